package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// Positions of a static gate.
const (
	// GateBefore pauses before the node runs: the approver sees the state
	// the node will get.
	GateBefore = "before"
	// GateAfter pauses after the node ran: the approver reviews its output.
	GateAfter = "after"
)

// Gate is a static approval gate, declared on the flow rather than in node
// code (LangGraph's interrupt_before and interrupt_after). Its approval's
// action is the node's name and its args are the state. Approve continues;
// edit applies the edits to the state through the flow's reducers and
// continues; reject takes the node's reject route ([Builder.OnReject]) or,
// when there is none, completes the run with the rejection recorded. A
// before-gate's node never runs when rejected.
type Gate struct {
	// Reason says why approval is needed, for the approver.
	Reason string
	// ApproverRole is the role that may decide.
	ApproverRole string
	// Fields are the state fields shown as the approval's args, and the
	// only ones an edit may change. Defaults to every field of the state.
	Fields []string
	// Decisions are the verdicts allowed. Defaults to all three.
	Decisions []Verdict
	// RejectReasonRequired makes a reject say why; see [Approval].
	RejectReasonRequired bool
	// Assignees, Quorum, SeparationOfDuties, Reminders and RemindEvery
	// are as an [Approval]'s.
	Assignees          []string
	Quorum             *protocol.Quorum
	SeparationOfDuties *bool
	Reminders          []time.Duration
	RemindEvery        time.Duration
	// Timeout, if set, is how long the gate may wait; OnTimeout says what
	// happens then (defaults to expiring the run).
	Timeout   time.Duration
	OnTimeout Policy
	// Validate, if set, checks the args after an edit; see [Approval].
	Validate func(ctx context.Context, args map[string]any) error

	// Title, Description, Requester and ArgsSchema (a JSON Schema of the
	// state fields shown) say what the gate asks for the person who
	// decides it; see [Approval]. A schema that does not compile fails
	// the flow's Build.
	Title       string
	Description string
	Requester   string
	ArgsSchema  json.RawMessage
}

// GateBefore declares a gate that pauses the run for approval before node
// runs.
func (b *Builder[S]) GateBefore(node string, g Gate) *Builder[S] {
	return b.gate(node, GateBefore, g)
}

// GateAfter declares a gate that pauses the run for approval after node
// ran, before the flow moves on.
func (b *Builder[S]) GateAfter(node string, g Gate) *Builder[S] {
	return b.gate(node, GateAfter, g)
}

func (b *Builder[S]) gate(node, at string, g Gate) *Builder[S] {
	key := at + " " + node
	if _, dup := b.gates[key]; dup {
		b.errs = append(b.errs, fmt.Errorf("node %q has two gates %s it", node, at))
	}
	for _, f := range g.Fields {
		if p, c, err := splitPath(f); err != nil || c != "" || p == "" {
			b.errs = append(b.errs, fmt.Errorf("gate %s %q: field %q: gates show top-level state fields", at, node, f))
		}
	}
	if _, err := newApproval(node, g.approval(node, map[string]any{})); err != nil {
		b.errs = append(b.errs, fmt.Errorf("gate %s %q: %w", at, node, err))
	}
	if slices.Contains(g.Decisions, VerdictRespond) {
		b.errs = append(b.errs, fmt.Errorf("gate %s %q: a gate declared on the flow takes no respond: no node would get the message; ask with Node.Approve", at, node))
	}
	if err := checkReminders(g.Timeout, remindersOf(g.Reminders, g.RemindEvery)); err != nil {
		b.errs = append(b.errs, fmt.Errorf("gate %s %q: %w", at, node, err))
	}
	if err := checkTimeout(KindApproval, g.Timeout, g.OnTimeout); err != nil {
		b.errs = append(b.errs, fmt.Errorf("gate %s %q: %w", at, node, err))
	}
	b.gates[key] = &g
	return b
}

