// Package authoritytest is the conformance suite of the authority: one
// table of caller × action × run × expected outcome that every surface
// runs through its own door (the NATS workers, the HTTP API, the inbox,
// decision links and callback URLs, Slack, the MCP server and gateway),
// so that who may do what is the same wherever it is asked.
//
// A surface's test is a [Door]: it builds each of the [Runs] of the
// fixture on a deployment whose directory of people is [People] and whose
// gate rules are [Rules], then has a case's caller ask for the case's
// action through the surface; [Conform] runs every case of [Cases] through
// it and checks the outcome: allowed, or refused with the case's code.
package authoritytest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/protocol"
)

// Person is someone of the fixture's directory of people.
type Person struct {
	Name  string
	Roles []string
	// Agent is set for an agent service's identity (it holds no role).
	Agent bool
}

// The fixture's people.
const (
	Ann    = "ann@example.com" // supervisor
	Bob    = "bob@example.com" // supervisor
	Fin    = "fin@example.com" // finance_lead
	Ray    = "ray@example.com" // support: no role that decides a refund
	Ops    = "ops@example.com" // ops: may cancel and read any run
	AgentA = "agent-a"         // an agent service
	AgentB = "agent-b"         // another agent service
)

// Roles of the fixture.
const (
	Supervisor  = "supervisor"
	FinanceLead = "finance_lead"
	Support     = "support"
	OpsRole     = "ops"
)

// People is the fixture's directory of people.
func People() []Person {
	return []Person{
		{Name: Ann, Roles: []string{Supervisor}},
		{Name: Bob, Roles: []string{Supervisor}},
		{Name: Fin, Roles: []string{FinanceLead}},
		{Name: Ray, Roles: []string{Support}},
		{Name: Ops, Roles: []string{OpsRole}},
		{Name: AgentA, Agent: true},
		{Name: AgentB, Agent: true},
	}
}

// Config is the authority configuration of the fixture's deployment:
// callers identified, ops cancels and reads any run.
func Config(identified bool) authority.Config {
	return authority.Config{Identified: func() bool { return identified }, CancelRoles: []string{OpsRole}, ReadRoles: []string{OpsRole}}
}

// Rules are the gate rules of the fixture's deployment: refunds over 500
// take a supervisor, over 5000 two of them, duties separated.
const Rules = `rules:
  - name: two-supervisors
    tool: issue_refund
    when: args.amount > 5000
    reason: Refunds over 5000 take two supervisors.
    approverRole: supervisor
    quorum: {required: 2}
  - name: large-refund
    tool: issue_refund
    when: args.amount > 500
    reason: Refunds over 500 take a supervisor.
    approverRole: supervisor
`

// The fixture's runs.
const (
	// Refund waits on the approval of a refund by a supervisor; agent-a
	// asked for it.
	Refund = "refund"
	// Quorum waits on two supervisors' approval, duties separated; ann
	// herself asked for it, naming another agent in the request's agent
	// field (a label: she is still who asked).
	Quorum = "quorum"
	// Claimed waits on a supervisor's approval that bob claimed.
	Claimed = "claimed"
	// Assigned is agent-a's ask for an approval named to fin alone.
	Assigned = "assigned"
	// Ask is agent-a's ask for a supervisor's approval: private to them
	// and to the supervisors.
	Ask = "ask"
	// Approved is agent-a's refund, which ann approved: its approval
	// waits to be taken, once, by whoever runs the call.
	Approved = "approved"
)

// Run is one run of the fixture, as the authority sees it.
type Run struct {
	Key string
	// Flow is the flow a surface runs it on: the gate's for a tool call,
	// the ask's for an ask, any other for a flow's approval.
	Flow      string
	StartedBy string
	// Pending is the approval the run waits on; for an approved run, the
	// one it waited on.
	Pending authority.Pending
	Private bool
	// ApprovedBy, when set, approved the run's call: the run has ended,
	// and its approval waits to be taken.
	ApprovedBy string
}

