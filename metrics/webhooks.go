package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// maxSubscriptions bounds the values of the subscription label.
const maxSubscriptions = 256

// webhookBuckets are the bounds of a webhook attempt's duration, in
// seconds: from a fast receiver to one that times out.
var webhookBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// webhooks counts the attempts to deliver outbound webhooks.
type webhooks struct {
	deliveries *prometheus.CounterVec
	attempts   *prometheus.HistogramVec

	mu   sync.Mutex
	subs map[string]bool // the subscriptions labelled so far
}

func newWebhooks() *webhooks {
	return &webhooks{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlock_webhook_deliveries_total",
			Help: "Attempts to deliver an event to a webhook subscription, by subscription and the status the attempt left the delivery in (delivered, retrying, dead).",
		}, []string{"subscription", "status"}),
		attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "interlock_webhook_attempt_seconds",
			Help:    "Time one attempt to deliver a webhook took, from the request to the receiver's answer or the timeout, by subscription.",
			Buckets: webhookBuckets,
		}, []string{"subscription"}),
		subs: map[string]bool{},
	}
}

// ObserveWebhook counts one attempt to deliver a webhook to subscription:
// the status it left the delivery in (delivered, retrying or dead) and
// how long it took. The serve command hands it to the webhook service as
// its Observe. Past 256 subscriptions, new ones are counted as "other".
func (s *Service) ObserveWebhook(subscription, status string, took time.Duration) {
	w := s.webhooks
	w.mu.Lock()
	if !w.subs[subscription] {
		if len(w.subs) >= maxSubscriptions {
			subscription = "other"
		} else {
			w.subs[subscription] = true
		}
	}
	w.mu.Unlock()
	w.deliveries.WithLabelValues(subscription, status).Inc()
	w.attempts.WithLabelValues(subscription).Observe(took.Seconds())
}

// Describe implements [prometheus.Collector].
func (w *webhooks) Describe(ch chan<- *prometheus.Desc) {
	w.deliveries.Describe(ch)
	w.attempts.Describe(ch)
}

// Collect implements [prometheus.Collector].
func (w *webhooks) Collect(ch chan<- prometheus.Metric) {
	w.deliveries.Collect(ch)
	w.attempts.Collect(ch)
}
