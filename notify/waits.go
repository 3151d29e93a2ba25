package notify

import (
	"context"
	"errors"
	"fmt"

	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// StillWaits reports whether run of flow still waits on request
// requestID, as its checkpoint says (written before any event of the
// transition is published): a channel announces an interrupt only then,
// so that a backlog (a channel paused or turned on again, a receiver
// down) never tells people that work settled meanwhile waits on them.
func StillWaits(ctx context.Context, js jetstream.JetStream, names wire.Names, flow, run, requestID string) (bool, error) {
	// From the runs bucket's leader: a replica that fell behind may not
	// know the request yet, and the announcement would be skipped for
	// good.
	doc, rev, err := wire.LeaderKV(ctx, js.Conn(), names.RunsBucket(), flow+"."+run)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil // gone, or its retention ran out
	case err != nil:
		return false, fmt.Errorf("reading the checkpoint of %s %s: %w", flow, run, err)
	}
	cp, err := protocol.DecodeCheckpoint(doc, rev)
	if err != nil {
		return false, Permanent(fmt.Errorf("decoding the checkpoint of %s %s: %w", flow, run, err))
	}
	return cp.Waiting() && cp.Interrupt != nil && cp.Interrupt.RequestID == requestID, nil
}
