package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"cel.dev/cel-go/cel"

	"github.com/interlockhq/interlock/protocol"
)

// Request is a tool call an agent asks about: the data of an
// io.interlock.tool.requested event.
type Request struct {
	// CallID identifies the call for the agent service.
	CallID string `json:"callId"`
	// Tool is the name of the tool the agent wants to call.
	Tool string `json:"tool"`
	// Server names the server offering the tool, if the request says
	// (the MCP gateway names the upstream).
	Server string `json:"server,omitempty"`
	// Args are the call's arguments, as decoded from JSON: numbers are
	// float64 (or json.Number), objects map[string]any, arrays []any.
	Args map[string]any `json:"args,omitempty"`
	// ConversationID identifies the conversation the call belongs to.
	ConversationID string `json:"conversationId,omitempty"`
	// Agent names the agent that asks.
	Agent string `json:"agent,omitempty"`
	// Context is whatever else the agent service sends along (customer
	// tier, region, ...), for rules to read.
	Context map[string]any `json:"context,omitempty"`
}

// TimeoutAction is what happens when an approval's deadline passes.
type TimeoutAction string

// The actions a rule or an escalation may take when its timeout passes.
const (
	// Expire ends the approval unanswered: the call is not made. It is
	// the default for a rule or escalation with a timeout.
	Expire TimeoutAction = "expire"
	// Reject decides the approval as rejected.
	Reject TimeoutAction = "reject"
	// Approve decides the approval as approved.
	Approve TimeoutAction = "approve"
	// Escalate hands the same approval to another role, with its own
	// timeout (see [Escalation]).
	Escalate TimeoutAction = "escalate"
)

// Escalation is where an approval goes when the deadline before it passes
// with [Escalate]: another role, with its own timeout and its own action
// when that one passes. Escalations chain through Escalate.
type Escalation struct {
	// ApproverRole is the role the approval goes to next.
	ApproverRole string
	// Timeout is how long that role has; always positive.
	Timeout time.Duration
	// OnTimeout is what happens when Timeout passes. Defaults to Expire.
	OnTimeout TimeoutAction
	// Escalate is the next step, set exactly when OnTimeout is Escalate.
	Escalate *Escalation
}

func (e *Escalation) clone() *Escalation {
	if e == nil {
		return nil
	}
	c := *e
	c.Escalate = e.Escalate.clone()
	return &c
}

// Rule is one rule of a rule set: when an agent asks to call Tool and When
// holds, the call needs the approval of ApproverRole, for Reason.
type Rule struct {
	// Name identifies the rule in logs and events. Defaults to
	// "<tool>#<index>".
	Name string
	// Index is the rule's 1-based position in its rule set.
	Index int
	// Tool is the exact tool name the rule applies to.
	Tool string
	// Server, if set, is the exact server the rule applies to: it fires
	// only for a request that names it. Empty: any server, and requests
	// that name none.
	Server string
	// When is a CEL expression over tool, server, args, agent,
	// conversationId and context that says whether the rule fires; empty
	// means always.
	When string
	// EditWhen, if set, is a CEL expression an approver's edit must
	// satisfy: over the same variables, args being the edited args, and
	// requested the args asked for (e.g. args.amount <= requested.amount).
	// Empty: any edit that the rule would hold itself.
	EditWhen string
	// Reason tells the approver why the call needs approval.
	Reason string
	// ApproverRole is the role that may approve the call.
	ApproverRole string
	// Timeout is how long the approver has; 0 means no deadline.
	Timeout time.Duration
	// OnTimeout is what happens when Timeout passes: Expire (the default
	// when Timeout is set), Reject, Approve or Escalate. Empty when
	// Timeout is 0.
	OnTimeout TimeoutAction
	// Escalate is where the approval goes next, set exactly when
	// OnTimeout is Escalate.
	Escalate *Escalation
	// Title (one line) and Description (Markdown) say what the call
	// proposes, for the approver, as written in the rule: placeholders
	// such as {{args.amount}}, {{context.tier}} or {{tool}} stand for the
	// call's values, which [Rule.Card] fills in. Empty: surfaces show the
	// tool's name and Reason.
	Title, Description string
	// ArgsSchema is a JSON Schema (draft 2020-12) of the call's args, as
	// JSON: surfaces show and edit each argument by it, and an edit that
	// does not fit it is refused. Empty when the rule has none.
	ArgsSchema json.RawMessage
	// Decisions are the verdicts the approver may give, among approve,
	// edit, reject and respond (answering the agent with a message
	// instead). Defaults to approve, edit and reject.
	Decisions []protocol.Verdict
	// Assignees are people named to decide beside ApproverRole.
	Assignees []string
	// Quorum, if set, is the approvals the call takes before it runs;
	// the agent that asks may not vote.
	Quorum *protocol.Quorum
	// Reminders are how long before the deadline the people who may
	// decide are reminded, each shorter than Timeout.
	Reminders []time.Duration
	// RemindEvery, if set, reminds them every so often while the call
	// waits (at least a minute).
	RemindEvery time.Duration

	program            cel.Program // nil when When is empty
	editProgram        cel.Program // nil when EditWhen is empty
	title, description template
}

// RuleSet is a compiled rule set, made by [Parse]. It is immutable and
// safe for concurrent use.
type RuleSet struct {
	name   string
	source []byte
	rules  []Rule
	byTool map[string][]int // tool -> indexes into rules, in file order
}