// Runs are the fixture's runs.
func Runs() []Run {
	refund := approval(authority.Pending{ApproverRole: Supervisor, Action: "issue_refund", Requester: AgentA})
	return []Run{
		{Key: Refund, Flow: protocol.GateFlow, StartedBy: AgentA, Pending: refund, Private: true},
		{Key: Quorum, Flow: protocol.GateFlow, StartedBy: Ann, Private: true,
			Pending: approval(authority.Pending{ApproverRole: Supervisor, Action: "issue_refund", Requester: Ann,
				Quorum: &protocol.Quorum{Required: 2}, SeparationOfDuties: true})},
		{Key: Claimed, Flow: protocol.GateFlow, StartedBy: AgentA, Private: true,
			Pending: approval(authority.Pending{ApproverRole: Supervisor, Action: "issue_refund", Requester: AgentA, ClaimedBy: Bob})},
		{Key: Assigned, Flow: protocol.AskFlow, StartedBy: AgentA, Private: true,
			Pending: approval(authority.Pending{Assignees: []string{Fin}, Action: "issue_refund", Requester: AgentA})},
		{Key: Ask, Flow: protocol.AskFlow, StartedBy: AgentA, Private: true,
			Pending: approval(authority.Pending{ApproverRole: Supervisor, Action: "send_contract", Requester: AgentA})},
		{Key: Approved, Flow: protocol.GateFlow, StartedBy: AgentA, Pending: refund, Private: true, ApprovedBy: Ann},
	}
}

// ToolRequest is the gate request, sent by r.StartedBy, that makes run r
// named id; nil for an ask. Run r's pending approval is then the one
// [Rules] ask for (a claimed run is claimed by r.Pending.ClaimedBy after).
func (r Run) ToolRequest(id string) *protocol.ToolRequest {
	if r.Flow != protocol.GateFlow {
		return nil
	}
	req := &protocol.ToolRequest{CallID: id, Tool: r.Pending.Action, Args: map[string]json.RawMessage{"amount": json.RawMessage("900")}}
	if r.Pending.Quorum != nil {
		req.Args["amount"] = json.RawMessage("9000")
		req.Agent = "some-agent"
	}
	return req
}

// AskRequest is the ask, sent by r.StartedBy, that makes run r named id;
// nil for a tool call.
func (r Run) AskRequest(id string) *protocol.AskRequest {
	if r.Flow != protocol.AskFlow {
		return nil
	}
	return &protocol.AskRequest{AskID: id, Interrupt: protocol.AskInterrupt{Kind: r.Pending.Kind, Action: r.Pending.Action,
		Args: json.RawMessage(`{"amount": 900}`), ApproverRole: r.Pending.ApproverRole, Assignees: r.Pending.Assignees}}
}

// AuthorityRun is r as the authority takes it.
func (r Run) AuthorityRun() authority.Run {
	p := r.Pending
	out := authority.Run{Flow: r.Flow, ID: r.Key, Status: protocol.StatusWaiting, StartedBy: r.StartedBy, Pending: &p, Private: r.Private}
	out.DeciderRoles = nil
	if p.ApproverRole != "" {
		out.DeciderRoles = []string{p.ApproverRole}
	}
	out.DeciderPeople = p.Assignees
	if r.ApprovedBy != "" {
		out.Status, out.Pending, out.DeciderPeople = protocol.StatusCompleted, nil, []string{r.ApprovedBy}
	}
	return out
}

// FinalDigest is the digest of the args an approved run's call runs
// with: those it was requested with ([protocol.ArgsDigest]).
func (r Run) FinalDigest(id string) string {
	d, err := protocol.ArgsDigest(r.ToolRequest(id).Args)
	if err != nil {
		panic("authoritytest: " + err.Error())
	}
	return d
}

