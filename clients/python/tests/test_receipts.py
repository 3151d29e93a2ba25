"""What the client checks before a gated tool runs: Ed25519 (RFC 8032),
canonical JSON (RFC 8785) and receipts as the Go side computes them, and,
against the API, that an approved call runs once, that an allowed call
runs on the gate's receipt of it, and that a decision changed on its way
runs nothing."""

from __future__ import annotations

import copy
import datetime
import struct
import unittest
from typing import Any, Callable, Dict, List

import interlock
from interlock.receipts import _number, args_digest, canonical_json, ed25519_verify, parse_audit_key, verify_decided, verify_receipt
from support import VECTORS, WAIT, APITest, TamperingProxy, decide, http_call, unique, waiting_run

NOW = datetime.datetime.fromisoformat(VECTORS["now"].replace("Z", "+00:00"))


def by_name(kind: str, name: str) -> Dict[str, Any]:
    return next(v for v in VECTORS[kind] if v["name"] == name)


class Ed25519Test(unittest.TestCase):
    # RFC 8032, section 7.1, tests 1 to 3: public key, message, signature.
    RFC8032 = [
        ("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
         "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
        ("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
         "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
        ("fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
         "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
    ]

    def test_verifies_the_rfc_8032_test_vectors_and_refuses_them_changed(self) -> None:
        for pub, msg, sig in self.RFC8032:
            p, m, s = bytes.fromhex(pub), bytes.fromhex(msg), bytes.fromhex(sig)
            self.assertTrue(ed25519_verify(p, m, s), pub)
            self.assertFalse(ed25519_verify(p, m + b"x", s), "another message")
            self.assertFalse(ed25519_verify(p, m, s[:63] + bytes([s[63] ^ 1])), "another signature")
            self.assertFalse(ed25519_verify(bytes(32), m, s), "another key")
            self.assertFalse(ed25519_verify(p, m, s[:32]), "a short signature")
        # S not below L: the signature of test 1 with L added to S.
        pub, _, sig = self.RFC8032[0]
        s = int.from_bytes(bytes.fromhex(sig)[32:], "little") + 2**252 + 27742317777372353535851937790883648493
        self.assertFalse(ed25519_verify(bytes.fromhex(pub), b"", bytes.fromhex(sig)[:32] + s.to_bytes(32, "little")))


class CanonicalJSONTest(unittest.TestCase):
    # RFC 8785, appendix B: IEEE 754 doubles and how JSON writes them.
    RFC8785_NUMBERS = [
        ("0000000000000000", "0"), ("8000000000000000", "0"), ("0000000000000001", "5e-324"),
        ("8000000000000001", "-5e-324"), ("7fefffffffffffff", "1.7976931348623157e+308"),
        ("ffefffffffffffff", "-1.7976931348623157e+308"), ("4340000000000000", "9007199254740992"),
        ("c340000000000000", "-9007199254740992"), ("4430000000000000", "295147905179352830000"),
        ("44b52d02c7e14af5", "9.999999999999997e+22"), ("44b52d02c7e14af6", "1e+23"),
        ("44b52d02c7e14af7", "1.0000000000000001e+23"), ("444b1ae4d6e2ef4e", "999999999999999700000"),
        ("444b1ae4d6e2ef4f", "999999999999999900000"), ("444b1ae4d6e2ef50", "1e+21"),
        ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"), ("3eb0c6f7a0b5ed8d", "0.000001"),
        ("41b3de4355555553", "333333333.3333332"), ("41b3de4355555554", "333333333.33333325"),
        ("41b3de4355555555", "333333333.3333333"), ("41b3de4355555556", "333333333.3333334"),
        ("41b3de4355555557", "333333333.33333343"), ("becbf647612f3696", "-0.0000033333333333333333"),
        ("43143ff3c1cb0959", "1424953923781206.2"),
    ]

    def test_writes_numbers_as_rfc_8785_does(self) -> None:
        for bits, want in self.RFC8785_NUMBERS:
            self.assertEqual(_number(struct.unpack(">d", bytes.fromhex(bits))[0]), want, bits)
        for bad in (float("nan"), float("inf"), 10**400):
            with self.assertRaises(ValueError):
                canonical_json({"n": bad})

    def test_writes_the_rfc_8785_examples(self) -> None:
        # Section 3.2.2, parsed as Python's json reads it.
        import json

        value = json.loads('{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000001], '
                           '"string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/", "literals": [null, true, false]}')
        self.assertEqual(canonical_json(value), '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,0.000001],'
                         '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}')
        # Section 3.2.3: keys sorted by their UTF-16 code units.
        keys = {"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One",
                "\U0001f600": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis"}
        order = [k for k in json.loads(canonical_json(keys))]
        self.assertEqual(order, ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"])

    def test_gives_args_the_canonical_json_and_digest_go_gives_them_however_written(self) -> None:
        import json

        for v in VECTORS["digests"]:
            args = json.loads(v["args"])
            self.assertEqual(canonical_json(args), v["canonical"], v["name"])
            self.assertEqual(args_digest(args), v["digest"], v["name"])
        digest = {v["name"]: v["digest"] for v in VECTORS["digests"]}
        self.assertEqual(digest["refund"], digest["refund, keys in another order, 4.8e3"])
        self.assertEqual(digest["refund"], digest["refund, spaced, 4800.0"])
        self.assertEqual(digest["unicode"], digest["unicode, escaped"])
        self.assertEqual(args_digest(None), digest["empty"])
        self.assertEqual(args_digest({"orderId": "o-1", "amount": 4800.0, "currency": "USD"}), digest["refund"], "a float of Python's")


class ReceiptTest(unittest.TestCase):
    def test_verifies_the_receipts_go_signs_and_refuses_every_one_that_is_not(self) -> None:
        keys = VECTORS["keys"]
        for v in VECTORS["receipts"]:
            if v["valid"]:
                self.assertEqual(verify_receipt(v["receipt"], keys, NOW), v["payload"], v["name"])
                continue
            with self.assertRaises(interlock.ReceiptError, msg=v["name"]) as caught:
                verify_receipt(v["receipt"], keys, NOW)
            self.assertEqual(caught.exception.reason, "expired" if v.get("expired") else "invalid", v["name"])
        good = by_name("receipts", "approved")
        with self.assertRaisesRegex(interlock.ReceiptError, "not among the audit keys trusted"):
            verify_receipt(good["receipt"], VECTORS["untrusted"], NOW)
        k = keys[0]
        self.assertEqual(verify_receipt(good["receipt"], [f"{k['kid']}:{k['publicKey']}"], NOW), good["payload"])
        self.assertEqual(verify_receipt(good["receipt"], [k["publicKey"]], NOW), good["payload"])

    def test_refuses_a_pinned_key_that_is_not_one_saying_how_to_give_it(self) -> None:
        with self.assertRaisesRegex(ValueError, "32 bytes in standard base64"):
            parse_audit_key("abc")
        with self.assertRaisesRegex(ValueError, f"its id is {VECTORS['keys'][0]['kid']}"):
            parse_audit_key("0000000000000000:" + VECTORS["keys"][0]["publicKey"])
        with self.assertRaisesRegex(ValueError, "audit_keys is empty"):
            interlock.Client(url="http://127.0.0.1:1", audit_keys=[])

    def test_takes_a_decision_its_receipt_states_and_refuses_one_changed(self) -> None:
        decided = {d["decision"]: d for d in VECTORS["decisions"]}
        approved, edited = decided["approved"], decided["edited"]
        keys = VECTORS["keys"]

        def call(d: Dict[str, Any]) -> Dict[str, Any]:
            return {"callId": d["callId"], "tool": VECTORS["call"]["tool"], "argsDigest": args_digest(VECTORS["call"]["args"])}

        self.assertEqual(verify_decided(call(approved), approved, keys, NOW)["decision"], "approved")
        self.assertEqual(verify_decided(call(edited), edited, keys, NOW)["finalDigest"], args_digest(edited["args"]))

        def changed(d: Dict[str, Any], f: Callable[[Dict[str, Any]], None]) -> Dict[str, Any]:
            c = copy.deepcopy(d)
            f(c)
            return c

        more = {**edited["args"], "amount": 4800}
        cases = [
            ("other args", changed(edited, lambda d: d.update(args=more)), "mismatch"),
            ("other args and their finalDigest", changed(edited, lambda d: d.update(args=more, finalDigest=args_digest(more))), "mismatch"),
            ("edited said approved", changed(edited, lambda d: d.update(decision="approved")), "mismatch"),
            ("another call's receipt", changed(edited, lambda d: d.update(receipt=approved["receipt"])), "mismatch"),
            ("no receipt", changed(approved, lambda d: d.pop("receipt")), "missing"),
            ("a receipt signed by a key not trusted",
             changed(approved, lambda d: d.update(receipt=by_name("receipts", "signed with a key not trusted")["receipt"])), "invalid"),
        ]
        for name, d, reason in cases:
            with self.assertRaises(interlock.ReceiptError, msg=name) as caught:
                verify_decided(call(d), d, keys, NOW)
            self.assertEqual(caught.exception.reason, reason, name)
        with self.assertRaisesRegex(interlock.ReceiptError, "other args"):
            verify_decided({**call(approved), "argsDigest": args_digest({"amount": 1})}, approved, keys, NOW)
        with self.assertRaisesRegex(interlock.ReceiptError, "about call"):
            verify_decided({**call(approved), "tool": "wire_money"}, approved, keys, NOW)

    def test_believes_an_allowed_decision_only_on_the_gates_receipt_of_the_call_and_its_args(self) -> None:
        decided = {d["decision"]: d for d in VECTORS["decisions"]}
        allowed, approved = decided["allowed"], decided["approved"]
        keys = VECTORS["keys"]

        def call(d: Dict[str, Any]) -> Dict[str, Any]:
            return {"callId": d["callId"], "tool": VECTORS["call"]["tool"], "argsDigest": args_digest(VECTORS["call"]["args"])}

        r = verify_decided(call(allowed), allowed, keys, NOW)
        self.assertEqual((r["decision"], r["auth"], r.get("finalDigest")), ("allowed", "server", None))

        def changed(d: Dict[str, Any], f: Callable[[Dict[str, Any]], None]) -> Dict[str, Any]:
            c = copy.deepcopy(d)
            f(c)
            return c

        other_args = by_name("receipts", "allowed, of other args")
        cases = [
            ("no receipt", changed(allowed, lambda d: d.pop("receipt")), "missing"),
            ("another call's receipt", changed(allowed, lambda d: d.update(receipt=approved["receipt"])), "mismatch"),
            ("the receipt of the call with other args", changed(allowed, lambda d: d.update(receipt=other_args["receipt"])), "mismatch"),
            ("the decision and receipt of the call with other args",
             changed(allowed, lambda d: d.update(argsDigest=other_args["payload"]["argsDigest"], receipt=other_args["receipt"])), "mismatch"),
            ("an approval said allowed", changed(approved, lambda d: d.update(decision="allowed")), "mismatch"),
            ("a receipt signed by a key not trusted",
             changed(allowed, lambda d: d.update(receipt=by_name("receipts", "signed with a key not trusted")["receipt"])), "invalid"),
        ]
        for name, d, reason in cases:
            with self.assertRaises(interlock.ReceiptError, msg=name) as caught:
                verify_decided(call(d), d, keys, NOW)
            self.assertEqual(caught.exception.reason, reason, name)


class RunsOnceTest(APITest):
    def setUp(self) -> None:
        self.client = interlock.Client()
        self.ran: List[Dict[str, Any]] = []

    def decided_call(self, amount: int, decision: Dict[str, Any]) -> Dict[str, Any]:
        """A call of issue_refund, requested and decided; its call_id and args."""
        args = {"order_id": unique("o"), "amount": amount, "currency": "USD"}
        with self.assertRaises(interlock.ApprovalPending) as caught:
            self.client.request_tool("issue_refund", args, timeout=0.3)
        call_id = caught.exception.call_id
        waiting_run("gate", call_id)
        status, ans = decide("gate", call_id, decision)
        self.assertEqual(status, 202, ans)
        return {"call_id": call_id, "args": args}

    def refund(self, client: interlock.Client, call_id: str) -> Any:
        @client.require_approval(tool="issue_refund", timeout=WAIT, call_id=lambda **_: call_id)
        def issue_refund(order_id: str, amount: float, currency: str = "USD") -> str:
            self.ran.append({"order_id": order_id, "amount": amount, "currency": currency})
            return f"refunded {amount} {currency} on {order_id}"

        return issue_refund

    def test_approved_call_runs_once_and_the_same_call_again_raises_approval_taken(self) -> None:
        c = self.decided_call(900, {"decision": "approve"})
        issue_refund = self.refund(self.client, c["call_id"])
        self.assertEqual(issue_refund(**c["args"]), f"refunded 900 USD on {c['args']['order_id']}")
        with self.assertRaises(interlock.ApprovalTaken) as caught:
            issue_refund(**c["args"])
        self.assertEqual(caught.exception.call_id, c["call_id"])
        self.assertIn("an approval runs its call once", str(caught.exception))
        self.assertEqual(self.ran, [c["args"]], "the tool ran once")

    def test_edited_call_runs_once_with_the_edit(self) -> None:
        c = self.decided_call(1200, {"decision": "edit", "edits": {"amount": 400}})
        issue_refund = self.refund(self.client, c["call_id"])
        issue_refund(**c["args"])
        with self.assertRaises(interlock.ApprovalTaken):
            issue_refund(**c["args"])
        self.assertEqual(self.ran, [{**c["args"], "amount": 400}])

    def test_request_tool_looks_without_taking_and_take_approval_takes_once(self) -> None:
        c = self.decided_call(800, {"decision": "approve"})
        decided = self.client.request_tool("issue_refund", c["args"], call_id=c["call_id"], timeout=WAIT, take=False)
        self.assertEqual(decided["decision"], "approved")
        consumed = self.client.take_approval(decided)
        self.assertEqual(consumed["argsDigest"], args_digest(c["args"]))
        with self.assertRaises(interlock.ApprovalTaken):
            self.client.take_approval(decided)
        with self.assertRaises(interlock.ApprovalTaken):
            self.client.request_tool("issue_refund", c["args"], call_id=c["call_id"], timeout=WAIT)

    def test_pinned_key_verifies_and_another_pinned_key_runs_nothing(self) -> None:
        status, ans = http_call("GET", "/v1/audit/keys")
        self.assertEqual(status, 200, ans)
        c = self.decided_call(650, {"decision": "approve"})
        wrong = interlock.Client(audit_keys=VECTORS["keys"])
        with self.assertRaisesRegex(interlock.ReceiptError, "not among the audit keys trusted"):
            self.refund(wrong, c["call_id"])(**c["args"])
        self.assertEqual(self.ran, [])
        pinned = interlock.Client(audit_keys=",".join(f"{k['kid']}:{k['publicKey']}" for k in ans["keys"]))
        self.refund(pinned, c["call_id"])(**c["args"])
        self.assertEqual(self.ran, [c["args"]], "the approval was still there to take")

    def test_a_decision_changed_on_its_way_raises_receipt_error_and_runs_nothing(self) -> None:
        c = self.decided_call(900, {"decision": "approve"})
        more = {**c["args"], "amount": 90000}
        forged = by_name("receipts", "signed with a key not trusted")["receipt"]
        cases = [
            ("other args", lambda d: d.update(args=more), "mismatch"),
            ("other args and their finalDigest", lambda d: d.update(args=more, finalDigest=args_digest(more)), "mismatch"),
            ("edited args said approved", lambda d: d.update(decision="edited", args=more, finalDigest=args_digest(more)), "mismatch"),
            ("a receipt signed with another key", lambda d: d.update(args=more, finalDigest=args_digest(more), receipt=forged), "invalid"),
            ("no receipt", lambda d: d.pop("receipt"), "missing"),
        ]
        for name, change, reason in cases:
            proxy = TamperingProxy(change)
            try:
                with self.assertRaises(interlock.ReceiptError, msg=name) as caught:
                    self.refund(interlock.Client(url=proxy.url), c["call_id"])(**c["args"])
                self.assertEqual(caught.exception.reason, reason, name)
                self.assertEqual(proxy.takes, 0, f"{name}: the approval was not taken")
            finally:
                proxy.close()
        self.assertEqual(self.ran, [], "no changed decision ran the tool")
        self.refund(self.client, c["call_id"])(**c["args"])
        self.assertEqual(self.ran, [c["args"]], "the approval was still there, for the call as approved")

    def test_an_allowed_call_runs_on_the_gates_receipt_of_it_and_nothing_runs_on_a_forged_one(self) -> None:
        call_id = unique("call")
        args = {"order_id": unique("o"), "amount": 120, "currency": "USD"}
        # The gate's own receipts: of another call, and of this call id
        # requested with other args.
        other = self.client.request_tool("issue_refund", args, call_id=unique("call"), timeout=WAIT)
        other_args = {**args, "amount": 130}
        before = self.client.request_tool("issue_refund", other_args, call_id=call_id, timeout=WAIT)
        self.assertEqual((other["decision"], before["decision"]), ("allowed", "allowed"))
        forged = by_name("receipts", "signed with a key not trusted")["receipt"]
        cases = [
            ("no receipt", lambda d: d.pop("receipt"), "missing"),
            ("another call's receipt", lambda d: d.update(receipt=other["receipt"]), "mismatch"),
            ("the receipt of the call with other args", lambda d: d.update(receipt=before["receipt"]), "mismatch"),
            ("the decision and receipt of the call with other args", lambda d: d.update(argsDigest=args_digest(other_args), receipt=before["receipt"]), "mismatch"),
            ("a receipt signed with another key", lambda d: d.update(receipt=forged), "invalid"),
        ]
        for name, change, reason in cases:
            proxy = TamperingProxy(change)
            try:
                with self.assertRaises(interlock.ReceiptError, msg=name) as caught:
                    self.refund(interlock.Client(url=proxy.url), call_id)(**args)
                self.assertEqual(caught.exception.reason, reason, name)
            finally:
                proxy.close()
        self.assertEqual(self.ran, [], "no changed decision ran the tool")

        proxy = TamperingProxy(lambda d: None)
        try:
            client = interlock.Client(url=proxy.url)
            self.assertEqual(self.refund(client, call_id)(**args), f"refunded 120 USD on {args['order_id']}")
            self.assertEqual(self.ran, [args], "the allowed call ran, with its own args")
            self.assertEqual(proxy.takes, 0, "an allowed call has no approval to take")
            decided = client.request_tool("issue_refund", args, call_id=call_id, timeout=WAIT)
        finally:
            proxy.close()
        with self.assertRaisesRegex(ValueError, "no approval to take"):
            self.client.take_approval(decided)
