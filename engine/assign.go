package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

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
		who := actor(cmd.By, cmd.Inbound)
		t.actor = who
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
		roles, known := cmd.roles()
		if !known && cmd.Authority.RoleRequired {
			// An assign has no role subject: a name without a vouch is
			// anyone's to type.
			return t.refuse(ctx, cmd.RequestID, CodeForbidden, "where approver roles are required, an approval is claimed, released or delegated only by a person a service of the deployment vouches for: send it through the HTTP API (POST /v1/runs/%s/%s/assign), the inbox or Slack", cp.Flow, cp.Run)
		}
		if msg := mayDecide(in, who, roles, known, cmd.Authority.RoleRequired); msg != "" {
			return t.refuse(ctx, cmd.RequestID, CodeForbidden, "%s", msg)
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

// roles are the approver roles the transport found for an assign: a
// vouched caller's, or a role subject's, when known.
func (cmd Assign) roles() ([]string, bool) {
	switch {
	case cmd.trusted:
		return cmd.Authority.Roles, true
	case cmd.Authority.Role != "":
		return []string{cmd.Authority.Role}, true
	}
	return nil, false
}

// mayDecide says why who (holding roles, when known) may not decide the
// approval in, or "" when they may: its claimant alone once it is claimed;
// otherwise an assignee, or someone holding its role. Without known
// roles, a name (a claimant's, an assignee's) is taken at its word unless
// the deployment requires roles.
func mayDecide(in *Interrupt, who string, roles []string, known, required bool) string {
	if in.ClaimedBy != "" {
		if who != in.ClaimedBy {
			return fmt.Sprintf("request %s is claimed by %s: only they may decide it, until they release it", in.RequestID, in.ClaimedBy)
		}
		if !known && required {
			// The name is the sender's word alone: anyone may type it.
			return fmt.Sprintf("request %s is claimed by %s, and where approver roles are required a claimant is known only through a service that vouches for them (the HTTP API, the inbox, the Slack bridge) or a role subject", in.RequestID, in.ClaimedBy)
		}
		return ""
	}
	if slices.Contains(in.Assignees, who) && (known || !required) {
		return ""
	}
	quorumRoles := in.Quorum != nil && len(in.Quorum.Roles) > 0
	if in.ApproverRole == "" && len(in.Assignees) == 0 && !quorumRoles {
		return ""
	}
	switch {
	case known && in.ApproverRole != "" && slices.Contains(roles, in.ApproverRole):
		return ""
	case known && quorumRole(in, roles):
		return ""
	case !known && !required && len(in.Assignees) == 0 && (in.ApproverRole != "" || !quorumRoles):
		return ""
	}
	who = nameOrSender(who)
	switch {
	case len(in.Assignees) > 0 && in.ApproverRole != "":
		return fmt.Sprintf("deciding this approval takes being one of %s or holding approver role %s; %s is neither", strings.Join(in.Assignees, ", "), in.ApproverRole, who)
	case len(in.Assignees) > 0:
		return fmt.Sprintf("deciding this approval takes being one of %s; %s is not", strings.Join(in.Assignees, ", "), who)
	case in.ApproverRole == "" && quorumRoles:
		need := make([]string, len(in.Quorum.Roles))
		for i, rc := range in.Quorum.Roles {
			need[i] = rc.Role
		}
		if !known {
			return fmt.Sprintf("voting on this approval takes one of the roles %s: send it on <prefix>.in.<flow>.resume.<role>, or through the HTTP API", strings.Join(need, ", "))
		}
		return fmt.Sprintf("voting on this approval takes one of the roles %s; %s came with %s", strings.Join(need, ", "), who, roleList(roles))
	case !known:
		return fmt.Sprintf("approval decisions are taken only with an approver role: send it on <prefix>.in.<flow>.resume.%s, or through the HTTP API", in.ApproverRole)
	}
	return fmt.Sprintf("deciding this approval takes approver role %s; %s came with %s", in.ApproverRole, who, roleList(roles))
}

// quorumRole reports whether roles hold a role of the approval's quorum,
// whose holders may vote beside the approval's role.
func quorumRole(in *Interrupt, roles []string) bool {
	if in.Quorum == nil {
		return false
	}
	for _, rc := range in.Quorum.Roles {
		if slices.Contains(roles, rc.Role) {
			return true
		}
	}
	return false
}

// nameOrSender names an empty name.
func nameOrSender(who string) string {
	if who == "" {
		return "the sender"
	}
	return who
}
