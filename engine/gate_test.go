package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/protocol"
)

type draftState struct {
	Topic string `json:"topic,omitempty"`
	Draft string `json:"draft,omitempty"`
	Sent  bool   `json:"sent,omitempty"`
	Note  string `json:"note,omitempty"`
}

func gatedFlow(before, after bool, rejectRoute bool, ran *[]string) *engine.Flow {
	b := engine.NewFlow[draftState]("mail").
		Node("write", func(_ context.Context, n *engine.Node[draftState]) error {
			*ran = append(*ran, "write")
			return n.Set("draft", "Dear customer, about "+n.State().Topic)
		}).
		Node("send", func(_ context.Context, n *engine.Node[draftState]) error {
			*ran = append(*ran, "send")
			return n.Set("sent", true)
		}).
		Start("write").Edge("write", "send")
	if after {
		b.GateAfter("write", engine.Gate{Reason: "Review the draft", ApproverRole: "editor", Fields: []string{"draft"}})
	}
	if before {
		b.GateBefore("send", engine.Gate{Reason: "About to send", ApproverRole: "support"})
	}
	if rejectRoute {
		b.Node("discard", func(_ context.Context, n *engine.Node[draftState]) error {
			*ran = append(*ran, "discard")
			return n.Set("note", "discarded")
		})
		b.OnReject("send", "discard").OnReject("write", "discard")
	}
	return b.MustBuild()
}

func TestGateBeforeShowsTheStateAndApproveRunsTheNode(t *testing.T) {
	var ran []string
	h := enginetest.New(t, engine.NewFlow[draftState]("mail").
		Node("send", func(_ context.Context, n *engine.Node[draftState]) error {
			ran = append(ran, "send")
			return n.Set("sent", true)
		}).Start("send").
		GateBefore("send", engine.Gate{Reason: "About to send", ApproverRole: "support"}).MustBuild())
	run := h.Start(map[string]any{"topic": "refunds"})
	in := h.Interrupt(run)
	if in.Kind != protocol.KindApproval || in.Gate != engine.GateBefore || in.Action != "send" || in.ApproverRole != "support" || !strings.Contains(string(in.Args), `"topic":"refunds"`) {
		t.Fatalf("gate interrupt = %+v (args %s)", in, in.Args)
	}
	if len(ran) != 0 {
		t.Fatalf("the gated node ran before approval: %v", ran)
	}
	h.Decide(run, "approve", nil, "sam", "")
	h.WantStatus(run, engine.Completed)
	if strings.Join(ran, ",") != "send" || h.State(run)["sent"] != true {
		t.Fatalf("ran %v, state %v", ran, h.State(run))
	}
}

func TestGateAfterReviewsTheOutputAndEditAppliesToState(t *testing.T) {
	var ran []string
	h := enginetest.New(t, gatedFlow(false, true, true, &ran))
	run := h.Start(map[string]any{"topic": "refunds"})
	in := h.Interrupt(run)
	if in.Gate != engine.GateAfter || in.Action != "write" || string(in.Args) != `{"draft":"Dear customer, about refunds"}` {
		t.Fatalf("after-gate interrupt = %+v (args %s)", in, in.Args)
	}
	if out := h.Decide(run, "edit", map[string]any{"draft": "Dear Ann, about your refund"}, "ed", "friendlier"); out.Refused != nil {
		t.Fatal(out.Refused)
	}
	h.WantStatus(run, engine.Completed)
	if strings.Join(ran, ",") != "write,send" {
		t.Fatalf("ran %v: the reviewed node must not run again", ran)
	}
	if s := h.State(run); s["draft"] != "Dear Ann, about your refund" || s["sent"] != true {
		t.Fatalf("state = %v", s)
	}
}

func TestGateEditOutsideItsFieldsIsRefused(t *testing.T) {
	var ran []string
	h := enginetest.New(t, gatedFlow(false, true, true, &ran))
	run := h.Start(map[string]any{"topic": "refunds"})
	out := h.Decide(run, "edit", map[string]any{"topic": "other"}, "ed", "")
	if out.Refused == nil || out.Refused.Code != protocol.CodeInvalidAnswer || !strings.Contains(out.Refused.Message, `edits name "topic", which is not an arg of write; edit one of draft`) {
		t.Fatalf("outcome = %+v", out.Refused)
	}
}

func TestGateRejectTakesTheRejectRouteAndTheGatedNodeNeverRuns(t *testing.T) {
	var ran []string
	h := enginetest.New(t, gatedFlow(true, false, true, &ran))
	run := h.Start(map[string]any{"topic": "refunds"})
	h.Decide(run, "reject", nil, "sam", "wrong customer")
	h.WantStatus(run, engine.Completed)
	if strings.Join(ran, ",") != "write,discard" {
		t.Fatalf("ran %v, want write then discard, never send", ran)
	}
	if cp := h.Checkpoint(run); cp.Rejection == nil || cp.Rejection.Reason != "wrong customer" || cp.Rejection.Action != "send" {
		t.Fatalf("rejection = %+v", cp.Rejection)
	}
}

func TestGateRejectWithoutARouteCompletesTheRunWithTheRejection(t *testing.T) {
	var ran []string
	h := enginetest.New(t, gatedFlow(true, false, false, &ran))
	run := h.Start(map[string]any{"topic": "refunds"})
	h.Decide(run, "reject", nil, "sam", "not now")
	h.WantStatus(run, engine.Completed)
	if strings.Join(ran, ",") != "write" {
		t.Fatalf("ran %v, want only write", ran)
	}
	evs := h.Events(run)
	last := evs[len(evs)-1]
	rj, _ := last.Data["rejection"].(map[string]any)
	if last.Kind != "completed" || rj["approver"] != "sam" || rj["reason"] != "not now" {
		t.Fatalf("last event %s %v", last.Kind, last.Data)
	}
}

func TestGateDeclarationsAreChecked(t *testing.T) {
	_, err := engine.NewFlow[draftState]("g").
		Node("a", func(context.Context, *engine.Node[draftState]) error { return nil }).
		Start("a").
		GateBefore("missing", engine.Gate{}).
		GateAfter("a", engine.Gate{Fields: []string{"a.b"}}).
		OnReject("a", "nowhere").
		Build()
	for _, want := range []string{`gate before "missing": "missing" is not a node`, `gate after "a": field "a.b"`, `reject route a -> nowhere: "nowhere" is not a node`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Build error = %v, want %q", err, want)
		}
	}
}
