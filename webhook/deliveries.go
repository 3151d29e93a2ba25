package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/wire"
)

// DefaultKeepDeliveries is how long a delivery's record is kept: longer
// than the longest retryFor a subscription may have.
const DefaultKeepDeliveries = 31 * 24 * time.Hour

// The statuses of a delivery.
const (
	// StatusDelivered: the receiver answered 2xx.
	StatusDelivered = "delivered"
	// StatusRetrying: the last attempt failed; another will be made.
	StatusRetrying = "retrying"
	// StatusDead: the event was dead-lettered: the receiver answered 410
	// Gone, or retryFor ran out.
	StatusDead = "dead"
)

// Statuses lists the statuses of a delivery.
func Statuses() []string { return []string{StatusDelivered, StatusRetrying, StatusDead} }

// DeliveriesBucket is the bucket of delivery records for names' prefix.
func DeliveriesBucket(names wire.Names) string { return names.WebhookDeliveriesBucket() }

// Delivery is the record of one event's delivery to one subscription,
// kept in [DeliveriesBucket] under <subscription>.<webhook-id>.
type Delivery struct {
	Subscription string `json:"subscription"`
	// WebhookID is the webhook-id header of every attempt.
	WebhookID string `json:"webhookId"`
	// EventID, Type, Flow and Run say which event.
	EventID string `json:"eventId"`
	Type    string `json:"type"`
	Flow    string `json:"flow,omitempty"`
	Run     string `json:"run,omitempty"`
	// Status is delivered, retrying or dead.
	Status string `json:"status"`
	// Attempts counts the attempts made.
	Attempts int `json:"attempts"`
	// HTTPStatus is the last answer's status code, 0 when none came.
	HTTPStatus int `json:"httpStatus,omitempty"`
	// Error says why the last attempt failed.
	Error string `json:"error,omitempty"`
	// URL is where it went, without user information or query.
	URL string `json:"url"`
	// First and Last are when the first and last attempts were made.
	First time.Time `json:"firstAttempt"`
	Last  time.Time `json:"lastAttempt"`
}

// records keeps delivery records.
type records struct {
	kv jetstream.KeyValue
}

// openRecords binds the bucket of delivery records, making it if need be.
func openRecords(ctx context.Context, js jetstream.JetStream, names wire.Names, keep time.Duration, replicas int) (*records, error) {
	cfg := jetstream.KeyValueConfig{
		Bucket:      DeliveriesBucket(names),
		Description: "Interlock's outbound webhooks: each event's delivery to each subscription, its attempts and last error",
		History:     1,
		TTL:         cmp.Or(keep, DefaultKeepDeliveries),
		Replicas:    notify.Replicas(ctx, js, names, replicas),
		Storage:     jetstream.FileStorage,
	}
	var kv jetstream.KeyValue
	err := bus.Ensure(ctx, "bucket "+DeliveriesBucket(names), func(ctx context.Context) (err error) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("webhooks: binding bucket %s: %w", DeliveriesBucket(names), err)
	}
	return &records{kv: kv}, nil
}

func recordKey(subscription, webhookID string) string { return subscription + "." + webhookID }

// get returns the record of a delivery, or a zero one.
func (r *records) get(ctx context.Context, key string) (Delivery, error) {
	e, err := r.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Delivery{}, nil
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("webhooks: reading delivery record %s: %w", key, err)
	}
	var d Delivery
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return Delivery{}, nil // a record that does not decode is written anew
	}
	return d, nil
}

func (r *records) put(ctx context.Context, d Delivery) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	key := recordKey(d.Subscription, d.WebhookID)
	if _, err := r.kv.Put(ctx, key, b); err != nil {
		return fmt.Errorf("webhooks: writing delivery record %s: %w", key, err)
	}
	return nil
}

// Query selects delivery records.
type Query struct {
	// Subscription, if set, selects one subscription's deliveries.
	Subscription string
	// Status, if set, selects deliveries of that status.
	Status string
	// Limit is the most records returned. Defaults to DefaultLimit; at
	// most MaxLimit.
	Limit int
}

// Limits of a [Query].
const (
	DefaultLimit = 50
	MaxLimit     = 1000
)

// maxScan bounds how many stream sequences one listing reads past the
// records it returns: superseded records leave gaps.
func maxScan(limit int) uint64 { return uint64(20*limit + 200) }

// Deliveries lists the delivery records of the deployment, newest attempt
// first, at most q.Limit of them; more reports whether older ones may
// match. It reads the bucket's stream backwards with message gets (which
// Interlock's clients may make; they may not create consumers), so its
// cost grows with the page, not with the bucket.
func Deliveries(ctx context.Context, js jetstream.JetStream, names wire.Names, q Query) (list []Delivery, more bool, err error) {
	if q.Subscription != "" && !nameRE.MatchString(q.Subscription) {
		return nil, false, fmt.Errorf("webhooks: subscription %q: a subscription's name is 1 to 64 letters, digits, _ and -", q.Subscription)
	}
	if q.Status != "" && !slices.Contains(Statuses(), q.Status) {
		return nil, false, fmt.Errorf("webhooks: status %q: use %s", q.Status, strings.Join(Statuses(), ", "))
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	bucket := DeliveriesBucket(names)
	stream, err := js.Stream(ctx, "KV_"+bucket)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, false, nil // no webhook service ever ran
	}
	if err != nil {
		return nil, false, fmt.Errorf("webhooks: reading bucket %s: %w", bucket, err)
	}
	state := stream.CachedInfo().State
	prefix := "$KV." + bucket + "."
	if q.Subscription != "" {
		prefix += q.Subscription + "."
	}
	var scanned uint64
	for seq := state.LastSeq; seq >= state.FirstSeq && seq > 0; seq-- {
		if len(list) == limit {
			return list, true, nil
		}
		if scanned == maxScan(limit) {
			return list, true, nil
		}
		scanned++
		m, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // superseded by a later attempt, or expired
		}
		if err != nil {
			return nil, false, fmt.Errorf("webhooks: reading bucket %s: %w", bucket, err)
		}
		if !strings.HasPrefix(m.Subject, prefix) || len(m.Data) == 0 {
			continue
		}
		var d Delivery
		if json.Unmarshal(m.Data, &d) != nil || q.Status != "" && d.Status != q.Status {
			continue
		}
		list = append(list, d)
	}
	return list, false, nil
}
