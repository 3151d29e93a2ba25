package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/kv"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// Environment of the crash worker, a copy of the test binary that runs one
// worker and dies at a chosen point.
const (
	envCrashWorker    = "INTERLOCK_TEST_CRASH_WORKER"     // NATS URL
	envCrashOn        = "INTERLOCK_TEST_CRASH_ON"         // die when publishing an event of this kind
	envCrashAfterStep = "INTERLOCK_TEST_CRASH_AFTER_STEP" // die in the pay flow after its step is recorded
	envCrashAtWrite   = "INTERLOCK_TEST_CRASH_AT_WRITE"   // die just before the transition's n-th write
	crashExit         = 3
	doneExit          = 4 // the transition finished with fewer writes
	testAckWait       = 2 * time.Second
)

func TestMain(m *testing.M) {
	if url := os.Getenv(envCrashWorker); url != "" {
		os.Exit(crashWorker(url))
	}
	goleak.VerifyTestMain(m)
}

// crashPublisher dies, as a killed process would, when asked to publish an
// event of one kind: after the checkpoint is written, before anything of the
// transition is published.
type crashPublisher struct {
	engine.Publisher
	kind string
}

func (p crashPublisher) Publish(ctx context.Context, msgs []engine.Message, recheck bool) error {
	for _, m := range msgs {
		if m.Kind == p.kind {
			os.Exit(crashExit)
		}
	}
	return p.Publisher.Publish(ctx, msgs, recheck)
}

// writeCounter kills the process just before the n-th write of the
// worker's first transition (a checkpoint, a pending index entry, or one
// message published), as kill -9 would.
type writeCounter struct {
	mu     sync.Mutex
	n, max int
}

func (c *writeCounter) write() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.n == c.max {
		os.Exit(crashExit)
	}
}

// crashStore counts the store's writes.
type crashStore struct {
	engine.Store
	w *writeCounter
}

func (s crashStore) Create(ctx context.Context, cp *engine.Checkpoint) (uint64, error) {
	s.w.write()
	return s.Store.Create(ctx, cp)
}

func (s crashStore) Update(ctx context.Context, cp *engine.Checkpoint, rev uint64) (uint64, error) {
	s.w.write()
	return s.Store.Update(ctx, cp, rev)
}

func (s crashStore) PutPending(ctx context.Context, p *protocol.Pending) error {
	s.w.write()
	return s.Store.PutPending(ctx, p)
}

func (s crashStore) DeletePending(ctx context.Context, flow, run string, rev uint64) error {
	s.w.write()
	return s.Store.DeletePending(ctx, flow, run, rev)
}

// countingPublisher publishes a transition's messages one at a time,
// counting each as a write.
type countingPublisher struct {
	engine.Publisher
	w *writeCounter
}

func (p countingPublisher) Publish(ctx context.Context, msgs []engine.Message, recheck bool) error {
	for i := range msgs {
		p.w.write()
		if err := p.Publisher.Publish(ctx, msgs[i:i+1], recheck); err != nil {
			return err
		}
	}
	return nil
}

func crashWorker(url string) int {
	ctx := context.Background()
	nc, js, err := wire.Connect(ctx, wire.ConnConfig{URL: url})
	if err != nil {
		return 1
	}
	defer nc.Close()
	names, _ := wire.NewNames("")
	runs, err1 := js.KeyValue(ctx, names.RunsBucket())
	pending, err2 := js.KeyValue(ctx, names.PendingBucket())
	if err := errors.Join(err1, err2); err != nil {
		return 1
	}
	var store engine.Store = kv.New(runs, pending)
	var pub engine.Publisher = crashPublisher{bus.NewPublisher(js, names, "interlock/crash"), os.Getenv(envCrashOn)}
	var observe func(bus.Observation)
	if at := os.Getenv(envCrashAtWrite); at != "" {
		n, err := strconv.Atoi(at)
		if err != nil {
			return 1
		}
		w := &writeCounter{max: n}
		store, pub = crashStore{store, w}, countingPublisher{bus.NewPublisher(js, names, "interlock/crash"), w}
		// Every write done and no crash: the transition has fewer.
		observe = func(bus.Observation) { os.Exit(doneExit) }
	}
	runner, err := engine.NewRunner(engine.Config{Flows: testFlows(), Store: store, Secret: natstest.Secret, Publisher: pub})
	if err != nil {
		return 1
	}
	w, err := bus.NewWorker(js, bus.WorkerConfig{Names: names, Runner: runner, Concurrency: 1, AckWait: testAckWait, HandlerTimeout: time.Second, Observe: observe})
	if err != nil || w.Start(ctx) != nil {
		return 1
	}
	<-time.After(time.Minute) // the worker exits the process long before
	return 1
}

