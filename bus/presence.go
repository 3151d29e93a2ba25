package bus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// PresenceTTL is how long a worker's entry in the workers bucket lives
// after its last write; PresenceEvery is how often a running worker
// writes it.
const (
	PresenceTTL   = 30 * time.Second
	PresenceEvery = 10 * time.Second
)

// Presence keeps a worker process's entry in the workers bucket
// (wire.Names.WorkersBucket) while it runs: written at Start, again every
// PresenceEvery, and deleted at Stop. The bucket's TTL removes the entry
// of a process that died.
type Presence struct {
	kv    jetstream.KeyValue
	key   string
	entry protocol.Worker
	every time.Duration
	log   zerolog.Logger

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewPresence returns the presence of a process named instance that runs
// flows (their names and versions), writing every every (PresenceEvery
// when 0). The bucket must exist (Provision makes it).
func NewPresence(ctx context.Context, js jetstream.JetStream, n wire.Names, instance string, flows map[string]string, every time.Duration, log zerolog.Logger) (*Presence, error) {
	kv, err := js.KeyValue(ctx, n.WorkersBucket())
	if err != nil {
		return nil, fmt.Errorf("bus: binding bucket %s: %w", n.WorkersBucket(), err)
	}
	if every <= 0 {
		every = PresenceEvery
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &Presence{kv: kv, key: presenceKey(instance) + "-" + hex.EncodeToString(b), every: every, log: log,
		entry: protocol.Worker{Instance: instance, Flows: flows, Since: time.Now().UTC()}}, nil
}

// presenceKey is instance as a key token: what a key may not hold is
// written as _.
func presenceKey(instance string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, instance)
}

// Start writes the entry and keeps it written until Stop. The first
// write is retried as provisioning retries ([Ensure]) while a cluster
// forms: a node restarted while its peers still elect the bucket's leader
// has its write answered by nobody.
func (p *Presence) Start(ctx context.Context) error {
	if err := Ensure(ctx, "the worker's entry in "+p.kv.Bucket(), p.write); err != nil {
		return err
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		tick := time.NewTicker(p.every)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
				wctx, cancel := context.WithTimeout(context.Background(), p.every)
				if err := p.write(wctx); err != nil {
					p.log.Warn().Err(err).Msg("bus: writing the worker's entry in the workers bucket; interlock flows may not list it")
				}
				cancel()
			}
		}
	}()
	return nil
}

func (p *Presence) write(ctx context.Context) error {
	e := p.entry
	e.At = time.Now().UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := p.kv.Put(ctx, p.key, b); err != nil {
		return fmt.Errorf("bus: writing %s to %s: %w", p.key, p.kv.Bucket(), err)
	}
	return nil
}

// Stop stops writing the entry and deletes it. Stopping twice is safe.
func (p *Presence) Stop(ctx context.Context) error {
	var err error
	p.once.Do(func() {
		if p.stop == nil {
			return
		}
		close(p.stop)
		<-p.done
		if e := p.kv.Purge(ctx, p.key); e != nil && !errors.Is(e, jetstream.ErrKeyNotFound) {
			err = fmt.Errorf("bus: deleting %s from %s: %w", p.key, p.kv.Bucket(), e)
		}
	})
	return err
}

// Migrates records, before Start, the earlier versions whose runs the
// process carries on by its flows' migrations, by flow.
func (p *Presence) Migrates(versions map[string][]string) { p.entry.Migrates = versions }

// Entry is the entry the presence writes.
func (p *Presence) Entry() protocol.Worker { return p.entry }

// Versions follows the workers bucket: which version of each flow the
// running workers have, and which is the newest, the version of the
// worker process that started last (a deploy's, or a rollback's). Stop
// ends it.
type Versions struct {
	w    jetstream.KeyWatcher
	self protocol.Worker
	done chan struct{}

	mu      sync.Mutex
	entries map[string]protocol.Worker
}

// WatchVersions follows the workers bucket of n; self is the entry of
// the calling process, counted before it is written. It returns once the
// entries there now are read.
func WatchVersions(ctx context.Context, js jetstream.JetStream, n wire.Names, self protocol.Worker) (*Versions, error) {
	kv, err := js.KeyValue(ctx, n.WorkersBucket())
	if err != nil {
		return nil, fmt.Errorf("bus: binding bucket %s: %w", n.WorkersBucket(), err)
	}
	w, err := kv.WatchAll(context.WithoutCancel(ctx))
	if err != nil {
		return nil, fmt.Errorf("bus: watching %s: %w", n.WorkersBucket(), err)
	}
	v := &Versions{w: w, self: self, done: make(chan struct{}), entries: map[string]protocol.Worker{}}
	ready := make(chan struct{})
	go v.follow(ready)
	select {
	case <-ready:
		return v, nil
	case <-ctx.Done():
		_ = w.Stop()
		<-v.done
		return nil, fmt.Errorf("bus: reading %s: %w", n.WorkersBucket(), ctx.Err())
	}
}

func (v *Versions) follow(ready chan struct{}) {
	defer close(v.done)
	once := sync.OnceFunc(func() { close(ready) })
	defer once()
	for e := range v.w.Updates() {
		if e == nil {
			once()
			continue
		}
		var w protocol.Worker
		ok := e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &w) == nil
		v.mu.Lock()
		if ok {
			v.entries[e.Key()] = w
		} else {
			delete(v.entries, e.Key())
		}
		v.mu.Unlock()
	}
}

// Newest is the version of flow of the running worker process that
// started last (this one included), and whether any runs it.
func (v *Versions) Newest(flow string) (string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	best, found := protocol.Worker{}, false
	consider := func(w protocol.Worker) {
		if _, ok := w.Flows[flow]; !ok {
			return
		}
		if !found || w.Since.After(best.Since) || w.Since.Equal(best.Since) && w.Flows[flow] > best.Flows[flow] {
			best, found = w, true
		}
	}
	consider(v.self)
	for _, w := range v.entries {
		consider(w)
	}
	return best.Flows[flow], found
}

// Start does nothing: WatchVersions started it.
func (v *Versions) Start(context.Context) error { return nil }

// Stop stops following the bucket.
func (v *Versions) Stop(ctx context.Context) error {
	_ = v.w.Stop()
	select {
	case <-v.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
