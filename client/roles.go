package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// ResumeWithRole sends a resume on the subject of an approver role,
// <prefix>.in.<flow>.resume.<role>: the way a bot decides approvals when
// NATS authorization says which roles it may decide for. It returns the
// event that settled it, as [Client.Resume] does.
func (c *Client) ResumeWithRole(ctx context.Context, flow, run, role string, r protocol.Resume) (Event, error) {
	if err := CheckName("approver role", role); err != nil {
		return Event{}, err
	}
	r.Approver = cmp.Or(r.Approver, c.by)
	return c.send(ctx, flow, run, "resume."+role, protocol.TypeResume, r, r.IdempotencyKey, nil)
}

// vouching is what a client vouches for on every command it sends.
type vouching struct {
	secret []byte
	caller protocol.Caller
}

// sign adds the vouch's headers to msg, a command whose event id is id;
// a nil vouching adds nothing.
func (v *vouching) sign(msg *nats.Msg, id string) {
	if v == nil {
		return
	}
	run := ""
	if ev, err := events.Decode(msg.Header, msg.Data); err == nil {
		run = ev.Subject()
	}
	msg.Header.Set(protocol.HeaderApprover, v.caller.Name)
	msg.Header.Set(protocol.HeaderRoles, joinRoles(v.caller.Roles))
	msg.Header.Set(protocol.HeaderAuth, string(v.caller.Method))
	msg.Header.Set(protocol.HeaderVouch, protocol.Vouch(v.secret, protocol.Vouched{Subject: msg.Subject, EventID: id, Run: run,
		Body: msg.Data, Approver: v.caller.Name, Roles: v.caller.Roles, Method: v.caller.Method}, time.Now().Add(protocol.VouchTTL)))
}

// Vouched returns a copy of the client that sends every command (start,
// resume, cancel, reannounce, assign, tool request, ask) vouched for
// caller with the deployment's secret: Interlock then takes caller as who
// sent it, never a name the command types. It is for a surface of the
// deployment that authenticated caller (the HTTP API, the inbox, the Slack
// bridge); only a part of the deployment holding its secret can vouch.
func (c *Client) Vouched(secret []byte, caller protocol.Caller) (*Client, error) {
	if len(secret) < 32 {
		return nil, errors.New("client: vouching for a caller takes the deployment's secret (32 bytes or more)")
	}
	if caller.Name == "" || len(caller.Name) > 256 || strings.ContainsAny(caller.Name, "\r\n,") || protocol.IsSender(caller.Name) {
		return nil, fmt.Errorf("client: vouching for a caller takes the caller's name, at most 256 bytes on one line, not a NATS sender's (%q)", protocol.Truncate(caller.Name, 64))
	}
	if !caller.Method.Vouched() {
		return nil, fmt.Errorf("client: %q is not a method a service vouches with (token, session, link, slack, teams, mcp, local, service)", protocol.Truncate(string(caller.Method), 32))
	}
	cp := *c
	cp.by = caller.Name
	cp.vouch = &vouching{secret: secret, caller: caller}
	return &cp, nil
}

// ResumeAs sends a resume on behalf of a caller the sender has
// authenticated (the HTTP API does): it is vouched for with the
// deployment's secret, so it needs no resume token, the audit record names
// approver, and an approval is decided only if its approver role is among
// roles. Only a part of the deployment holding its secret can vouch. A
// client made by [Client.Vouched] vouches for its own caller instead.
func (c *Client) ResumeAs(ctx context.Context, flow, run string, r protocol.Resume, secret []byte, approver string, roles []string) (Event, error) {
	if c.vouch != nil {
		return c.vouch.resume(ctx, c, flow, run, r)
	}
	if len(secret) < 32 {
		return Event{}, errors.New("client: vouching for a caller takes the deployment's secret (32 bytes or more)")
	}
	if approver == "" {
		return Event{}, errors.New("client: vouching for a caller takes the caller's name")
	}
	r.ResumeToken = ""
	if r.RequestID == "" {
		// A vouch binds the request it decides: name the pending one. A
		// run that is not waiting is refused by Interlock all the same.
		if cp, err := c.Checkpoint(ctx, flow, run); err == nil && cp.Waiting() && cp.Interrupt != nil {
			r.RequestID = cp.Interrupt.RequestID
		}
	}
	return c.send(ctx, flow, run, "resume", protocol.TypeResume, r, r.IdempotencyKey, func(msg *nats.Msg, id string) {
		msg.Header.Set(protocol.HeaderApprover, approver)
		msg.Header.Set(protocol.HeaderRoles, joinRoles(roles))
		msg.Header.Set(protocol.HeaderVouch, protocol.Vouch(secret, protocol.Vouched{Subject: msg.Subject, EventID: id, Run: run,
			Body: msg.Data, Approver: approver, Roles: roles}, time.Now().Add(protocol.VouchTTL)))
	})
}

// resume sends r vouched for v's caller, naming the pending request.
func (v *vouching) resume(ctx context.Context, c *Client, flow, run string, r protocol.Resume) (Event, error) {
	r.ResumeToken, r.Approver = "", ""
	if r.RequestID == "" {
		if cp, err := c.Checkpoint(ctx, flow, run); err == nil && cp.Waiting() && cp.Interrupt != nil {
			r.RequestID = cp.Interrupt.RequestID
		}
	}
	return c.send(ctx, flow, run, "resume", protocol.TypeResume, r, r.IdempotencyKey, nil)
}

func joinRoles(roles []string) string {
	s := ""
	for i, r := range roles {
		if i > 0 {
			s += ","
		}
		s += r
	}
	return s
}
