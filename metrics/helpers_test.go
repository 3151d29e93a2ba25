package metrics_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/metrics"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// countEvery is how often the tests' metrics services count the pending
// index: often, so that a test waits little for a gauge to move.
const countEvery = 50 * time.Millisecond

// httpClient keeps no idle connection, so that no goroutine outlives a test.
var httpClient = &http.Client{Timeout: natstest.Wait, Transport: &http.Transport{DisableKeepAlives: true}}

// rig is a service running the refund flow with a metrics service on a
// free loopback port, and a client on its server.
type rig struct {
	t   *testing.T
	srv *bus.Server
	svc *interlock.Service
	m   *metrics.Service
	c   *client.Client
	js  jetstream.JetStream
}

func newRig(t *testing.T, srv *bus.Server) *rig {
	t.Helper()
	return newRigWith(t, srv, nil)
}

// newRigWith starts a rig with the metrics service m (a new one if nil)
// on srv (a new server if nil).
func newRigWith(t *testing.T, srv *bus.Server, m *metrics.Service) *rig {
	t.Helper()
	return startRig(t, srv, m, interlock.Config{Flows: []*engine.Flow{refund.Flow()}})
}

// startRig starts a rig running cfg's flows and gate rules, with the
// metrics service m (a new one if nil) on srv (a new server if nil).
func startRig(t *testing.T, srv *bus.Server, m *metrics.Service, cfg interlock.Config) *rig {
	t.Helper()
	if srv == nil {
		srv = natstest.StartServer(t, "")
	}
	if m == nil {
		var err error
		if m, err = metrics.New(metrics.Config{Addr: "127.0.0.1:0", PendingEvery: countEvery, Timeout: natstest.Wait}); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Secret, cfg.Observe, cfg.Services = natstest.Secret, m.Observe, []interlock.Background{m}
	svc := natstest.StartWith(t, srv, cfg)
	nc, js := natstest.Connect(t, srv.ClientURL())
	return &rig{t: t, srv: srv, svc: svc, m: m, c: client.New(nc, js, wire.Names{}, "/metrics-test", 0), js: js}
}

// start starts a refund run and returns the interrupt it waits on.
func (r *rig) start(run string, state map[string]any) protocol.Interrupted {
	r.t.Helper()
	return r.startFlow(refund.Name, run, state)
}

// startFlow starts a run of flow and returns the interrupt it waits on.
func (r *rig) startFlow(flow, run string, state map[string]any) protocol.Interrupted {
	r.t.Helper()
	doc := map[string]json.RawMessage{}
	for k, v := range state {
		b, _ := json.Marshal(v)
		doc[k] = b
	}
	ev, err := r.c.Start(r.t.Context(), flow, run, doc, nil)
	if err != nil || ev.Kind != protocol.EventInterrupted {
		r.t.Fatalf("starting %s: %v (event %q)", run, err, ev.Kind)
	}
	var in protocol.Interrupted
	if err := ev.Decode(&in); err != nil {
		r.t.Fatal(err)
	}
	return in
}

// resume sends a resume to a refund run and returns the event it
// settles on.
func (r *rig) resume(run string, res protocol.Resume) client.Event {
	r.t.Helper()
	return r.resumeFlow(refund.Name, run, res)
}

// resumeFlow sends a resume to a run of flow and returns the event it
// settles on.
func (r *rig) resumeFlow(flow, run string, res protocol.Resume) client.Event {
	r.t.Helper()
	ev, err := r.c.Resume(r.t.Context(), flow, run, res)
	if err != nil {
		r.t.Fatalf("resuming %s.%s: %v", flow, run, err)
	}
	return ev
}

// decide decides a pending approval.
func (r *rig) decide(run string, in protocol.Interrupted, decision string, edits map[string]any) client.Event {
	r.t.Helper()
	res := protocol.Resume{ResumeToken: in.ResumeToken, Decision: decision, Approver: "sam", Reason: "checked"}
	for k, v := range edits {
		b, _ := json.Marshal(v)
		if res.Edits == nil {
			res.Edits = map[string]json.RawMessage{}
		}
		res.Edits[k] = b
	}
	return r.resume(run, res)
}

// scrape reads the metrics service's /metrics.
func scrape(t *testing.T, addr string) families {
	t.Helper()
	resp, err := httpClient.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scraping %s: %v", addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("scraping %s: %s\n%s", addr, resp.Status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the scrape of %s: %v", addr, err)
	}
	return fams
}

// families are a scrape's metric families by name.
type families map[string]*dto.MetricFamily

// value is the value of the series of name with exactly these labels
// (name=value pairs; the others empty): a counter's or gauge's value, a
// histogram's sample count. ok is false when there is no such series.
func (f families) value(name string, labels ...string) (float64, bool) {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	fam := f[name]
	if fam == nil {
		return 0, false
	}
next:
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		for k, v := range have {
			if v != "" && want[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// want checks series' values: each case is a metric name, labels, and the
// value wanted.
func (f families) want(t *testing.T, cases []series) {
	t.Helper()
	for _, c := range cases {
		got, ok := f.value(c.name, c.labels...)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v\n%s", c.name, c.labels, got, ok, c.want, f.dump(c.name))
		}
	}
}

type series struct {
	name   string
	labels []string
	want   float64
}

func s(name string, want float64, labels ...string) series {
	return series{name: name, labels: labels, want: want}
}

// dump prints a family's series, for failure messages.
func (f families) dump(name string) string {
	fam := f[name]
	if fam == nil {
		return "  (no series)"
	}
	var lines []string
	for _, m := range fam.GetMetric() {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		lines = append(lines, fmt.Sprintf("  {%s} %v", strings.Join(ls, ","), v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// eventually scrapes until cond holds on a scrape, and fails after
// natstest.Wait with what.
func eventually(t *testing.T, addr, what string, cond func(families) bool) families {
	t.Helper()
	deadline := time.After(natstest.Wait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		f := scrape(t, addr)
		if cond(f) {
			return f
		}
		select {
		case <-deadline:
			t.Fatalf("after %s, still not %s", natstest.Wait, what)
		case <-tick.C:
		}
	}
}

// settle scrapes until every series has its value, or natstest.Wait
// passed, and checks them on the last scrape, which it returns.
func settle(t *testing.T, addr string, want []series) families {
	t.Helper()
	deadline := time.After(natstest.Wait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		f := scrape(t, addr)
		if all(want)(f) {
			return f
		}
		select {
		case <-deadline:
			f.want(t, want)
			t.FailNow()
		case <-tick.C:
		}
	}
}

// all returns a condition: every series has its value.
func all(cases []series) func(families) bool {
	return func(f families) bool {
		for _, c := range cases {
			if !is(c.name, c.want, c.labels...)(f) {
				return false
			}
		}
		return true
	}
}

// is returns a condition: the series has value v.
func is(name string, v float64, labels ...string) func(families) bool {
	return func(f families) bool {
		got, ok := f.value(name, labels...)
		return ok && got == v
	}
}
