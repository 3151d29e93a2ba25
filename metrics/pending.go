package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/interlockhq/interlock/protocol"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// rewatchPause is how long the watcher waits before watching the pending
// index again after its watch ended.
const rewatchPause = time.Second

var (
	pendingDesc = prometheus.NewDesc("interlock_pending_interrupts",
		"Runs waiting on an interrupt, from the pending index, by flow, interrupt kind and approver role.",
		[]string{"flow", "kind", "approver_role"}, nil)
	oldestDesc = prometheus.NewDesc("interlock_pending_oldest_age_seconds",
		"Age of the flow's oldest pending interrupt, from when it was asked; 0 when none waits.",
		[]string{"flow"}, nil)
	overdueDesc = prometheus.NewDesc("interlock_pending_overdue_interrupts",
		"Pending interrupts of the flow whose deadline (expiresAt) has passed.",
		[]string{"flow"}, nil)
	overdueSecondsDesc = prometheus.NewDesc("interlock_pending_overdue_seconds",
		"How long the flow's most overdue pending interrupt is past its deadline; 0 when none is.",
		[]string{"flow"}, nil)
)

// pendingLabels are the labels of a pending interrupt.
type pendingLabels struct{ flow, kind, role string }

// pendingEntry is what the index keeps of one waiting run: a few words,
// with its label strings shared.
type pendingEntry struct {
	labels pendingLabels
	// action is what the approval proposes: not a label of the pending
	// gauges, but of a refused resume's count.
	action string
	// asked and expires are Unix nanoseconds; expires is 0 without a deadline.
	asked, expires int64
}

// pendingIndex mirrors the pending index (the <prefix>_pending bucket):
// one entry per waiting run, loaded from the bucket's values and kept up
// to date by watching it, so that its gauges are right from the first
// scrape after a restart. It is a [prometheus.Collector] computing its
// gauges when scraped.
type pendingIndex struct {
	now   func() time.Time
	flows *flowSet

	mu      sync.Mutex
	entries map[string]pendingEntry
	// seen are the label sets reported so far: each is reported, 0 once
	// no run waits with it, until the process ends.
	seen map[pendingLabels]bool
	// strs interns label strings.
	strs map[string]string
}

func newPendingIndex(now func() time.Time, flows *flowSet) *pendingIndex {
	return &pendingIndex{
		now: now, flows: flows,
		entries: map[string]pendingEntry{}, seen: map[pendingLabels]bool{}, strs: map[string]string{},
	}
}

// follow reads w until ctx ends, then watches the bucket again whenever
// the watch ends (a lost connection, a bucket recreated). loaded is
// closed once the first watch has delivered the bucket's values.
func (p *pendingIndex) follow(ctx context.Context, kv jetstream.KeyValue, w jetstream.KeyWatcher, log zerolog.Logger, loaded chan<- struct{}) {
	first := true
	onLoad := func() {
		if first {
			first = false
			close(loaded)
		}
	}
	for {
		err := p.read(ctx, w, onLoad)
		_ = w.Stop()
		for {
			if ctx.Err() != nil {
				return
			}
			log.Warn().Err(err).Str("bucket", kv.Bucket()).Dur("retry_in", rewatchPause).Msg("watching the pending index stopped; watching it again")
			pause := time.NewTimer(rewatchPause)
			select {
			case <-ctx.Done():
				pause.Stop()
				return
			case <-pause.C:
			}
			if w, err = kv.WatchAll(ctx); err == nil {
				break
			}
		}
	}
}

// read applies the watcher's entries until it ends. The initial values
// are gathered apart and replace the index at once when the watcher says
// they are all there, so that a watch started again never shows a
// partial index.
func (p *pendingIndex) read(ctx context.Context, w jetstream.KeyWatcher, onLoad func()) error {
	initial := map[string]pendingEntry{}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return errors.New("metrics: the pending index's watcher closed")
			case e == nil:
				p.replace(initial)
				initial = nil
				onLoad()
			default:
				p.mu.Lock()
				if initial != nil {
					p.apply(initial, e)
				} else {
					p.apply(p.entries, e)
				}
				p.mu.Unlock()
			}
		}
	}
}

