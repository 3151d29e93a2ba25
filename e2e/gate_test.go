package e2e_test

import (
	"fmt"
	"testing"

	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/internal/natstest"
)

func TestToolCallGateOverTheBus(t *testing.T) {
	t.Parallel()
	r := gateRig(t)

	r.request("call-small", "issue_refund", map[string]any{"orderId": "o-1", "amount": 200})
	if d := r.decided("call-small", 1); d.Decision != "allowed" || d.CallID != "call-small" {
		t.Fatalf("small refund = %+v, want allowed", d)
	}
	if _, err := r.js.KeyValue(t.Context(), r.names.RunsBucket()); err == nil {
		if cp, err := natstestCheckpoint(r, "gate", "call-small"); err == nil {
			t.Fatalf("an allowed call started a gate run: %+v", cp)
		}
	}

	r.request("call-big", "issue_refund", map[string]any{"orderId": "o-1", "amount": 4800})
	in := r.interrupt("gate", "call-big", 1)
	if in.Kind != "approval" || in.Action != "issue_refund" || in.ApproverRole != "supervisor" || in.ExpiresAt == nil || string(in.Origin) == "" {
		t.Fatalf("gate interrupt = %+v", in)
	}
	r.request("call-big", "issue_refund", map[string]any{"orderId": "o-1", "amount": 4800})
	natstest.WaitDrained(t, r.js, r.names.InStream())
	if evs := r.wait("gate", "call-big", "interrupted", 1); natstest.Count(evs, "interrupted") != 1 || natstest.Count(evs, "started") != 1 || natstest.Count(evs, "decided") != 0 {
		t.Fatalf("a repeated pending request published something: %d events", len(evs))
	}

	r.resume("gate", "call-big", map[string]any{"resumeToken": in.ResumeToken, "decision": "edit", "edits": map[string]any{"amount": 400},
		"approver": "sam@example.com", "reason": "partial refund"})
	d := r.decided("call-big", 1)
	if d.Decision != "edited" || string(d.Args) != `{"amount":400,"orderId":"o-1"}` || d.Approver != "sam@example.com" || d.Rule != "large-refund" {
		t.Fatalf("decided = %+v (args %s)", d, d.Args)
	}
	r.request("call-big", "issue_refund", map[string]any{"orderId": "o-1", "amount": 4800})
	if d := r.decided("call-big", 2); d.Decision != "edited" || string(d.Args) != `{"amount":400,"orderId":"o-1"}` {
		t.Fatalf("repeat after the decision = %+v, want the same edited answer", d)
	}

	r.request("call-cancel", "cancel_subscription", map[string]any{"plan": "pro"})
	in = r.interrupt("gate", "call-cancel", 1)
	if in.ApproverRole != "retention_lead" {
		t.Fatalf("cancellation approval = %+v", in)
	}
	r.resume("gate", "call-cancel", map[string]any{"resumeToken": in.ResumeToken, "decision": "reject", "approver": "rita", "reason": "offer a discount first"})
	if d := r.decided("call-cancel", 1); d.Decision != "rejected" || d.Approver != "rita" || d.Reason != "offer a discount first" {
		t.Fatalf("rejected = %+v", d)
	}
}

func TestGateRulesChangeWithoutARestart(t *testing.T) {
	t.Parallel()
	r := gateRig(t)
	kv, err := r.js.KeyValue(t.Context(), r.names.ConfigBucket())
	if err != nil {
		t.Fatal(err)
	}
	stricter := "rules:\n  - name: any-refund\n    tool: issue_refund\n    when: args.amount > 100\n    reason: Every refund above $100 is reviewed.\n    approverRole: supervisor\n"
	if _, err := kv.Put(t.Context(), gate.Key, []byte(stricter)); err != nil {
		t.Fatal(err)
	}
	n := 0
	natstest.Eventually(t, "the workers apply the new rules", func() bool {
		n++
		id := fmt.Sprintf("call-%d", n)
		r.request(id, "issue_refund", map[string]any{"amount": 200})
		evs := natstest.WaitFor(t, r.js, r.names.EventStream(), r.names.Event("gate", id, ">"), func(rs []natstest.Received) bool {
			return natstest.Count(rs, "decided")+natstest.Count(rs, "interrupted") > 0
		})
		return natstest.Count(evs, "interrupted") == 1
	})
	if _, err := kv.Put(t.Context(), gate.Key, []byte("rules:\n  - tool: issue_refund\n    when: args.amount >\n    reason: x\n    approverRole: supervisor\n")); err != nil {
		t.Fatal(err)
	}
	r.request("call-after-bad", "issue_refund", map[string]any{"amount": 200})
	if in := r.interrupt("gate", "call-after-bad", 1); in.Reason != "Every refund above $100 is reviewed." {
		t.Fatalf("after a rule set that does not compile the gate asked %+v, want the previous rules", in)
	}
}

func TestToolRequestsWithoutGateRulesAreDeadLettered(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.request("call-x", "issue_refund", map[string]any{"amount": 1})
	natstest.WaitFor(t, r.js, r.names.DeadLetterStream(), r.names.DeadLetter("unsupported"), func(rs []natstest.Received) bool { return len(rs) == 1 })
}

func natstestCheckpoint(r *rig, flow, run string) ([]byte, error) {
	kv, err := r.js.KeyValue(r.t.Context(), r.names.RunsBucket())
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(r.t.Context(), flow+"."+run)
	if err != nil {
		return nil, err
	}
	return e.Value(), nil
}
