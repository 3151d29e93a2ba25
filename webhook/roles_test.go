package webhook_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/notify/channeltest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/webhook"
)

// A subscription to a role's approvals hears how they ended: the
// resumed and completed events, which name no role, of a run that waited
// on the role; nothing of another role's run.
func TestASubscriptionToARoleHearsHowItsApprovalsEnded(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{channeltest.Flow()}, Secret: natstest.Secret})
	rcv := newReceiver(t)
	set, err := webhook.Parse([]byte(subscriptions(subscription("fin", rcv.URL, "roles: [finance]"))), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.Nop()
	s, err := webhook.New(webhook.Config{Subscriptions: set, Env: env, FirstRetry: 20 * time.Millisecond, MaxRetry: 100 * time.Millisecond, Egress: local, Logger: &log})
	if err != nil {
		t.Fatal(err)
	}
	s.UseJetStream(svc.JetStream(), svc.Names())
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.WithoutCancel(t.Context())) })

	c := svc.Client("/test")
	for run, role := range map[string]string{"r-fin": "finance", "r-aud": "audit"} {
		if _, err := c.Start(t.Context(), "refund", run, map[string]json.RawMessage{"amount": json.RawMessage("900"), "role": json.RawMessage(`"` + role + `"`)}, nil); err != nil {
			t.Fatal(err)
		}
		var in protocol.Interrupted
		natstest.Eventually(t, run+" waiting", func() bool {
			in, err = c.LastInterrupt(t.Context(), "refund", run)
			return err == nil
		})
		if ev, err := svc.ResumeAs(t.Context(), c, "refund", run, protocol.Resume{RequestID: in.RequestID, Decision: "approve"}, "ann", []string{role}); err != nil || ev.Kind == protocol.EventRefused {
			t.Fatalf("deciding %s: %s %v", run, ev.Kind, err)
		}
	}
	typeOf := func(kind string) string { typ, _ := protocol.OutboundType(kind); return typ }
	kinds := func(run string) []string {
		var out []string
		for _, h := range rcv.delivered() {
			if h.payload.Run == run {
				out = append(out, h.payload.Type)
			}
		}
		return out
	}
	natstest.Eventually(t, "r-fin's completed delivered", func() bool { return slices.Contains(kinds("r-fin"), typeOf(protocol.EventCompleted)) })
	got := kinds("r-fin")
	for _, k := range []string{protocol.EventInterrupted, protocol.EventResumed, protocol.EventCompleted} {
		if !slices.Contains(got, typeOf(k)) {
			t.Errorf("the finance subscription did not hear r-fin's %s: %v", k, got)
		}
	}
	if got := kinds("r-aud"); len(got) != 0 {
		t.Errorf("the finance subscription heard the audit role's run: %v", got)
	}
}