// Sender names a caller of a case that is no person of the directory.
const (
	// NATSSender is a NATS client no service vouches for, which types
	// the name of the case's Named.
	NATSSender = "nats"
)

// Case is one row of the table.
type Case struct {
	// Name says what the row checks.
	Name string
	// Who is a person of People, or NATSSender.
	Who string
	// Named is the name a NATS sender types (an approver, a by).
	Named  string
	Action authority.Action
	// Verdict is a decision's (approve when empty).
	Verdict protocol.Verdict
	Run     string
	// Want is the refusal's code; "" when the action is allowed.
	Want protocol.Code
}

// Cases is the table. It holds, among others, every way found to decide,
// vote, read or cancel without the right to.
func Cases() []Case {
	return []Case{
		{Name: "a supervisor decides a refund", Who: Ann, Action: authority.Decide, Run: Refund},
		{Name: "a support agent without the role does not decide a refund", Who: Ray, Action: authority.Decide, Run: Refund, Want: protocol.CodeForbidden},
		{Name: "an agent does not decide its own request", Who: AgentA, Action: authority.Decide, Run: Refund, Want: protocol.CodeForbidden},
		{Name: "a NATS sender typing a supervisor's name does not decide", Who: NATSSender, Named: Ann, Action: authority.Decide, Run: Refund, Want: protocol.CodeForbidden},
		{Name: "a NATS sender typing a name does not decide as that person", Who: NATSSender, Named: Ray, Action: authority.Decide, Run: Refund, Want: protocol.CodeForbidden},
		{Name: "whoever asked does not vote on her own quorum", Who: Ann, Action: authority.Decide, Run: Quorum, Want: protocol.CodeForbidden},
		{Name: "whoever asked may still reject", Who: Ann, Action: authority.Decide, Verdict: protocol.VerdictReject, Run: Quorum},
		{Name: "another supervisor votes", Who: Bob, Action: authority.Decide, Run: Quorum},
		{Name: "a claimed approval is the claimant's", Who: Ann, Action: authority.Decide, Run: Claimed, Want: protocol.CodeForbidden},
		{Name: "the claimant decides", Who: Bob, Action: authority.Decide, Run: Claimed},
		{Name: "an assignee decides", Who: Fin, Action: authority.Decide, Run: Assigned},
		{Name: "a role holder does not decide what is assigned to another", Who: Ann, Action: authority.Decide, Run: Assigned, Want: protocol.CodeForbidden},
		{Name: "a supervisor claims", Who: Ann, Action: authority.Claim, Run: Refund},
		{Name: "one without the role does not claim", Who: Ray, Action: authority.Claim, Run: Refund, Want: protocol.CodeForbidden},
		{Name: "a NATS sender does not claim in a person's name", Who: NATSSender, Named: Ann, Action: authority.Claim, Run: Refund, Want: protocol.CodeForbidden},
		{Name: "one without the role does not delegate", Who: Ray, Action: authority.Delegate, Run: Refund, Want: protocol.CodeForbidden},
		{Name: "the agent reads its own ask", Who: AgentA, Action: authority.Read, Run: Ask},
		{Name: "a supervisor reads an ask she may answer", Who: Ann, Action: authority.Read, Run: Ask},
		{Name: "another agent does not read an ask", Who: AgentB, Action: authority.Read, Run: Ask, Want: protocol.CodeForbidden},
		{Name: "one with no role does not read another's tool call", Who: Ray, Action: authority.Read, Run: Refund, Want: protocol.CodeForbidden},
		{Name: "an auditor reads any run", Who: Ops, Action: authority.Read, Run: Refund},
		{Name: "the starter cancels its run", Who: AgentA, Action: authority.Cancel, Run: Refund},
		{Name: "a supervisor cancels an approval she may decide", Who: Ann, Action: authority.Cancel, Run: Refund},
		{Name: "one with no role does not cancel an approval waiting on others", Who: Ray, Action: authority.Cancel, Run: Refund, Want: protocol.CodeForbidden},
		{Name: "another agent does not cancel", Who: AgentB, Action: authority.Cancel, Run: Refund, Want: protocol.CodeForbidden},
		{Name: "an operator's cancel role cancels", Who: Ops, Action: authority.Cancel, Run: Refund},
		{Name: "the agent cancels its own ask", Who: AgentA, Action: authority.Cancel, Run: Ask},
		{Name: "another agent does not cancel an ask", Who: AgentB, Action: authority.Cancel, Run: Ask, Want: protocol.CodeForbidden},
		{Name: "a supervisor mints a callback URL", Who: Ann, Action: authority.MintLink, Run: Refund},
		{Name: "one who may not decide mints no callback URL", Who: Ray, Action: authority.MintLink, Run: Refund, Want: protocol.CodeForbidden},
		{Name: "another agent mints no callback URL for an agent's ask", Who: AgentB, Action: authority.MintLink, Run: Ask, Want: protocol.CodeForbidden},
		{Name: "the agent takes the approval of the call it asked for", Who: AgentA, Action: authority.Consume, Run: Approved},
		{Name: "another agent does not take an approval it did not ask for", Who: AgentB, Action: authority.Consume, Run: Approved, Want: protocol.CodeForbidden},
		{Name: "the approver does not take the approval she gave", Who: Ann, Action: authority.Consume, Run: Approved, Want: protocol.CodeForbidden},
	}
}

