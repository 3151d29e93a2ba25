package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// policyFlow asks an approval whose one-second deadline has policy p, and
// records whether the action ran.
func policyFlow(name string, p engine.Policy) *engine.Flow {
	return engine.NewFlow[map[string]any](name).
		Node("ask", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			d, err := n.Approve(ctx, engine.Approval{Action: "send_email", Args: map[string]any{"to": "ann@example.com"},
				ApproverRole: "support", Timeout: time.Second, OnTimeout: p})
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"sent": d.Approved(), "by": d.Approver})
		}).Start("ask").MustBuild()
}

func TestDeadlinePoliciesOverTheBus(t *testing.T) {
	t.Parallel()
	r := newRig(t, policyFlow("on_approve", engine.Policy{Action: engine.OnTimeoutApprove}),
		policyFlow("on_reject", engine.Policy{Action: engine.OnTimeoutReject}))
	for flow, sent := range map[string]bool{"on_approve": true, "on_reject": false} {
		run := "r-" + flow
		r.start(flow, run, nil)
		r.interrupt(flow, run, 1)
		var done protocol.Completed
		natstest.Last(t, r.wait(flow, run, "completed", 1), "completed").Decode(t, &done)
		var s map[string]any
		if err := json.Unmarshal(done.State, &s); err != nil {
			t.Fatal(err)
		}
		if s["sent"] != sent || s["by"] != engine.TimeoutActor {
			t.Fatalf("%s: final state %v, want sent=%v by %s", flow, s, sent, engine.TimeoutActor)
		}
		var resumed protocol.Resumed
		natstest.Last(t, r.wait(flow, run, "resumed", 1), "resumed").Decode(t, &resumed)
		if resumed.Approver != engine.TimeoutActor {
			t.Fatalf("%s: resumed by %q", flow, resumed.Approver)
		}
	}
}

func TestApprovalRulesOverTheBus(t *testing.T) {
	t.Parallel()
	r := newRig(t, refund.Flow())
	const run = "r-refund-rules"
	r.start("refund", run, map[string]any{"orderId": "o-9", "amount": 4800, "currency": "USD", "last4": "4821"})
	in := r.interrupt("refund", run, 1)
	if in.Kind != "approval" || in.Action != "issue_refund" || fmt.Sprint(in.Decisions) != "[approve edit reject]" {
		t.Fatalf("approval = %+v", in)
	}
	// Rule 6: edits the validator refuses, edits on approve and an edit
	// without edits are refused invalid_answer; the token still works after.
	for i, bad := range []map[string]any{
		{"decision": "edit", "edits": map[string]any{"amount": 9000}},
		{"decision": "approve", "edits": map[string]any{"amount": 1}},
		{"decision": "edit"},
	} {
		bad["resumeToken"] = in.ResumeToken
		r.resume("refund", run, bad)
		if ref := r.refusal("refund", run, i+1); ref.Code != protocol.CodeInvalidAnswer {
			t.Fatalf("%v refused %+v, want invalid_answer", bad, ref)
		}
	}
	r.resume("refund", run, map[string]any{"resumeToken": in.ResumeToken, "decision": "reject", "approver": "sam", "reason": "duplicate"})
	var done protocol.Completed
	natstest.Last(t, r.wait("refund", run, "completed", 1), "completed").Decode(t, &done)
	var s refund.State
	if err := json.Unmarshal(done.State, &s); err != nil {
		t.Fatal(err)
	}
	if s.Refund != nil || s.Outcome != "rejected" || s.Rejection == nil || s.Rejection.Approver != "sam" || s.Rejection.Reason != "duplicate" {
		t.Fatalf("after a rejection the state is %+v", s)
	}
	cp, _ := r.checkpoint("refund", run)
	if cp.Rejection == nil || cp.Rejection.Approver != "sam" {
		t.Fatalf("checkpoint rejection = %+v", cp.Rejection)
	}
}

func TestUpdateAppendsThroughReducersOverTheBus(t *testing.T) {
	t.Parallel()
	type chat struct {
		Messages []string `json:"messages"`
	}
	flow := engine.NewFlow[chat]("chat").
		Node("confirm", func(ctx context.Context, n *engine.Node[chat]) error {
			_, err := n.Approve(ctx, engine.Approval{Action: "reply", Args: map[string]any{"count": len(n.State().Messages)}})
			return err
		}).Start("confirm").Reducer("messages", engine.Append).MustBuild()
	r := newRig(t, flow)
	msgs := make([]string, 47)
	for i := range msgs {
		msgs[i] = fmt.Sprintf("message %d", i)
	}
	r.start("chat", "r-chat", map[string]any{"messages": msgs})
	in := r.interrupt("chat", "r-chat", 1)
	r.resume("chat", "r-chat", map[string]any{"resumeToken": in.ResumeToken, "decision": "approve", "update": map[string]any{"messages": []string{"one more"}}})
	var done protocol.Completed
	natstest.Last(t, r.wait("chat", "r-chat", "completed", 1), "completed").Decode(t, &done)
	var s chat
	if err := json.Unmarshal(done.State, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Messages) != 48 || s.Messages[0] != "message 0" || s.Messages[47] != "one more" {
		t.Fatalf("messages: %d, want 48 ending with the update", len(s.Messages))
	}
}

func TestStaticGatesOverTheBus(t *testing.T) {
	t.Parallel()
	type mail struct {
		Draft string `json:"draft,omitempty"`
		Sent  bool   `json:"sent,omitempty"`
	}
	flow := engine.NewFlow[mail]("mail").
		Node("write", func(_ context.Context, n *engine.Node[mail]) error { return n.Set("draft", "Dear customer") }).
		Node("send", func(_ context.Context, n *engine.Node[mail]) error { return n.Set("sent", true) }).
		Start("write").Edge("write", "send").
		GateAfter("write", engine.Gate{ApproverRole: "editor", Reason: "Review the draft", Fields: []string{"draft"}}).
		GateBefore("send", engine.Gate{ApproverRole: "support", Reason: "About to send"}).
		MustBuild()
	r := newRig(t, flow)
	r.start("mail", "r-mail", nil)
	in := r.interrupt("mail", "r-mail", 1)
	if in.Gate != "after" || in.Action != "write" || string(in.Args) != `{"draft":"Dear customer"}` {
		t.Fatalf("after-gate = %+v (%s)", in, in.Args)
	}
	r.resume("mail", "r-mail", map[string]any{"resumeToken": in.ResumeToken, "decision": "edit", "edits": map[string]any{"draft": "Dear Ann"}})
	in = r.interrupt("mail", "r-mail", 2)
	if in.Gate != "before" || in.Action != "send" || !strings.Contains(string(in.Args), `"draft":"Dear Ann"`) {
		t.Fatalf("before-gate = %+v (%s)", in, in.Args)
	}
	r.resume("mail", "r-mail", map[string]any{"resumeToken": in.ResumeToken, "decision": "reject", "reason": "not today"})
	var done protocol.Completed
	natstest.Last(t, r.wait("mail", "r-mail", "completed", 1), "completed").Decode(t, &done)
	if strings.Contains(string(done.State), `"sent"`) || (done.Rejection == nil || !strings.Contains(done.Rejection.Reason, "not today")) {
		t.Fatalf("completed state %s rejection %+v: the gated node ran or the rejection is missing", done.State, done.Rejection)
	}
}
