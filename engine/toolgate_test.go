package engine_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/protocol"
)

func request(t *testing.T, h *enginetest.Harness, id, callID string, amount float64, rule *engine.GateRule) engine.Outcome {
	t.Helper()
	out, err := h.Runner.Request(t.Context(), engine.ToolRequest{
		CallID: callID, Tool: "issue_refund", Args: map[string]json.RawMessage{"amount": json.RawMessage(mustMarshal(t, amount))},
		Agent: "support-bot", Rule: rule, Inbound: engine.Inbound{EventID: id, Source: "/agents/support"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decided(t *testing.T, h *enginetest.Harness, call string) []*protocol.Decided {
	t.Helper()
	var out []*protocol.Decided
	for _, m := range h.Publisher.Messages(call) {
		if d, ok := m.Data.(*protocol.Decided); ok {
			out = append(out, d)
		}
	}
	return out
}

var supervisorRule = &engine.GateRule{Name: "large-refund", Reason: "over $500", ApproverRole: "supervisor", Timeout: time.Minute}

func TestToolCallWithNoRuleIsAllowedAtOnce(t *testing.T) {
	h := enginetest.New(t, engine.GateFlow())
	request(t, h, "req-1", "call-1", 40, nil)
	d := decided(t, h, "call-1")
	if len(d) != 1 || d[0].Decision != engine.ToolAllowed || d[0].CallID != "call-1" {
		t.Fatalf("decided = %+v", d)
	}
	if _, _, err := h.Store.Load(t.Context(), engine.GateFlowName, "call-1"); err == nil {
		t.Fatal("an allowed call started a gate run")
	}
}

func TestToolCallRuleStartsOneGateRunAndRepeatsAnswerTheSameDecision(t *testing.T) {
	h := enginetest.New(t, engine.GateFlow())
	request(t, h, "req-1", "call-2", 4800, supervisorRule)
	cp := h.Checkpoint("call-2")
	if cp.Status != engine.Waiting || cp.Interrupt.Kind != protocol.KindApproval || cp.Interrupt.Action != "issue_refund" || cp.Interrupt.ApproverRole != "supervisor" {
		t.Fatalf("gate run = %s %+v", cp.Status, cp.Interrupt)
	}
	if out := request(t, h, "req-2", "call-2", 4800, supervisorRule); !out.Duplicate {
		t.Fatalf("repeat while pending = %+v, want acknowledged", out)
	}
	if len(decided(t, h, "call-2")) != 0 || len(h.Store.Pending()) != 1 {
		t.Fatal("a repeated request while pending answered or started something")
	}
	if out := h.Decide("call-2", "edit", map[string]any{"amount": 400}, "sam", "partial"); out.Refused != nil {
		t.Fatal(out.Refused)
	}
	d := decided(t, h, "call-2")
	if len(d) != 1 || d[0].Decision != engine.ToolEdited || decodeArgs(d[0].Args)["amount"] != 400.0 || d[0].Approver != "sam" || d[0].Rule != "large-refund" {
		t.Fatalf("decided = %+v", d)
	}
	request(t, h, "req-3", "call-2", 4800, nil)
	d = decided(t, h, "call-2")
	if len(d) != 2 || d[1].Decision != engine.ToolEdited || decodeArgs(d[1].Args)["amount"] != 400.0 {
		t.Fatalf("repeat after the decision answered %+v, want the same edited decision", d)
	}
}

func TestToolCallExpiresWithADecidedEvent(t *testing.T) {
	h := enginetest.New(t, engine.GateFlow())
	request(t, h, "req-1", "call-3", 4800, supervisorRule)
	h.Expire("call-3")
	h.WantStatus("call-3", engine.Expired)
	d := decided(t, h, "call-3")
	if len(d) != 1 || d[0].Decision != engine.ToolExpired {
		t.Fatalf("decided = %+v", d)
	}
	request(t, h, "req-2", "call-3", 4800, supervisorRule)
	if d = decided(t, h, "call-3"); len(d) != 2 || d[1].Decision != engine.ToolExpired {
		t.Fatalf("repeat after expiry answered %+v", d)
	}
}

func TestToolCallRejectedNeverRuns(t *testing.T) {
	h := enginetest.New(t, engine.GateFlow())
	request(t, h, "req-1", "call-4", 4800, supervisorRule)
	h.Decide("call-4", "reject", nil, "sam", "looks like fraud")
	d := decided(t, h, "call-4")
	if len(d) != 1 || d[0].Decision != engine.ToolRejected || d[0].Approver != "sam" || d[0].Reason != "looks like fraud" {
		t.Fatalf("decided = %+v", d)
	}
}

// decodeArgs decodes a decided event's args.
func decodeArgs(raw json.RawMessage) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}

func TestAGateRulesAssigneesQuorumAndRemindersHoldTheCall(t *testing.T) {
	h := enginetest.New(t, engine.GateFlow())
	rule := &engine.GateRule{Name: "huge-refund", Reason: "over $10,000", ApproverRole: "supervisor", Timeout: 30 * time.Minute,
		Assignees: []string{"ann@example.com"}, Quorum: &protocol.Quorum{Required: 2}, Reminders: []time.Duration{10 * time.Minute}, RemindEvery: time.Hour}
	request(t, h, "req-1", "call-q", 12000, rule)
	cp := h.Checkpoint("call-q")
	in := cp.Interrupt
	if in == nil || len(in.Assignees) != 1 || in.Quorum == nil || in.Quorum.Required != 2 || in.Requester != "support-bot" ||
		in.Remind == nil || len(in.Remind.Before) != 1 || in.Remind.Before[0] != 10*time.Minute || in.Remind.Every != time.Hour {
		t.Fatalf("gate interrupt = %+v, want the rule's assignee, quorum of two, the agent as requester and a reminder", in)
	}
	decide := func(who string) engine.Outcome {
		return h.Resume("call-q", engine.Resume{Flow: engine.GateFlowName, Decision: "approve", Approver: who, Roles: []string{"supervisor"}, RolesKnown: true})
	}
	if out := decide("support-bot"); out.Refused == nil || out.Refused.Code != protocol.CodeForbidden {
		t.Fatalf("the agent's own vote = %+v, want forbidden", out.Refused)
	}
	if out := decide("sam"); out.Refused != nil {
		t.Fatalf("sam's vote: %+v", out.Refused)
	}
	if d := decided(t, h, "call-q"); len(d) != 0 {
		t.Fatalf("decided after one vote of two: %+v", d)
	}
	if out := decide("ann@example.com"); out.Refused != nil {
		t.Fatalf("ann's vote: %+v", out.Refused)
	}
	if d := decided(t, h, "call-q"); len(d) != 1 || d[0].Decision != engine.ToolApproved {
		t.Fatalf("decided = %+v, want approved once both voted", d)
	}
}
