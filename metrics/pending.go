package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

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
	versionDesc = prometheus.NewDesc("interlock_pending_flow_version_runs",
		"Runs waiting on an interrupt, from the pending index, by flow and the version of the flow they paused on (their checkpoint's flowVersion).",
		[]string{"flow", "version"}, nil)
	overdueSecondsDesc = prometheus.NewDesc("interlock_pending_overdue_seconds",
		"How long the flow's most overdue pending interrupt is past its deadline; 0 when none is.",
		[]string{"flow"}, nil)
)

// pendingLabels are the labels of a pending interrupt.
type pendingLabels struct{ flow, kind, role string }

// flowTimes are what a count keeps of one flow's waiting runs, in Unix
// nanoseconds: three numbers, however many runs wait.
type flowTimes struct {
	// oldest is the earliest askedAt; 0 when none waits.
	oldest int64
	// deadlines are the deadlines (expiresAt) in the count, ordered, at
	// most maxDeadlines of them: the earliest, which decide how many are
	// overdue when scraped until the next count.
	deadlines []int64
	// later counts the deadlines past the last of deadlines.
	later int
	// overdueAt counts the deadlines passed when the reading began.
	overdueAt int
}

// maxDeadlines bounds the deadlines a count keeps per flow. The overdue
// gauge counts that many exactly as of each scrape; when all of them have
// passed, it counts those passed when the index was read, if more.
const maxDeadlines = 64

// pendingCount is one reading of the whole pending index, reduced to its
// sums: nothing in it grows with the number of waiting runs.
type pendingCount struct {
	// began is when the reading began, in Unix nanoseconds.
	began  int64
	counts map[pendingLabels]int
	// versions counts the runs by flow and flow version.
	versions map[flowVersion]int
	flows    map[string]*flowTimes
	// lastSeq is the bucket's last sequence when the reading began: a
	// bucket whose last sequence has not moved holds the same entries.
	lastSeq uint64
}

// pendingDoc is the part of a pending entry (protocol.Pending) the
// gauges need.
type pendingDoc struct {
	Flow         string     `json:"flow"`
	Kind         string     `json:"kind"`
	ApproverRole string     `json:"approverRole"`
	FlowVersion  string     `json:"flowVersion"`
	Action       string     `json:"action"`
	AskedAt      time.Time  `json:"askedAt"`
	ExpiresAt    *time.Time `json:"expiresAt"`
}

// pendingCounter counts the pending index (the <prefix>_pending bucket)
// on the server instead of keeping a copy: every Config.PendingEvery it
// reads the bucket's current entries once, with an ordered consumer, and
// keeps only their sums by flow, kind and role, and each flow's oldest
// ask and earliest deadlines. Its memory is bounded by the label sets,
// not by the waiting runs. It is a [prometheus.Collector] reporting the
// latest count when scraped.
type pendingCounter struct {
	now   func() time.Time
	flows *flowSet

	mu   sync.Mutex
	kv   jetstream.KeyValue
	last *pendingCount
	// seen are the label sets reported so far: each is reported, 0 once
	// no run waits with it, until the process ends.
	seen map[pendingLabels]bool
	// seenVersions are the flows and versions reported so far, the same
	// way.
	seenVersions map[flowVersion]bool
}

// flowVersion is a flow and one of its versions.
type flowVersion struct{ flow, version string }

func newPendingCounter(now func() time.Time, flows *flowSet) *pendingCounter {
	return &pendingCounter{now: now, flows: flows, seen: map[pendingLabels]bool{}, seenVersions: map[flowVersion]bool{}}
}

// use sets the bucket the counter reads.
func (p *pendingCounter) use(kv jetstream.KeyValue) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kv = kv
}

func (p *pendingCounter) bucket() jetstream.KeyValue {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kv
}

// lastSeq returns the last sequence of the bucket's stream.
func lastSeq(ctx context.Context, kv jetstream.KeyValue) (uint64, error) {
	st, err := kv.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("metrics: reading the state of bucket %s: %w", kv.Bucket(), err)
	}
	si, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return 0, fmt.Errorf("metrics: bucket %s reports its state as %T, without its stream's", kv.Bucket(), st)
	}
	return si.StreamInfo().State.LastSeq, nil
}

// recount reads the whole bucket once and replaces the count, unless the
// bucket's last sequence is where the previous count began: then nothing
// was written or removed since, and the count stands. stall bounds the
// wait for each entry.
func (p *pendingCounter) recount(ctx context.Context, stall time.Duration) error {
	kv := p.bucket()
	seq, err := lastSeq(ctx, kv)
	if err != nil {
		return err
	}
	p.mu.Lock()
	same := p.last != nil && p.last.lastSeq == seq
	p.mu.Unlock()
	if same {
		return nil
	}
	c, err := p.read(ctx, kv, stall)
	if err != nil {
		return err
	}
	c.lastSeq = seq
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = c
	for flow := range c.flows {
		p.flows.add(flow)
	}
	for l := range c.counts {
		p.seen[l] = true
	}
	for v := range c.versions {
		p.seenVersions[v] = true
	}
	return nil
}

// read counts the bucket's current entries: a watch of every key,
// markers left out, until it says the current values are all delivered.
func (p *pendingCounter) read(ctx context.Context, kv jetstream.KeyValue, stall time.Duration) (*pendingCount, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("metrics: reading bucket %s: %w", kv.Bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	c := &pendingCount{counts: map[pendingLabels]int{}, versions: map[flowVersion]int{}, flows: map[string]*flowTimes{}, began: p.now().UnixNano()}
	timer := time.NewTimer(stall)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("metrics: reading bucket %s: %w", kv.Bucket(), ctx.Err())
		case <-timer.C:
			return nil, fmt.Errorf("metrics: reading bucket %s: no entry for %s; the server is slow or unreachable", kv.Bucket(), stall)
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return nil, fmt.Errorf("metrics: reading bucket %s: the watch ended before the last entry", kv.Bucket())
			case e == nil:
				return c, nil
			}
			c.add(e.Value())
			timer.Reset(stall)
		}
	}
}

