"""require_approval and request_tool against the tool-call gate."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, Dict, List, Optional

import interlock
from support import APPROVER, WAIT, APITest, decide, eventually, gate_call, http_call, unique


class RequireApprovalTest(APITest):
    def setUp(self) -> None:
        self.client = interlock.Client()
        self.calls: List[Dict[str, Any]] = []
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
        self.addCleanup(self.pool.shutdown, wait=False)

        @self.client.require_approval(timeout=WAIT)
        def issue_refund(order_id: str, amount: float, currency: str = "USD") -> str:
            self.calls.append({"order_id": order_id, "amount": amount, "currency": currency})
            return f"refunded {amount} {currency} on {order_id}"

        self.issue_refund = issue_refund

    def test_call_no_rule_fires_on_runs_at_once(self) -> None:
        order = unique("o")
        self.assertEqual(self.issue_refund(order, 20), f"refunded 20 USD on {order}")
        self.assertEqual(self.calls, [{"order_id": order, "amount": 20, "currency": "USD"}])

    def test_approved_call_runs_with_its_args(self) -> None:
        order = unique("o")
        result = self.pool.submit(self.issue_refund, order, 900, currency="EUR")
        cp = gate_call("issue_refund", order_id=order)
        self.assertEqual(cp["interrupt"]["args"], {"order_id": order, "amount": 900, "currency": "EUR"})
        self.assertFalse(result.done(), "the tool ran before anyone approved it")
        status, ans = decide("gate", cp["run"], {"decision": "approve"})
        self.assertEqual(status, 202, ans)
        self.assertEqual(result.result(WAIT), f"refunded 900 EUR on {order}")
        self.assertEqual(self.calls, [{"order_id": order, "amount": 900, "currency": "EUR"}])

    def test_edited_call_runs_with_the_final_args(self) -> None:
        order = unique("o")
        result = self.pool.submit(self.issue_refund, order_id=order, amount=1200)
        cp = gate_call("issue_refund", order_id=order)
        status, ans = decide("gate", cp["run"], {"decision": "edit", "edits": {"amount": 400}})
        self.assertEqual(status, 202, ans)
        self.assertEqual(result.result(WAIT), f"refunded 400 USD on {order}")
        self.assertEqual(self.calls, [{"order_id": order, "amount": 400, "currency": "USD"}])

    def test_rejected_call_raises_with_approver_and_reason_and_does_not_run(self) -> None:
        order = unique("o")
        result = self.pool.submit(self.issue_refund, order, 5000)
        cp = gate_call("issue_refund", order_id=order)
        status, ans = decide("gate", cp["run"], {"decision": "reject", "reason": "a duplicate of ticket 4821"})
        self.assertEqual(status, 202, ans)
        with self.assertRaises(interlock.ApprovalRejected) as caught:
            result.result(WAIT)
        e = caught.exception
        self.assertEqual((e.approver, e.reason, e.call_id, e.action), (APPROVER, "a duplicate of ticket 4821", cp["run"], "issue_refund"))
        self.assertIsInstance(e, interlock.NotApproved)
        self.assertEqual(str(e), f"issue_refund was rejected by {APPROVER}: a duplicate of ticket 4821")
        self.assertEqual(self.calls, [])

    def test_responded_call_raises_with_the_message_and_does_not_run(self) -> None:
        sent: List[str] = []

        @self.client.require_approval(tool="send_contract", timeout=WAIT)
        def send(customer: str, value: int) -> None:
            sent.append(customer)

        customer = unique("acme")
        result = self.pool.submit(send, customer, 50000)
        cp = gate_call("send_contract", customer=customer)
        status, ans = decide("gate", cp["run"], {"decision": "respond", "message": "Use the 2026 template first."})
        self.assertEqual(status, 202, ans)
        with self.assertRaises(interlock.ApprovalResponded) as caught:
            result.result(WAIT)
        self.assertEqual((caught.exception.message, caught.exception.approver), ("Use the 2026 template first.", APPROVER))
        self.assertEqual(sent, [])

    def test_expired_call_raises_and_does_not_run(self) -> None:
        wired: List[int] = []

        @self.client.require_approval(timeout=WAIT)
        def wire_money(amount: int) -> None:
            wired.append(amount)

        # The rule gives the approver one second; nobody decides.
        with self.assertRaises(interlock.ApprovalExpired) as caught:
            wire_money(10)
        self.assertTrue(caught.exception.call_id)
        self.assertEqual(caught.exception.decided["decision"], "expired")
        self.assertEqual(wired, [])

    def test_async_tool_waits_without_blocking_the_loop(self) -> None:
        @self.client.require_approval(tool="issue_refund", timeout=WAIT)
        async def refund(order_id: str, amount: float) -> str:
            return f"{order_id}:{amount}"

        order = unique("o")

        async def main() -> Any:
            call = asyncio.ensure_future(refund(order, 700))
            # The loop runs while the call waits: decide from it.
            cp = await asyncio.to_thread(gate_call, "issue_refund", order_id=order)
            await asyncio.to_thread(decide, "gate", cp["run"], {"decision": "edit", "edits": {"amount": 650}})
            return await asyncio.wait_for(call, WAIT)

        self.assertEqual(asyncio.run(main()), f"{order}:650")

    def test_decorated_call_with_a_call_id_is_made_again_without_asking_twice(self) -> None:
        ran: List[str] = []

        @self.client.require_approval(timeout=0.5, call_id=lambda order_id, amount: f"refund-{order_id}")
        def issue_refund(order_id: str, amount: float) -> str:
            ran.append(order_id)
            return f"refunded {amount} on {order_id}"

        order = unique("o")
        with self.assertRaises(interlock.ApprovalPending) as caught:
            issue_refund(order, 800)
        self.assertEqual(caught.exception.call_id, f"refund-{order}")
        # Made again while it waits: the same call, not a second approval.
        with self.assertRaises(interlock.ApprovalPending):
            issue_refund(order, 800)
        status, page = http_call("GET", "/v1/interrupts?flow=gate&order=newest&limit=100")
        self.assertEqual(status, 200, page)
        waiting = []
        for item in page["items"]:
            _, cp = http_call("GET", f"/v1/runs/gate/{item['run']}")
            if ((cp.get("interrupt") or {}).get("args") or {}).get("order_id") == order:
                waiting.append(item["run"])
        self.assertEqual(waiting, [f"refund-{order}"], "the call made again was asked again")
        status, ans = decide("gate", f"refund-{order}", {"decision": "approve"})
        self.assertEqual(status, 202, ans)
        # Made again until the decision comes, as the decorator's half
        # second may end first on a loaded machine: still never asked twice.
        def made_again() -> Optional[str]:
            try:
                return issue_refund(order, 800)
            except interlock.ApprovalPending:
                return None

        self.assertEqual(eventually(f"refund-{order} run once approved", made_again), f"refunded 800 on {order}")
        self.assertEqual(ran, [order])

        @self.client.require_approval(call_id=lambda order_id, amount: "")
        def broken(order_id: str, amount: float) -> None:
            raise AssertionError("ran")

        with self.assertRaisesRegex(TypeError, "non-empty str"):
            broken(order, 1)

    def test_call_still_pending_is_waited_for_again_with_its_call_id(self) -> None:
        order = unique("o")
        with self.assertRaises(interlock.ApprovalPending) as caught:
            self.client.request_tool("issue_refund", {"order_id": order, "amount": 800}, timeout=0.5)
        call_id = caught.exception.call_id
        self.assertEqual(caught.exception.pending["run"], call_id)
        self.assertIn("wait again with the same id", str(caught.exception))
        decide("gate", call_id, {"decision": "approve"})
        decided = self.client.request_tool("issue_refund", {"order_id": order, "amount": 800}, call_id=call_id, timeout=WAIT)
        self.assertEqual((decided["decision"], decided["approver"], decided["callId"]), ("approved", APPROVER, call_id))
