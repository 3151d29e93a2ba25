package client

import (
	"context"
	"fmt"
	"time"

	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// migratePoll is how often Migrate reads the run's audit for the outcome.
const migratePoll = 100 * time.Millisecond

// Migrate moves a waiting run from version from of its flow to version
// to: a worker of version to moves it, by the flow's migration from from
// (or as it is when to has the run's node), in one audited transition.
// It returns the run's audit record migrated; a refusal is a
// *RefusedError (code stale_checkpoint when the run is at another version,
// having moved meanwhile). It waits up to the client's wait: while no
// worker of version to runs, the command waits for one, and Migrate
// returns the context's error.
func (c *Client) Migrate(ctx context.Context, flow, run, from, to, reason string) (protocol.AuditRecord, error) {
	if err := CheckName("flow", flow); err != nil {
		return protocol.AuditRecord{}, err
	}
	if err := CheckName("run", run); err != nil {
		return protocol.AuditRecord{}, err
	}
	id := randomHex(16)
	ev, err := events.New(id, c.source, protocol.TypeMigrate, run, time.Now().UTC(), protocol.Migrate{From: from, To: to, Reason: reason, By: c.by})
	if err != nil {
		return protocol.AuditRecord{}, err
	}
	body, err := events.Encode(ev)
	if err != nil {
		return protocol.AuditRecord{}, err
	}
	if err := c.publish(ctx, c.command(flow, protocol.VerbMigrate, id, body, nil), protocol.VerbMigrate); err != nil {
		return protocol.AuditRecord{}, err
	}
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	// The outcome is the run's audit record naming the command: migrated,
	// or a refusal's side record.
	tick := time.NewTicker(migratePoll)
	defer tick.Stop()
	for {
		recs, err := c.Audit(ctx, flow, run)
		if err != nil {
			return protocol.AuditRecord{}, err
		}
		for _, rec := range recs {
			if rec.EventID != id {
				continue
			}
			if rec.Action == protocol.ActionRefused {
				return rec, &RefusedError{What: "migrate of run " + run, Refused: protocol.Refused{Flow: flow, Run: run, Code: rec.Code, Message: rec.Reason, EventID: id}}
			}
			return rec, nil
		}
		select {
		case <-ctx.Done():
			return protocol.AuditRecord{}, fmt.Errorf("client: no outcome of the migrate of run %s of flow %s to version %s: %w; is a worker of version %s running? (interlock flows)", run, flow, to, ctx.Err(), to)
		case <-tick.C:
		}
	}
}