// PersonNamed is the fixture's person named name.
func PersonNamed(name string) (Person, bool) {
	for _, p := range People() {
		if p.Name == name {
			return p, true
		}
	}
	return Person{}, false
}

// Caller is the case's caller as a surface that authenticated them with
// method holds them; a NATSSender as the authority makes it.
func (c Case) Caller(a *authority.Authority, method protocol.AuthMethod) authority.Caller {
	if c.Who == NATSSender {
		return a.NATSCaller("", c.Named, "/agents/nats-sender")
	}
	p, ok := PersonNamed(c.Who)
	if !ok {
		panic("authoritytest: no person " + c.Who)
	}
	return authority.Caller{Name: p.Name, Method: method, Roles: p.Roles}
}

// Door is a surface as the table runs through it.
type Door interface {
	// Start makes run r of the fixture anew, named id (through the
	// surface, or beside it where it starts nothing), and returns its
	// flow and run ID once it waits.
	Start(t *testing.T, r Run, id string) (flow, run string)
	// Ask has case c's caller ask for its action on the run through
	// the surface, and returns the code of its refusal, or "" when the
	// surface let it through.
	Ask(t *testing.T, c Case, flow, run string) protocol.Code
}

// Conform runs every case of the table through d, the door of the
// surface named surface (one of [Surfaces]), each on a run of its own, in
// parallel, and fails unless it is allowed or refused as the table says.
// A case the surface offers no way for is skipped, saying why.
func Conform(t *testing.T, surface string, d Door) {
	s := SurfaceNamed(surface)
	if want := s.Test; t.Name() != want {
		t.Fatalf("the %s's table runs in %s, not %s: docs/operations.md names it so", surface, want, t.Name())
	}
	for i, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if why := s.Skip(c); why != "" {
				t.Skip(why)
			}
			t.Parallel()
			flow, run := d.Start(t, RunNamed(c.Run), fmt.Sprintf("%s-%d", c.Run, i))
			if got := d.Ask(t, c, flow, run); got != c.Want {
				t.Errorf("%s asking to %s on %s: %s, want %s", c.Who, c.Action, c.Run, outcome(got), outcome(c.Want))
			}
		})
	}
}

// outcome words a door's answer.
func outcome(code protocol.Code) string {
	if code == "" {
		return "allowed"
	}
	return "refused " + string(code)
}

// approval is p, an approval.
func approval(p authority.Pending) authority.Pending {
	p.Kind = protocol.KindApproval
	return p
}
