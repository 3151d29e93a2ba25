package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/metrics"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

var names = wire.Names{Prefix: wire.DefaultPrefix}

func TestMetricsOfRefundRuns(t *testing.T) {
	t.Parallel()
	began := time.Now()
	r := newRig(t, nil)
	withCard := map[string]any{"orderId": "o-1", "amount": 4800, "currency": "USD", "last4": "4821"}
	noCard := map[string]any{"orderId": "o-2", "amount": 4800, "currency": "USD"}

	// A question answered wrong (asked again), then right: an approval waits.
	in := r.start("r-q", noCard)
	in = interrupted(t, r.resume("r-q", protocol.Resume{ResumeToken: in.ResumeToken, Answers: map[string]json.RawMessage{"last4": json.RawMessage(`"12ab"`)}}))
	waiting := interrupted(t, r.resume("r-q", protocol.Resume{ResumeToken: in.ResumeToken, Answers: map[string]json.RawMessage{"last4": json.RawMessage(`"4821"`)}}))
	if waiting.Kind != protocol.KindApproval {
		t.Fatalf("r-q waits on %s, want an approval", waiting.Kind)
	}
	// Approvals approved, edited and rejected.
	for run, decision := range map[string]string{"r-approve": "approve", "r-edit": "edit", "r-reject": "reject"} {
		in := r.start(run, withCard)
		var edits map[string]any
		if decision == "edit" {
			edits = map[string]any{"amount": 400}
		}
		if ev := r.decide(run, in, decision, edits); ev.Kind != protocol.EventCompleted {
			t.Fatalf("%s %s: %s, want completed", decision, run, ev.Kind)
		}
	}
	// A question left waiting.
	r.start("r-wait", noCard)
	// An approval whose deadline escalates it to finance, then expires it.
	timeout := map[string]any{"orderId": "o-3", "amount": 4800, "last4": "4821", "approvalTimeoutSeconds": 1}
	r.start("r-timeout", timeout)
	natstest.WaitFor(t, r.js, names.EventStream(), names.Event("refund", "r-timeout", ">"), natstest.Nth("expired", 1))
	// r-q's approval in the pending index, which names the action a
	// refused resume was for.
	eventually(t, r.m.Addr(), "r-q's approval pending", is("interlock_pending_interrupts", 1, "flow", "refund", "kind", "approval", "approver_role", "supervisor"))
	// A forged token, refused.
	forged := protocol.Resume{ResumeToken: "AAAA" + waiting.ResumeToken[4:], Decision: "approve"}
	if ev := r.resume("r-q", forged); ev.Kind != protocol.EventRefused {
		t.Fatalf("forged token: %s, want refused", ev.Kind)
	}
	// A resume that is not a CloudEvent, dead-lettered.
	natstest.PublishRaw(t, r.js, names.In("refund", "resume"), []byte("not an event"), nats.Header{})

	want := []series{
		s("interlock_pending_interrupts", 1, "flow", "refund", "kind", "question"),
		s("interlock_pending_interrupts", 1, "flow", "refund", "kind", "approval", "approver_role", "supervisor"),
		// Seen while r-timeout was escalated; none waits there now.
		s("interlock_pending_interrupts", 0, "flow", "refund", "kind", "approval", "approver_role", "finance_lead"),
		s("interlock_pending_overdue_interrupts", 0, "flow", "refund"),
		s("interlock_pending_overdue_seconds", 0, "flow", "refund"),

		s("interlock_decisions_total", 1, "flow", "refund", "action", "issue_refund", "outcome", "approved", "by", "approver"),
		s("interlock_decisions_total", 1, "flow", "refund", "action", "issue_refund", "outcome", "edited", "by", "approver"),
		s("interlock_decisions_total", 1, "flow", "refund", "action", "issue_refund", "outcome", "rejected", "by", "approver"),
		s("interlock_decisions_total", 1, "flow", "refund", "action", "issue_refund", "outcome", "expired", "by", "timeout"),

		s("interlock_time_to_decision_seconds", 2, "flow", "refund", "kind", "question", "verb", "resume"),
		s("interlock_time_to_decision_seconds", 3, "flow", "refund", "action", "issue_refund", "kind", "approval", "verb", "resume"),
		s("interlock_time_to_decision_seconds", 2, "flow", "refund", "action", "issue_refund", "kind", "approval", "verb", "expire"),

		// Asked at each start, again after a wrong answer, and once the
		// right one came; not again when escalated.
		s("interlock_interrupts_total", 3, "flow", "refund", "kind", "question"),
		s("interlock_interrupts_total", 5, "flow", "refund", "action", "issue_refund", "kind", "approval"),

		s("interlock_expiries_total", 1, "flow", "refund"),
		s("interlock_escalations_total", 1, "flow", "refund"),

		s("interlock_resumes_total", 2, "flow", "refund", "result", "accepted"),
		s("interlock_resumes_total", 3, "flow", "refund", "action", "issue_refund", "result", "accepted"),
		s("interlock_resumes_total", 1, "flow", "refund", "action", "issue_refund", "result", "refused", "code", string(protocol.CodeTokenMismatch)),
		s("interlock_resumes_total", 1, "flow", "refund", "result", "dead_lettered"),
		s("interlock_dead_letters_total", 1, "reason", events.ReasonUnparseable),

		s("interlock_transition_seconds", 6, "verb", "start"),
		s("interlock_transition_seconds", 7, "verb", "resume"),
		s("interlock_transition_seconds", 2, "verb", "expire"),

		s("interlock_ready", 1),
		s("interlock_consumer_lag_messages", 0),
		s("interlock_consumer_ack_pending_messages", 0),
	}
	// The workers count a command after publishing its events: wait for
	// the counts, not for the events.
	f := settle(t, r.m.Addr(), want)
	if age, _ := f.value("interlock_pending_oldest_age_seconds", "flow", "refund"); age <= 0 || age > time.Since(began).Seconds() {
		t.Errorf("oldest pending of refund is %v s old, want more than 0 and at most the %v the test has run", age, time.Since(began))
	}
	if n, ok := f.value("interlock_schedule_stream_messages"); !ok || n < 1 {
		t.Errorf("schedule stream holds %v messages (present %v), want the deadlines waiting", n, ok)
	}
	if _, ok := f.value("interlock_inbound_stream_messages"); !ok {
		t.Error("no interlock_inbound_stream_messages")
	}
	for name, fam := range f {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.HasPrefix(l.GetValue(), "r-") || l.GetValue() == "sam" {
					t.Errorf("%s has label %s=%s: no run ids or approver names in labels", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

func interrupted(t *testing.T, ev interface{ Decode(any) error }) protocol.Interrupted {
	t.Helper()
	var in protocol.Interrupted
	if err := ev.Decode(&in); err != nil || in.ResumeToken == "" {
		t.Fatalf("want an interrupted event: %v %+v", err, in)
	}
	return in
}

func TestPendingGaugesComeBackAfterARestart(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	first := newRig(t, srv)
	card := map[string]any{"orderId": "o-1", "amount": 4800, "currency": "USD", "last4": "4821"}
	approvals := map[string]protocol.Interrupted{}
	for _, run := range []string{"r-1", "r-2", "r-3"} {
		approvals[run] = first.start(run, card)
	}
	first.start("r-4", map[string]any{"orderId": "o-4", "amount": 100})
	wantPending := []series{
		s("interlock_pending_interrupts", 3, "flow", "refund", "kind", "approval", "approver_role", "supervisor"),
		s("interlock_pending_interrupts", 1, "flow", "refund", "kind", "question"),
	}
	eventually(t, first.m.Addr(), "4 runs pending", all(wantPending)).want(t, wantPending)
	if err := first.svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}

	second := newRig(t, srv)
	// Loaded from the index before Start returned: the first scrape is right.
	f := scrape(t, second.m.Addr())
	f.want(t, wantPending)
	if age, _ := f.value("interlock_pending_oldest_age_seconds", "flow", "refund"); age <= 0 {
		t.Errorf("oldest pending age after a restart = %v, want the time since r-1 asked", age)
	}
	if _, ok := f.value("interlock_decisions_total", "flow", "refund", "action", "issue_refund", "outcome", "approved", "by", "approver"); ok {
		t.Error("a new process reports decisions it did not see")
	}
	second.decide("r-2", approvals["r-2"], "approve", nil)
	eventually(t, second.m.Addr(), "r-2 gone from the pending gauge",
		is("interlock_pending_interrupts", 2, "flow", "refund", "kind", "approval", "approver_role", "supervisor"))
}

func TestPendingIndexFollowsTheBucket(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	kv, err := r.js.KeyValue(t.Context(), names.PendingBucket())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	put := func(key string, p protocol.Pending) {
		t.Helper()
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(t.Context(), key, b); err != nil {
			t.Fatal(err)
		}
	}
	overdue := now.Add(-90 * time.Second)
	later := now.Add(time.Hour)
	put("booking.r-1", protocol.Pending{Flow: "booking", Run: "r-1", Kind: "question", AskedAt: now.Add(-10 * time.Minute)})
	put("booking.r-2", protocol.Pending{Flow: "booking", Run: "r-2", Kind: "approval", ApproverRole: "ops", AskedAt: now.Add(-5 * time.Minute), ExpiresAt: &overdue})
	put("booking.r-3", protocol.Pending{Flow: "booking", Run: "r-3", Kind: "approval", ApproverRole: "ops", AskedAt: now, ExpiresAt: &later})
	if _, err := kv.Put(t.Context(), "booking.r-junk", []byte("not a pending entry")); err != nil {
		t.Fatal(err)
	}
	f := eventually(t, r.m.Addr(), "booking's runs pending", is("interlock_pending_interrupts", 2, "flow", "booking", "kind", "approval", "approver_role", "ops"))
	f.want(t, []series{
		s("interlock_pending_interrupts", 1, "flow", "booking", "kind", "question"),
		s("interlock_pending_overdue_interrupts", 1, "flow", "booking"),
	})
	if age, _ := f.value("interlock_pending_oldest_age_seconds", "flow", "booking"); age < 600 || age > 660 {
		t.Errorf("oldest age %v, want about 600 s", age)
	}
	if late, _ := f.value("interlock_pending_overdue_seconds", "flow", "booking"); late < 90 || late > 150 {
		t.Errorf("most overdue %v s past its deadline, want about 90", late)
	}

	if err := kv.Delete(t.Context(), "booking.r-2"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(t.Context(), "booking.r-1"); err != nil {
		t.Fatal(err)
	}
	f = eventually(t, r.m.Addr(), "deletes and purges applied", is("interlock_pending_interrupts", 0, "flow", "booking", "kind", "question"))
	f.want(t, []series{
		s("interlock_pending_interrupts", 1, "flow", "booking", "kind", "approval", "approver_role", "ops"),
		s("interlock_pending_overdue_interrupts", 0, "flow", "booking"),
		s("interlock_pending_overdue_seconds", 0, "flow", "booking"),
	})
}

func TestReadiness(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	m, err := metrics.New(metrics.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	// Before Start: nothing bound.
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"missing":["nats: not started"]`) {
		t.Fatalf("/readyz before start: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/healthz: %d", rec.Code)
	}

	r := newRigWith(t, srv, m)
	if code, body := get(t, m.Addr(), "/readyz"); code != http.StatusOK || body != `{"ready":true}` {
		t.Fatalf("/readyz when serving: %d %s", code, body)
	}
	if code, body := get(t, m.Addr(), "/healthz"); code != http.StatusOK || body != "ok" {
		t.Fatalf("/healthz: %d %s", code, body)
	}

	// The workers' consumer deleted: not ready, and /readyz says why.
	in, err := r.js.Stream(t.Context(), names.InStream())
	if err != nil {
		t.Fatal(err)
	}
	if err := in.DeleteConsumer(t.Context(), names.Consumer()); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, m.Addr(), "/readyz")
	var got struct {
		Ready   bool
		Missing []string
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || code != http.StatusServiceUnavailable || got.Ready ||
		len(got.Missing) != 1 || got.Missing[0] != "consumer interlock-workers of INTERLOCK_IN: not found" {
		t.Fatalf("/readyz without the consumer: %d %s", code, body)
	}
	if v, _ := scrape(t, m.Addr()).value("interlock_ready"); v != 0 {
		t.Fatalf("interlock_ready = %v without the consumer", v)
	}

	// A worker started again binds it again.
	stopCtx, cancel := context.WithTimeout(t.Context(), natstest.Wait)
	defer cancel()
	if err := r.svc.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	again := newRig(t, srv)
	if code, body := get(t, again.m.Addr(), "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz after a restart: %d %s", code, body)
	}
}

func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := httpClient.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func TestConfigIsChecked(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		cfg     metrics.Config
		wantErr string
	}{
		{name: "default", cfg: metrics.Config{}},
		{name: "loopback", cfg: metrics.Config{Addr: "127.0.0.1:0"}},
		{name: "localhost", cfg: metrics.Config{Addr: "localhost:9090"}},
		{name: "ipv6 loopback", cfg: metrics.Config{Addr: "[::1]:9090"}},
		{name: "localhost in capitals", cfg: metrics.Config{Addr: "LOCALHOST:9090"}},
		{name: "localhost with a trailing dot", cfg: metrics.Config{Addr: "localhost.:9090"}},
		{name: "another loopback address", cfg: metrics.Config{Addr: "127.0.0.2:9090"}},
		{name: "public allowed", cfg: metrics.Config{Addr: "0.0.0.0:9090", InsecurePublic: true}},
		{name: "public", cfg: metrics.Config{Addr: "0.0.0.0:9090"}, wantErr: "beyond loopback"},
		{name: "every interface", cfg: metrics.Config{Addr: ":9090"}, wantErr: "beyond loopback"},
		{name: "host name", cfg: metrics.Config{Addr: "metrics.example.com:9090"}, wantErr: "beyond loopback"},
		{name: "no port", cfg: metrics.Config{Addr: "127.0.0.1"}, wantErr: "Config.Addr"},
		{name: "negative timeout", cfg: metrics.Config{Timeout: -time.Second}, wantErr: "Config.Timeout"},
		{name: "negative count interval", cfg: metrics.Config{PendingEvery: -time.Second}, wantErr: "Config.PendingEvery"},
	}
	for _, tc := range cases {
		_, err := metrics.New(tc.cfg)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestStartWithoutJetStreamFails(t *testing.T) {
	t.Parallel()
	m, err := metrics.New(metrics.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "UseJetStream") {
		t.Fatalf("Start without JetStream: %v", err)
	}
	if err := m.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(t.Context()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// gateOutcome is the outcome of a gate command with one decided event.
func gateOutcome(d protocol.Decided, extra ...engine.Message) engine.Outcome {
	msgs := append([]engine.Message{{Kind: protocol.EventDecided, Flow: engine.GateFlowName, Run: d.CallID, Data: &d}}, extra...)
	return engine.Outcome{Flow: engine.GateFlowName, Run: d.CallID, Events: msgs}
}

func TestObserveCountsTheGateAndBoundsLabels(t *testing.T) {
	t.Parallel()
	m, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	resumed := engine.Message{Kind: protocol.EventResumed, Flow: engine.GateFlowName, Data: &protocol.Resumed{Kind: protocol.KindApproval, Decision: "approve"}}
	asked := time.Now().Add(-time.Minute)
	for _, o := range []bus.Observation{
		// A call no rule holds: allowed by the request itself.
		{Verb: "request", Outcome: gateOutcome(protocol.Decided{CallID: "c-1", Tool: "search", Decision: engine.ToolAllowed})},
		// A call approved by a person: the decided event counts, not the resumed one too.
		{Verb: "resume", Outcome: func() engine.Outcome {
			o := gateOutcome(protocol.Decided{CallID: "c-2", Tool: "issue_refund", Decision: engine.ToolApproved, Approver: "sam"}, resumed)
			o.AskedAt, o.Action = asked, "issue_refund"
			return o
		}()},
		// The same call asked again: answered from the decision taken before.
		{Verb: "request", Outcome: gateOutcome(protocol.Decided{CallID: "c-2", Tool: "issue_refund", Decision: engine.ToolApproved, Approver: "sam"})},
		// A call rejected by its deadline's policy.
		{Verb: "expire", Outcome: gateOutcome(protocol.Decided{CallID: "c-3", Tool: "issue_refund", Decision: engine.ToolRejected, Approver: engine.TimeoutActor})},
		// A resume for a flow no one runs, and a verb no one knows.
		{Verb: "resume", Outcome: engine.Outcome{Flow: "made-up", Run: "r-1", Refused: &engine.Refusal{Code: protocol.CodeUnknownFlow}}},
		{Verb: "frobnicate", Outcome: engine.Outcome{Flow: "made-up", DeadLetter: bus.ReasonUnknownSubject}},
	} {
		m.Observe(o)
	}
	f := gather(t, m)
	f.want(t, []series{
		s("interlock_decisions_total", 1, "flow", "gate", "action", "search", "outcome", "allowed", "by", "rule"),
		s("interlock_decisions_total", 1, "flow", "gate", "action", "issue_refund", "outcome", "approved", "by", "approver"),
		s("interlock_decisions_total", 1, "flow", "gate", "action", "issue_refund", "outcome", "rejected", "by", "timeout"),
		s("interlock_time_to_decision_seconds", 1, "flow", "gate", "action", "issue_refund", "kind", "approval", "verb", "resume"),
		s("interlock_resumes_total", 1, "flow", "gate", "action", "issue_refund", "result", "accepted"),
		s("interlock_resumes_total", 1, "result", "refused", "code", string(protocol.CodeUnknownFlow)),
		s("interlock_transition_seconds", 1, "verb", "other"),
		s("interlock_dead_letters_total", 1, "reason", bus.ReasonUnknownSubject),
	})
	if n := len(f["interlock_decisions_total"].GetMetric()); n != 3 {
		t.Errorf("%d decision series, want 3:\n%s", n, f.dump("interlock_decisions_total"))
	}

	// Tool names come from agents: past a bound they count as "other".
	for i := range 300 {
		m.Observe(bus.Observation{Verb: "request", Outcome: gateOutcome(protocol.Decided{CallID: "c", Tool: "tool" + strings.Repeat("x", i), Decision: engine.ToolAllowed})})
	}
	f = gather(t, m)
	if n := len(f["interlock_decisions_total"].GetMetric()); n > 260 {
		t.Errorf("%d decision series after 300 tools, want them bounded", n)
	}
	if v, _ := f.value("interlock_decisions_total", "flow", "gate", "action", "other", "outcome", "allowed", "by", "rule"); v == 0 {
		t.Error("no tool counted as other past the bound")
	}
}

// gather reads the service's registry directly.
func gather(t *testing.T, m *metrics.Service) families {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	f := families{}
	for _, fam := range fams {
		f[fam.GetName()] = fam
	}
	return f
}

func TestPendingGaugesHoldNothingPerWaitingRun(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	kv, err := r.js.KeyValue(t.Context(), names.PendingBucket())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	deadline := now.Add(time.Hour)
	// wait puts n more waiting runs in each of a few label sets, half of
	// them with a deadline, and counts the index.
	next := 0
	wait := func(n int) {
		t.Helper()
		for range n {
			next++
			for i, p := range []protocol.Pending{
				{Flow: "booking", Kind: "question"},
				{Flow: "booking", Kind: "approval", ApproverRole: "ops"},
				{Flow: "payroll", Kind: "approval", ApproverRole: "finance"},
			} {
				p.Run = fmt.Sprintf("r-%d-%d", next, i)
				p.AskedAt = now.Add(-time.Duration(next) * time.Second)
				if next%2 == 0 {
					p.ExpiresAt = &deadline
				}
				b, err := json.Marshal(p)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := kv.Put(t.Context(), p.Flow+"."+p.Run, b); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := r.m.CountPending(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	wait(10)
	few := r.m.PendingKept()
	scrape(t, r.m.Addr()).want(t, []series{s("interlock_pending_interrupts", 10, "flow", "booking", "kind", "question")})
	wait(290)
	many := r.m.PendingKept()
	scrape(t, r.m.Addr()).want(t, []series{
		s("interlock_pending_interrupts", 300, "flow", "booking", "kind", "question"),
		s("interlock_pending_interrupts", 300, "flow", "booking", "kind", "approval", "approver_role", "ops"),
		s("interlock_pending_interrupts", 300, "flow", "payroll", "kind", "approval", "approver_role", "finance"),
	})
	// Ten waiting runs of each label set, then three hundred: at most each
	// label set twice (counted, seen) and each flow with its earliest
	// deadlines, however many wait.
	if bound := 3*2 + 2*(1+64); few >= many || many > bound {
		t.Errorf("the pending gauges hold %d things with 900 runs waiting, %d with 30; want more deadlines kept, and at most %d: they grow with the waiting runs", many, few, bound)
	}
}

// TestRunsOfAFlowVersionNoWorkerHasAreCounted: the pending gauges count
// runs by the flow version they paused on, and each worker reports the
// versions it runs, so that a query finds the runs no running worker
// has the version of.
func TestRunsOfAFlowVersionNoWorkerHasAreCounted(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	version := refund.Flow().Version()
	r.start("r-1", map[string]any{"orderId": "o-1", "amount": 4800, "currency": "USD", "last4": "4821"})
	r.start("r-2", map[string]any{"orderId": "o-2", "amount": 4800, "currency": "USD", "last4": "4821"})
	f := eventually(t, r.m.Addr(), "two runs of the worker's version", is("interlock_pending_flow_version_runs", 2, "flow", refund.Name, "version", version))
	if v, ok := f.value("interlock_worker_flow_version", "flow", refund.Name, "version", version); !ok || v != 1 {
		t.Errorf("interlock_worker_flow_version of %s %s = %v %v, want 1", refund.Name, version, v, ok)
	}
	// The asks' flow carries on runs of every earlier version.
	if v, ok := f.value("interlock_worker_flow_version", "flow", engine.AskFlowName, "version", engine.AnyVersion); !ok || v != 1 {
		t.Errorf("interlock_worker_flow_version of %s %s = %v %v, want 1", engine.AskFlowName, engine.AnyVersion, v, ok)
	}
	// A run paused on an earlier version, as an earlier build left it in
	// the pending index.
	e, err := r.js.KeyValue(t.Context(), r.svc.Names().PendingBucket())
	if err != nil {
		t.Fatal(err)
	}
	entry, err := e.Get(t.Context(), refund.Name+".r-2")
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(string(entry.Value()), `"flowVersion":"`+version+`"`, `"flowVersion":"v1"`, 1)
	if _, err := e.Put(t.Context(), refund.Name+".r-2", []byte(old)); err != nil {
		t.Fatal(err)
	}
	eventually(t, r.m.Addr(), "one run of v1, one of the worker's",
		all([]series{s("interlock_pending_flow_version_runs", 1, "flow", refund.Name, "version", "v1"), s("interlock_pending_flow_version_runs", 1, "flow", refund.Name, "version", version)}))
}
