package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/wire"
)

// DefaultKeepSent is how long a record of a delivery is kept: longer than
// any event is tried (DefaultRetryFor).
const DefaultKeepSent = 7 * 24 * time.Hour

// SentBucket is the bucket of deliveries made, for names' prefix.
func SentBucket(names wire.Names) string { return names.SentBucket() }

// Sent records which deliveries were made, so that an event delivered
// again (a restart, another recipient that failed) reaches each recipient
// once. Records expire after the bucket's TTL.
type Sent struct {
	kv jetstream.KeyValue
}

// OpenSent binds the bucket of deliveries made, making it if need be.
// keep (DefaultKeepSent when 0) is how long records are kept; replicas
// how many copies the bucket has (see [Replicas] for 0).
func OpenSent(ctx context.Context, js jetstream.JetStream, names wire.Names, keep time.Duration, replicas int) (*Sent, error) {
	if keep == 0 {
		keep = DefaultKeepSent
	}
	cfg := jetstream.KeyValueConfig{
		Bucket:      SentBucket(names),
		Description: "Interlock's channels: the deliveries made (mail, webhooks, Teams), so that none is made twice",
		History:     1,
		TTL:         keep,
		Replicas:    Replicas(ctx, js, names, replicas),
		Storage:     jetstream.FileStorage,
	}
	var kv jetstream.KeyValue
	err := bus.Ensure(ctx, "bucket "+SentBucket(names), func(ctx context.Context) (err error) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("notify: binding bucket %s: %w", SentBucket(names), err)
	}
	return &Sent{kv: kv}, nil
}

// Replicas is how many copies a channel's bucket has: n when it is not
// 0, else as many as the deployment's events stream has (the replicas
// `serve --replicas auto` picked for every stream and bucket of the
// cluster), or 1 when that stream cannot be read. Every channel opening a
// shared bucket with 0 so asks for the same count, and none scales down
// what another made.
func Replicas(ctx context.Context, js jetstream.JetStream, names wire.Names, n int) int {
	if n > 0 {
		return n
	}
	if st, err := js.Stream(ctx, names.EventStream()); err == nil {
		return max(st.CachedInfo().Config.Replicas, 1)
	}
	return 1
}

// Key is the record's key of a delivery to one recipient on one channel:
// the channel's name and a digest of the parts (an event id and a
// recipient, say), so that any recipient makes a valid key.
func Key(channel string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return channel + "." + hex.EncodeToString(h.Sum(nil)[:16])
}

// Done reports whether the delivery of key was made.
func (s *Sent) Done(ctx context.Context, key string) (bool, error) {
	_, err := s.kv.Get(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("notify: reading delivery record %s: %w", key, err)
	}
}

// Mark records that the delivery of key was made, with a note (a
// message id, a receiver's status) kept for operators.
func (s *Sent) Mark(ctx context.Context, key, note string) error {
	if _, err := s.kv.Put(ctx, key, []byte(note)); err != nil {
		return fmt.Errorf("notify: recording delivery %s: %w", key, err)
	}
	return nil
}

// Note returns the note of the delivery record of key, and whether there
// is one: a channel that records a recipient refused for good (with
// Mark) reads why when the event comes again.
func (s *Sent) Note(ctx context.Context, key string) (string, bool, error) {
	e, err := s.kv.Get(ctx, key)
	switch {
	case err == nil:
		return string(e.Value()), true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return "", false, nil
	default:
		return "", false, fmt.Errorf("notify: reading delivery record %s: %w", key, err)
	}
}

// Keys returns the keys of the records that match filter (a key with *
// for one token, > for the rest), as the bucket lists them.
func (s *Sent) Keys(ctx context.Context, filter string) ([]string, error) {
	lister, err := s.kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("notify: listing delivery records %s: %w", filter, err)
	}
	var out []string
	for k := range lister.Keys() {
		out = append(out, k)
	}
	return out, nil
}

// Forget removes the record of key.
func (s *Sent) Forget(ctx context.Context, key string) error {
	if err := s.kv.Purge(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("notify: removing delivery record %s: %w", key, err)
	}
	return nil
}
