package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/protocol"
)

// Verdict is an approver's decision on a proposed action.
type Verdict = protocol.Verdict

// Verdicts of an approval.
const (
	// VerdictApprove runs the action with the proposed args.
	VerdictApprove = protocol.VerdictApprove
	// VerdictEdit runs the action with the approver's edits merged over
	// the proposed args.
	VerdictEdit = protocol.VerdictEdit
	// VerdictReject never runs the action; the run takes the flow's reject
	// route, if it declares one.
	VerdictReject = protocol.VerdictReject
	// VerdictRespond never runs the action either: the node gets the
	// approver's Message instead (only where Decisions lists it).
	VerdictRespond = protocol.VerdictRespond
)

// TimeoutActor is the approver named on a decision that a deadline's
// policy took.
const TimeoutActor = "interlock/timeout"

// Approval is an approval interrupt: a proposed action (a tool call, an
// email, a refund) that a person with ApproverRole approves, edits or
// rejects.
type Approval struct {
	// Action names the proposed action, for example a tool name. Required.
	Action string
	// Args are the action's proposed arguments: a map or a struct that
	// encodes as a JSON object.
	Args any
	// Reason says why approval is needed, for the approver.
	Reason string
	// ApproverRole is the role that may decide.
	ApproverRole string
	// Decisions are the verdicts allowed. Defaults to all three.
	Decisions []Verdict
	// RejectReasonRequired makes a reject say why: a reject without a
	// reason is refused invalid_answer, on every surface.
	RejectReasonRequired bool
	// Assignees are people named to decide, beside ApproverRole: a person
	// may decide when they are an assignee or hold the role. Anyone who
	// may decide may claim the approval (then only they may decide it),
	// release it, or delegate it to a person or a role.
	Assignees []string
	// Requester names who asked for the action (an agent, a user): with a
	// quorum's separation of duties, they may not vote on it.
	Requester string
	// Quorum, if set, takes several approvals before the action runs:
	// Required distinct approvers, or for each role its count. Each
	// approve or edit is a vote for the final args it would run with;
	// votes for different args do not add up, and any reject ends the
	// approval at once. The decision the node gets lists the votes.
	Quorum *protocol.Quorum
	// SeparationOfDuties, with a quorum, keeps the requester and anyone
	// who voted from voting (again). Defaults to true with a quorum.
	SeparationOfDuties *bool
	// Reminders are durations before the deadline at which the people who
	// may decide are reminded (a reminded event, which every channel
	// passes on); RemindEvery reminds them every so often while it waits.
	// The server schedules them as it does deadlines.
	Reminders   []time.Duration
	RemindEvery time.Duration
	// Timeout, if set, is how long the approval may wait; OnTimeout says
	// what happens then.
	Timeout time.Duration
	// OnTimeout is the deadline's policy. Defaults to expiring the run.
	OnTimeout Policy
	// Validate, if set, checks the final args of an edit before the run
	// advances. Returning [Reject] refuses the resume invalid_answer with
	// the message (the approval stays pending, with its token); any other
	// error fails the run.
	Validate func(ctx context.Context, args map[string]any) error

	// Title says in one line what is proposed ("Refund $4,800.00 on
	// order o-1"); surfaces show it in place of the action's name.
	Title string
	// Description says more, in Markdown, which surfaces render safely
	// (no raw HTML, no scripts).
	Description string
	// ArgsSchema is a JSON Schema (draft 2020-12) of Args, as JSON: each
	// property's title, description, enum, bounds and format, and display
	// hints such as "x-interlock-display": "currency" (see
	// [protocol.Arg]). Surfaces show and edit each argument by it, in the
	// order of its properties; an edit whose final args do not fit it is
	// refused invalid_answer naming the path ("/amount: must be <=
	// 4800"), before Validate runs. A schema that does not compile fails
	// the run.
	ArgsSchema json.RawMessage
}

// Decision is the decision taken on an approval.
type Decision = protocol.Decision

// maxDecisions bounds the decisions a checkpoint keeps.
const maxDecisions = 32

