package metrics_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/metrics"
	"github.com/interlockhq/interlock/protocol"
)

// contract is the flow of these tests: one approval of send_contract by
// legal, with a quorum of the state's quorum approvers, if any, and a
// reminder a second after it is asked, if the state asks for one.
const contract = "contract"

// contractState is the contract flow's state.
type contractState struct {
	Value   float64 `json:"value"`
	Quorum  int     `json:"quorum,omitempty"`
	Remind  bool    `json:"remind,omitempty"`
	Verdict string  `json:"verdict,omitempty"`
}

func contractFlow() *engine.Flow {
	return engine.NewFlow[contractState](contract).
		Node("review", func(ctx context.Context, n *engine.Node[contractState]) error {
			st := n.State()
			a := engine.Approval{
				Action: "send_contract", Args: map[string]any{"value": st.Value}, ApproverRole: "legal",
				Decisions: protocol.AllVerdicts(), Timeout: time.Hour,
			}
			if st.Quorum > 0 {
				a.Quorum = &protocol.Quorum{Required: st.Quorum}
			}
			if st.Remind {
				// The deadline is an hour after the asking: a second after it.
				a.Reminders = []time.Duration{time.Hour - time.Second}
			}
			d, err := n.Approve(ctx, a)
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"verdict": string(d.Verdict)})
		}).
		Start("review").
		MustBuild()
}

// newApprovalsRig runs the contract flow and the example gate rules.
func newApprovalsRig(t *testing.T) *rig {
	t.Helper()
	rules, err := examples.GateRules()
	if err != nil {
		t.Fatal(err)
	}
	return startRig(t, nil, nil, interlock.Config{Flows: []*engine.Flow{contractFlow()}, GateRules: rules})
}

// completed fails unless ev is a contract run's completed event with
// the verdict.
func completed(t *testing.T, ev client.Event, verdict string) {
	t.Helper()
	var c protocol.Completed
	if err := ev.Decode(&c); err != nil || ev.Kind != protocol.EventCompleted || !strings.Contains(string(c.State), `"verdict":"`+verdict+`"`) {
		t.Fatalf("%s %s (%v): want the run completed with verdict %s", ev.Kind, ev.Event.Data(), err, verdict)
	}
}

// decideContract answers a contract run's pending approval.
func (r *rig) decideContract(run string, in protocol.Interrupted, res protocol.Resume) client.Event {
	r.t.Helper()
	res.ResumeToken = in.ResumeToken
	return r.resumeFlow(contract, run, res)
}

// assign claims, releases or delegates a contract run's approval, and
// waits for its n-th assigned event.
func (r *rig) assign(run string, a protocol.Assign, n int) {
	r.t.Helper()
	natstest.Publish(r.t, r.js, names.In(contract, protocol.VerbAssign), protocol.TypeAssign, run, a)
	natstest.WaitFor(r.t, r.js, names.EventStream(), names.Event(contract, run, protocol.EventAssigned), natstest.Nth(protocol.EventAssigned, n))
}

// noPersonalLabels fails when a label of any series is a run id (starting
// r- or c-) or one of words: people's names, what people wrote.
func noPersonalLabels(t *testing.T, f families, words ...string) {
	t.Helper()
	for name, fam := range f {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				v := l.GetValue()
				for _, w := range append([]string{"r-", "c-"}, words...) {
					if v == w || strings.HasPrefix(v, w) && strings.HasSuffix(w, "-") {
						t.Errorf("%s has label %s=%s: no run ids, names or messages in labels", name, l.GetName(), l.GetValue())
					}
				}
			}
		}
	}
}

