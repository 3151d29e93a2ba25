package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/protocol"
)

// contractState is the state of the contract flow these tests run.
type contractState struct {
	Value    float64 `json:"value"`
	Sent     float64 `json:"sent,omitempty"`
	Verdict  string  `json:"verdict,omitempty"`
	Message  string  `json:"message,omitempty"`
	Voters   string  `json:"voters,omitempty"`
	Approver string  `json:"approver,omitempty"`
}

// contractFlow asks a's approval of send_contract with the state's value,
// and records what the node got.
func contractFlow(a engine.Approval) *engine.Flow {
	return engine.NewFlow[contractState]("contract").
		Node("review", func(ctx context.Context, n *engine.Node[contractState]) error {
			ask := a
			ask.Action = "send_contract"
			ask.Args = map[string]any{"value": n.State().Value, "customer": "Acme"}
			d, err := n.Approve(ctx, ask)
			if err != nil {
				return err
			}
			var voters []string
			for _, v := range d.Votes {
				voters = append(voters, v.Approver)
			}
			u := engine.Update{"verdict": string(d.Verdict), "message": d.Message, "voters": strings.Join(voters, ","), "approver": d.Approver}
			if d.Approved() {
				u["sent"] = d.Args["value"]
			}
			return n.Update(u)
		}).
		Start("review").
		MustBuild()
}

// vote decides the run's pending approval as who, holding roles.
func vote(t *testing.T, h *enginetest.Harness, run, who, verdict string, edits map[string]any, roles ...string) engine.Outcome {
	t.Helper()
	var raw map[string]json.RawMessage
	if edits != nil {
		raw = map[string]json.RawMessage{}
		for k, v := range edits {
			b, _ := json.Marshal(v)
			raw[k] = b
		}
	}
	reason := ""
	if verdict == "reject" {
		reason = "not this quarter"
	}
	return h.Resume(run, engine.Resume{Decision: verdict, Edits: raw, Approver: who, Reason: reason, Roles: roles, RolesKnown: roles != nil})
}

func wantRefused(t *testing.T, out engine.Outcome, code protocol.Code, says string) {
	t.Helper()
	if out.Refused == nil {
		t.Fatalf("outcome = %+v, want refused %s", out, code)
	}
	if out.Refused.Code != code || !strings.Contains(out.Refused.Message, says) {
		t.Fatalf("refused %s %q, want %s saying %q", out.Refused.Code, out.Refused.Message, code, says)
	}
}

func wantAccepted(t *testing.T, out engine.Outcome) {
	t.Helper()
	if out.Refused != nil {
		t.Fatalf("refused %s: %s", out.Refused.Code, out.Refused.Message)
	}
}

func votedEvents(h *enginetest.Harness, run string) []*protocol.Voted {
	var out []*protocol.Voted
	for _, m := range h.Publisher.Messages(run) {
		if v, ok := m.Data.(*protocol.Voted); ok {
			out = append(out, v)
		}
	}
	return out
}

func twoApprovers() engine.Approval {
	return engine.Approval{ApproverRole: "legal", Quorum: &protocol.Quorum{Required: 2}, Requester: "sales-bot"}
}

func TestAVoteShortOfTheQuorumIsAnnouncedAndAskedAgainWithAFreshToken(t *testing.T) {
	h := enginetest.New(t, contractFlow(twoApprovers()))
	run := h.Start(map[string]any{"value": 12000})
	first := h.Interrupt(run)
	if first.Quorum == nil || first.Quorum.Required != 2 || !first.SeparationOfDuties || first.Requester != "sales-bot" {
		t.Fatalf("interrupt quorum %+v, separation of duties %v, requester %q", first.Quorum, first.SeparationOfDuties, first.Requester)
	}
	wantAccepted(t, vote(t, h, run, "ana", "approve", nil))
	h.WantStatus(run, engine.Waiting)
	again := h.Interrupt(run)
	if again.RequestID == first.RequestID || again.ResumeToken == first.ResumeToken {
		t.Fatalf("asked again with request %s token %q; want fresh ones", again.RequestID, again.ResumeToken)
	}
	if len(again.Votes) != 1 || again.Votes[0].Approver != "ana" || again.Votes[0].Digest == "" {
		t.Fatalf("votes so far = %+v", again.Votes)
	}
	v := votedEvents(h, run)
	if len(v) != 1 || v[0].RequestID != first.RequestID || v[0].Approver != "ana" || v[0].Required != 2 || len(v[0].Votes) != 1 {
		t.Fatalf("voted events = %+v", v)
	}
	wantAccepted(t, vote(t, h, run, "ben", "approve", nil))
	h.WantStatus(run, engine.Completed)
	s := h.State(run)
	if s["sent"] != 12000.0 || s["voters"] != "ana,ben" || s["verdict"] != "approve" {
		t.Fatalf("state = %v", s)
	}
	var actions []string
	for _, rec := range h.Audit(run) {
		actions = append(actions, rec.Action)
	}
	if got := strings.Join(actions, ","); got != "started,voted,approved" {
		t.Fatalf("audit actions = %s", got)
	}
}

