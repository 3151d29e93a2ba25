package command_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/interlockhq/interlock/command"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/protocol"
)

// secret is the harness's (enginetest.New).
var secret = []byte("enginetest-secret-enginetest-secret-0123")

func cloudEvent(t *testing.T, id, typ, run string, data any) event.Event {
	t.Helper()
	ev := event.New()
	ev.SetID(id)
	ev.SetSource("/test")
	ev.SetType(typ)
	ev.SetSubject(run)
	ev.SetTime(time.Now())
	if err := ev.SetData("application/json", data); err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestAnyTransportAppliesCommandsThroughTheTable drives a run with the
// table alone, as a transport other than NATS would: CloudEvents in, the
// engine's outcomes out, and who sent each command decided by the engine
// from the authority the transport found.
func TestAnyTransportAppliesCommandsThroughTheTable(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	verbs := command.Verbs(nil)
	apply := func(verb string, ev event.Event, a engine.Authority) engine.Outcome {
		t.Helper()
		v, ok := verbs.Lookup(verb, refund.Name, false)
		if !ok {
			t.Fatalf("the table has no %s for a client", verb)
		}
		body, _ := json.Marshal(ev)
		a.Subject, a.Body = "interlock.in.refund."+verb, body
		out, err := v.Apply(t.Context(), h.Runner, refund.Name, ev, engine.Inbound{EventID: ev.ID(), Source: ev.Source(), Authority: a})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := apply("start", cloudEvent(t, "e-1", protocol.TypeStart, "r-1",
		map[string]any{"state": map[string]any{"orderId": "o-1", "amount": 4800, "last4": "4242"}, "by": "ann"}), engine.Authority{})
	if out.Refused != nil || h.Interrupt("r-1").Kind != protocol.KindApproval {
		t.Fatalf("start: %+v", out.Refused)
	}
	if rec := h.Audit("r-1")[0]; rec.By != "ann" || rec.Source != "/test" {
		t.Errorf("the start is recorded by %q from %q, want ann from /test", rec.By, rec.Source)
	}
	in := h.Interrupt("r-1")
	decide := cloudEvent(t, "e-2", protocol.TypeResume, "r-1",
		map[string]any{"requestId": in.RequestID, "decision": "approve", "approver": "mallory"})

	// A vouch that does not verify: refused forbidden, dead-lettered.
	out = apply("resume", decide, engine.Authority{Vouch: "v2.9999999999.AAAA", Approver: "sam", Roles: []string{refund.SupervisorRole}})
	if out.Refused == nil || out.Refused.Code != protocol.CodeForbidden || out.DeadLetter != engine.ReasonInvalidPayload {
		t.Fatalf("a forged vouch: %+v, dead letter %q; want refused forbidden and dead-lettered", out.Refused, out.DeadLetter)
	}
	// The same resume, vouched for sam: no token needed, and the audit
	// names sam, not the body's mallory.
	body, _ := json.Marshal(decide)
	vouched := protocol.Vouched{Subject: "interlock.in.refund.resume", EventID: "e-2", Run: "r-1", Body: body,
		Approver: "sam", Roles: []string{refund.SupervisorRole}}
	out = apply("resume", decide, engine.Authority{Vouch: protocol.Vouch(secret, vouched, time.Now().Add(time.Minute)),
		Approver: "sam", Roles: []string{refund.SupervisorRole}})
	if out.Refused != nil {
		t.Fatalf("a vouched decision: %+v", out.Refused)
	}
	h.WantStatus("r-1", engine.Completed)
	recs := h.Audit("r-1")
	for _, rec := range recs {
		if rec.Action == protocol.ActionApproved && (rec.By != "sam" || !rec.Trusted) {
			t.Errorf("approved by %q (trusted %v), want sam, vouched", rec.By, rec.Trusted)
		}
	}
}

func TestTheTableTakesEachVerbOnlyWhereItComesFrom(t *testing.T) {
	verbs := command.Verbs(nil)
	cases := []struct {
		verb, flow string
		due, ok    bool
	}{
		{"start", "refund", false, true},
		{"start", engine.GateFlowName, false, false},
		{"request", engine.GateFlowName, false, true},
		{"request", "refund", false, false},
		{"resume", engine.GateFlowName, false, true},
		{"expire", "refund", false, false},
		{"expire", "refund", true, true},
		{"resume", "refund", true, false},
		{"explode", "refund", false, false},
		{"migrate", "refund", false, true},
		{"migrate", "refund", true, false},
	}
	for _, c := range cases {
		if _, ok := verbs.Lookup(c.verb, c.flow, c.due); ok != c.ok {
			t.Errorf("Lookup(%s, %s, due %v) = %v, want %v", c.verb, c.flow, c.due, ok, c.ok)
		}
	}
	if got := verbs.ClientVerbs(); got != "assign|cancel|migrate|reannounce|resume|start" {
		t.Errorf("ClientVerbs() = %q", got)
	}
	if v, _ := verbs.Lookup("request", engine.GateFlowName, false); v.Unsupported == "" {
		t.Error("without rules, the gate's request is not unsupported")
	}
}
