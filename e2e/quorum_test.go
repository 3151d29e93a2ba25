package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// Approvals that take more than one person, reminders, and respond, over
// the real bus.

// vote publishes a resume deciding the run's approval with in's token, on
// the role subject of role, as who.
func (r *rig) vote(flow, run, role string, in protocol.Interrupted, who, decision string) {
	r.t.Helper()
	data := map[string]any{"resumeToken": in.ResumeToken, "decision": decision, "approver": who}
	if decision == "reject" {
		data["reason"] = "the customer was refunded already"
	}
	natstest.Publish(r.t, r.js, r.names.ResumeAs(flow, role), protocol.TypeResume, run, data)
}

// largeRefund starts a refund that takes a supervisor and a finance lead,
// its identity already answered, and returns its approval.
func (r *rig) largeRefund(run string) protocol.Interrupted {
	r.t.Helper()
	r.start("refund", run, map[string]any{"orderId": "o-7", "amount": 12000, "currency": "USD", "customer": "Ann", "last4": "4821"})
	in := r.interrupt("refund", run, 1)
	if in.Kind != "approval" || in.Quorum == nil || in.Quorum.Total() != 2 {
		r.t.Fatalf("approval = %+v, want a quorum of two", in)
	}
	return in
}

// finalState waits for the run to complete and decodes its state.
func (r *rig) finalState(flow, run string, v any) {
	r.t.Helper()
	var done protocol.Completed
	natstest.Last(r.t, r.wait(flow, run, "completed", 1), "completed").Decode(r.t, &done)
	if err := json.Unmarshal(done.State, v); err != nil {
		r.t.Fatal(err)
	}
}

func TestTwoPeopleCompleteALargeRefundOverRoleSubjects(t *testing.T) {
	t.Parallel()
	r := newRig(t, refund.Flow())
	const run = "r-two-people"
	in := r.largeRefund(run)
	if in.Title != "Refund $12,000.00 to Ann on order o-7" || in.Requester != refund.DefaultRequester {
		t.Fatalf("approval title %q, requester %q", in.Title, in.Requester)
	}

	r.vote("refund", run, refund.SupervisorRole, in, "sam", "approve")
	var voted protocol.Voted
	natstest.Last(t, r.wait("refund", run, "voted", 1), "voted").Decode(t, &voted)
	if voted.Approver != "sam" || len(voted.Votes) != 1 || voted.Required != 2 || voted.RequestID != in.RequestID {
		t.Fatalf("voted = %+v", voted)
	}
	again := r.interrupt("refund", run, 2)
	if again.RequestID == in.RequestID || again.ResumeToken == in.ResumeToken || len(again.Votes) != 1 {
		t.Fatalf("asked again = %+v, want a fresh request with sam's vote", again)
	}

	r.vote("refund", run, refund.FinanceLeadRole, again, "sam", "approve")
	if ref := r.refusal("refund", run, 1); ref.Code != protocol.CodeForbidden {
		t.Fatalf("sam's second vote was refused %+v, want forbidden", ref)
	}
	r.vote("refund", run, refund.FinanceLeadRole, again, refund.DefaultRequester, "approve")
	if ref := r.refusal("refund", run, 2); ref.Code != protocol.CodeForbidden {
		t.Fatalf("the requester's vote was refused %+v, want forbidden", ref)
	}
	if cp, _ := r.checkpoint("refund", run); cp.Status != engine.Waiting || len(cp.Interrupt.Votes) != 1 {
		t.Fatalf("after two refused votes: %s with %d votes, want waiting with one", cp.Status, len(cp.Interrupt.Votes))
	}

	r.vote("refund", run, refund.FinanceLeadRole, again, "fay", "approve")
	var s refund.State
	r.finalState("refund", run, &s)
	if s.Outcome != "refunded" || s.Refund == nil || s.Refund.Amount != 12000 {
		t.Fatalf("final state = %+v", s)
	}
	if strings.Join(s.Refund.Approvers, ",") != "sam,fay" || s.Refund.ApprovedBy != "fay" {
		t.Errorf("the refund names approvers %v (approvedBy %s), want every vote: sam,fay", s.Refund.Approvers, s.Refund.ApprovedBy)
	}
	if n := natstest.Count(r.wait("refund", run, "completed", 1), "voted"); n != 1 {
		t.Fatalf("%d voted events, want one: the second vote completes the quorum", n)
	}
}

