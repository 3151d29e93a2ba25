"""ask, its helpers, wait_for and list_pending against the built-in ask flow."""

from __future__ import annotations

import concurrent.futures

import interlock
from support import AGENT, APPROVER, WAIT, APITest, decide, http_call, unique, waiting_run


class AskTest(APITest):
    def setUp(self) -> None:
        self.client = interlock.Client()
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
        self.addCleanup(self.pool.shutdown, wait=False)

    def test_question_answer_refused_by_its_schema_stays_open_until_answered(self) -> None:
        ask_id = unique("ask")
        schema = {"type": "string", "minLength": 10}
        answer = self.pool.submit(
            self.client.ask_question, "Where should we ship it?", field="address", schema=schema,
            title="Delivery address", ask_id=ask_id, timeout=WAIT,
        )
        cp = waiting_run("ask", ask_id)
        (q,) = cp["interrupt"]["questions"]
        self.assertEqual((q["field"], q["question"], q["schema"]), ("address", "Where should we ship it?", schema))
        status, problem = decide("ask", ask_id, {"answers": {"address": "Main St"}})
        self.assertEqual((status, problem["code"]), (422, "invalid_answer"), problem)
        self.assertIn("address", problem["detail"])
        self.assertFalse(answer.done(), "a refused answer settled the ask")
        status, ans = decide("ask", ask_id, {"answers": {"address": "1 Main Street, Springfield"}})
        self.assertEqual(status, 202, ans)
        self.assertEqual(answer.result(WAIT), "1 Main Street, Springfield")

    def test_choice_returns_the_option_picked(self) -> None:
        ask_id = unique("ask")
        picked = self.pool.submit(self.client.ask_choice, "Which plan?", {"pro": "Pro", "team": "Team"}, ask_id=ask_id, timeout=WAIT)
        cp = waiting_run("ask", ask_id)
        self.assertEqual(cp["interrupt"]["options"], [{"id": "pro", "label": "Pro"}, {"id": "team", "label": "Team"}])
        status, problem = decide("ask", ask_id, {"selected": ["enterprise"]})
        self.assertEqual((status, problem["code"]), (422, "invalid_answer"), problem)
        decide("ask", ask_id, {"selected": ["team"]})
        self.assertEqual(picked.result(WAIT), "team")

    def test_choice_of_several_returns_every_option_picked(self) -> None:
        ask_id = unique("ask")
        picked = self.pool.submit(self.client.ask_choice, "Which topics?", ["product", "design", "sales"], multiple=True, ask_id=ask_id, timeout=WAIT)
        waiting_run("ask", ask_id)
        decide("ask", ask_id, {"selected": ["product", "sales"]})
        self.assertEqual(sorted(picked.result(WAIT)), ["product", "sales"])

    def test_assignees_and_reminders_are_refused_on_a_question_or_choice_before_sending(self) -> None:
        for call in (
            lambda: self.client.ask_question("Where to?", ask_id=unique("ask"), assignees=["ann@example.com"]),
            lambda: self.client.ask_choice("Which plan?", ["pro"], ask_id=unique("ask"), reminders=["10m"]),
        ):
            with self.assertRaises(TypeError) as e:
                call()
            self.assertIn("assignees and reminders are for approvals", str(e.exception))

    def test_approval_edited_returns_the_final_args(self) -> None:
        ask_id = unique("ask")
        args = self.pool.submit(
            self.client.ask_approval, "issue_refund", {"order_id": "o-1", "amount": 4800}, role="supervisor", ask_id=ask_id, timeout=WAIT,
        )
        cp = waiting_run("ask", ask_id)
        self.assertEqual((cp["interrupt"]["approverRole"], cp["interrupt"]["requester"]), ("supervisor", AGENT))
        decide("ask", ask_id, {"decision": "edit", "edits": {"amount": 400}})
        self.assertEqual(args.result(WAIT), {"order_id": "o-1", "amount": 400})

    def test_approval_rejected_raises_with_approver_and_reason(self) -> None:
        ask_id = unique("ask")
        args = self.pool.submit(self.client.ask_approval, "delete_account", {"user": "u-9"}, role="supervisor", ask_id=ask_id, timeout=WAIT)
        waiting_run("ask", ask_id)
        decide("ask", ask_id, {"decision": "reject", "reason": "the customer asked to keep it"})
        with self.assertRaises(interlock.ApprovalRejected) as caught:
            args.result(WAIT)
        self.assertEqual((caught.exception.approver, caught.exception.reason), (APPROVER, "the customer asked to keep it"))
        self.assertEqual(caught.exception.answered["askId"], ask_id)

    def test_ask_nobody_answers_raises_expired(self) -> None:
        with self.assertRaises(interlock.AskExpired) as caught:
            self.client.ask_question("Anyone there?", deadline=1, timeout=WAIT)
        self.assertEqual((caught.exception.status, caught.exception.answered["status"]), ("expired", "expired"))

    def test_cancelled_ask_raises_cancelled(self) -> None:
        ask_id = unique("ask")
        answer = self.pool.submit(self.client.ask_question, "Which colour?", ask_id=ask_id, timeout=WAIT)
        waiting_run("ask", ask_id)
        status, ans = http_call("POST", f"/v1/runs/ask/{ask_id}/cancel?wait=10s", {"reason": "not needed"})
        self.assertEqual(status, 202, ans)
        with self.assertRaises(interlock.AskCancelled):
            answer.result(WAIT)

    def test_ask_sent_earlier_is_waited_for_by_its_id(self) -> None:
        ask_id = unique("ask")
        sent = self.client.send_ask({"kind": "question", "questions": [{"field": "name", "question": "Your name?"}]}, ask_id=ask_id)
        self.assertEqual((sent["askId"], sent["pending"]["kind"], sent["pending"]["run"]), (ask_id, "question", ask_id))
        with self.assertRaises(interlock.AskPending) as caught:
            self.client.wait_for(ask_id, timeout=0.2)
        self.assertEqual(caught.exception.ask_id, ask_id)
        # The same ask again is the same ask, not a second one.
        again = self.client.send_ask({"kind": "question", "questions": [{"field": "name", "question": "Your name?"}]}, ask_id=ask_id)
        self.assertEqual(again["askId"], ask_id)
        decide("ask", ask_id, {"answers": {"name": "Ann"}})
        answered = self.client.wait_for(ask_id, timeout=WAIT)
        self.assertEqual((answered["status"], answered["kind"], answered["answers"]), ("answered", "question", {"name": "Ann"}))

    def test_list_pending_lists_an_ask_until_it_is_answered(self) -> None:
        ask_id = unique("ask")
        self.client.send_ask({"kind": "choice", "question": "Ship today?", "options": [{"id": "yes", "label": "Yes"}]}, ask_id=ask_id)

        def runs() -> list:
            runs, cursor = [], None
            while True:
                page = self.client.list_pending(flow="ask", kind="choice", limit=50, cursor=cursor)
                runs += [item["run"] for item in page["items"]]
                cursor = page.get("next")
                if not cursor:
                    return runs

        self.assertIn(ask_id, runs())
        decide("ask", ask_id, {"selected": "yes"})
        self.client.wait_for(ask_id, timeout=WAIT)
        self.assertNotIn(ask_id, runs())
