"""start, resume, cancel and get_run: a flow's run over the HTTP API."""

from __future__ import annotations

import interlock
from support import APPROVER_TOKEN, WAIT, APITest, unique


class RunsTest(APITest):
    def setUp(self) -> None:
        self.agent = interlock.Client()
        self.approver = interlock.Client(token=APPROVER_TOKEN)

    def test_a_refund_started_waits_for_its_approval_and_completes_once_approved(self) -> None:
        run = unique("r")
        state = {"orderId": "o-1", "amount": 900, "currency": "USD", "customer": "Ann", "last4": "4242"}
        started = self.agent.start("refund", state, run=run, wait=WAIT)
        self.assertEqual((started["run"], started["outcome"]), (run, "interrupted"), started)
        data = started["event"]["data"]
        self.assertEqual((data["kind"], data["action"], data["approverRole"]), ("approval", "issue_refund", "supervisor"))
        self.assertEqual(data["resumeToken"], "[redacted]")
        # The same run id again is refused, saying so.
        with self.assertRaises(interlock.ProblemError) as e:
            self.agent.start("refund", state, run=run, wait=WAIT)
        self.assertEqual(e.exception.code, "run_exists")
        # An edit above the amount asked for is refused by the args schema;
        # the run still waits.
        with self.assertRaises(interlock.ProblemError) as e:
            self.approver.resume("refund", run, {"decision": "edit", "edits": {"amount": 9000}}, wait=WAIT)
        self.assertEqual(e.exception.code, "invalid_answer")
        self.assertEqual(self.agent.get_run("refund", run)["status"], "waiting")
        done = self.approver.resume("refund", run, {"decision": "approve"}, idempotency_key="approve-" + run, wait=WAIT)
        self.assertEqual(done["outcome"], "completed", done)
        again = self.approver.resume("refund", run, {"decision": "approve"}, idempotency_key="approve-" + run, wait=WAIT)
        self.assertEqual(again["outcome"], "repeat", again)
        self.assertEqual(self.agent.get_run("refund", run)["status"], "completed")

    def test_a_cancelled_run_is_cancelled_and_an_unknown_run_not_found(self) -> None:
        run = unique("r")
        self.agent.start("booking", {"name": "Ann"}, run=run, wait=WAIT)
        out = self.agent.cancel("booking", run, "the customer called back", wait=WAIT)
        self.assertEqual(out["outcome"], "cancelled", out)
        self.assertEqual(self.agent.get_run("booking", run)["status"], "cancelled")
        with self.assertRaises(interlock.ProblemError) as e:
            self.agent.get_run("booking", unique("never"))
        self.assertEqual(e.exception.code, "unknown_run")
