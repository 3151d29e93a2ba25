"""What the tests share: the API they run against, and a second caller,
the approver, who decides over plain HTTP as a person in the inbox would."""

from __future__ import annotations

import http.client
import http.server
import json
import os
import threading
import time
import unittest
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar
from urllib.parse import urlsplit

URL = os.environ.get("INTERLOCK_URL", "")
TOKEN = os.environ.get("INTERLOCK_TOKEN", "")
AGENT = os.environ.get("INTERLOCK_TEST_AGENT", "")
APPROVER = os.environ.get("INTERLOCK_TEST_APPROVER", "")
APPROVER_TOKEN = os.environ.get("INTERLOCK_TEST_APPROVER_TOKEN", "")
GATE_OFF_URL = os.environ.get("INTERLOCK_TEST_GATE_OFF_URL", "")
"""An API of a deployment without gate rules or auth file."""

WAIT = 15.0
"""Seconds a test waits for something that should happen before failing."""

T = TypeVar("T")


class APITest(unittest.TestCase):
    """A test against a running Interlock HTTP API: INTERLOCK_URL, with
    INTERLOCK_TOKEN an agent's token and INTERLOCK_TEST_APPROVER_TOKEN the
    token of an approver holding the roles supervisor and legal.
    `go test ./clients/python` serves one and sets them."""

    @classmethod
    def setUpClass(cls) -> None:
        if URL and TOKEN and APPROVER and APPROVER_TOKEN and GATE_OFF_URL:
            return
        why = (
            "INTERLOCK_URL, INTERLOCK_TOKEN, INTERLOCK_TEST_APPROVER, INTERLOCK_TEST_APPROVER_TOKEN and "
            "INTERLOCK_TEST_GATE_OFF_URL are not all set: run these tests with `go test ./clients/python`, which serves an API for them"
        )
        if os.environ.get("INTERLOCK_TEST_REQUIRED"):
            raise RuntimeError(why)
        raise unittest.SkipTest(why)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def http_call(method: str, path: str, body: Any = None, token: Optional[str] = None) -> Tuple[int, Any]:
    """A request to the API as the approver (or token), over plain http.client."""
    u = urlsplit(URL)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=WAIT + 5)
    headers = {"Authorization": "Bearer " + (token or APPROVER_TOKEN)}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, json.loads(raw) if raw else None
    finally:
        conn.close()


def eventually(what: str, probe: Callable[[], Optional[T]], wait: float = WAIT) -> T:
    """Poll probe until it returns something, failing after wait seconds."""
    deadline = time.monotonic() + wait
    while True:
        got = probe()
        if got is not None:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {wait}s")
        time.sleep(0.05)


def waiting_run(flow: str, run: str) -> Dict[str, Any]:
    """The checkpoint of flow's run once it waits on an interrupt."""

    def probe() -> Optional[Dict[str, Any]]:
        status, cp = http_call("GET", f"/v1/runs/{flow}/{run}")
        if status == 200 and cp.get("status") == "waiting":
            return cp
        return None

    return eventually(f"{flow} run {run} waiting", probe)


def gate_call(tool: str, **match: Any) -> Dict[str, Any]:
    """The checkpoint of the waiting gate run of tool whose proposed args
    hold match: the call a decorated function made."""

    def probe() -> Optional[Dict[str, Any]]:
        status, page = http_call("GET", "/v1/interrupts?flow=gate&order=newest&limit=100")
        assert status == 200, page
        for item in page["items"]:
            if item.get("action") != tool:
                continue
            status, cp = http_call("GET", f"/v1/runs/gate/{item['run']}")
            args = (cp.get("interrupt") or {}).get("args") or {}
            if status == 200 and cp.get("status") == "waiting" and all(args.get(k) == v for k, v in match.items()):
                return cp
        return None

    return eventually(f"a pending call of {tool} with {match}", probe)


def decide(flow: str, run: str, body: Dict[str, Any]) -> Tuple[int, Any]:
    """Resume flow's run as the approver."""
    return http_call("POST", f"/v1/runs/{flow}/{run}/resume?wait=10s", body)


VECTORS = json.loads((Path(__file__).resolve().parents[2] / "testdata" / "receipts.json").read_text(encoding="utf8"))
"""What the Go side computes (clients/testdata/receipts.json): args digests
and receipts, good and bad, with the keys that verify them."""


class TamperingProxy:
    """An HTTP proxy in front of the API whose decided answers to tool
    requests pass through change on their way: what a hand in between
    could do. takes counts the approvals taken through it."""

    def __init__(self, change: Callable[[Dict[str, Any]], None]):
        self.takes = 0
        proxy = self
        target = urlsplit(URL)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._forward()

            def do_POST(self) -> None:
                self._forward()

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?")[0]
                if path.endswith("/consume"):
                    proxy.takes += 1
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=WAIT + 330)
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type", "accept")}
                try:
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    resp = conn.getresponse()
                    status, raw = resp.status, resp.read()
                    kind = resp.getheader("Content-Type") or "application/json"
                finally:
                    conn.close()
                if self.command == "POST" and path == "/v1/gate/requests" and status == 200:
                    answer = json.loads(raw)
                    if "decided" in answer:
                        change(answer["decided"])
                    raw = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(WAIT)
