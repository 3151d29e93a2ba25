"""The Python example of docs/asks.md, run as written."""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import re
from pathlib import Path
from typing import Any, Dict, Optional, Set

from support import WAIT, APITest, decide, eventually, gate_call, http_call

DOC = Path(__file__).resolve().parents[3] / "docs" / "asks.md"


def pending_asks() -> Set[str]:
    status, page = http_call("GET", "/v1/interrupts?flow=ask&order=newest&limit=100")
    assert status == 200, page
    return {item["run"] for item in page["items"]}


class DocsTest(APITest):
    def test_the_asks_python_example_gets_the_answer_given_in_the_inbox(self) -> None:
        text = DOC.read_text(encoding="utf8")
        section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
        blocks = re.findall(r"```python\n(.*?)```", section, re.S)
        self.assertEqual(len(blocks), 1, "docs/asks.md's Python section has one example")
        before = pending_asks()
        scope: Dict[str, Any] = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            running = pool.submit(exec, blocks[0], scope)

            def new_ask() -> Optional[str]:
                for run in pending_asks() - before:
                    status, cp = http_call("GET", f"/v1/runs/ask/{run}")
                    questions = (cp.get("interrupt") or {}).get("questions") or []
                    if status == 200 and questions and questions[0].get("question") == "Where should we ship it?":
                        return run
                return None

            run = eventually("the example's ask", new_ask)
            status, problem = decide("ask", run, {"answers": {"address": "short"}})
            self.assertEqual((status, problem["code"]), (422, "invalid_answer"), problem)
            decide("ask", run, {"answers": {"address": "1 Rue de Rivoli, Paris"}})
            running.result(WAIT)
        self.assertEqual(scope["address"], "1 Rue de Rivoli, Paris")

    def test_the_asks_gated_tool_example_runs_the_tool_once_approved(self) -> None:
        text = DOC.read_text(encoding="utf8")
        section = text.split("\n## A gated tool call\n", 1)[1].split("\n## ", 1)[0]
        blocks = re.findall(r"```python\n(.*?)```", section, re.S)
        self.assertEqual(len(blocks), 1, "docs/asks.md's gated tool call has one Python example")
        out = io.StringIO()

        def run() -> None:
            with contextlib.redirect_stdout(out):
                exec(blocks[0], {})

        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            running = pool.submit(run)
            cp = gate_call("issue_refund", orderId="o-2", amount=900)
            decide("gate", cp["run"], {"decision": "approve"})
            running.result(WAIT)
        self.assertEqual(out.getvalue(), "refunded 900 USD on o-2\n")