func TestARejectVetoesAHalfVotedRefund(t *testing.T) {
	t.Parallel()
	r := newRig(t, refund.Flow())
	const run = "r-veto"
	in := r.largeRefund(run)
	r.vote("refund", run, refund.SupervisorRole, in, "sam", "approve")
	again := r.interrupt("refund", run, 2)
	r.vote("refund", run, refund.FinanceLeadRole, again, "fay", "reject")
	var s refund.State
	r.finalState("refund", run, &s)
	if s.Outcome != "rejected" || s.Refund != nil || s.Rejection == nil || s.Rejection.Approver != "fay" {
		t.Fatalf("after a veto the state is %+v", s)
	}
}

// Two people who both saw the first approval vote at the same moment, on
// the real bus: both votes count (the one applied second carries the
// token of a request the first replaced), and the refund runs once.
func TestTwoVotesSentAtOnceBothCount(t *testing.T) {
	t.Parallel()
	r := newRig(t, refund.Flow())
	const run = "r-race"
	in := r.largeRefund(run)
	var wg sync.WaitGroup
	wg.Go(func() { r.vote("refund", run, refund.SupervisorRole, in, "sam", "approve") })
	wg.Go(func() { r.vote("refund", run, refund.FinanceLeadRole, in, "fay", "approve") })
	wg.Wait()
	var s refund.State
	r.finalState("refund", run, &s)
	if s.Outcome != "refunded" || s.Refund == nil || s.Refund.Amount != 12000 {
		t.Fatalf("final state = %+v", s)
	}
	evs := r.wait("refund", run, "completed", 1)
	if n := natstest.Count(evs, "refused"); n != 0 {
		t.Errorf("%d votes refused, want none", n)
	}
	if n := natstest.Count(evs, "voted"); n != 1 {
		t.Errorf("%d voted events, want one", n)
	}
}

// An edit is a vote for the args it would run with: over the bus, a
// finance lead's edit does not add to a supervisor's approve of the
// original amount, and the refund runs with the edited amount once a
// supervisor agrees to it.
func TestAnEditsVoteCountsOnlyForItsArgsOverTheBus(t *testing.T) {
	t.Parallel()
	r := newRig(t, refund.Flow())
	const run = "r-edit-votes"
	in := r.largeRefund(run)
	r.vote("refund", run, refund.SupervisorRole, in, "sam", "approve")
	again := r.interrupt("refund", run, 2)
	edit := func(role string, in protocol.Interrupted, who string) {
		natstest.Publish(t, r.js, r.names.ResumeAs("refund", role), protocol.TypeResume, run,
			map[string]any{"resumeToken": in.ResumeToken, "decision": "edit", "edits": map[string]any{"amount": 11000}, "approver": who, "reason": "partial"})
	}
	edit(refund.FinanceLeadRole, again, "fay")
	third := r.interrupt("refund", run, 3)
	if len(third.Votes) != 2 || third.Votes[0].Digest == third.Votes[1].Digest {
		t.Fatalf("votes after the edit = %+v, want two, for different args", third.Votes)
	}
	if cp, _ := r.checkpoint("refund", run); cp.Status != engine.Waiting {
		t.Fatalf("after votes for different args the run is %s, want waiting", cp.Status)
	}
	edit(refund.SupervisorRole, third, "sue")
	var s refund.State
	r.finalState("refund", run, &s)
	if s.Outcome != "refunded" || s.Refund == nil || s.Refund.Amount != 11000 {
		t.Fatalf("final state = %+v, want the edited amount refunded", s)
	}
}

// remindState is the state of the remind flow.
type remindState struct {
	Voters string `json:"voters,omitempty"`
}

// remindFlow asks legal for two approvals of a contract within timeout,
// reminding them remind before the deadline.
func remindFlow(timeout, remind time.Duration) *engine.Flow {
	return engine.NewFlow[remindState]("contract").
		Node("review", func(ctx context.Context, n *engine.Node[remindState]) error {
			d, err := n.Approve(ctx, engine.Approval{Action: "send_contract", Args: map[string]any{"value": 25000},
				Title: "Send a contract worth $25,000.00", ApproverRole: "legal", Requester: "sales-bot",
				Quorum: &protocol.Quorum{Required: 2}, Timeout: timeout, Reminders: []time.Duration{remind}})
			if err != nil {
				return err
			}
			var voters []string
			for _, v := range d.Votes {
				voters = append(voters, v.Approver)
			}
			return n.Set("voters", strings.Join(voters, ","))
		}).Start("review").MustBuild()
}

