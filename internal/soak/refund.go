package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/protocol"
)

// With Config.Refunds, every other run is a run of examples/refund whose
// approval people decide over NATS, on the role subjects, as a chat bot or
// an inbox would: each run tests one refundCase.
type refundCase int

// The refund cases, in turn.
const (
	// caseEdit: the supervisor lowers the amount. In ModeNetwork an
	// agent first forges an approval (on the plain subject, naming the
	// supervisor), which must be refused.
	caseEdit refundCase = iota
	// caseReject: the supervisor rejects, with a reason.
	caseReject
	// caseRace: the supervisor's approve and reject are sent together,
	// again and again: exactly one applies.
	caseRace
	// caseQuorum: a refund over the second approver's threshold: a
	// supervisor's and a finance lead's votes, sent together.
	caseQuorum
	// caseDeadline: nobody decides: the approval escalates to finance at
	// its deadline and expires at the next, each once.
	caseDeadline
	// caseCancel: the agent cancels the run while the supervisor
	// approves: one of them wins.
	caseCancel
	// caseDeadlineRace: the supervisor approves as the 2 s deadline
	// falls due: approved, or escalated and then expired.
	caseDeadlineRace
	// caseClaim (ModeNetwork): a service of the deployment (the soak,
	// holding its secret, as the inbox or the Slack bridge would) claims
	// the approval for one supervisor, claimant; once the claim is
	// applied, it sends the approvals of another supervisor and of the
	// claimant together: the other's must be refused, the claimant's
	// applied. Elsewhere the supervisor approves.
	caseClaim
	numRefundCases
)

func (c refundCase) String() string {
	return [...]string{"edit", "reject", "race", "quorum", "deadline", "cancel", "deadline-race", "claim"}[c]
}

// Amounts of the refund runs: above the supervisor's threshold, and above
// the second approver's for a quorum; editedAmount is what the supervisor
// lowers caseEdit's to.
const (
	refundAmount = 4800
	quorumAmount = 12000
	editedAmount = 4000
)

// refundDeadline is caseDeadline's approval timeout, and its
// escalation's: JetStream schedules take whole seconds.
const refundDeadline = 2 * time.Second

// isRefund reports whether run i is a refund run.
func isRefund(cfg Config, i int) bool { return cfg.Refunds && i%2 == 1 }

// flowOf is the flow of run i.
func flowOf(cfg Config, i int) string {
	switch {
	case isRefund(cfg, i):
		return refund.Name
	case isAsk(cfg, i):
		return protocol.AskFlow
	case isGate(cfg, i), isGateway(cfg, i):
		return protocol.GateFlow
	}
	return "booking"
}

// caseOf is what refund run i tests.
func caseOf(i int) refundCase { return refundCase((i / 2) % int(numRefundCases)) }

// approver is one who decides refunds of a role: a NATS connection that
// may publish on the role's subject.
type approver struct {
	role string
	js   jetstream.JetStream
	// name is the approver the resume names; entitled is the caller the
	// run must record: the name itself where NATS authenticates nobody,
	// else nats:<role>, whatever name is typed.
	name, entitled string
}

// approverName is the name an approver of role types.
func approverName(role string) string { return "soak-" + role }

// refundStart is the start of refund run i.
func refundStart(i int) protocol.Start {
	amount := refundAmount
	if caseOf(i) == caseQuorum {
		amount = quorumAmount
	}
	state := map[string]any{"orderId": fmt.Sprintf("o-%06d", i), "amount": amount, "customer": fmt.Sprintf("Customer %d", i)}
	if caseOf(i) == caseDeadline || caseOf(i) == caseDeadlineRace {
		state["approvalTimeoutSeconds"] = int(refundDeadline / time.Second)
	}
	raw := map[string]json.RawMessage{}
	for k, v := range state {
		raw[k], _ = json.Marshal(v)
	}
	return protocol.Start{State: raw}
}

// driveRefund starts refund run i and answers or decides each of its
// interrupts as its case says, until it ends or has made no progress for
// cfg.Patience. It reports whether the run ended.
func (a *agents) driveRefund(ctx context.Context, cfg Config, i int) bool {
	run := runID(i)
	start, err := a.newCommand(a.names.In(refund.Name, "start"), protocol.TypeStart, run, run+"-start", refundStart(i))
	if err != nil {
		return false
	}
	cmds := map[string][]*command{} // by request id
	return a.follow(ctx, cfg, refund.Name, run, start, func(cp protocol.Checkpoint) {
		a.decide(ctx, cfg, i, cp, cmds)
	})
}

