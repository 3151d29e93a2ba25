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
func DeliveriesBucket(names wire.Names) string { return names.Prefix + "_webhook_deliveries" }

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
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      DeliveriesBucket(names),
		Description: "Interlock's outbound webhooks: each event's delivery to each subscription, its attempts and last error",
		History:     1,
		TTL:         cmp.Or(keep, DefaultKeepDeliveries),
		Replicas:    max(replicas, 1),
		Storage:     jetstream.FileStorage,
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

// Deliveries lists the delivery records of the deployment, newest attempt
// first, at most q.Limit of them; more reports whether others matched.
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
	kv, err := js.KeyValue(ctx, DeliveriesBucket(names))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, false, nil // no webhook was ever delivered
	}
	if err != nil {
		return nil, false, fmt.Errorf("webhooks: binding bucket %s: %w", DeliveriesBucket(names), err)
	}
	filter := ">"
	if q.Subscription != "" {
		filter = q.Subscription + ".>"
	}
	w, err := kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, false, fmt.Errorf("webhooks: reading bucket %s: %w", DeliveriesBucket(names), err)
	}
	defer func() { _ = w.Stop() }()
	newest := func(a, b Delivery) int { return b.Last.Compare(a.Last) }
	matched := 0
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, false, fmt.Errorf("webhooks: reading bucket %s: the watch ended", DeliveriesBucket(names))
			}
			if e == nil {
				slices.SortFunc(list, newest)
				return list[:min(limit, len(list))], matched > limit, nil
			}
			var d Delivery
			if json.Unmarshal(e.Value(), &d) != nil || q.Status != "" && d.Status != q.Status {
				continue
			}
			matched++
			// Only the newest limit are kept: memory stays O(limit)
			// however many records the bucket holds.
			if list = append(list, d); len(list) >= 2*limit {
				slices.SortFunc(list, newest)
				list = list[:limit]
			}
		case <-ctx.Done():
			return nil, false, fmt.Errorf("webhooks: reading bucket %s: %w", DeliveriesBucket(names), ctx.Err())
		}
	}
}
