package engine

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// Authority is what the transport knows of who sent a command: the role of
// the subject it came on, and the headers a service of the deployment
// (the HTTP API, the inbox, a channel) sends when it vouches for the
// caller it authenticated. The engine decides with it, here and nowhere
// else, what the command may do: [Runner.authenticate] for every command,
// [txn.authorize] for a resume (the vouch, the token, the request, the
// deadline and the approval's role).
type Authority struct {
	// Role is the approver role of the subject the command came on
	// (<prefix>.in.<flow>.resume.<role>), which the deployment's NATS
	// permissions grant; "" for any other subject.
	Role string
	// RoleRequired is set when the deployment configures authorization:
	// an approval is decided only with a known role (a role subject or a
	// vouch).
	RoleRequired bool
	// Vouch, Approver and Roles are the values of the headers
	// protocol.HeaderVouch, HeaderApprover and HeaderRoles.
	Vouch, Approver string
	Roles           []string
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
		Body: a.Body, Approver: a.Approver, Roles: a.Roles}, a.Vouch, r.cfg.Now())
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

// actor names who sent a command, the same way for every command and on
// every surface: the caller a service of the deployment vouched for
// (never a name the body typed), else the name the command gives (a
// resume's approver, a start's, cancel's or reannounce's by), else its
// source.
func actor(named string, in Inbound) string {
	switch {
	case in.trusted && in.Authority.Approver != "":
		return in.Authority.Approver
	case named != "":
		return named
	}
	return in.Source
}

// fromTransport gives a resume the authority its transport found: a
// vouched caller's name and roles (no token is then needed), or a role
// subject's role. A resume an in-process caller built with Trusted or
// Roles keeps them.
func (cmd *Resume) fromTransport() {
	a := cmd.Authority
	cmd.RoleRequired = cmd.RoleRequired || a.RoleRequired
	switch {
	case cmd.trusted:
		// The caller was authenticated: the audit names the caller, never
		// a name typed in the body.
		cmd.Trusted, cmd.Approver, cmd.Roles, cmd.RolesKnown = true, a.Approver, a.Roles, true
		if a.Role != "" {
			cmd.Roles = []string{a.Role}
		}
	case a.Role != "":
		cmd.Roles, cmd.RolesKnown = []string{a.Role}, true
	}
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
	who := cmd.approver()
	if msg := mayDecide(in, who, cmd.Roles, cmd.RolesKnown, cmd.RoleRequired); msg != "" {
		return refuse(cmd.RequestID, CodeForbidden, "%s", msg)
	}
	v := Verdict(cmd.Decision)
	if in.Quorum != nil && (v == VerdictApprove || v == VerdictEdit) {
		if in.SeparationOfDuties && in.Requester != "" && who == in.Requester {
			return refuse(cmd.RequestID, CodeForbidden, "%s asked for %s and may not vote on it: the quorum separates duties", who, in.Action)
		}
		if in.SeparationOfDuties && cp.StartedBy != "" && who == cp.StartedBy {
			return refuse(cmd.RequestID, CodeForbidden, "%s started run %s and may not vote on its %s: the quorum separates duties", who, cp.Run, in.Action)
		}
		// With separation of duties each approver votes once; without,
		// an approver may vote again only for other args (an edit), and
		// counts once for any args.
		for _, vote := range in.Votes {
			if vote.Approver == who && (in.SeparationOfDuties || v == VerdictApprove) {
				return refuse(cmd.RequestID, CodeForbidden, "%s voted on %s already (%s, at %s); each approver votes once", who, in.Action, vote.Verdict, vote.At.Format(time.RFC3339))
			}
		}
	}
	return Outcome{}, false, nil
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
