// Package kv keeps Interlock's checkpoints and pending index in JetStream
// key-value buckets. [Store] implements [engine.Store]: one JSON document per
// run under key <flow>.<run>, written with Create for the first write and
// Update with the revision read for every later one, so a conflict is a
// typed error and never an overwrite. The KV revision is the run's
// checkpoint number.
package kv

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/engine"
)

// Bucket is the part of a JetStream key-value bucket the store uses.
type Bucket interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
	Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error)
	Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error)
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error
	ListKeys(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyLister, error)
}

// Store keeps checkpoints in the runs bucket and the pending index in the
// pending bucket.
type Store struct {
	runs    Bucket
	pending Bucket
	// limit is the largest message the server takes (max_payload), 0 if unknown.
	limit int
}

// Option configures a [Store].
type Option func(*Store)

// MaxPayload tells the store the largest message the NATS server takes
// (the connection's MaxPayload), so that a checkpoint too large to write is
// a [*engine.TooLargeError] that names the limit.
func MaxPayload(n int64) Option { return func(s *Store) { s.limit = int(n) } }

var _ engine.Store = (*Store)(nil)

// New returns a store over the two buckets.
func New(runs, pending Bucket, opts ...Option) *Store {
	s := &Store{runs: runs, pending: pending}
	for _, o := range opts {
		o(s)
	}
	return s
}

// tooLarge turns the client's refusal to send an oversized message into
// the engine's typed error.
func (s *Store) tooLarge(cp *engine.Checkpoint, size int, err error) error {
	if !errors.Is(err, nats.ErrMaxPayload) && (s.limit == 0 || size <= s.limit) {
		return nil
	}
	return &engine.TooLargeError{Flow: cp.Flow, Run: cp.Run, Size: size, Limit: cmp.Or(s.limit, size-1)}
}

// Key returns the key of a run: <flow>.<run>.
func Key(flow, run string) string { return flow + "." + run }

// Load implements [engine.Store]. The revision returned is the checkpoint number.
func (s *Store) Load(ctx context.Context, flow, run string) (*engine.Checkpoint, uint64, error) {
	e, err := s.runs.Get(ctx, Key(flow, run))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, engine.ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("kv: reading checkpoint %s: %w", Key(flow, run), err)
	}
	var cp engine.Checkpoint
	if err := json.Unmarshal(e.Value(), &cp); err != nil {
		return nil, 0, fmt.Errorf("kv: checkpoint %s at revision %d is not a checkpoint document: %w", Key(flow, run), e.Revision(), err)
	}
	return &cp, e.Revision(), nil
}

// Create implements [engine.Store].
func (s *Store) Create(ctx context.Context, cp *engine.Checkpoint) (uint64, error) {
	b, err := json.Marshal(cp)
	if err != nil {
		return 0, fmt.Errorf("kv: encoding checkpoint %s: %w", Key(cp.Flow, cp.Run), err)
	}
	if err := s.tooLarge(cp, len(b), nil); err != nil {
		return 0, err
	}
	rev, err := s.runs.Create(ctx, Key(cp.Flow, cp.Run), b)
	if big := s.tooLarge(cp, len(b), err); big != nil {
		return 0, big
	}
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, engine.ErrExists
	}
	if err != nil {
		return 0, fmt.Errorf("kv: creating checkpoint %s: %w", Key(cp.Flow, cp.Run), err)
	}
	return rev, nil
}

// Update implements [engine.Store].
func (s *Store) Update(ctx context.Context, cp *engine.Checkpoint, rev uint64) (uint64, error) {
	b, err := json.Marshal(cp)
	if err != nil {
		return 0, fmt.Errorf("kv: encoding checkpoint %s: %w", Key(cp.Flow, cp.Run), err)
	}
	if err := s.tooLarge(cp, len(b), nil); err != nil {
		return 0, err
	}
	next, err := s.runs.Update(ctx, Key(cp.Flow, cp.Run), b, rev)
	if big := s.tooLarge(cp, len(b), err); big != nil {
		return 0, big
	}
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		return 0, &engine.ConflictError{Flow: cp.Flow, Run: cp.Run, Expected: rev}
	}
	if err != nil {
		return 0, fmt.Errorf("kv: updating checkpoint %s from revision %d: %w", Key(cp.Flow, cp.Run), rev, err)
	}
	return next, nil
}

// PutPending implements [engine.Store].
func (s *Store) PutPending(ctx context.Context, p *engine.Pending) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("kv: encoding pending entry %s: %w", Key(p.Flow, p.Run), err)
	}
	if _, err := s.pending.Put(ctx, Key(p.Flow, p.Run), b); err != nil {
		return fmt.Errorf("kv: writing pending entry %s: %w", Key(p.Flow, p.Run), err)
	}
	return nil
}

// DeletePending implements [engine.Store].
func (s *Store) DeletePending(ctx context.Context, flow, run string) error {
	if err := s.pending.Delete(ctx, Key(flow, run)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("kv: deleting pending entry %s: %w", Key(flow, run), err)
	}
	return nil
}

// ListPending returns the runs waiting on an interrupt, from the pending
// index alone (finished runs are never scanned), sorted by key. A non-empty
// flow keeps only that flow's runs.
func (s *Store) ListPending(ctx context.Context, flow string) ([]engine.Pending, error) {
	var opts []jetstream.WatchOpt
	lister, err := s.pending.ListKeys(ctx, opts...)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kv: listing pending runs: %w", err)
	}
	defer func() { _ = lister.Stop() }()
	var keys []string
	for k := range lister.Keys() {
		if flow == "" || strings.HasPrefix(k, flow+".") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]engine.Pending, 0, len(keys))
	for _, k := range keys {
		e, err := s.pending.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // resumed while listing
		}
		if err != nil {
			return nil, fmt.Errorf("kv: reading pending entry %s: %w", k, err)
		}
		var p engine.Pending
		if err := json.Unmarshal(e.Value(), &p); err != nil {
			return nil, fmt.Errorf("kv: pending entry %s is not a pending document: %w", k, err)
		}
		out = append(out, p)
	}
	return out, nil
}
