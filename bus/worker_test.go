package bus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// workerRig is a worker on an embedded server, running booking on an
// in-memory store, publishing for real.
type workerRig struct {
	js     jetstream.JetStream
	names  wire.Names
	store  engine.Store
	worker *bus.Worker
}

func newWorkerRig(t *testing.T, store engine.Store, maxDeliver int) *workerRig {
	t.Helper()
	return newWorkerRigLogging(t, store, maxDeliver, nil)
}

func newWorkerRigLogging(t *testing.T, store engine.Store, maxDeliver int, log *zerolog.Logger) *workerRig {
	t.Helper()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	names, _ := wire.NewNames("")
	if err := bus.Provision(t.Context(), js, names, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	queue, err := bus.NewQueue(t.Context(), js, names)
	if err != nil {
		t.Fatal(err)
	}
	r, err := engine.NewRunner(engine.Config{Flows: []*engine.Flow{booking.Flow()}, Store: store,
		Publisher: bus.NewPublisher(js, names, "interlock/bus-test"), Queue: queue, Secret: natstest.Secret})
	if err != nil {
		t.Fatal(err)
	}
	w, err := bus.NewWorker(js, bus.WorkerConfig{Names: names, Runner: r, Concurrency: 4, MaxDeliver: maxDeliver, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.WithoutCancel(t.Context())) })
	return &workerRig{js: js, names: names, store: store, worker: w}
}

func (r *workerRig) events(t *testing.T, run, kind string, n int) []natstest.Received {
	t.Helper()
	return natstest.WaitFor(t, r.js, r.names.EventStream(), r.names.Event("booking", run, ">"), natstest.Nth(kind, n))
}

func TestWorkerAppliesEveryVerbOfItsTable(t *testing.T) {
	t.Parallel()
	r := newWorkerRig(t, enginetest.NewStore(), 0)
	natstest.Publish(t, r.js, r.names.In("booking", "start"), protocol.TypeStart, "r-1", nil)
	r.events(t, "r-1", "interrupted", 1)
	natstest.Publish(t, r.js, r.names.In("booking", "reannounce"), protocol.TypeReannounce, "r-1", nil)
	r.events(t, "r-1", "interrupted", 2)
	var in protocol.Interrupted
	natstest.Last(t, r.events(t, "r-1", "interrupted", 2), "interrupted").Decode(t, &in)
	natstest.Publish(t, r.js, r.names.In("booking", "resume"), protocol.TypeResume, "r-1",
		map[string]any{"resumeToken": in.ResumeToken, "answers": map[string]any{"email": "ann@example.com"}})
	r.events(t, "r-1", "interrupted", 3)
	natstest.Publish(t, r.js, r.names.In("booking", "cancel"), protocol.TypeCancel, "r-1", map[string]any{"reason": "done"})
	evs := r.events(t, "r-1", "cancelled", 1)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	if got := strings.Join(kinds, ","); got != "started,interrupted,interrupted,resumed,interrupted,cancelled" {
		t.Fatalf("events %s", got)
	}
	natstest.WaitDrained(t, r.js, r.names.InStream())
}

func TestWorkerDeadLettersWhatItsTableDoesNotKnow(t *testing.T) {
	t.Parallel()
	r := newWorkerRig(t, enginetest.NewStore(), 0)
	for _, subject := range []string{"interlock.in.booking.explode", "interlock.in.booking.request", "interlock.in.gate.start", "interlock.in.gate.request"} {
		natstest.Publish(t, r.js, subject, protocol.TypeStart, "r-x", nil)
	}
	natstest.WaitDrained(t, r.js, r.names.InStream())
	dead := natstest.Read(t, r.js, r.names.DeadLetterStream(), ">")
	reasons := map[string]string{}
	for _, d := range dead {
		reasons[d.Header.Get(bus.HeaderSubject)] = d.Header.Get(bus.HeaderReason)
	}
	want := map[string]string{
		"interlock.in.booking.explode": bus.ReasonUnknownSubject, "interlock.in.booking.request": bus.ReasonUnknownSubject,
		"interlock.in.gate.start": bus.ReasonUnknownSubject, "interlock.in.gate.request": bus.ReasonUnsupported,
	}
	for subject, reason := range want {
		if reasons[subject] != reason {
			t.Errorf("%s dead-lettered as %q, want %q", subject, reasons[subject], reason)
		}
	}
}