// Approve pauses the run with an approval interrupt. On the run that
// follows the decision it returns the decision; a rejection is recorded in
// the checkpoint (see [Node.Rejection]) and, when the node ends, the flow
// takes the node's reject route if [Builder.OnReject] declares one. While
// the run must wait it returns [ErrInterrupted]: return it.
func (n *Node[S]) Approve(ctx context.Context, a Approval) (Decision, error) {
	return n.x.approve(ctx, a)
}

// Decision returns the latest decision taken in this run on approvals of
// action, and false if there is none.
func (n *Node[S]) Decision(action string) (Decision, bool) {
	for i := len(n.x.cp.Decisions) - 1; i >= 0; i-- {
		if d := n.x.cp.Decisions[i]; d.Action == action {
			return d, true
		}
	}
	return Decision{}, false
}

// Rejection returns the run's latest rejection, and false if nothing was
// rejected.
func (n *Node[S]) Rejection() (Decision, bool) {
	if r := n.x.cp.Rejection; r != nil {
		return *r, true
	}
	return Decision{}, false
}

func (x *exec) approve(ctx context.Context, a Approval) (Decision, error) {
	i, err := x.begin()
	if err != nil {
		return Decision{}, err
	}
	if raw, ok := x.resolved(i); ok {
		var d Decision
		if err := json.Unmarshal(raw, &d); err != nil {
			return Decision{}, x.fail(fmt.Errorf("recorded decision of interrupt %d: %w", i, err))
		}
		if d.Verdict == VerdictReject {
			x.rejected = true
		}
		return d, nil
	}
	in, err := newApproval(x.cp.Node, a)
	if err != nil {
		return Decision{}, x.fail(fmt.Errorf("node %q: %w", x.cp.Node, err))
	}
	if err := checkTimeout(KindApproval, a.Timeout, a.OnTimeout); err != nil {
		return Decision{}, x.fail(fmt.Errorf("node %q: approval %q: %w", x.cp.Node, a.Action, err))
	}
	if err := checkReminders(a.Timeout, remindersOf(a.Reminders, a.RemindEvery)); err != nil {
		return Decision{}, x.fail(fmt.Errorf("node %q: approval %q: %w", x.cp.Node, a.Action, err))
	}
	in.Index = i
	if cur := x.current(i, KindApproval); cur != nil {
		if cur.Decision != nil {
			d := *cur.Decision
			if d.Verdict == VerdictEdit && a.Validate != nil {
				if err := a.Validate(ctx, d.Args); err != nil {
					var rej *Rejection
					if !errors.As(err, &rej) {
						return Decision{}, x.fail(fmt.Errorf("validating the edited args of %q: %w", a.Action, err))
					}
					return Decision{}, x.invalidEdit(cur, rej.Message)
				}
			}
			x.decided(d)
			if err := x.resolve(i, d); err != nil {
				return Decision{}, x.fail(err)
			}
			return d, nil
		}
		// Still pending (a re-run after a crash): ask the same again, as
		// it stands (escalated, claimed, delegated, voted on).
		in.ExpiresAt, in.OnTimeout, in.Escalations, in.Retired = cur.ExpiresAt, cur.OnTimeout, cur.Escalations, cur.Retired
		in.ApproverRole, in.Assignees, in.ClaimedBy, in.Votes, in.Superseded = cur.ApproverRole, cur.Assignees, cur.ClaimedBy, cur.Votes, cur.Superseded
		in.RemindedAt = cur.RemindedAt
	} else {
		x.deadline(in, a.Timeout, a.OnTimeout)
	}
	return Decision{}, x.pause(in)
}

// invalidEdit answers an edit whose validator refused the final args. If
// nothing of this transition was written yet, the resume is refused
// invalid_answer and the approval stays pending with its token; otherwise
// the approval is asked again with the message as its error.
func (x *exec) invalidEdit(cur *Interrupt, msg string) error {
	if !x.persisted {
		x.invalid = msg
		return ErrInterrupted
	}
	again := *cur
	again.Decision = nil
	again.Error = msg
	return x.pause(&again)
}

// decided records a decision on the checkpoint.
func (x *exec) decided(d Decision) {
	x.cp.Decisions = append(x.cp.Decisions, d)
	if len(x.cp.Decisions) > maxDecisions {
		x.cp.Decisions = x.cp.Decisions[len(x.cp.Decisions)-maxDecisions:]
	}
	if d.Verdict == VerdictReject {
		r := d
		x.cp.Rejection = &r
		x.rejected = true
	}
}