func TestTwoRacingVotesByDifferentPeopleBothCount(t *testing.T) {
	h := enginetest.New(t, contractFlow(twoApprovers()))
	run := h.Start(map[string]any{"value": 12000})
	in := h.Interrupt(run)
	// Both saw the first interrupted event; the second arrives after the
	// first vote asked again with a fresh token, and still counts.
	wantAccepted(t, h.Resume(run, engine.Resume{Decision: "approve", Approver: "ana", Token: in.ResumeToken, RequestID: in.RequestID}))
	wantAccepted(t, h.Resume(run, engine.Resume{Decision: "approve", Approver: "ben", Token: in.ResumeToken, RequestID: in.RequestID}))
	h.WantStatus(run, engine.Completed)
	if s := h.State(run); s["voters"] != "ana,ben" {
		t.Fatalf("voters = %v", s["voters"])
	}
}

func TestTheSamePersonVotingTwiceCountsOnceAndTheSecondIsRefused(t *testing.T) {
	h := enginetest.New(t, contractFlow(twoApprovers()))
	run := h.Start(map[string]any{"value": 12000})
	in := h.Interrupt(run)
	wantAccepted(t, vote(t, h, run, "ana", "approve", nil))
	wantRefused(t, h.Resume(run, engine.Resume{Decision: "approve", Approver: "ana", Token: in.ResumeToken, RequestID: in.RequestID}), protocol.CodeForbidden, "ana voted on send_contract already")
	wantRefused(t, vote(t, h, run, "ana", "approve", nil), protocol.CodeForbidden, "each approver votes once")
	h.WantStatus(run, engine.Waiting)
	if got := h.Interrupt(run).Votes; len(got) != 1 {
		t.Fatalf("votes = %+v, want ana's one", got)
	}
}

func TestTheRequesterMayNotVoteOnWhatTheyAskedFor(t *testing.T) {
	h := enginetest.New(t, contractFlow(twoApprovers()))
	run := h.Start(map[string]any{"value": 12000})
	out := vote(t, h, run, "sales-bot", "approve", nil)
	wantRefused(t, out, protocol.CodeForbidden, "sales-bot asked for send_contract and may not vote on it")
	if out.Action != "send_contract" {
		t.Errorf("the refusal's outcome names action %q, want the approval it meant to answer (send_contract)", out.Action)
	}
	if got := h.Interrupt(run).Votes; len(got) != 0 {
		t.Fatalf("votes = %+v, want none", got)
	}
}

