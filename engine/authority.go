package engine

import (
	"cmp"
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/protocol"
)

// Authority is what the transport knows of who sent a command: the role of
// the subject it came on, and the headers a service of the deployment
// (the HTTP API, the inbox, a channel) sends when it vouches for the
// caller it authenticated. The engine turns it into the command's
// caller (see [Runner.caller]), and the deployment's [authority.Authority]
// decides what that caller may do.
type Authority struct {
	// Role is the approver role of the subject the command came on
	// (<prefix>.in.<flow>.resume.<role>), which the deployment's NATS
	// permissions grant; "" for any other subject.
	Role string
	// Vouch, Approver, Roles and Method are the values of the headers
	// protocol.HeaderVouch, HeaderApprover, HeaderRoles and HeaderAuth.
	Vouch, Approver string
	Roles           []string
	Method          protocol.AuthMethod
	// Subject and Body are the message the vouch binds: its NATS subject
	// and its body as published.
	Subject string
	Body    []byte
}

// ReasonInvalidPayload is the dead-letter reason of a command whose vouch
// does not verify, as of one whose payload does not decode.
const ReasonInvalidPayload = "invalid_payload"

// authenticate checks the vouch a command carries, if any: one that
// verifies makes the command trusted, its caller the vouched approver
// with the vouched roles; one that does not is refused forbidden and
// dead-lettered (stop is then set, with the outcome to return).
func (r *Runner) authenticate(ctx context.Context, flow, run string, in *Inbound) (out Outcome, stop bool, err error) {
	a := in.Authority
	if a.Vouch == "" {
		return Outcome{}, false, nil
	}
	err = protocol.VerifyVouch(r.cfg.Secret, protocol.Vouched{Subject: a.Subject, EventID: in.EventID, Run: run,
		Body: a.Body, Approver: a.Approver, Roles: a.Roles, Method: a.Method}, a.Vouch, r.cfg.Now())
	if err == nil && (a.Approver == "" || (a.Method != "" && !a.Method.Vouched())) {
		err = fmt.Errorf("%w: it names no caller, or a method (%q) no service vouches with", protocol.ErrVouchInvalid, protocol.Truncate(string(a.Method), 32))
	}
	if err == nil {
		in.trusted = true
		return Outcome{}, false, nil
	}
	msg := fmt.Sprintf("header %s does not verify: a vouch holds only for the command (subject, event id, run and body) and the caller it was made for, "+
		"and only the deployment's own services may vouch, with the workers' resume-token secret "+
		"(a service of the deployment that sees this: give it the workers' --secret-file or INTERLOCK_SECRET)", protocol.HeaderVouch)
	if errors.Is(err, protocol.ErrVouchExpired) {
		msg = fmt.Sprintf("header %s: %v; the command waited in the inbound stream longer than a vouch holds (%s): send it again", protocol.HeaderVouch, err, protocol.VouchTTL)
	}
	if CheckName("flow", flow) != nil || run == "" || CheckName("run", run) != nil {
		return Outcome{Flow: flow, Run: run, DeadLetter: ReasonInvalidPayload}, true, nil
	}
	out, err = r.refuse(ctx, flow, run, "", *in, CodeForbidden, ReasonInvalidPayload, msg)
	return out, true, err
}

// caller is who sent a command, the same way for every command and on
// every surface: the caller a service of the deployment vouched for
// (never a name the body typed); else, as the deployment's authority
// says, the NATS sender (where callers are identified) or the name the
// command gives (a resume's approver, a start's, cancel's or
// reannounce's by, an ask's or a tool request's agent), else its source.
func (r *Runner) caller(named string, in Inbound) authority.Caller {
	a := in.Authority
	if in.trusted {
		c := r.cfg.Authority.Vouched(protocol.Caller{Name: a.Approver, Method: a.Method, Roles: a.Roles})
		if a.Role != "" {
			c.Roles, c.AllRoles = []string{a.Role}, false
		}
		return c
	}
	if in.Due {
		return authority.Caller{Name: cmp.Or(in.Source, r.cfg.Source), Method: protocol.AuthServer}
	}
	return r.cfg.Authority.NATSCaller(a.Role, named, in.Source)
}

// actor names who sent a command: its caller's name.
func (r *Runner) actor(named string, in Inbound) string { return r.caller(named, in).Name }

// resumeCaller is who sent a resume: the transport's caller, or the one an
// in-process sender (a test harness, a program that embeds the engine)
// gave: Trusted for a person it authenticated, Roles with RolesKnown for
// the roles it vouches for.
func (r *Runner) resumeCaller(cmd Resume) authority.Caller {
	if cmd.trusted || cmd.Authority.Role != "" || (!cmd.Trusted && !cmd.RolesKnown) {
		return r.caller(cmd.Approver, cmd.Inbound)
	}
	c := authority.Caller{Name: cmd.Approver, Method: protocol.AuthService, Roles: cmd.Roles}
	if !cmd.Trusted {
		c.Method = protocol.AuthRoleSubject
	}
	if c.Name == "" {
		c.Name = cmd.Source
	}
	return c
}