// newApproval checks an approval's declaration and returns its interrupt.
func newApproval(node string, a Approval) (*Interrupt, error) {
	action := a.Action
	if action == "" {
		return nil, errors.New("an approval needs an action (what is proposed, e.g. a tool name)")
	}
	if a.ApproverRole != "" {
		if err := CheckName("approver role", a.ApproverRole); err != nil {
			return nil, fmt.Errorf("approval %q: %w", action, err)
		}
	}
	raw, err := encodeValue("args", a.Args)
	if err != nil {
		return nil, fmt.Errorf("approval %q: %w", action, err)
	}
	if a.Args == nil {
		raw = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("approval %q: args must encode as a JSON object, not %s", action, jsonKind(raw))
	}
	decisions := a.Decisions
	if len(decisions) == 0 {
		decisions = protocol.Verdicts()
	}
	seen := map[Verdict]bool{}
	for _, d := range decisions {
		if !slices.Contains(protocol.AllVerdicts(), d) {
			return nil, fmt.Errorf("approval %q: decision %q is not one of approve, edit, reject, respond", action, d)
		}
		if seen[d] {
			return nil, fmt.Errorf("approval %q: decision %q is listed twice", action, d)
		}
		seen[d] = true
	}
	seenPerson := map[string]bool{}
	for _, p := range a.Assignees {
		if err := checkPerson(p); err != nil {
			return nil, fmt.Errorf("approval %q: assignee: %w", action, err)
		}
		if seenPerson[p] {
			return nil, fmt.Errorf("approval %q: assignee %q is listed twice", action, p)
		}
		seenPerson[p] = true
	}
	in := &Interrupt{
		Kind: KindApproval, Node: node, Action: action, Args: raw, Reason: a.Reason,
		ApproverRole: a.ApproverRole, Decisions: slices.Clone(decisions), RejectReasonRequired: a.RejectReasonRequired,
		Assignees: slices.Clone(a.Assignees), Requester: a.Requester,
	}
	if a.Quorum != nil {
		q := *a.Quorum
		if err := q.Check(); err != nil {
			return nil, fmt.Errorf("approval %q: %w", action, err)
		}
		in.Quorum = &q
		in.SeparationOfDuties = a.SeparationOfDuties == nil || *a.SeparationOfDuties
	}
	in.Remind = remindersOf(a.Reminders, a.RemindEvery)
	if err := in.setCard(card{Title: a.Title, Description: a.Description, Requester: a.Requester, ArgsSchema: a.ArgsSchema}); err != nil {
		return nil, fmt.Errorf("approval %q: %w", action, err)
	}
	return in, nil
}

// checkPerson checks a person's name: free text of 1 to 128 bytes, with
// no control characters.
func checkPerson(p string) error {
	if p == "" || len(p) > protocol.MaxNameLen {
		return fmt.Errorf("a person's name is 1 to %d bytes, not %d", protocol.MaxNameLen, len(p))
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("person %q has a control character", protocol.Truncate(p, 40))
		}
	}
	return nil
}

// approvalKind is the rules of an approval interrupt.
type approvalKind struct{}

