package client

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/interlockhq/interlock/protocol"
)

// AssignAs claims, releases or delegates a run's pending approval on
// behalf of a caller the sender has authenticated, vouched for with the
// deployment's secret as [Client.ResumeAs] vouches for a resume: the
// engine takes the vouched approver as who asks (never a.By) and their
// roles to check that they may decide the approval. It returns the
// assigned event, or refused.
func (c *Client) AssignAs(ctx context.Context, flow, run string, a protocol.Assign, secret []byte, approver string, roles []string) (Event, error) {
	if len(secret) < 32 {
		return Event{}, errors.New("client: vouching for a caller takes the deployment's secret (32 bytes or more)")
	}
	if approver == "" {
		return Event{}, errors.New("client: vouching for a caller takes the caller's name")
	}
	a.By = approver
	return c.send(ctx, flow, run, protocol.VerbAssign, protocol.TypeAssign, a, "", func(msg *nats.Msg, id string) {
		msg.Header.Set(protocol.HeaderApprover, approver)
		msg.Header.Set(protocol.HeaderRoles, joinRoles(roles))
		msg.Header.Set(protocol.HeaderVouch, protocol.Vouch(secret, protocol.Vouched{Subject: msg.Subject, EventID: id, Run: run,
			Body: msg.Data, Approver: approver, Roles: roles}, time.Now().Add(protocol.VouchTTL)))
	})
}
