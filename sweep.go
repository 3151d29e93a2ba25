package interlock

import (
	"context"
	"sync"

	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/kv"
)

// pendingSweep removes, once, in the background of a starting service,
// the pending index's entries of runs that no longer wait
// ([kv.Store.SweepPending]): entries nats-server brought back after a
// crash (its issue #8505), which inboxes would otherwise list as waiting
// for good. It reads O(pending) and does not hold up the start.
type pendingSweep struct {
	store *kv.Store
	log   zerolog.Logger

	cancel context.CancelFunc
	done   sync.WaitGroup
}

// Start begins the sweep and returns.
func (p *pendingSweep) Start(context.Context) error {
	// The sweep outlives Start's context, which bounds only the start;
	// Stop ends it.
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.done.Go(func() {
		n, err := p.store.SweepPending(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
		case err != nil:
			p.log.Warn().Err(err).Int("removed", n).Msg("interlock: sweeping the pending index of runs that no longer wait stopped; the next start sweeps again")
		case n > 0:
			p.log.Info().Int("removed", n).Msg("interlock: removed from the pending index the entries of runs that no longer wait (nats-server issue #8505 brings purged entries back after a crash)")
		}
	})
	return nil
}

// Stop ends the sweep and waits for it.
func (p *pendingSweep) Stop(context.Context) error {
	if p.cancel != nil {
		p.cancel()
	}
	p.done.Wait()
	return nil
}
