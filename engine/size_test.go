package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/protocol"
)

// sizeLimit is the largest checkpoint the stores of these tests take: a
// tenth of NATS's default max_payload, so that an origin under
// engine.MaxOriginSize can be most of it.
const sizeLimit = 100_000

// countingStore is an in-memory store that counts the writes refused as too
// large, and refuses every write once there were too many of them, so that
// a transition writing without end fails instead of running for ever.
type countingStore struct {
	*enginetest.Store
	mu       sync.Mutex
	tooLarge int
}

// maxTooLarge is more oversized writes than one command may make: the
// transition's, then the failed run's.
const maxTooLarge = 10

var errEndless = errors.New("test store: the transition keeps writing oversized checkpoints")

func (s *countingStore) count(err error) error {
	var big *engine.TooLargeError
	if !errors.As(err, &big) {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tooLarge++
	if s.tooLarge > maxTooLarge {
		return errEndless
	}
	return err
}

func (s *countingStore) Create(ctx context.Context, cp *engine.Checkpoint) (uint64, error) {
	rev, err := s.Store.Create(ctx, cp)
	return rev, s.count(err)
}

func (s *countingStore) Update(ctx context.Context, cp *engine.Checkpoint, rev uint64) (uint64, error) {
	next, err := s.Store.Update(ctx, cp, rev)
	return next, s.count(err)
}

func (s *countingStore) writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tooLarge
}

// sizeRig is a runner on a store that takes checkpoints up to sizeLimit.
type sizeRig struct {
	store  *countingStore
	pub    *enginetest.Publisher
	runner *engine.Runner
}

func newSizeRig(t *testing.T, flows ...*engine.Flow) *sizeRig {
	t.Helper()
	inner := enginetest.NewStore()
	inner.Limit = sizeLimit
	r := &sizeRig{store: &countingStore{Store: inner}, pub: enginetest.NewPublisher()}
	var err error
	r.runner, err = engine.NewRunner(engine.Config{Flows: flows, Store: r.store, Publisher: r.pub,
		Secret: []byte("size-test-secret-size-test-secret-0123")})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// refused checks that out is a refusal with code, mentioning each of want.
func refused(t *testing.T, what string, out engine.Outcome, err error, code protocol.Code, want ...string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if out.Refused == nil || out.Refused.Code != code {
		t.Fatalf("%s: outcome %+v; want refused %s", what, out, code)
	}
	for _, w := range want {
		if !strings.Contains(out.Refused.Message, w) {
			t.Errorf("%s: refusal %q does not say %q", what, out.Refused.Message, w)
		}
	}
}

// waitFlow asks one question, then completes.
func waitFlow() *engine.Flow {
	type s struct {
		Email string `json:"email"`
	}
	return engine.NewFlow[s]("wait").
		Node("ask", func(ctx context.Context, n *engine.Node[s]) error {
			_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{Field: "email", Question: "Email?"}}})
			return err
		}).
		Start("ask").Edge("ask", engine.End).MustBuild()
}

// doneFlow completes at once.
func doneFlow() *engine.Flow {
	return engine.NewFlow[map[string]any]("done").
		Node("noop", func(context.Context, *engine.Node[map[string]any]) error { return nil }).
		Start("noop").Edge("noop", engine.End).MustBuild()
}

func origin(n int) json.RawMessage {
	return json.RawMessage(`{"note":"` + strings.Repeat("o", n) + `"}`)
}

// TestAStartWhoseOriginFillsTheCheckpointIsRefusedAfterOneWrite: the
// origin is echoed in the started event, so a start whose origin is over
// half the limit cannot be stored; it is refused at once, and the store
// sees one oversized write, not a failed run that is too large again.
func TestAStartWhoseOriginFillsTheCheckpointIsRefusedAfterOneWrite(t *testing.T) {
	r := newSizeRig(t, doneFlow())
	out, err := r.runner.Start(t.Context(), engine.Start{Flow: "done", Run: "r-1", Origin: origin(60_000),
		Inbound: engine.Inbound{EventID: "ev-1", Source: "/test"}})
	refused(t, "start", out, err, protocol.CodeInvalidPayload, "max_payload")
	if n := r.store.writes(); n != 1 {
		t.Fatalf("%d oversized writes; want 1", n)
	}
	if _, _, err := r.store.Load(t.Context(), "done", "r-1"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a refused start left a checkpoint: %v", err)
	}
}