func TestApprovalMetricsMoveWithTheirEvents(t *testing.T) {
	t.Parallel()
	r := newApprovalsRig(t)
	const action = "send_contract"
	sc := func(name string, want float64, labels ...string) series {
		return s(name, want, append([]string{"flow", contract, "action", action}, labels...)...)
	}

	// A quorum of two: the first vote is short, the second meets it.
	in := r.startFlow(contract, "r-quorum", map[string]any{"value": 20000, "quorum": 2})
	again := interrupted(t, r.decideContract("r-quorum", in, protocol.Resume{Decision: "approve", Approver: "ann"}))
	if again.RequestID == in.RequestID || len(again.Votes) != 1 {
		t.Fatalf("after one vote of two: request %s (was %s), %d votes; want the approval asked again with the vote", again.RequestID, in.RequestID, len(again.Votes))
	}
	completed(t, r.decideContract("r-quorum", again, protocol.Resume{Decision: "approve", Approver: "bob"}), "approve")

	// An answer to the agent instead of a decision.
	in = r.startFlow(contract, "r-respond", map[string]any{"value": 100})
	completed(t, r.decideContract("r-respond", in, protocol.Resume{Decision: "respond", Approver: "ann", Message: "Ask Dana first"}), "respond")

	// A reminder a second after the asking.
	in = r.startFlow(contract, "r-remind", map[string]any{"value": 100, "remind": true})
	natstest.WaitFor(t, r.js, names.EventStream(), names.Event(contract, "r-remind", protocol.EventReminded), natstest.Nth(protocol.EventReminded, 1))
	r.decideContract("r-remind", in, protocol.Resume{Decision: "edit", Approver: "ann", Edits: map[string]json.RawMessage{"value": json.RawMessage(`90`)}})

	// Claimed, released, delegated to finance, claimed again; then a
	// decision by someone else refused, and the claimant's reject.
	in = r.startFlow(contract, "r-assign", map[string]any{"value": 100})
	r.assign("r-assign", protocol.Assign{RequestID: in.RequestID, Op: protocol.AssignClaim, By: "ann"}, 1)
	r.assign("r-assign", protocol.Assign{RequestID: in.RequestID, Op: protocol.AssignRelease, By: "ann"}, 2)
	r.assign("r-assign", protocol.Assign{RequestID: in.RequestID, Op: protocol.AssignDelegate, To: "role:finance", By: "ann", Reason: "over my limit"}, 3)
	r.assign("r-assign", protocol.Assign{RequestID: in.RequestID, Op: protocol.AssignClaim, By: "carl"}, 4)
	// The refused resume's action comes from the pending index.
	eventually(t, r.m.Addr(), "r-assign pending with finance", is("interlock_pending_interrupts", 1, "flow", contract, "kind", "approval", "approver_role", "finance"))
	refused := r.resumeFlow(contract, "r-assign", protocol.Resume{ResumeToken: in.ResumeToken, Decision: "approve", Approver: "bob"})
	if refused.Kind != protocol.EventRefused {
		t.Fatalf("bob deciding carl's claim: %s, want refused", refused.Kind)
	}
	r.decideContract("r-assign", in, protocol.Resume{Decision: "reject", Approver: "carl", Reason: "not this quarter"})

	// A tool call a gate rule holds, approved; one no rule holds.
	answer, err := r.c.AskTool(t.Context(), protocol.ToolRequest{CallID: "c-refund", Tool: "issue_refund", Agent: "support-bot",
		Args: map[string]json.RawMessage{"amount": json.RawMessage(`900`)}}, natstest.Wait)
	if err != nil || answer.Pending == nil {
		t.Fatalf("asking for issue_refund: %v %+v; want it pending", err, answer)
	}
	r.resumeFlow(engine.GateFlowName, "c-refund", protocol.Resume{ResumeToken: answer.Pending.ResumeToken, Decision: "approve", Approver: "ann"})
	if answer, err := r.c.AskTool(t.Context(), protocol.ToolRequest{CallID: "c-lookup", Tool: "lookup_order"}, natstest.Wait); err != nil || !answer.May() {
		t.Fatalf("asking for lookup_order: %v %+v; want it allowed", err, answer)
	}

	want := []series{
		// Each run asked once; voting asked r-quorum's again, not anew.
		sc("interlock_interrupts_total", 4, "kind", "approval"),
		s("interlock_interrupts_total", 1, "flow", "gate", "action", "issue_refund", "kind", "approval"),

		sc("interlock_votes_total", 1, "quorum", "short"),
		sc("interlock_votes_total", 1, "quorum", "met"),

		sc("interlock_decisions_total", 1, "outcome", "approved", "by", "approver"),
		sc("interlock_decisions_total", 1, "outcome", "responded", "by", "approver"),
		sc("interlock_decisions_total", 1, "outcome", "edited", "by", "approver"),
		sc("interlock_decisions_total", 1, "outcome", "rejected", "by", "approver"),
		s("interlock_decisions_total", 1, "flow", "gate", "action", "issue_refund", "outcome", "approved", "by", "approver"),
		s("interlock_decisions_total", 1, "flow", "gate", "action", "lookup_order", "outcome", "allowed", "by", "rule"),

		sc("interlock_time_to_decision_seconds", 4, "kind", "approval", "verb", "resume"),
		s("interlock_time_to_decision_seconds", 1, "flow", "gate", "action", "issue_refund", "kind", "approval", "verb", "resume"),

		// Five answers taken (two votes), one refused.
		sc("interlock_resumes_total", 5, "result", "accepted"),
		sc("interlock_resumes_total", 1, "result", "refused", "code", string(protocol.CodeForbidden)),
		s("interlock_resumes_total", 1, "flow", "gate", "action", "issue_refund", "result", "accepted"),

		sc("interlock_reminders_total", 1, "kind", "approval"),

		sc("interlock_assignments_total", 2, "op", "claim"),
		sc("interlock_assignments_total", 1, "op", "release"),
		sc("interlock_assignments_total", 1, "op", "delegate"),

		// How each run ended: a rejection is not a success.
		s("interlock_runs_finished_total", 1, "flow", contract, "outcome", "approved"),
		s("interlock_runs_finished_total", 1, "flow", contract, "outcome", "edited"),
		s("interlock_runs_finished_total", 1, "flow", contract, "outcome", "rejected"),
		s("interlock_runs_finished_total", 1, "flow", contract, "outcome", "answered"),
		s("interlock_runs_finished_total", 1, "flow", "gate", "outcome", "approved"),

		s("interlock_transition_seconds", 4, "verb", "assign"),
		s("interlock_transition_seconds", 1, "verb", "remind"),
	}
	f := settle(t, r.m.Addr(), want)
	noPersonalLabels(t, f, "ann", "bob", "carl", "Ask Dana first", "support-bot", "not this quarter", "over my limit")
}