// runCrashWorker runs the crash worker until it dies, and checks it died
// where it was told to.
func runCrashWorker(t *testing.T, url string, env ...string) {
	t.Helper()
	if code := crashWorkerExit(t, url, env...); code != crashExit {
		t.Fatalf("crash worker exited %d, want %d", code, crashExit)
	}
}

// crashWorkerExit runs the crash worker until it dies, and returns its
// exit code: crashExit or doneExit.
func crashWorkerExit(t *testing.T, url string, env ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), natstest.Wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, envCrashWorker+"="+url)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || (exit.ExitCode() != crashExit && exit.ExitCode() != doneExit) {
		t.Fatalf("crash worker: %v (want exit %d or %d)\n%s", err, crashExit, doneExit, out)
	}
	return exit.ExitCode()
}

// payState is the state of the pay flow, which charges in a step, then asks
// for a confirmation.
type payState struct {
	Ledger  string   `json:"ledger"`
	Amount  int      `json:"amount"`
	Receipt string   `json:"receipt,omitempty"`
	Confirm string   `json:"confirm,omitempty"`
	Notes   []string `json:"notes,omitempty"`
}

func payFlow() *engine.Flow {
	return engine.NewFlow[payState]("pay").
		Node("charge", func(ctx context.Context, n *engine.Node[payState]) error {
			s := n.State()
			receipt, err := engine.Step(ctx, n, "charge", func(context.Context) (string, error) {
				f, err := os.OpenFile(s.Ledger, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
				if err != nil {
					return "", err
				}
				defer f.Close()
				_, err = f.WriteString("charged\n")
				return "rc-1", err
			})
			if err != nil {
				return err
			}
			if os.Getenv(envCrashAfterStep) != "" {
				os.Exit(crashExit)
			}
			if err := n.Set("receipt", receipt); err != nil {
				return err
			}
			_, err = n.Ask(ctx, engine.Questions{Questions: []engine.Question{{
				Field: "confirm", Question: "Confirm the charge?",
				Validate: func(_ context.Context, v any) (engine.Update, error) {
					if v != "yes" {
						return nil, engine.Reject("Answer yes to confirm.")
					}
					return nil, nil
				},
			}}})
			return err
		}).
		Start("charge").Reducer("notes", engine.Append).MustBuild()
}

func testFlows() []*engine.Flow { return []*engine.Flow{booking.Flow(), payFlow(), refund.Flow()} }

func ledgerLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// workerlessRig is a server with Interlock's streams and buckets and no
// worker: the test runs the crash worker, then healthy ones, itself.
func workerlessRig(t *testing.T) *rig {
	t.Helper()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	names, _ := wire.NewNames("")
	if err := bus.Provision(t.Context(), js, names, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := kv.Provision(t.Context(), js, names, kv.BucketConfig{}); err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, srv: srv, js: js, names: names}
}

func TestWorkerKilledBetweenCheckpointAndPublishLosesAndDuplicatesNothing(t *testing.T) {
	t.Parallel()
	r := workerlessRig(t)
	srv, js, names := r.srv, r.js, r.names
	const run = "r-crash"
	r.start("booking", run, nil)
	runCrashWorker(t, natstest.WorkersURL(srv), envCrashOn+"=interrupted")

	cp, rev := r.checkpoint("booking", run)
	if cp.Status != engine.Waiting {
		t.Fatalf("after the crash the checkpoint is %s, want waiting", cp.Status)
	}
	if got := natstest.Read(t, js, names.EventStream(), names.Event("booking", run, ">")); len(got) != 0 {
		t.Fatalf("the crashed worker published %d events", len(got))
	}

	natstest.StartWith(t, srv, interlock.Config{Flows: testFlows(), Secret: natstest.Secret, AckWait: testAckWait})
	in := r.interrupt("booking", run, 1)
	if in.Checkpoint != rev || in.RequestID != cp.Interrupt.RequestID {
		t.Fatalf("published interrupt (checkpoint %d, %s) is not the checkpointed one (%d, %s)", in.Checkpoint, in.RequestID, rev, cp.Interrupt.RequestID)
	}
	if _, rev2 := r.checkpoint("booking", run); rev2 != rev {
		t.Fatalf("redelivery moved the checkpoint from %d to %d: the transition ran twice", rev, rev2)
	}
	r.resume("booking", run, answer(in, map[string]any{"email": "a@b.c"}))
	evs := r.wait("booking", run, "interrupted", 2)
	if n := natstest.Count(evs, "started"); n != 1 {
		t.Fatalf("%d started events, want 1", n)
	}
	if n := natstest.Count(evs, "interrupted"); n != 2 {
		t.Fatalf("%d interrupted events, want 2", n)
	}
	// The crash came after the started record was stored, before the
	// events: the redelivery stored it no second time.
	var actions []string
	for _, a := range natstest.Read(t, js, names.AuditStream(), names.Audit("booking", run)) {
		var rec protocol.AuditRecord
		a.Decode(t, &rec)
		actions = append(actions, rec.Action)
	}
	if got := strings.Join(actions, ","); got != "started,answered" {
		t.Fatalf("audit records %s, want started,answered once each", got)
	}
}

func TestWorkerKilledBetweenAnApprovalsCheckpointAndItsPublish(t *testing.T) {
	t.Parallel()
	r := workerlessRig(t)
	srv, js, names := r.srv, r.js, r.names
	const run = "r-crash-approval"
	r.start("refund", run, map[string]any{"orderId": "o-1", "amount": 4800, "last4": "4821"})
	// The started record is the first message the transition publishes.
	runCrashWorker(t, natstest.WorkersURL(srv), envCrashOn+"=started")

	cp, rev := r.checkpoint("refund", run)
	if cp.Status != engine.Waiting || cp.Interrupt.Kind != protocol.KindApproval {
		t.Fatalf("after the crash the checkpoint is %s %+v, want waiting on the approval", cp.Status, cp.Interrupt)
	}
	if got := natstest.Read(t, js, names.EventStream(), names.Event("refund", run, ">")); len(got) != 0 {
		t.Fatalf("the crashed worker published %d events", len(got))
	}
	if got := natstest.Read(t, js, names.AuditStream(), names.Audit("refund", run)); len(got) != 0 {
		t.Fatalf("the crashed worker appended %d audit records", len(got))
	}

	natstest.StartWith(t, srv, interlock.Config{Flows: testFlows(), Secret: natstest.Secret, AckWait: testAckWait})
	in := r.interrupt("refund", run, 1)
	if in.Checkpoint != rev || in.RequestID != cp.Interrupt.RequestID || in.Kind != "approval" {
		t.Fatalf("published approval (checkpoint %d, %s) is not the checkpointed one (%d, %s)", in.Checkpoint, in.RequestID, rev, cp.Interrupt.RequestID)
	}
	r.resume("refund", run, map[string]any{"resumeToken": in.ResumeToken, "decision": "approve", "approver": "sam"})
	evs := r.wait("refund", run, "completed", 1)
	for kind, want := range map[string]int{"started": 1, "interrupted": 1, "resumed": 1, "completed": 1} {
		if n := natstest.Count(evs, kind); n != want {
			t.Fatalf("%d %s events, want %d", n, kind, want)
		}
	}
	audit := natstest.Read(t, js, names.AuditStream(), names.Audit("refund", run))
	var actions []string
	for _, a := range audit {
		var rec protocol.AuditRecord
		a.Decode(t, &rec)
		actions = append(actions, rec.Action)
	}
	if got := strings.Join(actions, ","); got != "started,approved" {
		t.Fatalf("audit records %s, want started,approved once each", got)
	}
}

func TestRedeliveredResumeHasItsEffectOnce(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	names, _ := wire.NewNames("")
	r := &rig{t: t, srv: srv, js: js, names: names}
	const run = "r-redeliver"

	first := natstest.StartWith(t, srv, interlock.Config{Flows: testFlows(), Secret: natstest.Secret, AckWait: testAckWait})
	r.start("booking", run, nil)
	in := r.interrupt("booking", run, 1)
	if err := first.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}

	r.resume("booking", run, map[string]any{"resumeToken": in.ResumeToken,
		"answers": map[string]any{"email": "a@b.c"}, "update": map[string]any{"notes": "called back"}})
	runCrashWorker(t, natstest.WorkersURL(srv), envCrashOn+"=resumed")

	natstest.StartWith(t, srv, interlock.Config{Flows: testFlows(), Secret: natstest.Secret, AckWait: testAckWait})
	evs := r.wait("booking", run, "interrupted", 2)
	if n := natstest.Count(evs, "resumed"); n != 1 {
		t.Fatalf("%d resumed events, want 1", n)
	}
	cp, _ := r.checkpoint("booking", run)
	if got := string(cp.State["notes"]); got != `["called back"]` {
		t.Fatalf("notes = %s, want the update applied once", got)
	}
	if cp.Node != "ask_contact" {
		t.Fatalf("run at %s, want ask_contact", cp.Node)
	}
}