// add counts one entry's value. A value that is not an entry the engine
// writes counts as no run waiting.
func (c *pendingCount) add(value []byte) {
	var doc pendingDoc
	if err := json.Unmarshal(value, &doc); err != nil || doc.Flow == "" || doc.AskedAt.IsZero() {
		return
	}
	l := pendingLabels{flow: doc.Flow, kind: doc.Kind, role: doc.ApproverRole}
	c.counts[l]++
	if doc.FlowVersion != "" {
		c.versions[flowVersion{doc.Flow, doc.FlowVersion}]++
	}
	f := c.flows[doc.Flow]
	if f == nil {
		f = &flowTimes{}
		c.flows[doc.Flow] = f
	}
	if asked := doc.AskedAt.UnixNano(); f.oldest == 0 || asked < f.oldest {
		f.oldest = asked
	}
	if doc.ExpiresAt != nil {
		d := doc.ExpiresAt.UnixNano()
		f.deadline(d)
		if d <= c.began {
			f.overdueAt++
		}
	}
}

// deadline keeps d among the flow's earliest deadlines.
func (f *flowTimes) deadline(d int64) {
	i := len(f.deadlines)
	for i > 0 && f.deadlines[i-1] > d {
		i--
	}
	if i == maxDeadlines {
		f.later++
		return
	}
	if len(f.deadlines) == maxDeadlines {
		f.deadlines = f.deadlines[:maxDeadlines-1]
		f.later++
	}
	f.deadlines = append(f.deadlines, 0)
	copy(f.deadlines[i+1:], f.deadlines[i:])
	f.deadlines[i] = d
}

// overdue is how many of the flow's deadlines have passed at now, and
// the earliest of them (0 when none has). When every deadline kept has
// passed, those beyond them count as of the reading.
func (f *flowTimes) overdue(now int64) (n int, earliest int64) {
	for _, d := range f.deadlines {
		if d > now {
			break
		}
		n++
	}
	if n == len(f.deadlines) && f.later > 0 {
		n = max(n, f.overdueAt)
	}
	if n > 0 {
		earliest = f.deadlines[0]
	}
	return n, earliest
}

// follow counts the bucket again every, or after four times as long as
// the last count took when that is longer, until ctx ends. A failed
// count is logged and the previous one stays.
func (p *pendingCounter) follow(ctx context.Context, every, stall time.Duration, took time.Duration, log zerolog.Logger) {
	for {
		wait := max(every, 4*took)
		pause := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			pause.Stop()
			return
		case <-pause.C:
		}
		begin := time.Now()
		err := p.recount(ctx, stall)
		took = time.Since(begin)
		if err != nil && ctx.Err() == nil {
			log.Warn().Err(err).Dur("retry_in", max(every, 4*took)).Msg("counting the pending index failed; the gauges keep the previous count")
		}
	}
}

// action is the action of the approval run waits on in flow, "" when it
// waits on none or the entry cannot be read within timeout: one read of
// the run's entry.
func (p *pendingCounter) action(ctx context.Context, flow, run string) string {
	kv := p.bucket()
	if kv == nil {
		return ""
	}
	e, err := kv.Get(ctx, flow+"."+run)
	if err != nil {
		return ""
	}
	var doc pendingDoc
	if err := json.Unmarshal(e.Value(), &doc); err != nil || doc.Flow != flow {
		return ""
	}
	return doc.Action
}

// kept is how many things the counter holds: label sets and flows in the
// latest count, deadlines kept and label sets seen.
func (p *pendingCounter) kept() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.seen) + len(p.seenVersions)
	if p.last != nil {
		n += len(p.last.counts) + len(p.last.versions) + len(p.last.flows)
		for _, f := range p.last.flows {
			n += len(f.deadlines)
		}
	}
	return n
}

// Describe implements [prometheus.Collector].
func (p *pendingCounter) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- oldestDesc
	ch <- overdueDesc
	ch <- overdueSecondsDesc
	ch <- versionDesc
}

// Collect implements [prometheus.Collector]: it reports the latest count,
// with the ages and the deadlines passed as of now.
func (p *pendingCounter) Collect(ch chan<- prometheus.Metric) {
	now := p.now().UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	flows := map[string]bool{}
	for l := range p.seen {
		n := 0
		if p.last != nil {
			n = p.last.counts[l]
		}
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(n), l.flow, l.kind, l.role)
		flows[l.flow] = true
	}
	for flow := range flows {
		f := &flowTimes{}
		if p.last != nil && p.last.flows[flow] != nil {
			f = p.last.flows[flow]
		}
		n, earliest := f.overdue(now)
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, since(now, f.oldest), flow)
		ch <- prometheus.MustNewConstMetric(overdueDesc, prometheus.GaugeValue, float64(n), flow)
		ch <- prometheus.MustNewConstMetric(overdueSecondsDesc, prometheus.GaugeValue, since(now, earliest), flow)
	}
	for v := range p.seenVersions {
		n := 0
		if p.last != nil {
			n = p.last.versions[v]
		}
		ch <- prometheus.MustNewConstMetric(versionDesc, prometheus.GaugeValue, float64(n), v.flow, v.version)
	}
}

// since is the seconds from at to now, 0 when at is 0 or ahead of now.
func since(now, at int64) float64 {
	if at == 0 || at > now {
		return 0
	}
	return time.Duration(now - at).Seconds()
}
