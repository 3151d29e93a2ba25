package engine

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/protocol"
)

// Assign claims, releases or delegates a run's pending approval (see
// [protocol.Assign]).
type Assign struct {
	Flow, Run string
	RequestID string
	// Op is protocol.AssignClaim, AssignRelease or AssignDelegate.
	Op string
	// To is whom a delegation hands the approval to: a person, or a role
	// written role:<name>.
	To string
	// By names who asks; a vouched caller is named by the vouch.
	By     string
	Reason string
	Inbound
}

// Assign applies an assign command. Only someone who may decide the
// approval may claim, release or delegate it: an assignee, a holder of
// its role, or, once it is claimed, its claimant. Each change publishes
// an assigned event and is audited.
func (r *Runner) Assign(ctx context.Context, cmd Assign) (Outcome, error) {
	if out, stop, err := r.authenticate(ctx, cmd.Flow, cmd.Run, &cmd.Inbound); stop {
		return out, err
	}
	return r.transact(ctx, cmd.Flow, cmd.Run, cmd.Inbound, cmd.EventID, "assign", func(t *txn) (Outcome, error) {
		cp := t.cp
		c := r.caller(cmd.By, cmd.Inbound)
		who := c.Name
		t.actor, t.caller = who, c
		if busy, err := r.busy(ctx, cp); err != nil || busy {
			return t.retry(), err
		}
		in := cp.Interrupt
		if cp.Status != Waiting || in == nil {
			return t.refuse(ctx, cmd.RequestID, CodeNotWaiting, "run %s is %s, not waiting on an approval; there is nothing to %s", cmd.Run, cp.Status, cmd.Op)
		}
		if !protocol.RoleRestricted(in.Kind) {
			return t.refuse(ctx, cmd.RequestID, CodeInvalidPayload, "run %s waits on a %s, which anyone may answer; only an approval is claimed, released or delegated", cmd.Run, in.Kind)
		}
		if cmd.RequestID != in.RequestID && !slices.Contains(in.Superseded, cmd.RequestID) {
			return t.refuse(ctx, cmd.RequestID, CodeTokenMismatch, "requestId %q is not the pending request %s", truncate(cmd.RequestID, 64), in.RequestID)
		}
		var ref *authority.Refusal
		if err := r.cfg.Authority.MayAssign(c, authority.Action(cmd.Op), t.authorityRun()); errors.As(err, &ref) {
			return t.refuse(ctx, cmd.RequestID, ref.Code, "%s", ref.Reason)
		} else if err != nil {
			return Outcome{}, err
		}
		action, op, to := "", cmd.Op, ""
		switch op {
		case protocol.AssignClaim:
			if in.ClaimedBy == who {
				return t.refuse(ctx, cmd.RequestID, CodeInvalidPayload, "%s has claimed request %s already", who, in.RequestID)
			}
			in.ClaimedBy, action = who, protocol.ActionClaimed
		case protocol.AssignRelease:
			if in.ClaimedBy == "" {
				return t.refuse(ctx, cmd.RequestID, CodeInvalidPayload, "request %s is not claimed; there is nothing to release", in.RequestID)
			}
			in.ClaimedBy, action = "", protocol.ActionReleased
		case protocol.AssignDelegate:
			to = strings.TrimSpace(cmd.To)
			if role, ok := strings.CutPrefix(to, protocol.RolePrefix); ok {
				if err := CheckName("approver role", role); err != nil {
					return t.refuse(ctx, cmd.RequestID, CodeInvalidPayload, "to: %v", err)
				}
				in.ApproverRole, in.Assignees = role, nil
			} else {
				if err := checkPerson(to); err != nil {
					return t.refuse(ctx, cmd.RequestID, CodeInvalidPayload, "to: %v; name a person, or a role as role:<name>", err)
				}
				in.Assignees = []string{to}
			}
			in.ClaimedBy, action = "", protocol.ActionDelegated
		default:
			return t.refuse(ctx, cmd.RequestID, CodeInvalidPayload, "op %q is not claim, release or delegate", truncate(op, 32))
		}
		t.input += len(cmd.To) + len(cmd.Reason) + len(cmd.By)
		t.asked = in.AskedAt
		t.begin(cmd.Traceparent, action)
		t.emit(protocol.EventAssigned, &protocol.Assigned{Flow: cp.Flow, Run: cp.Run, RequestID: in.RequestID, Op: op, By: who,
			Reason: cmd.Reason, Assignees: in.Assignees, ClaimedBy: in.ClaimedBy, ApproverRole: in.ApproverRole, Origin: cp.Origin})
		t.audit(&protocol.AuditRecord{Action: action, Node: in.Node, RequestID: in.RequestID, Kind: in.Kind,
			By: who, Source: cmd.Source, EventID: cmd.EventID, Trusted: cmd.trusted, Reason: cmd.Reason, ApproverRole: in.ApproverRole, To: to,
			Outcome: &protocol.AuditOutcome{Status: Waiting, Node: in.Node, RequestID: in.RequestID, Kind: in.Kind}})
		return r.commit(ctx, t)
	})
}

// nameOrSender names an empty name.
func nameOrSender(who string) string {
	if who == "" {
		return "the sender"
	}
	return who
}