func TestWorkerKilledMidNodeDoesNotRepeatAStep(t *testing.T) {
	t.Parallel()
	r := workerlessRig(t)
	srv := r.srv
	ledger := filepath.Join(t.TempDir(), "ledger")
	const run = "r-step"
	r.start("pay", run, map[string]any{"ledger": ledger, "amount": 4800})
	runCrashWorker(t, natstest.WorkersURL(srv), envCrashAfterStep+"=1")
	if cp, _ := r.checkpoint("pay", run); cp.Status != engine.Running || cp.Steps["charge"] == nil {
		t.Fatalf("after the crash: status %s, steps %v; want the step recorded mid-node", cp.Status, cp.Steps)
	}

	natstest.StartWith(t, srv, interlock.Config{Flows: testFlows(), Secret: natstest.Secret, AckWait: testAckWait})
	in := r.interrupt("pay", run, 1)
	r.resume("pay", run, answer(in, map[string]any{"confirm": "no"}))
	in = r.interrupt("pay", run, 2)
	r.resume("pay", run, answer(in, map[string]any{"confirm": "yes"}))
	evs := r.wait("pay", run, "completed", 1)
	if n := ledgerLines(t, ledger); n != 1 {
		t.Fatalf("charged %d times, want once", n)
	}
	if n := natstest.Count(evs, "started"); n != 1 {
		t.Fatalf("%d started events", n)
	}
	var done protocol.Completed
	natstest.Last(t, evs, "completed").Decode(t, &done)
	if !strings.Contains(string(done.State), `"receipt":"rc-1"`) {
		t.Fatalf("final state %s lacks the replayed receipt", done.State)
	}
}

func TestServerRestartBetweenInterruptAndResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := natstest.StartServer(t, dir)
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: testFlows()}) // generated secret, kept in NATS
	nc, js := natstest.Connect(t, srv.ClientURL())
	names := svc.Names()
	r := &rig{t: t, srv: srv, js: js, names: names}
	const run = "r-restart"
	r.start("booking", run, nil)
	in := r.interrupt("booking", run, 1)

	if err := svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	srv.Shutdown()

	srv = natstest.StartServer(t, dir)
	natstest.StartWith(t, srv, interlock.Config{Flows: testFlows()})
	_, js = natstest.Connect(t, srv.ClientURL())
	r = &rig{t: t, srv: srv, js: js, names: names}

	r.resume("booking", run, answer(in, map[string]any{"email": "no-at-sign"}))
	in = r.interrupt("booking", run, 2)
	if !strings.HasPrefix(in.Questions[0].Context, "ERROR: ") {
		t.Fatalf("validator did not run after the restart: %+v", in.Questions)
	}
	r.resume("booking", run, answer(in, map[string]any{"email": "a@b.c"}))
	if in = r.interrupt("booking", run, 3); in.Node != "ask_contact" {
		t.Fatalf("after restart the run went to %s", in.Node)
	}
}

// TestAWorkerKilledBeforeAnyWriteOfATransitionLosesAndDoublesNothing
// kills a worker, as kill -9 would, just before each write of a
// transition in turn (a checkpoint, a pending index entry, each audit
// record, deadline and event), and after the last one before its ack;
// a healthy worker then takes over. Whatever the point, the refund's
// start pauses it once and its approval completes it once: each event
// once, an audit chain that verifies, the pending index right.
func TestAWorkerKilledBeforeAnyWriteOfATransitionLosesAndDoublesNothing(t *testing.T) {
	t.Parallel()
	r := workerlessRig(t)
	srv, js, names := r.srv, r.js, r.names
	nc, _ := natstest.Connect(t, srv.ClientURL())
	audit := client.New(nc, js, names, "/test", natstest.Wait)
	state := map[string]any{"orderId": "o-1", "amount": 900, "currency": "USD", "customer": "Ann", "last4": "4821"}
	serve := func() *interlock.Service {
		return natstest.StartWith(t, srv, interlock.Config{Flows: testFlows(), Secret: natstest.Secret, AckWait: testAckWait})
	}
	stop := func(svc *interlock.Service) {
		if err := svc.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	check := func(run string, want map[string]int, pending bool) {
		t.Helper()
		evs := natstest.Read(t, js, names.EventStream(), names.Event("refund", run, ">"))
		for kind, n := range want {
			if got := natstest.Count(evs, kind); got != n {
				t.Errorf("%s: %d %s events, want %d", run, got, kind, n)
			}
		}
		rep, err := audit.VerifyAudit(t.Context(), "refund", run)
		if err != nil || !rep.Intact {
			t.Errorf("%s: the audit chain does not verify: %v %+v", run, err, rep)
		}
		pk, err := js.KeyValue(t.Context(), names.PendingBucket())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pk.Get(t.Context(), "refund."+run); (err == nil) != pending {
			t.Errorf("%s: pending entry present %v, want %v (%v)", run, err == nil, pending, err)
		}
	}
	for _, phase := range []string{"start", "approve"} {
		for n := 1; ; n++ {
			if n > 40 {
				t.Fatalf("%s: the crash worker never finished a transition", phase)
			}
			run := fmt.Sprintf("r-%s-%d", phase, n)
			var in protocol.Interrupted
			if phase == "approve" {
				svc := serve()
				r.start("refund", run, state)
				in = r.interrupt("refund", run, 1)
				stop(svc)
				r.vote("refund", run, refund.SupervisorRole, in, "sam", "approve")
			} else {
				r.start("refund", run, state)
			}
			code := crashWorkerExit(t, natstest.WorkersURL(srv), envCrashAtWrite+"="+strconv.Itoa(n))
			svc := serve()
			if phase == "start" {
				r.interrupt("refund", run, 1)
				r.wait("refund", run, "interrupted", 1)
				check(run, map[string]int{"started": 1, "interrupted": 1}, true)
			} else {
				r.wait("refund", run, "completed", 1)
				check(run, map[string]int{"started": 1, "interrupted": 1, "resumed": 1, "completed": 1}, false)
			}
			stop(svc)
			if code == doneExit {
				t.Logf("%s: killed before each of its %d writes, and after them", phase, n-1)
				break
			}
		}
	}
}