func TestWhoStartedTheRunMayNotVoteOnItsApproval(t *testing.T) {
	h := enginetest.New(t, contractFlow(twoApprovers()))
	// The requester the node names is sales-bot; sam started the run.
	out, err := h.Runner.Start(t.Context(), engine.Start{Flow: "contract", Run: "r-sam", By: "sam",
		State: map[string]json.RawMessage{"value": json.RawMessage("12000")}, Inbound: engine.Inbound{EventID: "start-r-sam", Source: "/http/sam"}})
	if err != nil || out.Refused != nil {
		t.Fatalf("start: %+v %v", out, err)
	}
	if cp := h.Checkpoint("r-sam"); cp.StartedBy != "sam" {
		t.Fatalf("startedBy %q, want sam", cp.StartedBy)
	}
	wantRefused(t, vote(t, h, "r-sam", "sam", "approve", nil), protocol.CodeForbidden, "sam started run r-sam and may not vote on its send_contract")
	wantRefused(t, vote(t, h, "r-sam", "sam", "edit", map[string]any{"value": 1}), protocol.CodeForbidden, "sam started run r-sam")
	wantAccepted(t, vote(t, h, "r-sam", "ana", "approve", nil))
	wantAccepted(t, vote(t, h, "r-sam", "ben", "approve", nil))
	h.WantStatus("r-sam", engine.Completed)
	// A start that names nobody was started by its source.
	run := h.Start(map[string]any{"value": 12000})
	if cp := h.Checkpoint(run); cp.StartedBy != "/enginetest" {
		t.Fatalf("startedBy %q, want the source", cp.StartedBy)
	}
}

func TestWithoutSeparationOfDutiesTheRequesterMayVote(t *testing.T) {
	off := false
	a := twoApprovers()
	a.SeparationOfDuties = &off
	h := enginetest.New(t, contractFlow(a))
	run := h.Start(map[string]any{"value": 12000})
	wantAccepted(t, vote(t, h, run, "sales-bot", "approve", nil))
	wantRefused(t, vote(t, h, run, "sales-bot", "approve", nil), protocol.CodeForbidden, "each approver votes once")
	wantAccepted(t, vote(t, h, run, "ana", "approve", nil))
	h.WantStatus(run, engine.Completed)
}

func TestAnEditsVoteDoesNotAddToVotesForTheUneditedArgs(t *testing.T) {
	h := enginetest.New(t, contractFlow(twoApprovers()))
	run := h.Start(map[string]any{"value": 12000})
	wantAccepted(t, vote(t, h, run, "ana", "approve", nil))
	wantAccepted(t, vote(t, h, run, "ben", "edit", map[string]any{"value": 11000}))
	h.WantStatus(run, engine.Waiting)
	votes := h.Interrupt(run).Votes
	if len(votes) != 2 || votes[0].Digest == votes[1].Digest {
		t.Fatalf("votes = %+v, want two for different args", votes)
	}
	// A third person's approve of the unedited args makes two for them.
	wantAccepted(t, vote(t, h, run, "cem", "approve", nil))
	h.WantStatus(run, engine.Completed)
	if s := h.State(run); s["sent"] != 12000.0 || s["voters"] != "ana,cem" {
		t.Fatalf("state = %v, want the unedited value sent, voted by ana and cem", s)
	}
}

func TestAnEditAgreedByTwoRunsWithTheEditedArgs(t *testing.T) {
	h := enginetest.New(t, contractFlow(twoApprovers()))
	run := h.Start(map[string]any{"value": 12000})
	wantAccepted(t, vote(t, h, run, "ana", "edit", map[string]any{"value": 11000}))
	wantAccepted(t, vote(t, h, run, "ben", "edit", map[string]any{"value": 11000}))
	h.WantStatus(run, engine.Completed)
	if s := h.State(run); s["sent"] != 11000.0 || s["verdict"] != "edit" {
		t.Fatalf("state = %v", s)
	}
}

func TestARejectAfterOneApprovalVetoesTheApproval(t *testing.T) {
	h := enginetest.New(t, contractFlow(twoApprovers()))
	run := h.Start(map[string]any{"value": 12000})
	wantAccepted(t, vote(t, h, run, "ana", "approve", nil))
	wantAccepted(t, vote(t, h, run, "ben", "reject", nil))
	h.WantStatus(run, engine.Completed)
	s := h.State(run)
	if s["verdict"] != "reject" || s["sent"] != nil || s["voters"] != "ana" || s["approver"] != "ben" {
		t.Fatalf("state = %v, want ben's veto with ana's vote listed and nothing sent", s)
	}
}

