// Package kvwatch follows one key of a JetStream key-value bucket for a
// live configuration (the gate rules, the directory of people): it hands
// every value to the caller, in revision order, starting with the value
// the key holds now, until it is stopped or the connection closes.
package kvwatch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
)

// Watcher is the part of a key-value bucket a watch uses;
// jetstream.KeyValue implements it.
type Watcher interface {
	Watch(ctx context.Context, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error)
}

// Watch is one running watch of a key. [Start] starts it; [Watch.Stop]
// stops it.
type Watch struct {
	key     string
	watcher jetstream.KeyWatcher
	cancel  context.CancelFunc
	done    chan struct{}
	// stopping is set while the watch is stopped: values drained then are
	// not applied.
	stopping atomic.Bool
	once     sync.Once
}

// Start watches key in kv and calls apply with each of its values (puts,
// deletes and purges), one at a time, in revision order. It returns once
// the value the key holds now has been applied, so the caller's state
// reflects the bucket; ctx bounds that start and nothing after it. When
// the watch ends without Stop (the connection closed), ended is called,
// if set.
func Start(ctx context.Context, kv Watcher, key string, apply func(jetstream.KeyValueEntry), ended func()) (*Watch, error) {
	// The watch outlives ctx: the client library ends the subscription
	// when the context passed to Watch ends, so it gets its own, ended by
	// Stop.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	watcher, err := kv.Watch(wctx, key)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watching key %s: %w", key, err)
	}
	// The first values are the key's current value, if any, then nil.
	for started := false; !started; {
		select {
		case e, ok := <-watcher.Updates():
			switch {
			case !ok:
				cancel()
				return nil, fmt.Errorf("the watch of key %s ended before it started; check the NATS connection", key)
			case e == nil:
				started = true
			default:
				apply(e)
			}
		case <-ctx.Done():
			_ = watcher.Stop()
			cancel()
			return nil, fmt.Errorf("waiting for the current value of key %s: %w", key, context.Cause(ctx))
		}
	}
	w := &Watch{key: key, watcher: watcher, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for e := range watcher.Updates() {
			if e == nil || w.stopping.Load() {
				continue
			}
			apply(e)
		}
		if !w.stopping.Load() && ended != nil {
			ended()
		}
	}()
	return w, nil
}

// Stop stops the watch and waits for its goroutine, or for ctx. Stopping
// twice does nothing more.
func (w *Watch) Stop(ctx context.Context) error {
	w.once.Do(func() {
		w.stopping.Store(true)
		_ = w.watcher.Stop() // fails only when already stopped
		w.cancel()
	})
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopping the watch of key %s: %w", w.key, context.Cause(ctx))
	}
}
