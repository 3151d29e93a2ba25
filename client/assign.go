package client

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/interlockhq/interlock/protocol"
)

// AssignAs claims, releases or delegates a run's pending approval on
// behalf of a caller the sender has authenticated, as [Client.ResumeAs]
// decides one: vouched for with the deployment's secret, so that the
// audit names by, never a name in the body, and the approval is claimed
// only by someone who may decide it. It returns the assigned event, or
// a [RefusedError] saying why not.
func (c *Client) AssignAs(ctx context.Context, flow, run string, a protocol.Assign, secret []byte, by string, roles []string) (Event, error) {
	if len(secret) < 32 {
		return Event{}, errors.New("client: vouching for a caller takes the deployment's secret (32 bytes or more)")
	}
	if by == "" {
		return Event{}, errors.New("client: vouching for a caller takes the caller's name")
	}
	a.By = by
	ev, err := c.send(ctx, flow, run, protocol.VerbAssign, protocol.TypeAssign, a, "", func(msg *nats.Msg, id string) {
		msg.Header.Set(protocol.HeaderApprover, by)
		msg.Header.Set(protocol.HeaderRoles, joinRoles(roles))
		msg.Header.Set(protocol.HeaderVouch, protocol.Vouch(secret, protocol.Vouched{Subject: msg.Subject, EventID: id, Run: run,
			Body: msg.Data, Approver: by, Roles: roles}, time.Now().Add(protocol.VouchTTL)))
	})
	if err != nil {
		return ev, err
	}
	if ev.Kind == protocol.EventRefused {
		var r protocol.Refused
		if err := ev.Decode(&r); err == nil {
			return ev, &RefusedError{Refused: r, What: a.Op + " of " + flow + " " + run}
		}
	}
	return ev, nil
}