func TestAPerRoleQuorumTakesEachRoleItNames(t *testing.T) {
	h := enginetest.New(t, contractFlow(engine.Approval{
		Quorum: &protocol.Quorum{Roles: []protocol.RoleCount{{Role: "legal", Count: 1}, {Role: "finance", Count: 1}}},
	}))
	run := h.Start(map[string]any{"value": 12000})
	wantRefused(t, vote(t, h, run, "dan", "approve", nil, "sales"), protocol.CodeForbidden, "takes one of the roles legal, finance; dan came with role sales")
	wantAccepted(t, vote(t, h, run, "lea", "approve", nil, "legal"))
	wantRefused(t, vote(t, h, run, "lou", "approve", nil, "legal"), protocol.CodeInvalidAnswer, "1 legal and 1 finance")
	h.WantStatus(run, engine.Waiting)
	wantAccepted(t, vote(t, h, run, "fay", "approve", nil, "finance"))
	h.WantStatus(run, engine.Completed)
	if s := h.State(run); s["voters"] != "lea,fay" {
		t.Fatalf("voters = %v", s["voters"])
	}
}

func TestAQuorumOfMoreThanThirtyTwoIsRefusedAtTheNode(t *testing.T) {
	h := enginetest.New(t, contractFlow(engine.Approval{Quorum: &protocol.Quorum{Required: 33}}))
	run := h.Start(map[string]any{"value": 1})
	h.WantStatus(run, engine.Failed)
	if cp := h.Checkpoint(run); !strings.Contains(cp.Error, "more than 32") {
		t.Fatalf("error = %q", cp.Error)
	}
}