// Name is the source name the rule set was parsed under (a file name, or
// the KV key it was read from).
func (s *RuleSet) Name() string {
	if s == nil {
		return ""
	}
	return s.name
}

// Rules returns a copy of the rules, in file order.
func (s *RuleSet) Rules() []Rule {
	if s == nil {
		return nil
	}
	out := make([]Rule, len(s.rules))
	for i, r := range s.rules {
		r.Escalate = r.Escalate.clone()
		r.ArgsSchema = bytes.Clone(r.ArgsSchema)
		r.Decisions = slices.Clone(r.Decisions)
		r.Assignees = slices.Clone(r.Assignees)
		r.Reminders = slices.Clone(r.Reminders)
		if r.Quorum != nil {
			q := *r.Quorum
			q.Roles = slices.Clone(q.Roles)
			r.Quorum = &q
		}
		out[i] = r
	}
	return out
}

// Source returns a copy of the YAML the rule set was parsed from.
func (s *RuleSet) Source() []byte {
	if s == nil {
		return nil
	}
	return bytes.Clone(s.source)
}

// Match is the outcome of asking about a tool call.
type Match struct {
	// Rule is the rule that fired: the call needs its approval. Nil when
	// no rule fired and the call may go ahead. It points into the rule
	// set: read it, do not change it.
	Rule *Rule
	// Err is set when Rule's expression failed at run time (a missing
	// key, a type mismatch, the cost limit, a cancelled ctx). The rule is
	// then treated as firing, so a broken rule holds calls rather than
	// letting them through; the caller should log Err. It is an
	// *EvalError.
	Err error
}

// Allowed reports whether no rule fired, so the call may go ahead.
func (m Match) Allowed() bool { return m.Rule == nil }

// Match returns the first rule, in file order, whose tool is req.Tool and
// whose when holds for req. A rule whose when fails to evaluate fires,
// with the failure in Match.Err (fail closed). A nil rule set allows
// every call.
func (s *RuleSet) Match(ctx context.Context, req Request) Match {
	if s == nil {
		return Match{}
	}
	var vars map[string]any
	for _, i := range s.byTool[req.Tool] {
		r := &s.rules[i]
		if r.Server != "" && r.Server != req.Server {
			continue
		}
		if r.program == nil {
			return Match{Rule: r}
		}
		if vars == nil {
			vars = activation(req)
		}
		fired, err := r.eval(ctx, vars)
		if err != nil {
			return Match{Rule: r, Err: &EvalError{Source: s.name, Rule: r.Index, Name: r.Name, Err: err}}
		}
		if fired {
			return Match{Rule: r}
		}
	}
	return Match{}
}

// CheckEdit says why an approver's edit of a call held by the rule named
// rule may not run as its approval, or nil when it may: the rule must
// still be in the set, its editWhen (if any) must hold for the edited
// args beside the requested ones, and the edited call must be held by no
// other rule (an edit that would need another approval, or another role,
// is not this approval's to make). A condition that fails to evaluate
// refuses the edit (fail closed).
func (s *RuleSet) CheckEdit(ctx context.Context, rule string, req Request, final map[string]any) error {
	var r *Rule
	if s != nil {
		for i := range s.rules {
			if s.rules[i].Name == rule {
				r = &s.rules[i]
			}
		}
	}
	if r == nil {
		return fmt.Errorf("the gate rule %q that holds this call is no longer in the gate's rules, so no edit can be checked against it: approve or reject the call as asked", rule)
	}
	edited := req
	edited.Args = final
	if r.editProgram != nil {
		vars := activation(edited)
		requested := req.Args
		if requested == nil {
			requested = map[string]any{}
		}
		vars["requested"] = requested
		ok, err := evalBool(ctx, r.editProgram, vars)
		switch {
		case err != nil:
			return fmt.Errorf("rule %s bounds an edit with %s, which failed on these args (%v): the edit is refused; %s", r.Name, r.EditWhen, err, evalHint(err))
		case !ok:
			return fmt.Errorf("rule %s allows an edit only where %s; this edit does not: change less, or reject the call", r.Name, r.EditWhen)
		}
	}
	m := s.Match(ctx, edited)
	switch {
	case m.Err != nil:
		return fmt.Errorf("the edited call could not be checked against the rules (%v): the edit is refused", m.Err)
	case m.Rule != nil && m.Rule.Name != r.Name:
		role := m.Rule.ApproverRole
		if role == "" {
			role = "its own approvers"
		}
		return fmt.Errorf("the edited call would be held by rule %s (for %s), not by %s, whose approval this is: an edit may not take a call to another approval; reject it, and let the agent ask for that call", m.Rule.Name, role, r.Name)
	}
	return nil
}

// EvalError is a rule's when expression failing at run time.
type EvalError struct {
	// Source is the rule set's source name.
	Source string
	// Rule is the rule's 1-based index and Name its name.
	Rule int
	Name string
	// Err is what went wrong, from CEL or from ctx. Conversion errors
	// may quote an argument's value.
	Err error
}

// Error implements error.
func (e *EvalError) Error() string {
	return fmt.Sprintf("gate rules %s: rule %d (%s): when failed, so the rule fires and the call waits for approval: %v; %s",
		e.Source, e.Rule, e.Name, e.Err, evalHint(e.Err))
}

// Unwrap returns Err.
func (e *EvalError) Unwrap() error { return e.Err }
