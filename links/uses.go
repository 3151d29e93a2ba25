package links

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/wire"
)

// ErrUsed: the link settled its request already, or is settling it now.
var ErrUsed = errors.New("links: the link was used already")

// keepAfter is how long a use is kept past its link's expiry, so that a
// process whose clock runs late never finds an expired link unused.
const keepAfter = time.Minute

// markerTTL is how long the bucket keeps the marker of a use released or
// expired: the least JetStream allows.
const markerTTL = time.Second

// Use is the record of a link used: who used it, when.
type Use struct {
	// Person is who the link speaks for.
	Person string `json:"person"`
	// At is when the link was claimed.
	At time.Time `json:"at"`
	// KeyDigest is the SHA-256 (hex) of the idempotency key the link was
	// used with, if any: a retry with the same key is the same use.
	KeyDigest string `json:"keyDigest,omitempty"`
}

// MadeWith reports whether the use was made with idempotency key key (not
// "").
func (u Use) MadeWith(key string) bool { return key != "" && u.KeyDigest == keyDigest(key) }

// Claim is a link claimed for one use: Release gives it back.
type Claim struct {
	// ID is the link's id, the key of its use.
	ID string
	// Revision is the revision of the use in the bucket.
	Revision uint64
	// Retry is set when the link was used already with the same
	// idempotency key: the claim is that use, retried. Send the same
	// command again with the key (Interlock applies a key once) and do
	// not Release it.
	Retry bool
}

// Uses records the links used, in the bucket <prefix>_links
// (wire.Names.LinksBucket): one key per link id, written once with
// KV Create, so that of two requests racing with one link exactly one
// claims it, and kept (by a per-key TTL) until a minute after the link
// expires, when the link's signature refuses it anyway.
type Uses struct {
	kv jetstream.KeyValue
}

// OpenUses makes the bucket of uses (or brings it to this configuration)
// with replicas replicas, and returns its record. Every process calls it
// at start.
func OpenUses(ctx context.Context, js jetstream.JetStream, n wire.Names, replicas int) (*Uses, error) {
	if replicas < 1 {
		replicas = 1
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: n.LinksBucket(), Description: "Interlock signed links used (decision links, callback URLs)",
		History: 1, Storage: jetstream.FileStorage, Replicas: replicas, LimitMarkerTTL: markerTTL,
	})
	if err != nil {
		return nil, fmt.Errorf("links: making bucket %s: %w", n.LinksBucket(), err)
	}
	return &Uses{kv: kv}, nil
}

// Claim records c's link as used at now, with idempotency key key (""
// for none), unless it was used already: then it returns ErrUsed, or,
// when it was used with the same non-empty key, the claim of that use
// with Retry set. The use stays unless Release gives it back.
func (u *Uses) Claim(ctx context.Context, c Claims, key string, now time.Time) (Claim, error) {
	ttl := max(c.ExpiresAt().Sub(now)+keepAfter, time.Second)
	val, _ := json.Marshal(Use{Person: c.Person, At: now.UTC(), KeyDigest: keyDigest(key)})
	rev, err := u.kv.Create(ctx, c.ID, val, jetstream.KeyTTL(ttl.Round(time.Second)))
	switch {
	case errors.Is(err, jetstream.ErrKeyExists) && key != "":
		e, gerr := u.kv.Get(ctx, c.ID)
		if gerr != nil {
			return Claim{}, ErrUsed
		}
		var use Use
		if json.Unmarshal(e.Value(), &use) == nil && use.MadeWith(key) {
			return Claim{ID: c.ID, Revision: e.Revision(), Retry: true}, nil
		}
		return Claim{}, ErrUsed
	case errors.Is(err, jetstream.ErrKeyExists):
		return Claim{}, ErrUsed
	case err != nil:
		return Claim{}, fmt.Errorf("links: recording the use of link %s: %w", c.ID, err)
	}
	return Claim{ID: c.ID, Revision: rev}, nil
}

// keyDigest is the SHA-256 (hex) of an idempotency key, "" for none: the
// bucket of uses never holds a key itself.
func keyDigest(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Release gives back a claim whose decision was not applied, for a
// reason the person can put right (an answer that does not fit), so
// that the link works again. A use written since (by nobody: a claim
// is once) is left alone.
func (u *Uses) Release(ctx context.Context, cl Claim) error {
	err := u.kv.Purge(ctx, cl.ID, jetstream.LastRevision(cl.Revision), jetstream.PurgeTTL(markerTTL))
	if err != nil {
		return fmt.Errorf("links: releasing link %s: %w", cl.ID, err)
	}
	return nil
}

// Used returns the use of the link with id, if it was used.
func (u *Uses) Used(ctx context.Context, id string) (Use, bool, error) {
	e, err := u.kv.Get(ctx, id)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return Use{}, false, nil
	case err != nil:
		return Use{}, false, fmt.Errorf("links: reading the use of link %s: %w", id, err)
	}
	var use Use
	_ = json.Unmarshal(e.Value(), &use)
	return use, true, nil
}