// decide sends what refund run i's case sends at the interrupt cp waits
// on, each command again until it takes effect.
func (a *agents) decide(ctx context.Context, cfg Config, i int, cp protocol.Checkpoint, cmds map[string][]*command) {
	req := cp.Interrupt.RequestID
	list, ok := cmds[req]
	if !ok {
		in, err := a.c.LastInterrupt(ctx, refund.Name, cp.Run)
		if err != nil || in.RequestID != req {
			return // not announced yet, or the run moved: read again
		}
		if list, err = a.refundCommands(cfg, i, in); err != nil {
			return
		}
		cmds[req] = list
	}
	for _, cmd := range list {
		if cmd.when == nil || cmd.when(cp) {
			a.send(ctx, cmd, cfg.Retry)
		}
	}
}

// refundCommands are the commands refund run i sends at interrupt in.
func (a *agents) refundCommands(cfg Config, i int, in protocol.Interrupted) ([]*command, error) {
	run := in.Run
	resume := func(key string, r protocol.Resume, by *approver) (*command, error) {
		r.ResumeToken, r.RequestID, r.IdempotencyKey = in.ResumeToken, in.RequestID, run+"-"+key
		subject := a.names.In(refund.Name, "resume")
		var js jetstream.JetStream
		if by != nil {
			subject += "." + by.role
			r.Approver, js = by.name, by.js
		}
		c, err := a.newCommand(subject, protocol.TypeResume, run, run+"-"+key, r)
		if c != nil && by != nil {
			c.js, c.role = js, by.role
		}
		return c, err
	}
	if in.Node == "verify_identity" {
		c, err := resume("last4", protocol.Resume{Answers: map[string]json.RawMessage{"last4": json.RawMessage(`"4242"`)}}, nil)
		return []*command{c}, err
	}
	sup, fin := a.approvers[refund.SupervisorRole], a.approvers[refund.FinanceLeadRole]
	var out []*command
	add := func(c *command, err error) error {
		out = append(out, c)
		return err
	}
	var err error
	switch caseOf(i) {
	case caseEdit:
		if a.authenticated {
			// A forged approval: an agent, on the plain subject, typing
			// the supervisor's name. Sent first, and again with the rest.
			err = add(resume("forged", protocol.Resume{Decision: string(protocol.VerdictApprove), Approver: sup.name}, nil))
		}
		err = errors.Join(err, add(resume("edit", protocol.Resume{Decision: string(protocol.VerdictEdit),
			Edits: map[string]json.RawMessage{"amount": json.RawMessage(fmt.Sprint(editedAmount))}}, sup)))
	case caseReject:
		err = add(resume("reject", protocol.Resume{Decision: string(protocol.VerdictReject), Reason: "soak: not eligible"}, sup))
	case caseRace:
		err = errors.Join(
			add(resume("approve", protocol.Resume{Decision: string(protocol.VerdictApprove)}, sup)),
			add(resume("reject", protocol.Resume{Decision: string(protocol.VerdictReject), Reason: "soak: raced"}, sup)))
	case caseQuorum:
		err = errors.Join(
			add(resume("approve-"+sup.role, protocol.Resume{Decision: string(protocol.VerdictApprove)}, sup)),
			add(resume("approve-"+fin.role, protocol.Resume{Decision: string(protocol.VerdictApprove)}, fin)))
	case caseDeadline:
		// Nobody decides.
	case caseCancel:
		c, cerr := a.newCommand(a.names.In(refund.Name, "cancel"), protocol.TypeCancel, run, run+"-cancel", protocol.Cancel{Reason: "soak: the customer withdrew"})
		err = errors.Join(add(c, cerr), add(resume("approve", protocol.Resume{Decision: string(protocol.VerdictApprove)}, sup)))
	case caseDeadlineRace:
		if in.ApproverRole != sup.role || in.ExpiresAt == nil {
			break // escalated to finance: nobody decides
		}
		c, cerr := resume("approve", protocol.Resume{Decision: string(protocol.VerdictApprove)}, sup)
		if c != nil {
			c.notBefore = *in.ExpiresAt
		}
		err = add(c, cerr)
	case caseClaim:
		if !a.authenticated {
			err = add(resume("approve", protocol.Resume{Decision: string(protocol.VerdictApprove)}, sup))
			break
		}
		approve := func(key, person string) (*command, error) {
			r := protocol.Resume{ResumeToken: in.ResumeToken, RequestID: in.RequestID, IdempotencyKey: run + "-" + key, Decision: string(protocol.VerdictApprove)}
			return a.vouched(a.names.In(refund.Name, "resume"), protocol.TypeResume, run, run+"-"+key, r, person)
		}
		claimed := func(cp protocol.Checkpoint) bool { return cp.Interrupt != nil && cp.Interrupt.ClaimedBy == claimant }
		claim, cerr := a.vouched(a.names.In(refund.Name, protocol.VerbAssign), protocol.TypeAssign, run, run+"-claim",
			protocol.Assign{RequestID: in.RequestID, Op: protocol.AssignClaim}, claimant)
		other, oerr := approve("other", otherSupervisor)
		mine, merr := approve("claimant", claimant)
		if err = errors.Join(cerr, oerr, merr); err == nil {
			other.when, mine.when = claimed, claimed
			out = append(out, claim, other, mine)
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// The supervisors caseClaim's service vouches for.
const (
	claimant        = "soak-ann"
	otherSupervisor = "soak-bob"
)

// vouched is a command a service of the deployment sends for person, a
// supervisor it authenticated: vouched for with the deployment's secret,
// on the admin's connection (a user that may send assigns).
func (a *agents) vouched(subject, typ, run, id string, data any, person string) (*command, error) {
	c, err := a.newCommand(subject, typ, run, id, data)
	if err != nil {
		return nil, err
	}
	roles := []string{refund.SupervisorRole}
	m := c.msg
	m.Header.Set(protocol.HeaderApprover, person)
	m.Header.Set(protocol.HeaderRoles, strings.Join(roles, ","))
	m.Header.Set(protocol.HeaderAuth, string(protocol.AuthService))
	m.Header.Set(protocol.HeaderVouch, protocol.Vouch(a.secret, protocol.Vouched{Subject: m.Subject, EventID: id, Run: run, Body: m.Data,
		Approver: person, Roles: roles, Method: protocol.AuthService}, time.Now().Add(protocol.VouchTTL)))
	c.js, c.role = a.approvers[refund.FinanceLeadRole].js, "a service, for "+person
	return c, nil
}

// checkRefund checks refund run i's final checkpoint and events against
// its case. It returns what is wrong, "" if nothing is.
func (a *agents) checkRefund(i int, c protocol.Checkpoint, t tally) (lost, dup string) {
	var s refund.State
	if err := json.Unmarshal(c.State, &s); err != nil {
		return fmt.Sprintf("final state %s does not decode: %v", c.State, err), ""
	}
	if d := t.duplicates(); d != "" {
		return "", d
	}
	sup, fin := a.approvers[refund.SupervisorRole].entitled, a.approvers[refund.FinanceLeadRole].entitled
	claim := caseOf(i) == caseClaim && a.authenticated
	if claim {
		// Once claimed, the claimant alone is entitled to decide.
		sup, fin = claimant, claimant
	}
	if slices.Contains(c.Applied, runID(i)+"-forged") {
		return fmt.Sprintf("refund (%s): the forged approval was applied (applied %v)", caseOf(i), c.Applied), ""
	}
	// No decision of the run by anyone but those entitled to it.
	for _, d := range c.Decisions {
		if d.Approver != sup && d.Approver != fin {
			return fmt.Sprintf("an approval decided by %q, who is not entitled to it (decisions %+v)", d.Approver, c.Decisions), ""
		}
	}
	refunded := func(amount float64, by ...string) string {
		switch {
		case c.Status != protocol.StatusCompleted || s.Outcome != "refunded" || s.Refund == nil:
			return fmt.Sprintf("%s at %s, outcome %q; want completed and refunded", c.Status, c.Node, s.Outcome)
		case s.Refund.Amount != amount:
			return fmt.Sprintf("refunded %.2f, want %.2f", s.Refund.Amount, amount)
		case len(by) == 1 && s.Refund.ApprovedBy != by[0]:
			return fmt.Sprintf("refund approved by %q, want %q", s.Refund.ApprovedBy, by[0])
		case len(by) > 1 && !sameSet(s.Refund.Approvers, by):
			return fmt.Sprintf("refund approved by %q, want %q", s.Refund.Approvers, by)
		}
		return ""
	}
	rejected := func() string {
		switch {
		case c.Status != protocol.StatusCompleted || s.Outcome != "rejected" || s.Refund != nil:
			return fmt.Sprintf("%s at %s, outcome %q; want completed and rejected", c.Status, c.Node, s.Outcome)
		case s.Rejection == nil || s.Rejection.Approver != sup:
			return fmt.Sprintf("rejection %+v, want by %q", s.Rejection, sup)
		}
		return ""
	}
	var problem string
	switch caseOf(i) {
	case caseEdit:
		problem = refunded(editedAmount, sup)
	case caseReject:
		problem = rejected()
	case caseRace:
		if problem = refunded(refundAmount, sup); problem != "" {
			if r := rejected(); r == "" {
				problem = ""
			} else {
				problem = "neither approved nor rejected: " + problem + "; " + r
			}
		}
	case caseQuorum:
		problem = refunded(quorumAmount, sup, fin)
	case caseDeadline:
		if c.Status != protocol.StatusExpired {
			problem = fmt.Sprintf("%s at %s, want expired after its escalation", c.Status, c.Node)
		}
	case caseCancel:
		if c.Status != protocol.StatusCancelled {
			if p := refunded(refundAmount, sup); p != "" {
				problem = "neither cancelled nor refunded: " + p
			}
		}
	case caseDeadlineRace:
		if c.Status != protocol.StatusExpired {
			if p := refunded(refundAmount, sup); p != "" {
				problem = "neither expired nor refunded: " + p
			}
		}
	case caseClaim:
		problem = refunded(refundAmount, sup)
	}
	if problem != "" {
		return fmt.Sprintf("refund (%s): %s", caseOf(i), problem), ""
	}
	// The events its end implies, each once (more than once is a
	// duplicate, found above): fewer may yet be published.
	want := tally{started: 1}
	switch c.Status {
	case protocol.StatusCompleted:
		want.completed = 1
	case protocol.StatusExpired:
		want.expired = 1
	case protocol.StatusCancelled:
		want.cancelled = 1
	}
	interrupts := 2 // the question, the approval
	if caseOf(i) == caseDeadline || caseOf(i) == caseQuorum || c.Status == protocol.StatusExpired {
		interrupts = 3 // and its escalation, or the approval asked again after the first vote
	}
	switch {
	case t.started != want.started || t.completed != want.completed || t.expired != want.expired || t.cancelled != want.cancelled:
		problem = fmt.Sprintf("%d started, %d completed, %d expired, %d cancelled; want %d, %d, %d, %d",
			t.started, t.completed, t.expired, t.cancelled, want.started, want.completed, want.expired, want.cancelled)
	case caseOf(i) != caseCancel && len(t.interrupted) != interrupts:
		problem = fmt.Sprintf("%d interrupts, want %d", len(t.interrupted), interrupts)
	case caseOf(i) == caseEdit && a.authenticated && a.wasAcked(runID(i)+"-forged") && t.refused[runID(i)+"-forged"] == "":
		// Refused forbidden, or not_waiting when the supervisor's
		// decision, sent after it, was applied first. One JetStream never
		// acknowledged (a stream without a leader) the run may have ended
		// before it was sent again.
		problem = "no refusal of the forged approval"
	case claim && a.wasAcked(runID(i)+"-other") && t.refused[runID(i)+"-other"] != protocol.CodeForbidden && t.refused[runID(i)+"-other"] != protocol.CodeNotWaiting:
		// Forbidden, the approval claimed by another; or not_waiting when
		// the claimant's approval, sent with it, was applied first.
		problem = fmt.Sprintf("the approval of %s, who had not claimed it, refused %q; want forbidden or not_waiting", otherSupervisor, t.refused[runID(i)+"-other"])
	}
	if problem != "" {
		return fmt.Sprintf("%s: refund (%s): %s", eventsMissingPrefix, caseOf(i), problem), ""
	}
	return "", ""
}

// wasAcked reports whether JetStream acknowledged the command of event id.
func (a *agents) wasAcked(id string) bool {
	if a.acked == nil {
		return true
	}
	_, ok := a.acked.Load(id)
	return ok
}

// sameSet reports whether a and b hold the same names.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
