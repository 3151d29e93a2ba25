package client

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

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

// ResumeAs sends a resume on behalf of a caller the sender has
// authenticated (the HTTP API does): it is vouched for with the
// deployment's secret, so it needs no resume token, the audit record names
// approver, and an approval is decided only if its approver role is among
// roles. Only a part of the deployment holding its secret can vouch.
func (c *Client) ResumeAs(ctx context.Context, flow, run string, r protocol.Resume, secret []byte, approver string, roles []string) (Event, error) {
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
