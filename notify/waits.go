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
	runs, err := js.KeyValue(ctx, names.RunsBucket())
	if err != nil {
		return false, fmt.Errorf("binding bucket %s: %w", names.RunsBucket(), err)
	}
	e, err := runs.Get(ctx, flow+"."+run)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading the checkpoint of %s %s: %w", flow, run, err)
	}
	cp, err := protocol.DecodeCheckpoint(e.Value(), e.Revision())
	if err != nil {
		return false, Permanent(fmt.Errorf("decoding the checkpoint of %s %s: %w", flow, run, err))
	}
	return cp.Waiting() && cp.Interrupt != nil && cp.Interrupt.RequestID == requestID, nil
}