func TestApprovalMetricLabelsAreBounded(t *testing.T) {
	t.Parallel()
	r := newApprovalsRig(t)
	in := r.startFlow(contract, "r-1", map[string]any{"value": 100})

	// What a sender writes does not become a label: a flow that does not
	// run here, an op that does not exist, a verb no one knows.
	natstest.Publish(t, r.js, names.In("made-up", protocol.VerbAssign), protocol.TypeAssign, "r-2", protocol.Assign{RequestID: in.RequestID, Op: protocol.AssignClaim, By: "ann"})
	natstest.Publish(t, r.js, names.In("made-up", protocol.VerbResume), protocol.TypeResume, "r-2", protocol.Resume{ResumeToken: in.ResumeToken, Decision: "approve", Approver: "ann"})
	natstest.Publish(t, r.js, names.In(contract, protocol.VerbAssign), protocol.TypeAssign, "r-1", protocol.Assign{RequestID: in.RequestID, Op: "frobnicate", By: "ann"})
	natstest.Publish(t, r.js, names.In(contract, "frobnicate"), protocol.TypeAssign, "r-1", protocol.Assign{RequestID: in.RequestID, Op: protocol.AssignClaim, By: "ann"})

	f := settle(t, r.m.Addr(), []series{
		s("interlock_transition_seconds", 2, "verb", "assign"),
		s("interlock_transition_seconds", 1, "verb", "resume"),
		s("interlock_transition_seconds", 1, "verb", "other"),
		s("interlock_resumes_total", 1, "result", "refused", "code", string(protocol.CodeUnknownRun)),
		s("interlock_interrupts_total", 1, "flow", contract, "action", "send_contract", "kind", "approval"),
	})
	if fam := f["interlock_assignments_total"]; fam != nil && len(fam.GetMetric()) > 0 {
		t.Errorf("refused assigns counted as assignments:\n%s", f.dump("interlock_assignments_total"))
	}
	noPersonalLabels(t, f, "made-up", "frobnicate", "ann")

	// Tool names come from agents' requests and gate rules: past a bound
	// they count as other, in every metric labelled by action.
	m, err := metrics.New(metrics.Config{Timeout: natstest.Wait})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		tool := "tool" + strings.Repeat("x", i)
		run := "c-" + tool
		asked := &protocol.Interrupted{Flow: engine.GateFlowName, Run: run, Kind: protocol.KindApproval, Action: tool}
		m.Observe(bus.Observation{Verb: protocol.VerbRequest, Outcome: engine.Outcome{Flow: engine.GateFlowName, Run: run, Events: []engine.Message{
			{Kind: protocol.EventStarted, Flow: engine.GateFlowName, Run: run, Data: &protocol.Started{Flow: engine.GateFlowName, Run: run}},
			{Kind: protocol.EventInterrupted, Flow: engine.GateFlowName, Run: run, Data: asked},
		}}})
		m.Observe(bus.Observation{Verb: protocol.VerbAssign, Outcome: engine.Outcome{Flow: engine.GateFlowName, Run: run, Action: tool, AskedAt: time.Now(), Events: []engine.Message{
			{Kind: protocol.EventAssigned, Flow: engine.GateFlowName, Run: run, Data: &protocol.Assigned{Flow: engine.GateFlowName, Run: run, Op: "op" + tool, By: "ann"}},
		}}})
	}
	f = gather(t, m)
	for _, name := range []string{"interlock_interrupts_total", "interlock_assignments_total"} {
		if n := len(f[name].GetMetric()); n > 257 {
			t.Errorf("%d series of %s after 300 tools, want at most 257", n, name)
		}
	}
	f.want(t, []series{
		s("interlock_interrupts_total", 300-256, "flow", "gate", "action", "other", "kind", "approval"),
		s("interlock_assignments_total", 300-256, "flow", "gate", "action", "other", "op", "other"),
	})
	if n := len(f["interlock_assignments_total"].GetMetric()); n != 257 {
		t.Errorf("%d assignment series, want 256 tools and other, each with op other:\n%s", n, f.dump("interlock_assignments_total"))
	}
}

