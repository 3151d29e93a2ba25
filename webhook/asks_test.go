package webhook_test

import (
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/webhook"
)

// An ask's callbackUrl is POSTed the answered data once it settles, with
// the answer's receipt, which verifies with the audit public key alone,
// once, and again when the receiver was down for a while.
func TestASettledAskIsPostedToItsCallbackURLOnceWithItsReceipt(t *testing.T) {
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{booking.Flow()}, Secret: natstest.Secret})
	rcv := newReceiver(t)
	rcv.status.Store(http.StatusServiceUnavailable)
	a, err := webhook.NewAskCallbacks(svc, webhook.AskConfig{FirstRetry: 50 * time.Millisecond, MaxRetry: 200 * time.Millisecond, Egress: local})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Attach(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	c := svc.Client("test")
	ask := protocol.AskRequest{AskID: "ask-cb", CallbackURL: rcv.URL + "/hooks/interlock",
		Interrupt: protocol.AskInterrupt{Kind: "choice", Question: "Which?", Options: []protocol.Option{{ID: "a", Label: "A"}}}}
	ans, err := c.AskNoWait(t.Context(), ask, 0)
	if err != nil || ans.Pending == nil {
		t.Fatalf("ask: %+v, %v", ans, err)
	}
	if _, err := c.Resume(t.Context(), "ask", "ask-cb", protocol.Resume{ResumeToken: ans.Pending.ResumeToken, Selected: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "a refused POST", func() bool { return len(rcv.got()) > 0 })
	rcv.status.Store(0)
	natstest.Eventually(t, "the answer delivered", func() bool { return len(rcv.delivered()) == 1 })
	h := rcv.delivered()[0]
	if h.header.Get(webhook.HeaderSignature) != "" {
		t.Errorf("the POST is signed with a secret: %s", h.header.Get(webhook.HeaderSignature))
	}
	var got protocol.Answered
	if err := json.Unmarshal(h.body, &got); err != nil || got.AskID != "ask-cb" || got.Status != protocol.AskAnswered || len(got.Selected) != 1 {
		t.Fatalf("POSTed %s (%v), want the answered data", h.body, err)
	}
	key := svc.Runner().AuditKey()
	r, err := protocol.VerifyReceipt(map[string]ed25519.PublicKey{key.ID: key.Key}, h.header.Get(protocol.HeaderReceipt), time.Now())
	if err != nil || got.Receipt != h.header.Get(protocol.HeaderReceipt) {
		t.Fatalf("the POST's receipt: %v", err)
	}
	if err := r.CheckAnswered(got); err != nil {
		t.Fatalf("the receipt does not state the POSTed answer: %v", err)
	}
	for _, prev := range rcv.got()[:len(rcv.got())-1] {
		if prev.header.Get(webhook.HeaderID) != h.header.Get(webhook.HeaderID) {
			t.Fatalf("the retries have webhook-ids %q and %q; one event has one id", prev.header.Get(webhook.HeaderID), h.header.Get(webhook.HeaderID))
		}
	}
	// A repeated ask publishes answered again: a new event, POSTed again.
	if _, err := c.Ask(t.Context(), ask, 0); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the repeat's answer delivered", func() bool { return len(rcv.delivered()) == 2 })
}

// The forgery a shared secret allowed: agent-a, holding the secret every
// agent verified callbacks with, POSTed agent-b a validly signed
// "approved by ann" while agent-b's ask still waited. A receiver that
// believes only a receipt that verifies and states its ask and its answer
// refuses every such POST: one made up, one with agent-a's own real
// receipt, or one with its own receipt and another answer.
func TestACallbackIsBelievedOnlyOnAReceiptOfItsAskAndAnswer(t *testing.T) {
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{booking.Flow()}, Secret: natstest.Secret})
	key := svc.Runner().AuditKey()
	keys := map[string]ed25519.PublicKey{key.ID: key.Key}
	c := svc.Client("test")
	approval := func(id string) protocol.AskRequest {
		return protocol.AskRequest{AskID: id, Interrupt: protocol.AskInterrupt{Kind: "approval", Action: "issue_refund", Args: json.RawMessage(`{"amount":900}`)}}
	}
	pa, err := c.AskNoWait(t.Context(), approval("ask-a"), 0)
	if err != nil || pa.Pending == nil {
		t.Fatalf("agent-a's ask: %+v %v", pa, err)
	}
	if _, err := c.AskNoWait(t.Context(), approval("ask-b"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(t.Context(), "ask", "ask-a", protocol.Resume{ResumeToken: pa.Pending.ResumeToken, Decision: "reject", Reason: "no", Approver: "ann"}); err != nil {
		t.Fatal(err)
	}
	real, err := c.WaitAsk(t.Context(), "ask-a", natstest.Wait)
	if err != nil || real.Answered == nil {
		t.Fatalf("agent-a's answer: %+v %v", real, err)
	}
	believe := func(a protocol.Answered) error {
		r, err := protocol.VerifyReceipt(keys, a.Receipt, time.Now())
		if err != nil {
			return err
		}
		return r.CheckAnswered(a)
	}
	if err := believe(*real.Answered); err != nil {
		t.Fatalf("the real answer is not believed: %v", err)
	}
	madeUp := protocol.Answered{AskID: "ask-b", Status: protocol.AskAnswered, Kind: "approval", Decision: "approve", Approver: "ann", Args: json.RawMessage(`{"amount":900}`)}
	relabelled := *real.Answered
	relabelled.AskID, relabelled.Decision, relabelled.Reason = "ask-b", "approve", ""
	flipped := *real.Answered
	flipped.Decision, flipped.Args = "approve", json.RawMessage(`{"amount":900}`)
	for name, a := range map[string]protocol.Answered{"made up": madeUp, "another ask's receipt": relabelled, "another answer": flipped} {
		if err := believe(a); err == nil {
			t.Errorf("%s: believed", name)
		}
	}
}
