package webhook_test

import (
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

// An ask's callbackUrl is POSTed the answered data once it settles,
// signed as a Standard Webhook, once, and again when the receiver was
// down for a while.
func TestASettledAskIsPostedToItsCallbackURLOnceSigned(t *testing.T) {
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{booking.Flow()}, Secret: natstest.Secret})
	rcv := newReceiver(t)
	rcv.status.Store(http.StatusServiceUnavailable)
	a, err := webhook.NewAskCallbacks(svc, webhook.AskConfig{Secret: secret, FirstRetry: 50 * time.Millisecond, MaxRetry: 200 * time.Millisecond, Egress: local})
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
	if h.verified != nil {
		t.Fatalf("the POST does not verify with the Standard Webhooks library: %v", h.verified)
	}
	var got protocol.Answered
	if err := json.Unmarshal(h.body, &got); err != nil || got.AskID != "ask-cb" || got.Status != protocol.AskAnswered || len(got.Selected) != 1 {
		t.Fatalf("POSTed %s (%v), want the answered data", h.body, err)
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
