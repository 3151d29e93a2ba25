package webpush

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	wp "github.com/SherClockHolmes/webpush-go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/wire"
)

// Keys of the configuration bucket (wire.Names.ConfigBucket) the channel
// keeps its state under. Clients read that bucket by key, and only the
// keys they are given (the audit keys, the gate rules): neither the VAPID
// private key nor a subscription's endpoint (a credential of its own: who
// has it can push to the device) is readable by a client.
const (
	// KeyVAPID holds the deployment's VAPID key pair, made at first
	// start.
	KeyVAPID = "webpush.vapid"
	// keySubscriptions starts a device's subscription:
	// webpush.sub.<person>.<device>, both as digests.
	keySubscriptions = "webpush.sub."
)

// MaxSubscriptions is how many devices one person may subscribe; the
// oldest give way to new ones.
const MaxSubscriptions = 10

// vapid is the deployment's VAPID key pair, base64url without padding.
type vapid struct {
	Public  string `json:"public"`
	Private string `json:"private"`
}

// Subscription is a device a person subscribed: the PushSubscription
// their browser made (its endpoint at the push service, and the keys the
// notices are encrypted to), as the browser's toJSON() gives it.
type Subscription struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		P256dh string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
	// Person is who subscribed it.
	Person string `json:"person"`
}

// Devices keeps the deployment's VAPID keys and the devices people
// subscribed, in the configuration bucket.
type Devices struct {
	kv jetstream.KeyValue
	// public and private are the VAPID keys.
	public, private string
}

// OpenDevices binds the configuration bucket and reads the VAPID keys,
// making them the first time (of two processes starting at once, one
// makes them and both use them).
func OpenDevices(ctx context.Context, js jetstream.JetStream, names wire.Names) (*Devices, error) {
	kv, err := js.KeyValue(ctx, names.ConfigBucket())
	if err != nil {
		return nil, fmt.Errorf("webpush: binding bucket %s: %w", names.ConfigBucket(), err)
	}
	d := &Devices{kv: kv}
	for range 2 {
		e, err := kv.Get(ctx, KeyVAPID)
		if err == nil {
			var v vapid
			if err := json.Unmarshal(e.Value(), &v); err != nil || v.Public == "" || v.Private == "" {
				return nil, fmt.Errorf("webpush: %s of %s is not a VAPID key pair; delete it (nats kv del %s %s) for a new one, and have every device subscribe again",
					KeyVAPID, names.ConfigBucket(), names.ConfigBucket(), KeyVAPID)
			}
			d.public, d.private = v.Public, v.Private
			return d, nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("webpush: reading %s of %s: %w", KeyVAPID, names.ConfigBucket(), err)
		}
		private, public, err := wp.GenerateVAPIDKeys()
		if err != nil {
			return nil, fmt.Errorf("webpush: making the VAPID keys: %w", err)
		}
		b, _ := json.Marshal(vapid{Public: public, Private: private})
		if _, err := kv.Create(ctx, KeyVAPID, b); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("webpush: writing %s to %s: %w", KeyVAPID, names.ConfigBucket(), err)
		}
	}
	return nil, fmt.Errorf("webpush: %s of %s was written and then not found", KeyVAPID, names.ConfigBucket())
}

// PublicKey is the VAPID public key (the applicationServerKey a browser
// subscribes with), base64url.
func (d *Devices) PublicKey() string { return d.public }

// digest is a key token of s.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:12])
}

// personKeys is the filter of person's subscriptions.
func personKeys(person string) string { return keySubscriptions + digest(person) + ".*" }

// ParseSubscription reads a PushSubscription's JSON and checks it: an
// https endpoint, a P-256 public key and a 16-byte auth secret.
func ParseSubscription(b []byte) (Subscription, error) {
	var s Subscription
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("the subscription is not a PushSubscription's JSON ({\"endpoint\", \"keys\": {\"p256dh\", \"auth\"}}): %w", err)
	}
	u, err := url.Parse(s.Endpoint)
	switch {
	case err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil:
		return s, errors.New("the subscription's endpoint must be the https:// address of a push service")
	case len(s.Endpoint) > 2048:
		return s, errors.New("the subscription's endpoint is longer than 2048 bytes")
	}
	if k, err := decodeKey(s.Keys.P256dh); err != nil || len(k) != 65 || k[0] != 4 {
		return s, errors.New("the subscription's keys.p256dh is not an uncompressed P-256 public key (65 bytes, base64url)")
	}
	if k, err := decodeKey(s.Keys.Auth); err != nil || len(k) != 16 {
		return s, errors.New("the subscription's keys.auth is not a 16-byte secret (base64url)")
	}
	return s, nil
}

// decodeKey reads base64url with or without padding.
func decodeKey(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// Subscribe keeps s as a device of person's, once however often it is
// subscribed; beyond MaxSubscriptions, the oldest device gives way.
func (d *Devices) Subscribe(ctx context.Context, person string, s Subscription) error {
	s.Person = person
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	keys, err := d.keys(ctx, person)
	if err != nil {
		return err
	}
	key := keySubscriptions + digest(person) + "." + digest(s.Endpoint)
	if _, err := d.kv.Put(ctx, key, b); err != nil {
		return fmt.Errorf("webpush: keeping a device of %s: %w", person, err)
	}
	for len(keys) >= MaxSubscriptions {
		if keys[0] != key {
			if err := d.kv.Purge(ctx, keys[0]); err != nil {
				return fmt.Errorf("webpush: letting go of the oldest device of %s: %w", person, err)
			}
		}
		keys = keys[1:]
	}
	return nil
}

// Unsubscribe forgets person's device of endpoint.
func (d *Devices) Unsubscribe(ctx context.Context, person, endpoint string) error {
	return d.forget(ctx, keySubscriptions+digest(person)+"."+digest(endpoint))
}

// forget removes the subscription of key.
func (d *Devices) forget(ctx context.Context, key string) error {
	if err := d.kv.Purge(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("webpush: forgetting a device: %w", err)
	}
	return nil
}

// keys are the keys of person's subscriptions, oldest first.
func (d *Devices) keys(ctx context.Context, person string) ([]string, error) {
	lister, err := d.kv.ListKeysFiltered(ctx, personKeys(person))
	if err != nil {
		return nil, fmt.Errorf("webpush: listing the devices of %s: %w", person, err)
	}
	var out []string
	for k := range lister.Keys() {
		out = append(out, k)
	}
	return out, nil
}

// Of returns the keys of person's devices: the addresses the channel
// reaches them at.
func (d *Devices) Of(ctx context.Context, person string) ([]string, error) {
	return d.keys(ctx, person)
}

// get returns the subscription of key, and false when it is gone.
func (d *Devices) get(ctx context.Context, key string) (Subscription, bool, error) {
	var s Subscription
	if !strings.HasPrefix(key, keySubscriptions) {
		return s, false, nil
	}
	e, err := d.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return s, false, nil
	case err != nil:
		return s, false, fmt.Errorf("webpush: reading a device: %w", err)
	}
	if err := json.Unmarshal(e.Value(), &s); err != nil {
		return s, false, fmt.Errorf("webpush: a device's subscription does not decode: %w", err)
	}
	return s, true, nil
}
