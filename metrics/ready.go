package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	readyDesc = prometheus.NewDesc("interlock_ready",
		"1 when this worker is ready (as /readyz says): connected to NATS, the streams and buckets there, the workers' consumer bound; 0 otherwise.",
		nil, nil)
	lagDesc = prometheus.NewDesc("interlock_consumer_lag_messages",
		"Inbound commands the workers' consumer has not finished: not yet delivered (num_pending) plus delivered and not yet acknowledged (num_ack_pending).",
		nil, nil)
	ackPendingDesc = prometheus.NewDesc("interlock_consumer_ack_pending_messages",
		"Inbound commands delivered to a worker and not yet acknowledged.",
		nil, nil)
	redeliveredDesc = prometheus.NewDesc("interlock_consumer_redelivered_messages",
		"Inbound commands delivered more than once and not yet acknowledged.",
		nil, nil)
	inboundDesc = prometheus.NewDesc("interlock_inbound_stream_messages",
		"Messages in the inbound stream: commands not yet acknowledged.",
		nil, nil)
	scheduleDesc = prometheus.NewDesc("interlock_schedule_stream_messages",
		"Messages in the schedule stream: interrupt deadlines waiting to fire, and fired ones not yet acknowledged.",
		nil, nil)
)

// readiness is what a readiness check found; its JSON is /readyz's body.
type readiness struct {
	Ready bool `json:"ready"`
	// Missing says what is missing, one item each.
	Missing []string `json:"missing,omitempty"`

	consumer  *jetstream.ConsumerInfo
	inbound   *jetstream.StreamInfo
	schedules *jetstream.StreamInfo
}

// check asks JetStream whether the deployment is there for this worker:
// the connection up, the streams and buckets present, and the workers'
// durable consumer on the inbound stream.
func (s *Service) check(ctx context.Context) readiness {
	js, n := s.deployment()
	var r readiness
	if js == nil {
		r.Missing = []string{"nats: not started"}
		return r
	}
	if st := js.Conn().Status(); st != nats.CONNECTED {
		r.Missing = []string{"nats: connection " + st.String()}
		return r
	}
	missing := func(what string, err error, notFound error) {
		if errors.Is(err, notFound) {
			r.Missing = append(r.Missing, what+": not found")
			return
		}
		r.Missing = append(r.Missing, fmt.Sprintf("%s: %v", what, err))
	}
	for _, name := range []string{n.InStream(), n.ScheduleStream(), n.EventStream(), n.AuditStream(), n.DeadLetterStream()} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			missing("stream "+name, err, jetstream.ErrStreamNotFound)
			continue
		}
		if name == n.ScheduleStream() {
			r.schedules = st.CachedInfo()
			if _, err := st.Consumer(ctx, n.DueConsumer()); err != nil {
				missing("consumer "+n.DueConsumer()+" of "+name, err, jetstream.ErrConsumerNotFound)
			}
			continue
		}
		if name != n.InStream() {
			continue
		}
		r.inbound = st.CachedInfo()
		cons, err := st.Consumer(ctx, n.Consumer())
		if err != nil {
			missing("consumer "+n.Consumer()+" of "+name, err, jetstream.ErrConsumerNotFound)
			continue
		}
		r.consumer = cons.CachedInfo()
	}
	for _, bucket := range []string{n.RunsBucket(), n.PendingBucket(), n.ConfigBucket()} {
		if _, err := js.KeyValue(ctx, bucket); err != nil {
			missing("bucket "+bucket, err, jetstream.ErrBucketNotFound)
		}
	}
	r.Ready = len(r.Missing) == 0
	return r
}

// readyz answers 200 when the check finds everything, 503 otherwise, with
// the check's findings as JSON.
func (s *Service) readyz(w http.ResponseWriter, req *http.Request) {
	ctx, cancel := context.WithTimeout(req.Context(), s.cfg.Timeout)
	defer cancel()
	r := s.check(ctx)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !r.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(r)
}

// natsCollector asks JetStream, when scraped, for readiness and the
// consumer's backlog.
type natsCollector struct{ s *Service }

// Describe implements [prometheus.Collector].
func (c *natsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- readyDesc
	ch <- lagDesc
	ch <- ackPendingDesc
	ch <- redeliveredDesc
	ch <- inboundDesc
	ch <- scheduleDesc
}

// Collect implements [prometheus.Collector]. The backlog's gauges are left
// out when JetStream does not answer in time.
func (c *natsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.s.cfg.Timeout)
	defer cancel()
	r := c.s.check(ctx)
	ready := 0.0
	if r.Ready {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, ready)
	if ci := r.consumer; ci != nil {
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(ci.NumPending)+float64(ci.NumAckPending))
		ch <- prometheus.MustNewConstMetric(ackPendingDesc, prometheus.GaugeValue, float64(ci.NumAckPending))
		ch <- prometheus.MustNewConstMetric(redeliveredDesc, prometheus.GaugeValue, float64(ci.NumRedelivered))
	}
	if si := r.inbound; si != nil {
		ch <- prometheus.MustNewConstMetric(inboundDesc, prometheus.GaugeValue, float64(si.State.Msgs))
	}
	if si := r.schedules; si != nil {
		ch <- prometheus.MustNewConstMetric(scheduleDesc, prometheus.GaugeValue, float64(si.State.Msgs))
	}
}