// authorize decides whether cmd may answer the pending interrupt in: a
// trusted resume names the request it decides, any other carries its
// token; the request is the pending one and has not expired; an approval
// is decided only by someone holding its role. It refuses otherwise
// (stop is then set, with the outcome to return).
func (t *txn) authorize(ctx context.Context, cmd Resume, in *Interrupt) (out Outcome, stop bool, err error) {
	r, cp := t.r, t.cp
	refuse := func(requestID string, code protocol.Code, format string, args ...any) (Outcome, bool, error) {
		out, err := t.refuse(ctx, requestID, code, format, args...)
		return out, true, err
	}
	if cmd.Trusted {
		// A vouch binds the request it decides, so that it cannot decide
		// a later one.
		if cmd.RequestID == "" {
			return refuse("", CodeInvalidPayload, "a resume vouched for by a service of the deployment must name the request it decides: set requestId to the pending request's (%s)", in.RequestID)
		}
		// No token proves the caller saw the interrupted event, so make
		// sure the transition that published it has finished.
		if busy, err := r.busy(ctx, cp); err != nil || busy {
			return t.retry(), true, err
		}
	} else {
		if cmd.Token == "" {
			return refuse(cmd.RequestID, CodeTokenMismatch, "resumeToken is missing; copy it from the interrupted event")
		}
		if !hmac.Equal([]byte(cmd.Token), []byte(r.token(cp.Flow, cp.Run, in.RequestID))) && !r.supersededToken(cp, in, cmd) {
			for _, old := range in.Retired {
				if hmac.Equal([]byte(cmd.Token), []byte(r.token(cp.Flow, cp.Run, old))) {
					return refuse(cmd.RequestID, CodeExpired, "request %s expired and was escalated to %s (request %s); answer the latest interrupted event", old, in.ApproverRole, in.RequestID)
				}
			}
			return refuse(cmd.RequestID, CodeTokenMismatch, "resumeToken does not match the pending interrupt (request %s); it may be from an earlier, used or re-announced interrupt", in.RequestID)
		}
	}
	if cmd.RequestID != "" && cmd.RequestID != in.RequestID && !superseded(in, cmd) {
		if slices.Contains(in.Retired, cmd.RequestID) {
			return refuse(cmd.RequestID, CodeExpired, "request %s expired and was escalated to %s (request %s)", cmd.RequestID, in.ApproverRole, in.RequestID)
		}
		return refuse(cmd.RequestID, CodeTokenMismatch, "requestId %q is not the pending request %s", truncate(cmd.RequestID, 64), in.RequestID)
	}
	if in.ExpiresAt != nil && !t.now.Before(*in.ExpiresAt) {
		return refuse(cmd.RequestID, CodeExpired, "the interrupt expired at %s", in.ExpiresAt.Format(time.RFC3339))
	}
	if !protocol.RoleRestricted(in.Kind) {
		return Outcome{}, false, nil
	}
	err = r.cfg.Authority.MayDecide(cmd.caller, t.authorityRun(), protocol.Verdict(cmd.Decision))
	var ref *authority.Refusal
	if errors.As(err, &ref) {
		return refuse(cmd.RequestID, ref.Code, "%s", ref.Reason)
	}
	return Outcome{}, false, err
}

// authorityRun is the authority's view of the transaction's run.
func (t *txn) authorityRun() authority.Run {
	cp := t.cp
	r := authority.Run{Flow: cp.Flow, ID: cp.Run, Status: protocol.Status(cp.Status), StartedBy: cp.StartedBy,
		Private: cp.Flow == AskFlowName || cp.Flow == GateFlowName}
	if in := cp.Interrupt; in != nil {
		r.Pending = &authority.Pending{Kind: in.Kind, RequestID: in.RequestID, ApproverRole: in.ApproverRole, Assignees: in.Assignees,
			ClaimedBy: in.ClaimedBy, Requester: in.Requester, Quorum: in.Quorum, SeparationOfDuties: in.SeparationOfDuties,
			Votes: in.Votes, Action: in.Action}
	}
	return r
}

// supersededToken reports whether cmd, a decision, carries the token of a
// request of in that a vote superseded.
func (r *Runner) supersededToken(cp *Checkpoint, in *Interrupt, cmd Resume) bool {
	if in.Quorum == nil || cmd.Decision == "" {
		return false
	}
	for _, old := range in.Superseded {
		if hmac.Equal([]byte(cmd.Token), []byte(r.token(cp.Flow, cp.Run, old))) {
			return true
		}
	}
	return false
}

// superseded reports whether cmd, a decision, names a request of in that
// a vote superseded, or carries its token: a vote racing the one that
// asked again counts all the same.
func superseded(in *Interrupt, cmd Resume) bool {
	if in.Quorum == nil || cmd.Decision == "" {
		return false
	}
	return slices.Contains(in.Superseded, cmd.RequestID)
}