// scheduled counts the messages the schedule stream holds on subject.
func scheduled(t *testing.T, js jetstream.JetStream, names wire.Names, subject string) uint64 {
	t.Helper()
	s, err := js.Stream(t.Context(), names.ScheduleStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

func TestAReminderFiresFromItsScheduleAndNoneForAnAnsweredRequest(t *testing.T) {
	t.Parallel()
	r := newRig(t, remindFlow(4*time.Second, 2*time.Second))
	r.start("contract", "r-waits", nil)
	waits := r.interrupt("contract", "r-waits", 1)
	r.start("contract", "r-answered", nil)
	answered := r.interrupt("contract", "r-answered", 1)
	r.vote("contract", "r-answered", "legal", answered, "lee", "reject")
	r.wait("contract", "r-answered", "completed", 1)

	var rem protocol.Reminded
	natstest.Last(t, r.wait("contract", "r-waits", "reminded", 1), "reminded").Decode(t, &rem)
	at, _ := expiresAt(waits)
	if rem.RequestID != waits.RequestID || rem.ApproverRole != "legal" || rem.ExpiresAt == nil || !rem.ExpiresAt.Equal(at) {
		t.Fatalf("reminded = %+v, want the waiting request, for legal, with its deadline %v", rem, at)
	}
	if time.Now().Before(at.Add(-2 * time.Second)) {
		t.Fatalf("the reminder came before its time, %v", at.Add(-2*time.Second))
	}
	if cp, _ := r.checkpoint("contract", "r-waits"); cp.Interrupt.RemindedAt == nil {
		t.Fatal("the checkpoint's interrupt does not say it was reminded")
	}

	// The answered request's reminder has fired and been handled once no
	// schedule or due command of it is left: it published nothing.
	answeredAt, _ := expiresAt(answered)
	natstest.Eventually(t, "the answered request's reminder handled", func() bool {
		return time.Now().After(answeredAt.Add(-2*time.Second)) &&
			scheduled(t, r.js, r.names, r.names.Schedule("contract", "r-answered", answered.RequestID)+".>") == 0 &&
			scheduled(t, r.js, r.names, r.names.Due("contract", "remind")) == 0
	})
	evs := natstest.Read(t, r.js, r.names.EventStream(), r.names.Event("contract", "r-answered", ">"))
	if n := natstest.Count(evs, "reminded"); n != 0 {
		t.Fatalf("the answered request was reminded %d times", n)
	}
	if last := evs[len(evs)-1]; !strings.HasSuffix(last.Subject, ".completed") {
		t.Fatalf("an event followed the answered run's completion: %s", last.Subject)
	}
}

func TestAHalfVotedApprovalSurvivesAServerRestartAndItsReminderStillFires(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	flow := func() *engine.Flow { return remindFlow(8*time.Second, 4*time.Second) }
	srv := natstest.StartServer(t, dir)
	svc := natstest.Start(t, srv, flow())
	nc, js := natstest.Connect(t, srv.ClientURL())
	names := svc.Names()
	r := &rig{t: t, srv: srv, js: js, names: names}
	const run = "r-restart-quorum"
	r.start("contract", run, nil)
	in := r.interrupt("contract", run, 1)
	r.vote("contract", run, "legal", in, "lee", "approve")
	again := r.interrupt("contract", run, 2)
	if len(again.Votes) != 1 {
		t.Fatalf("asked again with %d votes, want lee's", len(again.Votes))
	}
	if n := scheduled(t, js, names, names.Schedule("contract", run, again.RequestID)+".>"); n == 0 {
		t.Fatal("no reminder is scheduled for the request asked again")
	}

	if err := svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	srv.Shutdown()
	srv = natstest.StartServer(t, dir)
	natstest.Start(t, srv, flow())
	_, js = natstest.Connect(t, srv.ClientURL())
	r = &rig{t: t, srv: srv, js: js, names: names}

	var rem protocol.Reminded
	natstest.Last(t, r.wait("contract", run, "reminded", 1), "reminded").Decode(t, &rem)
	if rem.RequestID != again.RequestID {
		t.Fatalf("reminded %s, want the pending request %s", rem.RequestID, again.RequestID)
	}
	r.vote("contract", run, "legal", again, "liz", "approve")
	var s remindState
	r.finalState("contract", run, &s)
	if s.Voters != "lee,liz" {
		t.Fatalf("voters = %q, want lee,liz", s.Voters)
	}
}

func TestWorkerKilledBetweenAVotesCheckpointAndItsPublishLosesAndDoublesNoVote(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	names, _ := wire.NewNames("")
	r := &rig{t: t, srv: srv, js: js, names: names}
	const run = "r-crash-vote"
	first := natstest.StartWith(t, srv, interlock.Config{Flows: testFlows(), Secret: natstest.Secret, AckWait: testAckWait})
	in := r.largeRefund(run)
	if err := first.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}

	r.vote("refund", run, refund.SupervisorRole, in, "sam", "approve")
	runCrashWorker(t, natstest.WorkersURL(srv), envCrashOn+"=voted")
	cp, rev := r.checkpoint("refund", run)
	if cp.Status != engine.Waiting || len(cp.Interrupt.Votes) != 1 || cp.Interrupt.Votes[0].Approver != "sam" {
		t.Fatalf("after the crash the checkpoint is %s with votes %+v, want sam's vote written", cp.Status, cp.Interrupt.Votes)
	}
	if n := natstest.Count(natstest.Read(t, js, names.EventStream(), names.Event("refund", run, ">")), "voted"); n != 0 {
		t.Fatalf("the crashed worker published %d voted events", n)
	}

	natstest.StartWith(t, srv, interlock.Config{Flows: testFlows(), Secret: natstest.Secret, AckWait: testAckWait})
	again := r.interrupt("refund", run, 2)
	if again.RequestID != cp.Interrupt.RequestID || again.Checkpoint != rev {
		t.Fatalf("published request %s at checkpoint %d, want the checkpointed %s at %d", again.RequestID, again.Checkpoint, cp.Interrupt.RequestID, rev)
	}
	r.vote("refund", run, refund.FinanceLeadRole, again, "fay", "approve")
	var s refund.State
	r.finalState("refund", run, &s)
	if s.Refund == nil || s.Refund.Amount != 12000 {
		t.Fatalf("final state = %+v", s)
	}
	evs := r.wait("refund", run, "completed", 1)
	if n := natstest.Count(evs, "voted"); n != 1 {
		t.Fatalf("%d voted events, want sam's once", n)
	}
	var done protocol.Completed
	natstest.Last(t, evs, "completed").Decode(t, &done)
	cp, _ = r.checkpoint("refund", run)
	var voters []string
	for _, d := range cp.Decisions {
		for _, v := range d.Votes {
			voters = append(voters, v.Approver)
		}
	}
	if strings.Join(voters, ",") != "sam,fay" {
		t.Fatalf("the decision's votes are %v, want sam,fay once each", voters)
	}
	var actions []string
	for _, a := range natstest.Read(t, js, names.AuditStream(), names.Audit("refund", run)) {
		var rec protocol.AuditRecord
		a.Decode(t, &rec)
		if rec.Action == protocol.ActionVoted {
			actions = append(actions, rec.By)
		}
	}
	if strings.Join(actions, ",") != "sam" {
		t.Fatalf("voted audit records by %v, want sam's once", actions)
	}
}

func TestRespondThroughTheToolGateAnswersTheAgentWithTheMessage(t *testing.T) {
	t.Parallel()
	r := gateRig(t)
	r.request("call-contract", "send_contract", map[string]any{"value": 25000, "customer": "Acme"})
	in := r.interrupt("gate", "call-contract", 1)
	if in.Title != "Send a contract worth $25,000.00 to Acme" || len(in.ArgsSchema) == 0 || in.Requester != "support-bot" {
		t.Fatalf("gate approval title %q, schema %s, requester %q", in.Title, in.ArgsSchema, in.Requester)
	}
	if len(in.Decisions) == 0 || in.Decisions[len(in.Decisions)-1] != protocol.VerdictRespond {
		t.Fatalf("decisions = %v, want respond among them", in.Decisions)
	}
	const msg = "Cap the liability at the contract's value, then ask again."
	natstest.Publish(t, r.js, r.names.ResumeAs("gate", "legal"), protocol.TypeResume, "call-contract",
		map[string]any{"resumeToken": in.ResumeToken, "decision": "respond", "message": msg, "approver": "lee"})
	evs := natstest.WaitFor(t, r.js, r.names.EventStream(), r.names.Event("gate", "call-contract", ">"), func(rs []natstest.Received) bool {
		return natstest.Count(rs, "decided")+natstest.Count(rs, "refused") > 0
	})
	if natstest.Count(evs, "refused") > 0 {
		var ref protocol.Refused
		natstest.Last(t, evs, "refused").Decode(t, &ref)
		t.Fatalf("respond was refused %+v", ref)
	}
	d := r.decided("call-contract", 1)
	if d.Decision != "responded" || d.Message != msg || d.Approver != "lee" || d.Rule != "large-contract" {
		t.Fatalf("decided = %+v, want responded with the message", d)
	}

	r.request("call-refund", "issue_refund", map[string]any{"orderId": "o-1", "amount": 4800, "currency": "USD"})
	in = r.interrupt("gate", "call-refund", 1)
	natstest.Publish(t, r.js, r.names.ResumeAs("gate", "supervisor"), protocol.TypeResume, "call-refund",
		map[string]any{"resumeToken": in.ResumeToken, "decision": "respond", "message": "no", "approver": "sam"})
	if ref := r.refusal("gate", "call-refund", 1); ref.Code != protocol.CodeInvalidAnswer || !strings.Contains(ref.Message, "respond") {
		t.Fatalf("respond where the rule does not list it was refused %+v, want invalid_answer", ref)
	}
}

// TestOneSenderOnARoleSubjectIsOneVoterWhateverNamesItTypes: where the
// NATS server authenticates its clients, whoever may publish on a role's
// subject holds the role, but not the names it types: two votes it sends
// for a two-person quorum, named by invented people, are one voter's, and
// the second is refused.
func TestOneSenderOnARoleSubjectIsOneVoterWhateverNamesItTypes(t *testing.T) {
	t.Parallel()
	flow := engine.NewFlow[map[string]any]("payout").
		Node("review", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Approve(ctx, engine.Approval{Action: "pay_out", Args: map[string]any{"amount": 9000},
				ApproverRole: "supervisor", Quorum: &protocol.Quorum{Required: 2}})
			return err
		}).Start("review").MustBuild()
	r := newRigWith(t, interlock.Config{Flows: []*engine.Flow{flow}, RequireRoles: true})
	const run = "r-invented"
	r.start("payout", run, nil)
	in := r.interrupt("payout", run, 1)
	r.vote("payout", run, "supervisor", in, "x1@nowhere", "approve")
	var voted protocol.Voted
	natstest.Last(t, r.wait("payout", run, "voted", 1), "voted").Decode(t, &voted)
	if voted.Approver != "nats:supervisor" {
		t.Fatalf("voted by %q, want the role subject's sender, nats:supervisor", voted.Approver)
	}
	again := r.interrupt("payout", run, 2)
	r.vote("payout", run, "supervisor", again, "x2@nowhere", "approve")
	if ref := r.refusal("payout", run, 1); ref.Code != protocol.CodeForbidden || !strings.Contains(ref.Message, "voted on pay_out already") {
		t.Fatalf("the second invented name's vote: %+v, want forbidden, one voter", ref)
	}
	if cp, _ := r.checkpoint("payout", run); cp.Status != engine.Waiting || len(cp.Interrupt.Votes) != 1 {
		t.Fatalf("after the invented votes: %s with %d votes, want waiting with one", cp.Status, len(cp.Interrupt.Votes))
	}
	// The audit keeps each typed name as a label.
	recs := natstest.WaitFor(t, r.js, r.names.AuditStream(), r.names.Audit("payout", run), func(rs []natstest.Received) bool { return len(rs) >= 3 })
	found := false
	for _, m := range recs {
		var rec protocol.AuditRecord
		m.Decode(t, &rec)
		if rec.Action != protocol.ActionVoted {
			continue
		}
		found = true
		if rec.By != "nats:supervisor" || rec.Named != "x1@nowhere" || rec.Auth != protocol.AuthRoleSubject {
			t.Fatalf("vote's audit record: by %q named %q auth %q", rec.By, rec.Named, rec.Auth)
		}
	}
	if !found {
		t.Fatal("no audit record of the vote")
	}
}