// TestAWorkerWithoutGateRulesRefusesAToolRequestAtOnce: the gate is off,
// and a tool request is answered at once with refused unsupported on the
// call's subject, saying how to turn the gate on, as well as
// dead-lettered; nobody waits on a decision that will not come.
func TestAWorkerWithoutGateRulesRefusesAToolRequestAtOnce(t *testing.T) {
	t.Parallel()
	r := newWorkerRig(t, enginetest.NewStore(), 0)
	natstest.Publish(t, r.js, r.names.GateRequest(), protocol.TypeToolRequest, "call-1",
		map[string]any{"callId": "call-1", "tool": "issue_refund", "args": map[string]any{"amount": 20}})
	got := natstest.WaitFor(t, r.js, r.names.EventStream(), r.names.Event("gate", "call-1", ">"), natstest.Nth("refused", 1))
	var ref protocol.Refused
	if err := json.Unmarshal(got[0].Event.Data(), &ref); err != nil || ref.Code != protocol.CodeUnsupported ||
		!strings.Contains(ref.Message, "gate is off") || !strings.Contains(ref.Message, "--gate-rules") {
		t.Fatalf("refused %+v (%v), want unsupported saying the gate is off and how to turn it on", ref, err)
	}
	natstest.WaitDrained(t, r.js, r.names.InStream())
	if dead := natstest.Read(t, r.js, r.names.DeadLetterStream(), ">"); len(dead) != 1 || dead[0].Header.Get(bus.HeaderReason) != bus.ReasonUnsupported {
		t.Fatalf("dead letters %+v, want the request, unsupported", dead)
	}
}

// brokenStore fails every write, as a store whose bucket is gone would.
type brokenStore struct {
	*enginetest.Store
	writes atomic.Int32
}

func (s *brokenStore) Create(context.Context, *engine.Checkpoint) (uint64, error) {
	s.writes.Add(1)
	return 0, errors.New("bucket unavailable")
}

func TestWorkerDeadLettersAMessageThatFailsOnItsLastDelivery(t *testing.T) {
	t.Parallel()
	store := &brokenStore{Store: enginetest.NewStore()}
	r := newWorkerRig(t, store, 2)
	id := natstest.Publish(t, r.js, r.names.In("booking", "start"), protocol.TypeStart, "r-1", nil)
	natstest.WaitDrained(t, r.js, r.names.InStream())
	dead := natstest.Read(t, r.js, r.names.DeadLetterStream(), r.names.DeadLetter(bus.ReasonDeliveryLimit))
	if len(dead) != 1 || dead[0].Event.ID() != id || !strings.Contains(dead[0].Header.Get(bus.HeaderError), "bucket unavailable") {
		t.Fatalf("dead letters %v; want the start with its last error", dead)
	}
	if n := store.writes.Load(); n != 2 {
		t.Fatalf("the start was tried %d times, want exactly the 2 deliveries allowed", n)
	}
}

