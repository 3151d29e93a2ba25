package engine_test

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/protocol"
)

// keysOf are the audit keys of h's runner, by kid.
func keysOf(h *enginetest.Harness) map[string]ed25519.PublicKey {
	k := h.Runner.AuditKey()
	return map[string]ed25519.PublicKey{k.ID: k.Key}
}

// TestEveryDecisionOnAToolCallYieldsAReceiptThatStatesIt checks the gate's
// receipts: signed with the audit key, stating the call (tool, args
// digest), the decision, the final args' digest, who decided and the
// rule, and verifying with the public key alone; forged or tampered,
// they do not.
func TestEveryDecisionOnAToolCallYieldsAReceiptThatStatesIt(t *testing.T) {
	h := gateHarness(t, anyEdit)
	request(t, h, "req-1", "call-r", 4800, supervisorRule)
	wantAccepted(t, h.Decide("call-r", "edit", map[string]any{"amount": 400}, "sam", "partial"))
	d := decided(t, h, "call-r")[0]
	r, err := protocol.VerifyReceipt(keysOf(h), d.Receipt, time.Now())
	if err != nil {
		t.Fatalf("the receipt does not verify: %v", err)
	}
	if err := r.CheckDecided(*d); err != nil {
		t.Fatal(err)
	}
	if r.Decision != protocol.ReceiptEdited || r.Approver != "sam" || r.Rule != "large-refund" || r.Tool != "issue_refund" ||
		r.RequestID == "" || r.Flow != engine.GateFlowName || r.Run != "call-r" || !r.Expires.After(r.At) {
		t.Fatalf("receipt = %+v", r)
	}
	// Another call's decision, or other args, do not check.
	other := *d
	other.FinalDigest = d.ArgsDigest
	if err := r.CheckDecided(other); err == nil {
		t.Error("a receipt checked a decision of other final args")
	}
	// A receipt of another deployment's key, or tampered with, does not
	// verify.
	_, priv, _ := ed25519.GenerateKey(nil)
	forged, _ := protocol.SignReceipt(h.Runner.AuditKey().ID, priv, r)
	if _, err := protocol.VerifyReceipt(keysOf(h), forged, time.Now()); !errors.Is(err, protocol.ErrReceiptInvalid) {
		t.Errorf("a receipt signed with another key: %v", err)
	}
	if _, err := protocol.VerifyReceipt(keysOf(h), d.Receipt, r.Expires); !errors.Is(err, protocol.ErrReceiptExpired) {
		t.Errorf("a receipt past its expiry: %v", err)
	}
	// A repeated request is answered with the same receipt.
	request(t, h, "req-2", "call-r", 4800, nil)
	if again := decided(t, h, "call-r"); len(again) != 2 || again[1].Receipt != d.Receipt {
		t.Fatalf("the repeat's receipt differs")
	}
	// An expired call's decision has one too, by the timeout.
	request(t, h, "req-3", "call-x", 4800, supervisorRule)
	h.Expire("call-x")
	x := decided(t, h, "call-x")[0]
	if r, err := protocol.VerifyReceipt(keysOf(h), x.Receipt, time.Now()); err != nil || r.Decision != protocol.ReceiptExpired || r.Auth != protocol.AuthServer {
		t.Fatalf("expired call's receipt %+v: %v", r, err)
	}
	// A call no rule holds is allowed by the gate, which says so in a
	// receipt of its own: a forged allowed decision has none that holds.
	request(t, h, "req-4", "call-a", 40, nil)
	a := decided(t, h, "call-a")[0]
	ra, err := protocol.VerifyReceipt(keysOf(h), a.Receipt, time.Now())
	if err != nil || ra.Decision != protocol.ReceiptAllowed || ra.Auth != protocol.AuthServer || ra.ArgsDigest != a.ArgsDigest || ra.Run != "call-a" {
		t.Fatalf("allowed call's receipt %+v: %v", ra, err)
	}
	if err := ra.CheckDecided(*a); err != nil {
		t.Fatal(err)
	}
	if err := ra.CheckDecided(*d); err == nil {
		t.Error("an allowed call's receipt checked another call's decision")
	}
}

// TestAnAsksAnswerCarriesAReceiptOfWhatWasAnswered checks that an ask's
// answered event, what its callback POSTs, carries a receipt binding the
// answer by digest.
func TestAnAsksAnswerCarriesAReceiptOfWhatWasAnswered(t *testing.T) {
	h := enginetest.New(t, engine.AskFlow())
	ask := protocol.AskRequest{AskID: "ask-r", Agent: "bot", Interrupt: protocol.AskInterrupt{Kind: protocol.KindQuestion,
		Questions: []protocol.Question{{Field: "address", Question: "Where to?"}}}}
	out, err := h.Runner.Ask(t.Context(), engine.AskRequest{AskRequest: ask, Inbound: engine.Inbound{EventID: "ask-1", Source: "/agents/bot"}})
	if err != nil || out.Refused != nil {
		t.Fatalf("ask: %v %+v", err, out.Refused)
	}
	h.Answer("ask-r", map[string]any{"address": "1 Main St"})
	var a *protocol.Answered
	for _, m := range h.Publisher.Messages("ask-r") {
		if d, ok := m.Data.(*protocol.Answered); ok {
			a = d
		}
	}
	if a == nil {
		t.Fatal("no answered event")
	}
	r, err := protocol.VerifyReceipt(keysOf(h), a.Receipt, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := protocol.AnswerDigest(map[string]json.RawMessage{"address": json.RawMessage(`"1 Main St"`)}, nil)
	if r.Flow != engine.AskFlowName || r.Run != "ask-r" || r.Decision != protocol.ReceiptAnswered || r.AnswerDigest != want {
		t.Fatalf("receipt = %+v, want the answer's digest %s", r, want)
	}
}