// approval is the gate's approval of node, proposing args.
func (g *Gate) approval(node string, args any) Approval {
	return Approval{Action: node, Args: args, Reason: g.Reason, ApproverRole: g.ApproverRole, Decisions: g.Decisions,
		RejectReasonRequired: g.RejectReasonRequired, Assignees: g.Assignees, Quorum: g.Quorum,
		SeparationOfDuties: g.SeparationOfDuties, Reminders: g.Reminders, RemindEvery: g.RemindEvery,
		Title: g.Title, Description: g.Description, Requester: g.Requester, ArgsSchema: g.ArgsSchema,
		Timeout: g.Timeout, OnTimeout: g.OnTimeout}
}

// OnReject declares where the run goes when an approval of node is
// rejected: an inline approval ([Node.Approve]) or the node's gate. to may
// be [End]. Without it, a node that saw a rejection follows its usual
// edges, and a rejected gate completes the run.
func (b *Builder[S]) OnReject(from, to string) *Builder[S] {
	if _, dup := b.rejects[from]; dup {
		b.errs = append(b.errs, fmt.Errorf("node %q has two reject routes", from))
	}
	b.rejects[from] = to
	return b
}

// gateOf returns the gate at a node, if any.
func (f *Flow) gateOf(node, at string) *Gate { return f.gates[at+" "+node] }

// gateInterrupt returns the approval interrupt of a gate at the current node.
func (t *txn) gateInterrupt(g *Gate, at string) (*Interrupt, error) {
	cp := t.cp
	args := map[string]json.RawMessage{}
	if len(g.Fields) == 0 {
		for k, v := range cp.State {
			args[k] = v
		}
	} else {
		for _, f := range g.Fields {
			v, ok := cp.State[f]
			if !ok {
				v = json.RawMessage("null")
			}
			args[f] = v
		}
	}
	in, err := newApproval(cp.Node, g.approval(cp.Node, args))
	if err != nil {
		return nil, err
	}
	in.Gate, in.Index = at, -1
	in.RequestID, in.AskedAt = newRequestID(), t.now
	if g.Timeout > 0 {
		x := exec{now: t.now}
		x.deadline(in, g.Timeout, g.OnTimeout)
	}
	return in, nil
}

// gateDecided takes a static gate's decision: it returns after whether the
// node is still to run (a before-gate approved or edited) or the flow is to
// move on from it.
func (r *Runner) gateDecided(ctx context.Context, t *txn, x *exec, in *Interrupt) (runNode bool, err error) {
	cp := t.cp
	d := *in.Decision
	g := t.f.gateOf(cp.Node, in.Gate)
	if d.Verdict == VerdictEdit && g != nil && g.Validate != nil {
		if err := g.Validate(ctx, d.Args); err != nil {
			var rej *Rejection
			if !errors.As(err, &rej) {
				return false, x.fail(fmt.Errorf("validating the edits at the gate %s %q: %w", in.Gate, cp.Node, err))
			}
			return false, &invalidAnswerError{msg: rej.Message}
		}
	}
	x.decided(d)
	cp.Interrupt = nil
	if d.Verdict == VerdictEdit {
		raws := map[string]json.RawMessage{}
		for k, v := range d.Edits {
			b, err := json.Marshal(v)
			if err != nil {
				return false, x.fail(fmt.Errorf("edit of %s: %w", k, err))
			}
			raws[k] = b
		}
		if err := x.applyRaw(raws); err != nil {
			return false, x.fail(err)
		}
	}
	if d.Verdict == VerdictReject {
		return false, nil
	}
	if in.Gate == GateBefore {
		cp.GatePassed = cp.Node
		return true, nil
	}
	return false, nil
}

// invalidAnswerError is a decision whose edits a validator refused before
// anything of the transition was written: the resume is refused.
type invalidAnswerError struct{ msg string }

func (e *invalidAnswerError) Error() string { return "invalid answer: " + e.msg }
