package webhook_test

import (
	"strings"
	"testing"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/webhook"
)

// askWithCallback asks a choice with askID on svc whose callbackUrl is
// callback, and answers it, so that its answered event goes out.
func askWithCallback(t *testing.T, svc *interlock.Service, askID, callback string) {
	t.Helper()
	c := svc.Client("test")
	ans, err := c.AskNoWait(t.Context(), protocol.AskRequest{AskID: askID, CallbackURL: callback,
		Interrupt: protocol.AskInterrupt{Kind: "choice", Question: "Which?", Options: []protocol.Option{{ID: "a", Label: "A"}}}}, 0)
	if err != nil || ans.Pending == nil {
		t.Fatalf("ask %s: %+v, %v", askID, ans, err)
	}
	if _, err := c.Resume(t.Context(), protocol.AskFlow, askID, protocol.Resume{ResumeToken: ans.Pending.ResumeToken, Selected: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
}

// startAskCallbacks starts the asks' callbacks on svc, with cfg's retries
// short unless it says.
func startAskCallbacks(t *testing.T, svc *interlock.Service, cfg webhook.AskConfig) {
	t.Helper()
	if cfg.FirstRetry == 0 {
		cfg.FirstRetry, cfg.MaxRetry = 20*time.Millisecond, 100*time.Millisecond
	}
	a, err := webhook.NewAskCallbacks(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Attach(t.Context(), a); err != nil {
		t.Fatal(err)
	}
}

// An agent's callbackUrl on loopback (Interlock's own HTTP API and
// metrics listen there) is not called: the default outbound policy
// refuses it, and the delivery is dead-lettered at once, saying so and
// how to allow it, not tried again for a day.
func TestAnAskCallbackToLoopbackIsDeadLetteredAtOnceByTheEgressPolicy(t *testing.T) {
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{booking.Flow()}, Secret: natstest.Secret})
	sink := newReceiver(t)
	startAskCallbacks(t, svc, webhook.AskConfig{})
	askWithCallback(t, svc, "ask-loopback", sink.URL+"/v1/runs")
	dls := natstest.WaitFor(t, svc.JetStream(), names.DeadLetterStream(), names.DeadLetter(notify.ReasonUndeliverable), func(rs []natstest.Received) bool { return len(rs) > 0 })
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	dl := dls[0]
	if c := dl.Header.Get(bus.HeaderConsumer); c != webhook.AskConsumerName(names) {
		t.Fatalf("dead letter names consumer %q, want %s", c, webhook.AskConsumerName(names))
	}
	e := dl.Header.Get(bus.HeaderError)
	for _, want := range []string{"after 1 attempt", "egress: refused to connect to 127.0.0.1:", "loopback", "--egress-allow 127.0.0.1"} {
		if !strings.Contains(e, want) {
			t.Errorf("dead letter's error %q does not say %q", e, want)
		}
	}
	if n := len(sink.got()); n != 0 {
		t.Fatalf("the loopback sink got %d requests", n)
	}
}

// The operator allows the destination by name (interlock serve
// --egress-allow 127.0.0.1; here the service's Config.Egress, which the
// callbacks take): the same callback is delivered.
func TestAnAskCallbackToAnAllowedLoopbackHostIsDelivered(t *testing.T) {
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{booking.Flow()}, Secret: natstest.Secret,
		Egress: egress.Policy{Allow: []string{"127.0.0.1"}}})
	sink := newReceiver(t)
	startAskCallbacks(t, svc, webhook.AskConfig{})
	askWithCallback(t, svc, "ask-allowed", sink.URL+"/hooks/interlock")
	natstest.Eventually(t, "the answer delivered", func() bool { return len(sink.delivered()) == 1 })
	if dl := natstest.Read(t, svc.JetStream(), names.DeadLetterStream(), names.DeadLetter(notify.ReasonUndeliverable)); len(dl) != 0 {
		t.Fatalf("%d dead letters for a delivered callback", len(dl))
	}
}

// A subscription to a cloud's metadata service or a private address is
// refused before any connection, and dead-lettered at once: its record
// says dead after one attempt, naming the policy.
func TestAWebhookSubscriptionToAPrivateOrLinkLocalAddressIsDeadLetteredAtOnce(t *testing.T) {
	_, js := deployment(t)
	start(t, js, subscriptions(
		subscription("metadata", "http://169.254.169.254/latest/meta-data/", "insecureHttp: true"),
		subscription("private", "https://10.20.30.40/hooks")))
	publish(t, js, "r-1", protocol.EventInterrupted)
	dls := natstest.WaitFor(t, js, names.DeadLetterStream(), names.DeadLetter(notify.ReasonUndeliverable), func(rs []natstest.Received) bool { return len(rs) >= 2 })
	want := map[string]string{
		"interlock-webhook-metadata": "169.254.169.254:80: a link-local address (a cloud's metadata service)",
		"interlock-webhook-private":  "10.20.30.40:443: a private address",
	}
	for _, dl := range dls {
		c, e := dl.Header.Get(bus.HeaderConsumer), dl.Header.Get(bus.HeaderError)
		if !strings.Contains(e, want[c]) || !strings.Contains(e, "after 1 attempt") || !strings.Contains(e, "--egress-allow") {
			t.Errorf("dead letter of %s says %q; want it refused at once saying %q and how to allow it", c, e, want[c])
		}
	}
	natstest.Eventually(t, "both deliveries recorded dead after one attempt", func() bool {
		d := deliveries(t, js, webhook.Query{Status: webhook.StatusDead})
		return len(d) == 2 && d[0].Attempts == 1 && d[1].Attempts == 1 && strings.Contains(d[0].Error, "egress: refused")
	})
}