func TestRefusedResumesCountAsFailuresByCode(t *testing.T) {
	t.Parallel()
	r := newApprovalsRig(t)
	const action = "send_contract"
	in := r.startFlow(contract, "r-1", map[string]any{"value": 100})
	pending := func(n float64) func(families) bool {
		return is("interlock_pending_interrupts", n, "flow", contract, "kind", "approval", "approver_role", "legal")
	}
	eventually(t, r.m.Addr(), "r-1 pending", pending(1))

	refuse := func(res protocol.Resume, code protocol.Code) {
		t.Helper()
		ev := r.resumeFlow(contract, "r-1", res)
		var got protocol.Refused
		if err := ev.Decode(&got); err != nil || ev.Kind != protocol.EventRefused || got.Code != code {
			t.Fatalf("%s %+v (%v), want refused %s", ev.Kind, got, err, code)
		}
	}
	refuse(protocol.Resume{ResumeToken: "AAAA" + in.ResumeToken[4:], Decision: "approve", Approver: "ann"}, protocol.CodeTokenMismatch)
	refuse(protocol.Resume{ResumeToken: in.ResumeToken, Decision: "respond", Approver: "ann"}, protocol.CodeInvalidAnswer)
	r.assign("r-1", protocol.Assign{RequestID: in.RequestID, Op: protocol.AssignClaim, By: "ann"}, 1)
	refuse(protocol.Resume{ResumeToken: in.ResumeToken, Decision: "approve", Approver: "bob"}, protocol.CodeForbidden)
	completed(t, r.decideContract("r-1", in, protocol.Resume{Decision: "approve", Approver: "ann"}), "approve")
	// Once the run waits no more, a refusal names no action.
	eventually(t, r.m.Addr(), "r-1 no longer pending", pending(0))
	refuse(protocol.Resume{ResumeToken: in.ResumeToken, Decision: "approve", Approver: "ann", IdempotencyKey: "late"}, protocol.CodeNotWaiting)

	f := settle(t, r.m.Addr(), []series{
		s("interlock_resumes_total", 1, "flow", contract, "action", action, "result", "accepted"),
		s("interlock_resumes_total", 1, "flow", contract, "action", action, "result", "refused", "code", string(protocol.CodeTokenMismatch)),
		s("interlock_resumes_total", 1, "flow", contract, "action", action, "result", "refused", "code", string(protocol.CodeInvalidAnswer)),
		s("interlock_resumes_total", 1, "flow", contract, "action", action, "result", "refused", "code", string(protocol.CodeForbidden)),
		s("interlock_resumes_total", 1, "flow", contract, "result", "refused", "code", string(protocol.CodeNotWaiting)),
	})
	// The success rate the dashboard draws: accepted or repeated, of all.
	var ok, total float64
	for _, m := range f["interlock_resumes_total"].GetMetric() {
		v := m.GetCounter().GetValue()
		total += v
		for _, l := range m.GetLabel() {
			if l.GetName() == "result" && (l.GetValue() == "accepted" || l.GetValue() == "duplicate") {
				ok += v
			}
		}
	}
	if total != 5 || ok/total != 0.2 {
		t.Errorf("resume success rate %v of %v resumes, want 1 of 5", ok, total)
	}
	if n, _ := f.value("interlock_decisions_total", "flow", contract, "action", action, "outcome", "approved", "by", "approver"); n != 1 {
		t.Errorf("%v approvals decided, want the one accepted, not the refused", n)
	}
}