// answer records a decision, which [protocol.Spec.Check] found allowed
// (rule 6), with the final args, until the node runs again and takes it.
func (approvalKind) answer(t *txn, in *Interrupt, cmd Resume) error {
	v := Verdict(cmd.Decision)
	var proposed map[string]json.RawMessage
	if err := json.Unmarshal(in.Args, &proposed); err != nil {
		return fmt.Errorf("the approval's args do not decode: %w", err)
	}
	final := map[string]json.RawMessage{}
	for k, val := range proposed {
		final[k] = val
	}
	if v == VerdictEdit {
		for k, val := range cmd.Edits {
			final[k] = val
		}
		if err := in.checkArgs(final); err != nil {
			return err
		}
		if t.cp.Flow == GateFlowName {
			// An edit stays within the rule that holds the call.
			if err := t.r.checkGateEdit(context.Background(), t.cp, final); err != nil {
				return err
			}
		}
		if in.Gate != "" {
			trial := *t.cp
			if err := applyDoc(t.f, &trial, cmd.Edits); err != nil {
				return fmt.Errorf("edits do not fit the state: %w", err)
			}
		}
	}
	d := &Decision{
		Verdict: v, Action: in.Action, Approver: cmd.approver(), Reason: cmd.Reason, At: t.now,
		Node: in.Node, RequestID: in.RequestID,
	}
	var err error
	if d.Args, err = decodeObject(final); err != nil {
		return err
	}
	if v == VerdictEdit {
		if d.Edits, err = decodeObject(cmd.Edits); err != nil {
			return err
		}
	}
	if v == VerdictRespond {
		d.Message = cmd.Message
	}
	if q := in.Quorum; q != nil {
		switch v {
		case VerdictApprove, VerdictEdit:
			b, err := json.Marshal(d.Args)
			if err != nil {
				return err
			}
			digest, err := protocol.CanonicalHash(b)
			if err != nil {
				return err
			}
			vote := protocol.Vote{Approver: d.Approver, Verdict: v, Digest: digest, Edits: d.Edits, Reason: d.Reason, At: t.now}
			if len(q.Roles) > 0 {
				roles := cmd.caller.RolesFor(&authority.Pending{ApproverRole: in.ApproverRole, Quorum: in.Quorum})
				if vote.Role = voteRole(*q, in.Votes, digest, roles); vote.Role == "" {
					return fmt.Errorf("the quorum takes %s, and %s has no role it still needs for these args", quorumText(*q), d.Approver)
				}
			}
			in.Votes = append(in.Votes, vote)
			if !q.Met(in.Votes, digest) {
				// A vote short of the quorum: recorded, and the approval
				// asked again with a fresh token.
				t.voted = &vote
				return nil
			}
			for _, v := range in.Votes {
				if v.Digest == digest {
					d.Votes = append(d.Votes, v)
				}
			}
		default:
			// A reject vetoes; a respond answers instead: either ends the
			// approval, with the votes cast before it.
			d.Votes = slices.Clone(in.Votes)
		}
	}
	in.Decision = d
	return nil
}

// voteRole is the role of the quorum a vote by someone holding roles
// counts for: the first of their roles the quorum still needs for the
// args of digest, or "" when it needs none of them.
func voteRole(q protocol.Quorum, votes []protocol.Vote, digest string, roles []string) string {
	have := map[string]int{}
	for _, v := range votes {
		if v.Digest == digest {
			have[v.Role]++
		}
	}
	for _, rc := range q.Roles {
		if slices.Contains(roles, rc.Role) && have[rc.Role] < rc.Count {
			return rc.Role
		}
	}
	return ""
}

// quorumText says what a quorum takes: "2 approvers", "1 legal and 1
// finance".
func quorumText(q protocol.Quorum) string {
	if len(q.Roles) == 0 {
		return fmt.Sprintf("%d approvers", q.Required)
	}
	parts := make([]string, len(q.Roles))
	for i, rc := range q.Roles {
		parts[i] = fmt.Sprintf("%d %s", rc.Count, rc.Role)
	}
	return strings.Join(parts, " and ")
}

func (approvalKind) describe(in *Interrupt, ev *protocol.Interrupted) {
	ev.Action, ev.Args, ev.Reason, ev.ApproverRole = in.Action, in.Args, in.Reason, in.ApproverRole
	ev.Decisions, ev.Gate, ev.Error = in.Decisions, in.Gate, in.Error
	ev.RejectReasonRequired = in.RejectReasonRequired
	ev.Assignees, ev.ClaimedBy, ev.Requester = in.Assignees, in.ClaimedBy, in.Requester
	ev.Quorum, ev.SeparationOfDuties, ev.Votes = in.Quorum, in.SeparationOfDuties, in.Votes
	ev.Title, ev.Description, ev.ArgsSchema = in.Title, in.Description, in.ArgsSchema
}

// approver names who decided a resume: its approver, else its source.
func (cmd Resume) approver() string { return cmd.caller.Name }

func decodeObject(m map[string]json.RawMessage) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, raw := range m {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}