// TestAFailedRunThatWouldNotFitEitherIsRefused: a start that brings less
// than half the limit, whose checkpoint is too large nonetheless, fails
// the run; when even the failed run's checkpoint (which echoes the origin
// in its failed event) is too large, the start is refused instead.
func TestAFailedRunThatWouldNotFitEitherIsRefused(t *testing.T) {
	r := newSizeRig(t, doneFlow())
	out, err := r.runner.Start(t.Context(), engine.Start{Flow: "done", Run: "r-2", Origin: origin(sizeLimit/2 - 200),
		Inbound: engine.Inbound{EventID: "ev-2", Source: "/test"}})
	refused(t, "start", out, err, protocol.CodeInvalidPayload, "max_payload")
	if n := r.store.writes(); n != 2 {
		t.Fatalf("%d oversized writes; want 2 (the run's, then the failed run's)", n)
	}
	if _, _, err := r.store.Load(t.Context(), "done", "r-2"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a refused start left a checkpoint: %v", err)
	}
}

// TestAnOriginOverTheLimitIsRefused: origin is echoed in every event of a
// run or a tool call, so a start or a tool request bringing more than
// MaxOriginSize of it is refused before anything is written.
func TestAnOriginOverTheLimitIsRefused(t *testing.T) {
	r := newSizeRig(t, doneFlow(), engine.GateFlow())
	big := origin(engine.MaxOriginSize)
	out, err := r.runner.Start(t.Context(), engine.Start{Flow: "done", Run: "r-3", Origin: big,
		Inbound: engine.Inbound{EventID: "ev-3", Source: "/test"}})
	refused(t, "start", out, err, protocol.CodeInvalidPayload, "origin", "65536", "every event")
	if out.DeadLetter != string(protocol.CodeInvalidPayload) {
		t.Errorf("start with a large origin: dead letter %q, want %s", out.DeadLetter, protocol.CodeInvalidPayload)
	}
	for _, rule := range []*engine.GateRule{nil, {Name: "all", Reason: "check"}} {
		out, err = r.runner.Request(t.Context(), engine.ToolRequest{CallID: "call-3", Tool: "refund", Origin: big, Rule: rule,
			Inbound: engine.Inbound{EventID: "ev-4", Source: "/test"}})
		refused(t, "tool request", out, err, protocol.CodeInvalidPayload, "origin", "65536")
	}
	if n := r.store.writes(); n != 0 {
		t.Fatalf("%d oversized writes; want none", n)
	}
	for _, m := range r.pub.Messages("") {
		if m.Kind != protocol.EventRefused {
			t.Fatalf("a refused command published %s", m.Kind)
		}
	}
	// At the limit, a start is stored (under NATS's default max_payload)
	// and its events carry the origin.
	h := enginetest.New(t, doneFlow())
	ok := origin(engine.MaxOriginSize - len(origin(0)))
	out, err = h.Runner.Start(t.Context(), engine.Start{Flow: "done", Run: "r-4", Origin: ok,
		Inbound: engine.Inbound{EventID: "ev-5", Source: "/test"}})
	if err != nil || out.Refused != nil || out.Status != engine.Completed {
		t.Fatalf("start with an origin of %d bytes: %+v, %v", len(ok), out, err)
	}
	for _, e := range h.Events("r-4") {
		if !strings.Contains(string(e.Raw), string(ok)) {
			t.Errorf("%s event does not carry the origin", e.Kind)
		}
	}
}

