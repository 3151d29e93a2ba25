package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
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

// editsFunc is an [engine.EditChecker] of a function.
type editsFunc func(rule string, req protocol.ToolRequest, final map[string]json.RawMessage) error

func (f editsFunc) CheckEdit(_ context.Context, rule string, req protocol.ToolRequest, final map[string]json.RawMessage) error {
	return f(rule, req, final)
}

// anyEdit lets every edit run.
var anyEdit = editsFunc(func(string, protocol.ToolRequest, map[string]json.RawMessage) error { return nil })

// gateHarness is a harness of the gate flow whose runner checks edits
// with edits.
func gateHarness(t *testing.T, edits engine.EditChecker) *enginetest.Harness {
	return enginetest.NewWithConfig(t, engine.Config{Edits: edits}, engine.GateFlow())
}

func TestToolCallRuleStartsOneGateRunAndRepeatsAnswerTheSameDecision(t *testing.T) {
	h := gateHarness(t, anyEdit)
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

// TestARequestUnderACallIDWithOtherArgsIsRefusedNotAnsweredWithItsDecision
// is the attack on the MCP gateway's computable call ids: a call id
// requested with harmless args, approved, then requested with harmful
// ones. The second request is refused run_exists; the decided event says
// which args it is about and carries the approved args to run.
func TestARequestUnderACallIDWithOtherArgsIsRefusedNotAnsweredWithItsDecision(t *testing.T) {
	h := gateHarness(t, anyEdit)
	request(t, h, "req-1", "mcp-1", 600, supervisorRule)
	wantAccepted(t, h.Decide("mcp-1", "approve", nil, "sam", ""))
	out := request(t, h, "req-2", "mcp-1", 5000, supervisorRule)
	if out.Refused == nil || out.Refused.Code != protocol.CodeRunExists || !strings.Contains(out.Refused.Message, "other args") {
		t.Fatalf("the same call id with other args = %+v, want refused run_exists", out.Refused)
	}
	d := decided(t, h, "mcp-1")
	if len(d) != 1 {
		t.Fatalf("decided events = %+v, want the first only", d)
	}
	want, _ := protocol.ArgsDigest(map[string]json.RawMessage{"amount": json.RawMessage("600")})
	if d[0].ArgsDigest != want || d[0].FinalDigest != want || decodeArgs(d[0].Args)["amount"] != 600.0 {
		t.Fatalf("decided = %+v, want it bound to the args of 600, and them to run", d[0])
	}
	// Another tool under the same id is another call too.
	out, err := h.Runner.Request(t.Context(), engine.ToolRequest{CallID: "mcp-1", Tool: "send_contract",
		Args: map[string]json.RawMessage{"amount": json.RawMessage("600")}, Inbound: engine.Inbound{EventID: "req-3", Source: "/agents/support"}})
	if err != nil || out.Refused == nil || out.Refused.Code != protocol.CodeRunExists {
		t.Fatalf("another tool under the call id = %+v %v, want refused run_exists", out.Refused, err)
	}
	// The same call, written otherwise (spacing, a number's form), is the
	// same call.
	out, err = h.Runner.Request(t.Context(), engine.ToolRequest{CallID: "mcp-1", Tool: "issue_refund",
		Args: map[string]json.RawMessage{"amount": json.RawMessage("6.0e2")}, Inbound: engine.Inbound{EventID: "req-4", Source: "/agents/support"}})
	if err != nil || out.Refused != nil || len(decided(t, h, "mcp-1")) != 2 {
		t.Fatalf("the same call again = %+v %v, want its decision again", out.Refused, err)
	}
}

// consume takes call's approval for the args of digest.
func consume(t *testing.T, h *enginetest.Harness, id, call, digest string) engine.Outcome {
	t.Helper()
	out, err := h.Runner.Consume(t.Context(), engine.Consume{CallID: call, ArgsDigest: digest, Inbound: engine.Inbound{EventID: id, Source: "/agents/support"}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAnApprovalIsTakenOnceForExactlyItsArgs checks that an approval lets
// its call run once: the first take of its final args succeeds, a second
// (another gateway, the same after a restart) is refused not_waiting, as
// is a take of other args or of a call no one approved.
func TestAnApprovalIsTakenOnceForExactlyItsArgs(t *testing.T) {
	h := gateHarness(t, anyEdit)
	request(t, h, "req-1", "call-c", 4800, supervisorRule)
	if out := consume(t, h, "take-0", "call-c", strings.Repeat("0", 64)); out.Refused == nil || out.Refused.Code != protocol.CodeNotWaiting {
		t.Fatalf("taking a pending call's approval = %+v, want not_waiting", out.Refused)
	}
	wantAccepted(t, h.Decide("call-c", "edit", map[string]any{"amount": 400}, "sam", "partial"))
	d := decided(t, h, "call-c")[0]
	if out := consume(t, h, "take-1", "call-c", d.ArgsDigest); out.Refused == nil || out.Refused.Code != protocol.CodeForbidden {
		t.Fatalf("taking the approval for the requested args, not the edited ones = %+v, want forbidden", out.Refused)
	}
	out := consume(t, h, "take-2", "call-c", d.FinalDigest)
	if out.Refused != nil {
		t.Fatalf("the first take: %+v", out.Refused)
	}
	var consumed *protocol.Consumed
	for _, m := range out.Events {
		if c, ok := m.Data.(*protocol.Consumed); ok {
			consumed = c
		}
	}
	if consumed == nil || consumed.ArgsDigest != d.FinalDigest || consumed.By != "/agents/support" {
		t.Fatalf("consumed = %+v", consumed)
	}
	if again := consume(t, h, "take-2", "call-c", d.FinalDigest); !again.Duplicate {
		t.Fatalf("the same take delivered again = %+v, want a repeat", again)
	}
	if out := consume(t, h, "take-3", "call-c", d.FinalDigest); out.Refused == nil || out.Refused.Code != protocol.CodeNotWaiting || !strings.Contains(out.Refused.Message, "was taken by") {
		t.Fatalf("a second take = %+v, want not_waiting: an approval runs its call once", out.Refused)
	}
	h.WantStatus("call-c", engine.Completed)
	if n := len(h.Store.Finished()); n != 1 {
		t.Fatalf("%d finished entries, want one: taking an approval does not finish the run again", n)
	}
	request(t, h, "req-r", "call-r", 4800, supervisorRule)
	h.Decide("call-r", "reject", nil, "sam", "no")
	if out := consume(t, h, "take-r", "call-r", decided(t, h, "call-r")[0].ArgsDigest); out.Refused == nil || out.Refused.Code != protocol.CodeNotWaiting {
		t.Fatalf("taking a rejected call's approval = %+v, want not_waiting", out.Refused)
	}
}

// TestAnEditIsCheckedAgainstTheRuleThatHoldsTheCall checks that the
// gate's rule checks an edit's final args, and that without a checker an
// edit is refused (fail closed), the call still waiting.
func TestAnEditIsCheckedAgainstTheRuleThatHoldsTheCall(t *testing.T) {
	lower := editsFunc(func(rule string, req protocol.ToolRequest, final map[string]json.RawMessage) error {
		if rule != "large-refund" || req.Tool != "issue_refund" || string(req.Args["amount"]) != "4800" {
			return errors.New("wrong call")
		}
		if string(final["amount"]) == "9000" {
			return errors.New("rule large-refund allows an edit only where args.amount <= requested.amount")
		}
		return nil
	})
	h := gateHarness(t, lower)
	request(t, h, "req-1", "call-e", 4800, supervisorRule)
	out := h.Decide("call-e", "edit", map[string]any{"amount": 9000}, "sam", "more")
	if out.Refused == nil || out.Refused.Code != protocol.CodeInvalidAnswer || !strings.Contains(out.Refused.Message, "requested.amount") {
		t.Fatalf("an edit beyond the rule = %+v, want invalid_answer saying why", out.Refused)
	}
	h.WantStatus("call-e", engine.Waiting)
	wantAccepted(t, h.Decide("call-e", "edit", map[string]any{"amount": 400}, "sam", "partial"))

	closed := gateHarness(t, nil)
	request(t, closed, "req-1", "call-e", 4800, supervisorRule)
	if out := closed.Decide("call-e", "edit", map[string]any{"amount": 400}, "sam", "partial"); out.Refused == nil || out.Refused.Code != protocol.CodeInvalidAnswer {
		t.Fatalf("an edit with no rules to check it = %+v, want refused", out.Refused)
	}
	wantAccepted(t, closed.Decide("call-e", "approve", nil, "sam", ""))
}

// racingStore is the harness's store as a runner sees it while another
// worker handles another message of the same request: its first read of
// the run finds nothing, and meanwhile other starts the run.
type racingStore struct {
	*enginetest.Store
	flow, run string
	other     func()
	once      sync.Once
}

func (s *racingStore) raced(flow, run string) bool {
	hit := false
	if flow == s.flow && run == s.run {
		s.once.Do(func() { s.other(); hit = true })
	}
	return hit
}

func (s *racingStore) Load(ctx context.Context, flow, run string) (*engine.Checkpoint, uint64, error) {
	if s.raced(flow, run) {
		return nil, 0, engine.ErrNotFound
	}
	return s.Store.Load(ctx, flow, run)
}

func (s *racingStore) LoadDoc(ctx context.Context, flow, run string) ([]byte, uint64, error) {
	if s.raced(flow, run) {
		return nil, 0, engine.ErrNotFound
	}
	return s.Store.LoadDoc(ctx, flow, run)
}

// racingRunner is a runner of flow on h's store and publisher whose first
// read of run finds nothing, while h's own runner, another worker, calls
// other.
func racingRunner(t *testing.T, h *enginetest.Harness, flow *engine.Flow, run string, other func()) *engine.Runner {
	t.Helper()
	r, err := engine.NewRunner(engine.Config{Flows: []*engine.Flow{flow}, Publisher: h.Publisher, Secret: []byte("enginetest-secret-enginetest-secret-0123"),
		Store: &racingStore{Store: h.Store, flow: flow.Name(), run: run, other: other}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Two messages of one tool call (an agent's request sent again while the
// first was on its way) handled at once by two workers: the second finds
// the call started by the first as it starts it, and answers it as the
// same call, never refusing it run_exists as another call's (a gateway
// would then ask a person again under another id).
func TestARequestOfACallAnotherWorkerStartsMeanwhileIsTheSameCall(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, engine.GateFlow())
	r := racingRunner(t, h, engine.GateFlow(), "call-twice", func() {
		if out := request(t, h, "ev-first", "call-twice", 800, supervisorRule); out.Refused != nil {
			t.Fatalf("the first message: refused %+v", out.Refused)
		}
	})
	out, err := r.Request(t.Context(), engine.ToolRequest{
		CallID: "call-twice", Tool: "issue_refund", Args: map[string]json.RawMessage{"amount": json.RawMessage("800")},
		Agent: "support-bot", Rule: supervisorRule, Inbound: engine.Inbound{EventID: "ev-second", Source: "/agents/support"},
	})
	if err != nil || out.Refused != nil {
		t.Fatalf("the second message: %+v %v, want it taken as the same call", out.Refused, err)
	}
	for _, m := range h.Publisher.Messages("call-twice") {
		if ref, ok := m.Data.(*protocol.Refused); ok {
			t.Fatalf("published a refusal of the same call: %+v", ref)
		}
	}
}

// Two messages of one ask handled at once by two workers: the second is
// the same ask, never refused run_exists.
func TestAnAskAnotherWorkerStartsMeanwhileIsTheSameAsk(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, engine.AskFlow())
	ask := protocol.AskRequest{AskID: "ask-twice", Agent: "bot", Interrupt: protocol.AskInterrupt{Kind: protocol.KindQuestion,
		Questions: []protocol.Question{{Field: "address", Question: "Where to?"}}}}
	r := racingRunner(t, h, engine.AskFlow(), "ask-twice", func() {
		out, err := h.Runner.Ask(t.Context(), engine.AskRequest{AskRequest: ask, Inbound: engine.Inbound{EventID: "ask-first", Source: "/agents/bot"}})
		if err != nil || out.Refused != nil {
			t.Fatalf("the first message: %v %+v", err, out.Refused)
		}
	})
	out, err := r.Ask(t.Context(), engine.AskRequest{AskRequest: ask, Inbound: engine.Inbound{EventID: "ask-second", Source: "/agents/bot"}})
	if err != nil || out.Refused != nil {
		t.Fatalf("the second message: %+v %v, want it taken as the same ask", out.Refused, err)
	}
	for _, m := range h.Publisher.Messages("ask-twice") {
		if ref, ok := m.Data.(*protocol.Refused); ok {
			t.Fatalf("published a refusal of the same ask: %+v", ref)
		}
	}
}
