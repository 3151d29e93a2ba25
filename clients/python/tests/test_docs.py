"""The Python example of docs/asks.md, and docs/protocol.md's Python
receipt verifier, run as written."""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import re
from pathlib import Path
from typing import Any, Dict, Optional, Set

import interlock
from support import VECTORS, WAIT, APITest, decide, eventually, gate_call, http_call, unique, waiting_run

DOC = Path(__file__).resolve().parents[3] / "docs" / "asks.md"
PROTOCOL = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"


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

    def test_the_protocols_python_receipt_verifier_takes_what_interlock_signs_and_refuses_what_it_did_not(self) -> None:
        import datetime

        section = PROTOCOL.read_text(encoding="utf8").split("\n### Receipts\n", 1)[1].split("\n## ", 1)[0]
        blocks = re.findall(r"```python\n(.*?)```", section, re.S)
        self.assertEqual(len(blocks), 1, "docs/protocol.md's Receipts section has one Python verifier")
        scope: Dict[str, Any] = {}
        exec(blocks[0], scope)
        verify_receipt = scope["verify_receipt"]

        keys = {k["kid"]: k["publicKey"] for k in VECTORS["keys"]}
        now = datetime.datetime.fromisoformat(VECTORS["now"].replace("Z", "+00:00"))
        refused = {"expired", "signed with a key not trusted", "signed with another key under the trusted kid",
                   "the edited payload under the approved signature", "alg HS256", "typ JWT", "version 2", "two parts"}
        for v in VECTORS["receipts"]:
            if v["valid"]:
                self.assertEqual(verify_receipt(v["receipt"], keys, now), v["payload"], v["name"])
            elif v["name"] in refused:
                with self.assertRaises(ValueError, msg=v["name"]):
                    verify_receipt(v["receipt"], keys, now)

        # A receipt the test's Interlock signed, with the keys it publishes.
        client = interlock.Client()
        args = {"order_id": unique("o"), "amount": 900}
        with self.assertRaises(interlock.ApprovalPending) as caught:
            client.request_tool("issue_refund", args, timeout=0.3)
        call_id = caught.exception.call_id
        waiting_run("gate", call_id)
        decide("gate", call_id, {"decision": "approve"})
        decided = client.request_tool("issue_refund", args, call_id=call_id, timeout=WAIT, take=False)
        status, published = http_call("GET", "/v1/audit/keys")
        self.assertEqual(status, 200, published)
        r = verify_receipt(decided["receipt"], {k["kid"]: k["publicKey"] for k in published["keys"]})
        self.assertEqual((r["flow"], r["run"], r["decision"], r["finalDigest"]), ("gate", call_id, "approved", decided["finalDigest"]))
        with self.assertRaisesRegex(ValueError, "which you do not trust"):
            verify_receipt(decided["receipt"], keys)
