package notify

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// ErrRunGone: the run has no checkpoint (it never was, or its retention
// ran out).
var ErrRunGone = errors.New("notify: the run is gone")

// Run reads run of flow's checkpoint from the runs bucket's leader, never
// from a replica: one that fell behind may not have the run yet, or have
// it as it was, and what a channel does on it (announce a request, call
// an ask's callback URL back) would be skipped for good. A run without a
// checkpoint is [ErrRunGone].
func Run(ctx context.Context, js jetstream.JetStream, names wire.Names, flow, run string) (protocol.Checkpoint, error) {
	doc, rev, err := wire.LeaderKV(ctx, js.Conn(), names.RunsBucket(), flow+"."+run)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return protocol.Checkpoint{}, fmt.Errorf("%w: %s %s", ErrRunGone, flow, run)
	case err != nil:
		return protocol.Checkpoint{}, fmt.Errorf("reading the checkpoint of %s %s: %w", flow, run, err)
	}
	cp, err := protocol.DecodeCheckpoint(doc, rev)
	if err != nil {
		return protocol.Checkpoint{}, Permanent(fmt.Errorf("decoding the checkpoint of %s %s: %w", flow, run, err))
	}
	return cp, nil
}

// StillWaits reports whether run of flow still waits on request
// requestID, as its checkpoint says (written before any event of the
// transition is published): a channel announces an interrupt only then,
// so that a backlog (a channel paused or turned on again, a receiver
// down) never tells people that work settled meanwhile waits on them.
func StillWaits(ctx context.Context, js jetstream.JetStream, names wire.Names, flow, run, requestID string) (bool, error) {
	cp, err := Run(ctx, js, names, flow, run)
	switch {
	case errors.Is(err, ErrRunGone):
		return false, nil
	case err != nil:
		return false, err
	}
	return cp.Waiting() && cp.Interrupt != nil && cp.Interrupt.RequestID == requestID, nil
}
