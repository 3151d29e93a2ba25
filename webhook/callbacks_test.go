package webhook_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/webhook"
)

// attemptsByAsk counts a receiver's requests by the ask they are for.
func attemptsByAsk(r *receiver) map[string]int {
	out := map[string]int{}
	for _, h := range r.got() {
		var a protocol.Answered
		if json.Unmarshal(h.body, &a) == nil {
			out[a.AskID]++
		}
	}
	return out
}

// Five agents whose callback URLs always fail (500) do not hold back a
// sixth agent's callback: it is delivered while the five are still
// failing, and the five go on being tried. The callbacks share one
// consumer with four places, and a failed callback kept its place
// through its day of retries, so the sixth got no attempt at all.
func TestFailingCallbackReceiversDoNotDelayAnotherAsksCallback(t *testing.T) {
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{booking.Flow()}, Secret: natstest.Secret, Egress: local})
	failing, working := newReceiver(t), newReceiver(t)
	failing.status.Store(http.StatusInternalServerError)
	startAskCallbacks(t, svc, webhook.AskConfig{FirstRetry: 50 * time.Millisecond, MaxRetry: 200 * time.Millisecond, RetryFor: time.Hour})
	var down []string
	for i := range 5 {
		id := fmt.Sprintf("ask-down-%d", i)
		down = append(down, id)
		askWithCallback(t, svc, id, fmt.Sprintf("%s/agents/%d", failing.URL, i))
	}
	natstest.Eventually(t, "the failing callbacks tried", func() bool { return len(failing.got()) >= 4 })
	askWithCallback(t, svc, "ask-up", working.URL+"/agents/up")
	natstest.Eventually(t, "the working agent's callback delivered", func() bool { return len(working.delivered()) == 1 })
	if dl := natstest.Read(t, svc.JetStream(), names.DeadLetterStream(), names.DeadLetter(notify.ReasonUndeliverable)); len(dl) != 0 {
		t.Fatalf("%d dead letters while the failing callbacks have an hour to go", len(dl))
	}
	// The five are still tried: each again after the sixth went out.
	before := attemptsByAsk(failing)
	natstest.Eventually(t, "each failing callback tried again", func() bool {
		now := attemptsByAsk(failing)
		for _, id := range down {
			if now[id] <= before[id] {
				return false
			}
		}
		return true
	})
	if got := attemptsByAsk(working); got["ask-up"] != 1 || len(got) != 1 {
		t.Fatalf("the working receiver got %v; want the sixth ask's callback once", got)
	}
}