func (p *pendingIndex) replace(entries map[string]pendingEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.entries = entries
	for _, e := range entries {
		p.seen[e.labels] = true
	}
}

// apply applies one watched entry to entries: a value adds or replaces
// the run's entry, a delete, a purge or a marker removes it. The caller
// holds p.mu.
func (p *pendingIndex) apply(entries map[string]pendingEntry, e jetstream.KeyValueEntry) {
	key := e.Key()
	if e.Operation() != jetstream.KeyValuePut {
		delete(entries, key)
		return
	}
	var doc protocol.Pending
	if err := json.Unmarshal(e.Value(), &doc); err != nil || doc.Flow == "" || doc.AskedAt.IsZero() {
		// Not an entry the engine writes; it counts as no run waiting.
		delete(entries, key)
		return
	}
	p.flows.add(doc.Flow)
	entry := pendingEntry{
		labels: pendingLabels{flow: p.intern(doc.Flow), kind: p.intern(doc.Kind), role: p.intern(doc.ApproverRole)},
		action: p.intern(doc.Action),
		asked:  doc.AskedAt.UnixNano(),
	}
	if doc.ExpiresAt != nil {
		entry.expires = doc.ExpiresAt.UnixNano()
	}
	entries[strings.Clone(key)] = entry
	p.seen[entry.labels] = true
}

// action is the action of the approval run waits on in flow, "" when it
// waits on none.
func (p *pendingIndex) action(flow, run string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.entries[flow+"."+run].action
}

// intern returns the index's copy of s. The caller holds p.mu.
func (p *pendingIndex) intern(s string) string {
	if c, ok := p.strs[s]; ok {
		return c
	}
	p.strs[s] = s
	return s
}

// Describe implements [prometheus.Collector].
func (p *pendingIndex) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- oldestDesc
	ch <- overdueDesc
	ch <- overdueSecondsDesc
}

// flowAges are a flow's gauges, in Unix nanoseconds.
type flowAges struct {
	oldest      int64 // 0 when none waits
	overdue     int
	mostOverdue int64 // the earliest passed deadline; 0 when none
}

// Collect implements [prometheus.Collector]: it counts the index's
// entries now.
func (p *pendingIndex) Collect(ch chan<- prometheus.Metric) {
	now := p.now().UnixNano()
	counts := map[pendingLabels]int{}
	flows := map[string]*flowAges{}
	p.mu.Lock()
	for l := range p.seen {
		counts[l] = 0
		if flows[l.flow] == nil {
			flows[l.flow] = &flowAges{}
		}
	}
	for _, e := range p.entries {
		counts[e.labels]++
		f := flows[e.labels.flow]
		if f.oldest == 0 || e.asked < f.oldest {
			f.oldest = e.asked
		}
		if e.expires != 0 && e.expires <= now {
			f.overdue++
			if f.mostOverdue == 0 || e.expires < f.mostOverdue {
				f.mostOverdue = e.expires
			}
		}
	}
	p.mu.Unlock()
	for l, n := range counts {
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(n), l.flow, l.kind, l.role)
	}
	for flow, f := range flows {
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, since(now, f.oldest), flow)
		ch <- prometheus.MustNewConstMetric(overdueDesc, prometheus.GaugeValue, float64(f.overdue), flow)
		ch <- prometheus.MustNewConstMetric(overdueSecondsDesc, prometheus.GaugeValue, since(now, f.mostOverdue), flow)
	}
}

// since is the seconds from at to now, 0 when at is 0 or ahead of now.
func since(now, at int64) float64 {
	if at == 0 || at > now {
		return 0
	}
	return time.Duration(now - at).Seconds()
}
