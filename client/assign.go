package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/interlockhq/interlock/protocol"
)

// Assign claims, releases or delegates a run's pending approval (see
// [protocol.Assign]) and returns the event that settles it: assigned,
// with who may now decide it, or refused. a.By defaults to the person the
// client acts for ([Client.As]), and a.RequestID to the request pending
// now: a run that is not waiting is an error wrapping [ErrNotWaiting],
// one that does not exist wraps [ErrNotFound].
//
// Over NATS alone the name in a.By is taken at its word unless the
// deployment requires approver roles; a surface that authenticated the
// caller vouches for them with [Client.AssignAs].
func (c *Client) Assign(ctx context.Context, flow, run string, a protocol.Assign) (Event, error) {
	if a.By == "" {
		a.By = c.by
	}
	if err := c.pendingRequest(ctx, flow, run, &a); err != nil {
		return Event{}, err
	}
	return c.send(ctx, flow, run, protocol.VerbAssign, protocol.TypeAssign, a, "", nil)
}

// AssignAs sends an assign on behalf of a caller the sender has
// authenticated, as [Client.ResumeAs] sends a resume: it is vouched for
// with the deployment's secret, the audit record and the assigned event
// name by (never a.By, which must be empty or by), and the engine checks
// that by, holding roles, may decide the approval. Only a part of the
// deployment holding its secret can vouch.
func (c *Client) AssignAs(ctx context.Context, flow, run string, a protocol.Assign, secret []byte, by string, roles []string) (Event, error) {
	if len(secret) < 32 {
		return Event{}, errors.New("client: vouching for a caller takes the deployment's secret (32 bytes or more)")
	}
	if by == "" {
		return Event{}, errors.New("client: vouching for a caller takes the caller's name")
	}
	if a.By != "" && a.By != by {
		return Event{}, fmt.Errorf("client: the assign names %s as by, but is vouched for %s: leave by out, the vouch names the caller", a.By, by)
	}
	a.By = by
	if err := c.pendingRequest(ctx, flow, run, &a); err != nil {
		return Event{}, err
	}
	return c.send(ctx, flow, run, protocol.VerbAssign, protocol.TypeAssign, a, "", func(msg *nats.Msg, id string) {
		msg.Header.Set(protocol.HeaderApprover, by)
		msg.Header.Set(protocol.HeaderRoles, joinRoles(roles))
		msg.Header.Set(protocol.HeaderVouch, protocol.Vouch(secret, protocol.Vouched{Subject: msg.Subject, EventID: id, Run: run,
			Body: msg.Data, Approver: by, Roles: roles}, time.Now().Add(protocol.VouchTTL)))
	})
}

// pendingRequest names the request pending now in an assign that names
// none.
func (c *Client) pendingRequest(ctx context.Context, flow, run string, a *protocol.Assign) error {
	if a.RequestID != "" {
		return nil
	}
	cp, err := c.Checkpoint(ctx, flow, run)
	if err != nil {
		return err
	}
	if !cp.Waiting() || cp.Interrupt == nil {
		return fmt.Errorf("%w: run %s of flow %s is %s, not waiting on an approval; there is nothing to %s", ErrNotWaiting, run, flow, cp.Status, a.Op)
	}
	a.RequestID = cp.Interrupt.RequestID
	return nil
}
