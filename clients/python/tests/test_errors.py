"""Errors say what was wrong and what to do."""

from __future__ import annotations

import http.server
import socket
import threading
import unittest

import interlock
from support import GATE_OFF_URL, URL, WAIT, APITest


class ErrorTest(APITest):
    def test_bad_token_is_told_how_to_get_one(self) -> None:
        client = interlock.Client(token="not-a-token")
        with self.assertRaises(interlock.Unauthorized) as caught:
            client.list_pending()
        e = caught.exception
        self.assertEqual((e.status, e.code), (401, "unauthorized"))
        self.assertIn("INTERLOCK_TOKEN", str(e))
        self.assertIn("interlock people add", str(e))

    def test_gated_tool_does_not_run_when_the_token_is_bad(self) -> None:
        ran = []

        @interlock.Client(token="not-a-token").require_approval
        def issue_refund(order_id: str, amount: float) -> None:
            ran.append(order_id)

        with self.assertRaises(interlock.Unauthorized):
            issue_refund("o-1", 10)
        self.assertEqual(ran, [])

    def test_unreachable_server_asks_whether_interlock_serve_runs(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        client = interlock.Client(url=url, timeout=5)
        ran = []

        @client.require_approval
        def issue_refund(order_id: str, amount: float) -> None:
            ran.append(order_id)

        with self.assertRaises(interlock.Unreachable) as caught:
            issue_refund("o-1", 10)
        self.assertIsInstance(caught.exception, ConnectionError)
        self.assertIn(f"cannot reach Interlock at {url}: connection refused", str(caught.exception))
        self.assertIn("is `interlock serve` running there?", str(caught.exception))
        self.assertEqual(ran, [])
        with self.assertRaises(interlock.Unreachable):
            client.ask_question("Hello?")

    def test_gated_tool_is_refused_at_once_where_the_gate_is_off(self) -> None:
        ran = []

        @interlock.Client(url=GATE_OFF_URL, token="").require_approval(timeout=WAIT)
        def issue_refund(order_id: str, amount: float) -> None:
            ran.append(order_id)

        with self.assertRaises(interlock.ProblemError) as caught:
            issue_refund("o-1", 10)
        self.assertEqual((caught.exception.status, caught.exception.code), (501, "unsupported"), str(caught.exception))
        self.assertIn("--gate-rules", str(caught.exception))
        self.assertEqual(ran, [])

    def test_malformed_ask_is_refused_with_what_to_fix(self) -> None:
        client = interlock.Client()
        cases = [
            ({"kind": "question"}, "question"),
            ({"kind": "poll", "question": "Which?"}, "kind"),
            ({"kind": "choice", "question": "Which?", "options": [{"id": "a", "label": "A"}], "questions": [{"field": "x", "question": "X?"}]}, "questions"),
            ({"kind": "question", "questions": [{"field": "x", "question": "X?", "schema": {"type": "strnig"}}]}, "schema"),
        ]
        for interrupt, named in cases:
            with self.subTest(interrupt=interrupt):
                with self.assertRaises(interlock.ProblemError) as caught:
                    client.ask(interrupt, timeout=5)
                e = caught.exception
                self.assertEqual((e.status, e.code), (400, "invalid_payload"), str(e))
                self.assertIn(named, e.detail)
                self.assertIn(e.detail, str(e))

    def test_ask_id_breaking_the_name_rule_is_refused_invalid_name(self) -> None:
        client = interlock.Client()
        with self.assertRaises(interlock.ProblemError) as caught:
            client.wait_for("bad.id", timeout=1)
        self.assertEqual((caught.exception.status, caught.exception.code), (400, "invalid_name"))
        self.assertIn("A-Z a-z 0-9 _ -", str(caught.exception))

    def test_server_that_is_not_interlock_is_named_as_such(self) -> None:
        class Files(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Files)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with self.assertRaises(interlock.ProtocolError) as caught:
            interlock.Client(url=url).list_pending()
        self.assertIn(f"is {url} Interlock's HTTP API", str(caught.exception))


class ClientArgumentTest(unittest.TestCase):
    def test_url_with_a_path_is_refused(self) -> None:
        with self.assertRaises(ValueError) as caught:
            interlock.Client(url="http://127.0.0.1:8080/v1")
        self.assertIn("scheme, host and port only", str(caught.exception))

    def test_arguments_that_are_not_json_are_refused_before_asking(self) -> None:
        @interlock.Client(url=URL or "http://127.0.0.1:9").require_approval
        def upload(blob: object) -> None:
            raise AssertionError("ran")

        with self.assertRaises(TypeError) as caught:
            upload(object())
        self.assertIn("upload: its arguments go to the tool-call gate as JSON", str(caught.exception))
