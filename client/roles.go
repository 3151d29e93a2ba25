package client

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"

	"github.com/interlockhq/interlock/events"
)

// ResumeWithRole sends a resume on the subject of an approver role,
// <prefix>.in.<flow>.resume.<role>: the way a bot decides approvals when
// NATS authorization says which roles it may decide for. It returns the
// event that settled it, as [Client.Resume] does.
func (c *Client) ResumeWithRole(ctx context.Context, flow, run, role string, r events.Resume) (Event, error) {
	if err := CheckName("approver role", role); err != nil {
		return Event{}, err
	}
	return c.send(ctx, flow, run, "resume."+role, events.TypeResume, r, r.IdempotencyKey, nil)
}

// ResumeAs sends a resume on behalf of a caller the sender has
// authenticated (the HTTP API does): it is vouched for with the
// deployment's secret, so it needs no resume token, the audit record names
// approver, and an approval is decided only if its approver role is among
// roles. Only a part of the deployment holding its secret can vouch.
func (c *Client) ResumeAs(ctx context.Context, flow, run string, r events.Resume, secret []byte, approver string, roles []string) (Event, error) {
	if len(secret) < 32 {
		return Event{}, errors.New("client: vouching for a caller takes the deployment's secret (32 bytes or more)")
	}
	if approver == "" {
		return Event{}, errors.New("client: vouching for a caller takes the caller's name")
	}
	r.ResumeToken = ""
	return c.send(ctx, flow, run, "resume", events.TypeResume, r, r.IdempotencyKey, func(id string, h nats.Header) {
		h.Set(events.HeaderApprover, approver)
		h.Set(events.HeaderRoles, joinRoles(roles))
		h.Set(events.HeaderVouch, events.Vouch(secret, id, approver, roles))
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