// TestAToolRequestWhoseArgsFillTheCheckpointIsRefused: a tool request's
// arguments become the gate run's state; too many of them are refused.
func TestAToolRequestWhoseArgsFillTheCheckpointIsRefused(t *testing.T) {
	r := newSizeRig(t, engine.GateFlow())
	args := map[string]json.RawMessage{"blob": json.RawMessage(`"` + strings.Repeat("a", 70_000) + `"`)}
	out, err := r.runner.Request(t.Context(), engine.ToolRequest{CallID: "call-4", Tool: "refund", Args: args,
		Rule: &engine.GateRule{Name: "all", Reason: "check"}, Inbound: engine.Inbound{EventID: "ev-6", Source: "/test"}})
	refused(t, "tool request", out, err, protocol.CodeInvalidPayload, "max_payload")
	if n := r.store.writes(); n > 2 {
		t.Fatalf("%d oversized writes; want at most 2", n)
	}
}

// TestAResumeOrCancelThatBringsTooMuchIsRefusedAndTheRunWaits: what a
// command brings (answers, an update, a cancel's reason) counts as its
// input: a command that brings most of the limit is refused, and the run
// stays waiting, rather than failed as if a node had grown its state.
func TestAResumeOrCancelThatBringsTooMuchIsRefusedAndTheRunWaits(t *testing.T) {
	r := newSizeRig(t, waitFlow())
	if out, err := r.runner.Start(t.Context(), engine.Start{Flow: "wait", Run: "r-5",
		Inbound: engine.Inbound{EventID: "ev-7", Source: "/test"}}); err != nil || out.Status != engine.Waiting {
		t.Fatalf("start: %+v, %v", out, err)
	}
	blob := strings.Repeat("b", 60_000)
	out, err := r.runner.Cancel(t.Context(), engine.Cancel{Flow: "wait", Run: "r-5", Reason: blob,
		Inbound: engine.Inbound{EventID: "ev-8", Source: "/test"}})
	refused(t, "cancel", out, err, protocol.CodeInvalidPayload, "max_payload")
	pending, _, err := r.store.Load(t.Context(), "wait", "r-5")
	if err != nil {
		t.Fatal(err)
	}
	out, err = r.runner.Resume(t.Context(), engine.Resume{Flow: "wait", Run: "r-5", Trusted: true, RolesKnown: true,
		RequestID: pending.Interrupt.RequestID,
		Answers:   map[string]json.RawMessage{"email": json.RawMessage(`"ann@example.com"`)},
		Update:    map[string]json.RawMessage{"notes": json.RawMessage(`"` + blob + `"`)},
		Inbound:   engine.Inbound{EventID: "ev-9", Source: "/test"}})
	refused(t, "resume", out, err, protocol.CodeInvalidPayload, "max_payload")
	cp, _, err := r.store.Load(t.Context(), "wait", "r-5")
	if err != nil || cp.Status != engine.Waiting {
		t.Fatalf("run after the refusals: %+v, %v; want waiting", cp, err)
	}
}

// TestARefusalEchoesABoundedPartOfWhatTheCommandSent: a refusal names the
// command's event id and request id, and says what was wrong; however long
// they are, the refused event stays small enough to publish.
func TestARefusalEchoesABoundedPartOfWhatTheCommandSent(t *testing.T) {
	r := newSizeRig(t, waitFlow())
	long := strings.Repeat("x", 600_000)
	out, err := r.runner.Resume(t.Context(), engine.Resume{Flow: "wait", Run: "r-none", RequestID: long,
		Inbound: engine.Inbound{EventID: long, Source: long}})
	refused(t, "resume of an unknown run", out, err, protocol.CodeUnknownRun)
	out, err = r.runner.Start(t.Context(), engine.Start{Flow: "wait", Run: "r-6",
		State:   map[string]json.RawMessage{long: json.RawMessage("1")},
		Inbound: engine.Inbound{EventID: long, Source: long, Traceparent: long}})
	refused(t, "start with a bad state field", out, err, protocol.CodeInvalidPayload)
	for _, m := range r.pub.Messages("") {
		b, err := json.Marshal(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if len(b)+len(m.Traceparent) > 16<<10 {
			t.Errorf("%s %s is %d bytes (traceparent %d)", m.Stream, m.Kind, len(b), len(m.Traceparent))
		}
	}
}