func TestWorkerStopsTwiceSafelyAndRefusesToStartAgain(t *testing.T) {
	t.Parallel()
	r := newWorkerRig(t, enginetest.NewStore(), 0)
	for range 2 {
		if err := r.worker.Stop(t.Context()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
	}
	if err := r.worker.Start(t.Context()); err == nil {
		t.Fatal("a stopped worker started again")
	}
}

func TestWorkerConfigIsValidated(t *testing.T) {
	t.Parallel()
	r, err := engine.NewRunner(engine.Config{Flows: []*engine.Flow{booking.Flow()}, Store: enginetest.NewStore(),
		Publisher: enginetest.NewPublisher(), Secret: natstest.Secret})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		cfg     bus.WorkerConfig
		wantErr string
	}{
		{"no runner", bus.WorkerConfig{}, "Runner is nil"},
		{"negative concurrency", bus.WorkerConfig{Runner: r, Concurrency: -1}, "Concurrency"},
		{"one delivery", bus.WorkerConfig{Runner: r, MaxDeliver: 1}, "MaxDeliver"},
		{"timeout past ack wait", bus.WorkerConfig{Runner: r, AckWait: time.Second, HandlerTimeout: 2 * time.Second}, "HandlerTimeout"},
		{"defaults", bus.WorkerConfig{Runner: r}, ""},
	}
	for _, tc := range cases {
		_, err := bus.NewWorker(nil, tc.cfg)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: NewWorker = %v, want an error naming %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestDeadLetterKeepsTheMessageWholeButRedactsTheResumeToken(t *testing.T) {
	t.Parallel()
	r := newWorkerRig(t, enginetest.NewStore(), 0)
	body := `{"specversion":"1.0","id":"d1","source":"/t","type":"io.interlock.run.resume","subject":"r-9","data":{"resumeToken":"LIVE-TOKEN","answers":7}}`
	natstest.PublishRaw(t, r.js, r.names.In("booking", "resume"), []byte(body), nats.Header{"Content-Type": {events.Structured}, "X-Trace": {"keep-me"}})
	natstest.WaitDrained(t, r.js, r.names.InStream())
	dead := natstest.Read(t, r.js, r.names.DeadLetterStream(), ">")
	if len(dead) != 1 {
		t.Fatalf("%d dead letters", len(dead))
	}
	want := strings.Replace(body, "LIVE-TOKEN", events.Redacted, 1)
	if string(dead[0].Data) != want || dead[0].Header.Get(bus.HeaderOriginal+"X-Trace") != "keep-me" {
		t.Fatalf("dead letter %s (headers %v); want %s with its headers", dead[0].Data, dead[0].Header, want)
	}
}

// lockedBuffer is a log sink safe for the worker's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWorkerLogsOneInfoLinePerRunEventAndNoSecrets: at info an operator
// sees each run started, interrupted, resumed, completed and cancelled,
// with flow, run, node and a duration, and never a token or an answer.
func TestWorkerLogsOneInfoLinePerRunEventAndNoSecrets(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
	log := zerolog.New(&buf).Level(zerolog.InfoLevel)
	r := newWorkerRigLogging(t, enginetest.NewStore(), 0, &log)
	natstest.Publish(t, r.js, r.names.In("booking", "start"), protocol.TypeStart, "r-1",
		map[string]any{"state": map[string]any{"name": "Ann", "phone": "1", "level": "beginner", "driver": map[string]any{"name": "Bob", "license": "D"}}})
	var in protocol.Interrupted
	natstest.Last(t, r.events(t, "r-1", "interrupted", 1), "interrupted").Decode(t, &in)
	natstest.Publish(t, r.js, r.names.In("booking", "resume"), protocol.TypeResume, "r-1",
		map[string]any{"resumeToken": in.ResumeToken, "answers": map[string]any{"email": "secret-answer@example.com"}})
	natstest.Last(t, r.events(t, "r-1", "interrupted", 2), "interrupted").Decode(t, &in)
	natstest.Publish(t, r.js, r.names.In("booking", "resume"), protocol.TypeResume, "r-1",
		map[string]any{"resumeToken": in.ResumeToken, "selected": "design"})
	r.events(t, "r-1", "completed", 1)
	natstest.Publish(t, r.js, r.names.In("booking", "start"), protocol.TypeStart, "r-2", nil)
	r.events(t, "r-2", "interrupted", 1)
	natstest.Publish(t, r.js, r.names.In("booking", "cancel"), protocol.TypeCancel, "r-2", nil)
	r.events(t, "r-2", "cancelled", 1)
	natstest.WaitDrained(t, r.js, r.names.InStream())

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	want := []struct{ run, msg, dur string }{
		{"r-1", "run started", ""}, {"r-1", "run interrupted", "since_start"}, {"r-1", "run resumed", "waited"},
		{"r-1", "run interrupted", "since_start"}, {"r-1", "run resumed", "waited"}, {"r-1", "run completed", "waited"},
		{"r-2", "run started", ""}, {"r-2", "run interrupted", "since_start"}, {"r-2", "run cancelled", "waited"},
	}
	var got []string
	i := 0
	for _, l := range lines {
		got = append(got, fmt.Sprint(l["run"], " ", l["message"]))
		if i < len(want) && l["run"] == want[i].run && l["message"] == want[i].msg {
			if l["level"] != "info" || l["flow"] != "booking" || l["node"] == nil || l["node"] == "" {
				t.Errorf("line %v lacks level info, flow or node", l)
			}
			if want[i].dur != "" && l[want[i].dur] == nil {
				t.Errorf("line %v lacks %s", l, want[i].dur)
			}
			i++
		}
	}
	if i != len(want) {
		t.Fatalf("info lines %v; want in order %v", got, want)
	}
	if out := buf.String(); strings.Contains(out, in.ResumeToken) || strings.Contains(out, "secret-answer") {
		t.Fatalf("the log holds a token or an answer:\n%s", out)
	}
}
