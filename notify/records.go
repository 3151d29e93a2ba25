package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Records keeps a channel's record of each run (where it posted the run's
// interrupt, to follow it up) in a bucket, as JSON, each write a
// compare-and-set on the revision read, so that two events of one run
// handled at once cannot lose one another's change.
type Records[T any] struct {
	kv   jetstream.KeyValue
	what string
}

// NewRecords returns the records of kv; what names the bucket in errors
// ("the Teams bucket").
func NewRecords[T any](kv jetstream.KeyValue, what string) *Records[T] {
	return &Records[T]{kv: kv, what: what}
}

// RecordKey is the key of a run's record.
func RecordKey(flow, run string) string { return flow + "." + run }

// Get returns the record of key and its revision, 0 when there is none.
func (s *Records[T]) Get(ctx context.Context, key string) (T, uint64, error) {
	var r T
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return r, 0, nil
	}
	if err != nil {
		return r, 0, fmt.Errorf("reading %s from %s: %w", key, s.what, err)
	}
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return r, 0, fmt.Errorf("decoding %s of %s: %w", key, s.what, err)
	}
	return r, e.Revision(), nil
}

// Put writes the record of key: created when rev is 0, else updated from
// rev; another write since rev is an error (read and try again).
func (s *Records[T]) Put(ctx context.Context, key string, r T, rev uint64) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if rev == 0 {
		_, err = s.kv.Create(ctx, key, b)
	} else {
		_, err = s.kv.Update(ctx, key, b, rev)
	}
	if err != nil {
		return fmt.Errorf("writing %s to %s: %w", key, s.what, err)
	}
	return nil
}