// assign claims, releases or delegates the run's pending approval as who.
func assign(t *testing.T, h *enginetest.Harness, run, who, op, to string) engine.Outcome {
	t.Helper()
	out, err := h.Runner.Assign(t.Context(), engine.Assign{Flow: "contract", Run: run, RequestID: h.Interrupt(run).RequestID,
		Op: op, To: to, By: who, Inbound: engine.Inbound{EventID: "assign-" + who + "-" + op + "-" + to, Source: "/test"}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func assignedEvents(h *enginetest.Harness, run string) []*protocol.Assigned {
	var out []*protocol.Assigned
	for _, m := range h.Publisher.Messages(run) {
		if a, ok := m.Data.(*protocol.Assigned); ok {
			out = append(out, a)
		}
	}
	return out
}

func TestAClaimedApprovalIsDecidedOnlyByItsClaimant(t *testing.T) {
	h := enginetest.New(t, contractFlow(engine.Approval{Assignees: []string{"ana", "ben"}}))
	run := h.Start(map[string]any{"value": 12000})
	wantRefused(t, assign(t, h, run, "eve", protocol.AssignClaim, ""), protocol.CodeForbidden, "one of ana, ben")
	wantAccepted(t, assign(t, h, run, "ana", protocol.AssignClaim, ""))
	if in := h.Checkpoint(run).Interrupt; in.ClaimedBy != "ana" {
		t.Fatalf("claimedBy = %q", in.ClaimedBy)
	}
	if p := h.Store.Pending(); len(p) != 1 || p[0].ClaimedBy != "ana" {
		t.Fatalf("pending index = %+v, want claimed by ana", p)
	}
	wantRefused(t, vote(t, h, run, "ben", "approve", nil), protocol.CodeForbidden, "claimed by ana")
	wantRefused(t, assign(t, h, run, "ben", protocol.AssignClaim, ""), protocol.CodeForbidden, "claimed by ana")
	wantAccepted(t, assign(t, h, run, "ana", protocol.AssignRelease, ""))
	wantAccepted(t, vote(t, h, run, "ben", "approve", nil))
	h.WantStatus(run, engine.Completed)
	a := assignedEvents(h, run)
	if len(a) != 2 || a[0].Op != "claim" || a[0].ClaimedBy != "ana" || a[1].Op != "release" || a[1].ClaimedBy != "" {
		t.Fatalf("assigned events = %+v", a)
	}
	var actions []string
	for _, rec := range h.Audit(run) {
		if rec.Action != protocol.ActionRefused {
			actions = append(actions, rec.Action+"/"+rec.By)
		}
	}
	if got := strings.Join(actions, ","); !strings.HasSuffix(got, "claimed/ana,released/ana,approved/ben") {
		t.Fatalf("audit = %s", got)
	}
}

func TestOnlyAnAssigneeOrARoleHolderMayDecide(t *testing.T) {
	h := enginetest.New(t, contractFlow(engine.Approval{Assignees: []string{"ana"}, ApproverRole: "legal"}))
	run := h.Start(map[string]any{"value": 12000})
	wantRefused(t, vote(t, h, run, "eve", "approve", nil, "sales"), protocol.CodeForbidden, "one of ana or holding approver role legal; eve is neither")
	wantAccepted(t, vote(t, h, run, "ana", "approve", nil, "sales"))
	h.WantStatus(run, engine.Completed)
}

func TestDelegatingToAPersonMakesThemTheAssignee(t *testing.T) {
	h := enginetest.New(t, contractFlow(engine.Approval{Assignees: []string{"ana"}}))
	run := h.Start(map[string]any{"value": 12000})
	wantAccepted(t, assign(t, h, run, "ana", protocol.AssignDelegate, "ben"))
	if in := h.Checkpoint(run).Interrupt; strings.Join(in.Assignees, ",") != "ben" {
		t.Fatalf("assignees = %v", in.Assignees)
	}
	wantRefused(t, vote(t, h, run, "ana", "approve", nil), protocol.CodeForbidden, "one of ben; ana is not")
	wantAccepted(t, vote(t, h, run, "ben", "approve", nil))
	h.WantStatus(run, engine.Completed)
}

func TestDelegatingToARoleHandsItToTheRolesHolders(t *testing.T) {
	h := enginetest.New(t, contractFlow(engine.Approval{Assignees: []string{"ana"}}))
	run := h.Start(map[string]any{"value": 12000})
	wantAccepted(t, assign(t, h, run, "ana", protocol.AssignClaim, ""))
	wantAccepted(t, assign(t, h, run, "ana", protocol.AssignDelegate, "role:finance_lead"))
	in := h.Checkpoint(run).Interrupt
	if in.ApproverRole != "finance_lead" || len(in.Assignees) != 0 || in.ClaimedBy != "" {
		t.Fatalf("after delegating: role %q, assignees %v, claimed by %q", in.ApproverRole, in.Assignees, in.ClaimedBy)
	}
	wantRefused(t, vote(t, h, run, "ana", "approve", nil, "sales"), protocol.CodeForbidden, "finance_lead")
	wantAccepted(t, vote(t, h, run, "fin", "approve", nil, "finance_lead"))
	h.WantStatus(run, engine.Completed)
}

func TestBadAssignsAreRefusedSayingWhatToFix(t *testing.T) {
	h := enginetest.New(t, contractFlow(engine.Approval{Assignees: []string{"ana"}}))
	run := h.Start(map[string]any{"value": 12000})
	wantRefused(t, assign(t, h, run, "ana", protocol.AssignRelease, ""), protocol.CodeInvalidPayload, "is not claimed")
	wantRefused(t, assign(t, h, run, "ana", protocol.AssignDelegate, "role:Bad Role"), protocol.CodeInvalidPayload, "to:")
	wantRefused(t, assign(t, h, run, "ana", "steal", ""), protocol.CodeInvalidPayload, "not claim, release or delegate")
	out, err := h.Runner.Assign(t.Context(), engine.Assign{Flow: "contract", Run: run, RequestID: "rq_other", Op: "claim", By: "ana",
		Inbound: engine.Inbound{EventID: "assign-other", Source: "/test"}})
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, out, protocol.CodeTokenMismatch, "not the pending request")
}

func TestRespondGivesTheNodeTheMessageAndTheActionDoesNotRun(t *testing.T) {
	h := enginetest.New(t, contractFlow(engine.Approval{Decisions: []engine.Verdict{"approve", "reject", "respond"}}))
	run := h.Start(map[string]any{"value": 12000})
	wantRefused(t, h.Resume(run, engine.Resume{Decision: "respond", Approver: "ana"}), protocol.CodeInvalidAnswer, "message")
	wantRefused(t, h.Resume(run, engine.Resume{Decision: "approve", Approver: "ana", Message: "hi"}), protocol.CodeInvalidAnswer, "message")
	wantAccepted(t, h.Resume(run, engine.Resume{Decision: "respond", Approver: "ana", Message: "Ask the customer for the order number first."}))
	h.WantStatus(run, engine.Completed)
	s := h.State(run)
	if s["verdict"] != "respond" || s["message"] != "Ask the customer for the order number first." || s["sent"] != nil {
		t.Fatalf("state = %v", s)
	}
	recs := h.Audit(run)
	if last := recs[len(recs)-1]; last.Action != protocol.ActionResponded || last.By != "ana" || last.Message != "Ask the customer for the order number first." {
		t.Fatalf("last audit record = %+v", last)
	}
	var resumed []*protocol.Resumed
	for _, m := range h.Publisher.Messages(run) {
		if r, ok := m.Data.(*protocol.Resumed); ok {
			resumed = append(resumed, r)
		}
	}
	if len(resumed) != 1 || resumed[0].Decision != "respond" || resumed[0].Message != "Ask the customer for the order number first." {
		t.Fatalf("resumed events = %+v", resumed)
	}
}

func TestRespondIsRefusedWhereTheApprovalDoesNotListIt(t *testing.T) {
	h := enginetest.New(t, contractFlow(engine.Approval{}))
	run := h.Start(map[string]any{"value": 12000})
	wantRefused(t, h.Resume(run, engine.Resume{Decision: "respond", Approver: "ana", Message: "no"}), protocol.CodeInvalidAnswer, "respond")
}

func TestAGateRuleThatListsRespondAnswersTheAgentWithTheMessage(t *testing.T) {
	h := enginetest.New(t, engine.GateFlow())
	rule := *supervisorRule
	rule.Decisions = []engine.Verdict{"approve", "reject", "respond"}
	request(t, h, "req-1", "call-1", 4800, &rule)
	h.WantStatus("call-1", engine.Waiting)
	wantAccepted(t, h.Resume("call-1", engine.Resume{Decision: "respond", Approver: "sam", Message: "Ask for the order number first."}))
	d := decided(t, h, "call-1")
	if len(d) != 1 || d[0].Decision != engine.ToolResponded || d[0].Message != "Ask for the order number first." || d[0].Approver != "sam" {
		t.Fatalf("decided = %+v", d)
	}
}

func TestAReminderOfThePendingRequestIsPublished(t *testing.T) {
	h := enginetest.New(t, contractFlow(engine.Approval{ApproverRole: "legal", Timeout: time.Hour, Reminders: []time.Duration{15 * time.Minute, 2 * time.Minute}}))
	run := h.Start(map[string]any{"value": 12000})
	in := h.Interrupt(run)
	var at []time.Time
	for _, m := range h.Publisher.Messages(run) {
		if r, ok := m.Data.(*protocol.Remind); ok {
			if r.RequestID != in.RequestID {
				t.Fatalf("reminder of request %s, want %s", r.RequestID, in.RequestID)
			}
			at = append(at, r.At)
		}
	}
	if len(at) != 2 || !at[0].Equal(in.ExpiresAt.Add(-15*time.Minute)) || !at[1].Equal(in.ExpiresAt.Add(-2*time.Minute)) {
		t.Fatalf("reminders scheduled at %v, deadline %v", at, in.ExpiresAt)
	}
	out, err := h.Runner.Remind(t.Context(), engine.Remind{Flow: "contract", Run: run, RequestID: in.RequestID, Inbound: engine.Inbound{EventID: "remind-1", Source: "/schedule"}})
	if err != nil || out.Refused != nil || out.Duplicate {
		t.Fatalf("remind: %+v, %v", out, err)
	}
	var reminded []*protocol.Reminded
	for _, m := range h.Publisher.Messages(run) {
		if r, ok := m.Data.(*protocol.Reminded); ok {
			reminded = append(reminded, r)
		}
	}
	if len(reminded) != 1 || reminded[0].RequestID != in.RequestID || reminded[0].ApproverRole != "legal" || reminded[0].ExpiresAt == nil {
		t.Fatalf("reminded = %+v", reminded)
	}
	if h.Checkpoint(run).Interrupt.RemindedAt == nil {
		t.Fatal("the checkpoint does not say when the interrupt was reminded")
	}
	if p := h.Store.Pending(); len(p) != 1 || p[0].RemindedAt == nil {
		t.Fatalf("the pending index entry does not say when it was reminded: %+v", p)
	}
}

// TestThePendingEntryOfAQuorumSaysWhoHasVoted: a queue row says "1 of 2
// approvals" from the pending index alone.
func TestThePendingEntryOfAQuorumSaysWhoHasVoted(t *testing.T) {
	h := enginetest.New(t, contractFlow(twoApprovers()))
	run := h.Start(map[string]any{"value": 12000})
	if p := h.Store.Pending(); len(p) != 1 || p[0].Quorum == nil || p[0].Quorum.Total() != 2 || len(p[0].Voters) != 0 {
		t.Fatalf("pending entry before any vote = %+v", p)
	}
	wantAccepted(t, vote(t, h, run, "ana", "approve", nil))
	if p := h.Store.Pending(); len(p) != 1 || strings.Join(p[0].Voters, ",") != "ana" {
		t.Fatalf("pending entry after ana's vote = %+v", p)
	}
}

func TestAReminderOfAnAnsweredRequestDoesNothing(t *testing.T) {
	h := enginetest.New(t, contractFlow(engine.Approval{Timeout: time.Hour, RemindEvery: 10 * time.Minute}))
	run := h.Start(map[string]any{"value": 12000})
	in := h.Interrupt(run)
	wantAccepted(t, vote(t, h, run, "ana", "approve", nil))
	before := len(h.Publisher.Messages(run))
	out, err := h.Runner.Remind(t.Context(), engine.Remind{Flow: "contract", Run: run, RequestID: in.RequestID, Inbound: engine.Inbound{EventID: "remind-late", Source: "/schedule"}})
	if err != nil || !out.Duplicate {
		t.Fatalf("remind of an answered request: %+v, %v", out, err)
	}
	if after := len(h.Publisher.Messages(run)); after != before {
		t.Fatalf("a reminder of an answered request published %d messages", after-before)
	}
}

func TestRemindersThatDoNotFitTheDeadlineFailTheNode(t *testing.T) {
	for name, a := range map[string]engine.Approval{
		"no deadline":       {Reminders: []time.Duration{time.Minute}},
		"before the asking": {Timeout: time.Hour, Reminders: []time.Duration{2 * time.Hour}},
		"every second":      {RemindEvery: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			h := enginetest.New(t, contractFlow(a))
			run := h.Start(map[string]any{"value": 1})
			h.WantStatus(run, engine.Failed)
		})
	}
}

func TestAClaimantsVoteReleasesTheClaimForTheOthersTheQuorumTakes(t *testing.T) {
	h := enginetest.New(t, contractFlow(twoApprovers()))
	run := h.Start(map[string]any{"value": 12000})
	wantAccepted(t, assign(t, h, run, "ana", protocol.AssignClaim, ""))
	wantRefused(t, vote(t, h, run, "ben", "approve", nil), protocol.CodeForbidden, "claimed by ana")
	wantAccepted(t, vote(t, h, run, "ana", "approve", nil))
	if in := h.Interrupt(run); in.ClaimedBy != "" {
		t.Fatalf("after the claimant's vote the approval is claimed by %q", in.ClaimedBy)
	}
	wantAccepted(t, vote(t, h, run, "ben", "approve", nil))
	h.WantStatus(run, engine.Completed)
}

func TestANodeMayNotEmitTheApprovalsEventKinds(t *testing.T) {
	for _, kind := range []string{protocol.EventAssigned, protocol.EventVoted, protocol.EventReminded, protocol.EventDecided} {
		t.Run(kind, func(t *testing.T) {
			f := engine.NewFlow[map[string]any]("forger").
				Node("emit", func(_ context.Context, n *engine.Node[map[string]any]) error {
					return n.Emit(kind, map[string]any{"approver": "ceo"})
				}).Start("emit").MustBuild()
			h := enginetest.New(t, f)
			run := h.Start(nil)
			h.WantStatus(run, engine.Failed)
			if cp := h.Checkpoint(run); !strings.Contains(cp.Error, "is one of the protocol's") {
				t.Fatalf("error = %q", cp.Error)
			}
		})
	}
}
