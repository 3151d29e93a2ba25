// Package enginetest helps flow authors test their flows without NATS: an
// in-memory [Store] and [Publisher] that keep the engine's promises
// (compare-and-set writes, ordered publishing), and a [Harness] that starts
// runs, reads their interrupts and answers them in a few lines.
//
//	h := enginetest.New(t, myFlow)
//	run := h.Start(map[string]any{"name": "Ann"})
//	in := h.Interrupt(run)          // the pending interrupt, as published
//	h.Answer(run, map[string]any{"email": "ann@example.com"})
//	h.WantStatus(run, engine.Completed)
package enginetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/protocol"
)

// DefaultLimit is the largest checkpoint a [Store] takes, as NATS's default
// max_payload.
const DefaultLimit = 1 << 20

// Store is an in-memory [engine.Store]. Revisions increase across all runs,
// as a JetStream key-value bucket's do, and a checkpoint larger than Limit
// is refused as one larger than the server's max_payload is.
type Store struct {
	// Limit is the largest checkpoint document taken, in bytes. Defaults
	// to DefaultLimit.
	Limit int

	mu       sync.Mutex
	rev      uint64
	runs     map[string]storedRun
	pending  map[string]*protocol.Pending
	finished []engine.Finished
	// finishedIDs are the ids of the finished entries written, to drop a
	// repeat as JetStream's deduplication does.
	finishedIDs map[string]bool
}

type storedRun struct {
	doc []byte
	rev uint64
}

var (
	_ engine.Store         = (*Store)(nil)
	_ engine.DocLoader     = (*Store)(nil)
	_ engine.FinishedIndex = (*Store)(nil)
)

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{Limit: DefaultLimit, runs: map[string]storedRun{}, pending: map[string]*protocol.Pending{}, finishedIDs: map[string]bool{}}
}

func (s *Store) tooLarge(cp *engine.Checkpoint, b []byte) error {
	if s.Limit > 0 && len(b) > s.Limit {
		return &engine.TooLargeError{Flow: cp.Flow, Run: cp.Run, Size: len(b), Limit: s.Limit}
	}
	return nil
}

func key(flow, run string) string { return flow + "." + run }

// Load implements [engine.Store].
func (s *Store) Load(_ context.Context, flow, run string) (*engine.Checkpoint, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[key(flow, run)]
	if !ok {
		return nil, 0, engine.ErrNotFound
	}
	var cp engine.Checkpoint
	if err := json.Unmarshal(r.doc, &cp); err != nil {
		return nil, 0, err
	}
	return &cp, r.rev, nil
}

// LoadDoc implements [engine.DocLoader].
func (s *Store) LoadDoc(_ context.Context, flow, run string) ([]byte, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[key(flow, run)]
	if !ok {
		return nil, 0, engine.ErrNotFound
	}
	return slices.Clone(r.doc), r.rev, nil
}

// Create implements [engine.Store].
func (s *Store) Create(_ context.Context, cp *engine.Checkpoint) (uint64, error) {
	b, err := cp.AppendJSON(make([]byte, 0, 2048))
	if err != nil {
		return 0, err
	}
	if err := s.tooLarge(cp, b); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(cp.Flow, cp.Run)
	if _, ok := s.runs[k]; ok {
		return 0, engine.ErrExists
	}
	s.rev++
	s.runs[k] = storedRun{doc: b, rev: s.rev}
	return s.rev, nil
}

// Update implements [engine.Store].
func (s *Store) Update(_ context.Context, cp *engine.Checkpoint, rev uint64) (uint64, error) {
	b, err := cp.AppendJSON(make([]byte, 0, 2048))
	if err != nil {
		return 0, err
	}
	if err := s.tooLarge(cp, b); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(cp.Flow, cp.Run)
	if r, ok := s.runs[k]; !ok || r.rev != rev {
		return 0, &engine.ConflictError{Flow: cp.Flow, Run: cp.Run, Expected: rev}
	}
	s.rev++
	s.runs[k] = storedRun{doc: b, rev: s.rev}
	return s.rev, nil
}

// PutPending implements [engine.Store].
func (s *Store) PutPending(_ context.Context, p *protocol.Pending) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *p
	s.pending[key(p.Flow, p.Run)] = &c
	return nil
}

// DeletePending implements [engine.Store].
func (s *Store) DeletePending(_ context.Context, flow, run string, _ uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, key(flow, run))
	return nil
}

// PutFinished implements [engine.FinishedIndex]: it appends the entry,
// dropping one whose id it has already seen.
func (s *Store) PutFinished(_ context.Context, id string, f *engine.Finished) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finishedIDs[id] {
		return nil
	}
	s.finishedIDs[id] = true
	s.finished = append(s.finished, *f)
	return nil
}

// Finished returns the finished-runs index, in the order the runs
// finished.
func (s *Store) Finished() []engine.Finished {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.finished)
}

// Pending returns the pending index, sorted by key.
func (s *Store) Pending() []protocol.Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []protocol.Pending
	for _, k := range slices.Sorted(mapsKeys(s.pending)) {
		out = append(out, *s.pending[k])
	}
	return out
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Publisher is an in-memory [engine.Publisher] that keeps what it is given,
// dropping a message whose id it has already seen, as JetStream does
// (within its window; this publisher never forgets an id). Like
// bus.Publisher, it stores a call's audit records and deadlines before its
// events.
type Publisher struct {
	mu   sync.Mutex
	seen map[string]bool
	msgs []engine.Message
}

var _ engine.Publisher = (*Publisher)(nil)

// NewPublisher returns an empty publisher.
func NewPublisher() *Publisher { return &Publisher{seen: map[string]bool{}} }

// Publish implements [engine.Publisher].
func (p *Publisher) Publish(_ context.Context, msgs []engine.Message, _ bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, events := range []bool{false, true} {
		for _, m := range msgs {
			if p.seen[m.ID] || (m.Stream == engine.EventStream) != events {
				continue
			}
			p.seen[m.ID] = true
			p.msgs = append(p.msgs, m)
		}
	}
	return nil
}

// Messages returns the messages of one run (all runs if run is ""), in order.
func (p *Publisher) Messages(run string) []engine.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []engine.Message
	for _, m := range p.msgs {
		if run == "" || m.Run == run {
			out = append(out, m)
		}
	}
	return out
}

// Event is an outbound event's data, decoded.
type Event struct {
	Kind string
	Data map[string]any
	Raw  json.RawMessage
}

// Interrupt is an interrupted event's data, decoded.
type Interrupt = protocol.Interrupted

// TB is the part of testing.TB the harness uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Context() context.Context
}

// Harness runs flows on an in-memory store and publisher.
type Harness struct {
	t         TB
	Runner    *engine.Runner
	Store     *Store
	Publisher *Publisher
	flow      string
	n         int
	// offset is how far the harness's clock is ahead of the wall clock.
	offset time.Duration
	// cfg is the runner's configuration but for what the harness sets.
	cfg engine.Config
}

// New returns a harness running flows; the first is the default flow of
// Start. It fails the test if the runner cannot be made. Callers are not
// identified: a name a command gives is taken at its word.
func New(t TB, flows ...*engine.Flow) *Harness {
	t.Helper()
	return NewWithConfig(t, engine.Config{}, flows...)
}

// NewWithConfig returns a harness as [New] does, whose runner is
// configured by cfg but for its flows, store, publisher, secret and
// clock, which are the harness's: for example an authority where callers
// are identified, as with a directory of people in force, or an edit
// checker for the gate's runs.
func NewWithConfig(t TB, cfg engine.Config, flows ...*engine.Flow) *Harness {
	t.Helper()
	h := &Harness{t: t, Store: NewStore(), Publisher: NewPublisher(), cfg: cfg}
	h.Deploy(flows...)
	return h
}

// Deploy replaces the harness's runner with one running flows, on the
// same store, publisher, secret and clock: a deploy of a new build, whose
// runs paused on the old one are carried on by the new (see
// [engine.Builder.Migrate]).
func (h *Harness) Deploy(flows ...*engine.Flow) {
	h.t.Helper()
	cfg := h.cfg
	cfg.Flows, cfg.Store, cfg.Publisher = flows, h.Store, h.Publisher
	cfg.Secret = []byte("enginetest-secret-enginetest-secret-0123")
	cfg.Now = func() time.Time { return time.Now().Add(h.offset) }
	r, err := engine.NewRunner(cfg)
	if err != nil {
		h.t.Fatalf("enginetest: %v", err)
	}
	h.Runner = r
	if len(flows) > 0 {
		h.flow = flows[0].Name()
	}
}

func (h *Harness) nextID() string {
	h.n++
	return fmt.Sprintf("ev-%d", h.n)
}

// Start starts a run of the default flow with state (nil for none) and
// returns its id. It fails the test if the start is refused.
func (h *Harness) Start(state map[string]any) string {
	h.t.Helper()
	raw := map[string]json.RawMessage{}
	for k, v := range state {
		b, err := json.Marshal(v)
		if err != nil {
			h.t.Fatalf("enginetest: start state %s: %v", k, err)
		}
		raw[k] = b
	}
	out, err := h.Runner.Start(h.t.Context(), engine.Start{
		Flow: h.flow, State: raw, Inbound: engine.Inbound{EventID: h.nextID(), Source: "/enginetest"},
	})
	if err != nil {
		h.t.Fatalf("enginetest: start: %v", err)
	}
	if out.Refused != nil {
		h.t.Fatalf("enginetest: start refused: %s: %s", out.Refused.Code, out.Refused.Message)
	}
	return out.Run
}

// Events returns the events of a run, decoded, in order.
func (h *Harness) Events(run string) []Event {
	h.t.Helper()
	var out []Event
	for _, m := range h.Publisher.Messages(run) {
		if m.Stream != engine.EventStream {
			continue
		}
		raw, err := json.Marshal(m.Data)
		if err != nil {
			h.t.Fatalf("enginetest: encoding event %s: %v", m.ID, err)
		}
		var d map[string]any
		if err := json.Unmarshal(raw, &d); err != nil {
			h.t.Fatalf("enginetest: event %s: %v", m.ID, err)
		}
		out = append(out, Event{Kind: m.Kind, Data: d, Raw: raw})
	}
	return out
}

// Kinds returns the kinds of a run's events, in order.
func (h *Harness) Kinds(run string) []string {
	var ks []string
	for _, e := range h.Events(run) {
		ks = append(ks, e.Kind)
	}
	return ks
}

// Interrupt returns the run's latest interrupted event. It fails the test if
// the run is not waiting.
func (h *Harness) Interrupt(run string) Interrupt {
	h.t.Helper()
	cp := h.Checkpoint(run)
	if cp.Status != engine.Waiting {
		h.t.Fatalf("enginetest: run %s is %s, not waiting (error: %q; events: %s)", run, cp.Status, cp.Error, strings.Join(h.Kinds(run), ","))
	}
	evs := h.Events(run)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == "interrupted" {
			var in Interrupt
			if err := json.Unmarshal(evs[i].Raw, &in); err != nil {
				h.t.Fatalf("enginetest: interrupted event: %v", err)
			}
			return in
		}
	}
	h.t.Fatalf("enginetest: run %s has no interrupted event", run)
	return Interrupt{}
}

// Resume sends a resume for the run's pending interrupt, filling in the
// token and request id, and returns the outcome without failing on refusal.
func (h *Harness) Resume(run string, r engine.Resume) engine.Outcome {
	h.t.Helper()
	in := h.Interrupt(run)
	r.Flow, r.Run = h.flow, run
	if r.Token == "" {
		r.Token = in.ResumeToken
	}
	if r.EventID == "" {
		r.EventID = h.nextID()
	}
	out, err := h.Runner.Resume(h.t.Context(), r)
	if err != nil {
		h.t.Fatalf("enginetest: resume: %v", err)
	}
	return out
}

// Answer answers the run's pending question interrupt. It fails the test if
// the answer is refused.
func (h *Harness) Answer(run string, answers map[string]any) engine.Outcome {
	h.t.Helper()
	raw := map[string]json.RawMessage{}
	for k, v := range answers {
		b, err := json.Marshal(v)
		if err != nil {
			h.t.Fatalf("enginetest: answer %s: %v", k, err)
		}
		raw[k] = b
	}
	out := h.Resume(run, engine.Resume{Answers: raw})
	if out.Refused != nil {
		h.t.Fatalf("enginetest: answer refused: %s: %s", out.Refused.Code, out.Refused.Message)
	}
	return out
}

// Choose answers the run's pending choice interrupt. It fails the test if
// the answer is refused.
func (h *Harness) Choose(run string, ids ...string) engine.Outcome {
	h.t.Helper()
	out := h.Resume(run, engine.Resume{Selected: ids})
	if out.Refused != nil {
		h.t.Fatalf("enginetest: choice refused: %s: %s", out.Refused.Code, out.Refused.Message)
	}
	return out
}

// Decide decides the run's pending approval with verdict ("approve",
// "edit", "reject"), edits (for an edit), approver and reason, and returns
// the outcome without failing on refusal.
func (h *Harness) Decide(run, verdict string, edits map[string]any, approver, reason string) engine.Outcome {
	h.t.Helper()
	var raw map[string]json.RawMessage
	if edits != nil {
		raw = map[string]json.RawMessage{}
		for k, v := range edits {
			b, err := json.Marshal(v)
			if err != nil {
				h.t.Fatalf("enginetest: edit %s: %v", k, err)
			}
			raw[k] = b
		}
	}
	return h.Resume(run, engine.Resume{Decision: verdict, Edits: raw, Approver: approver, Reason: reason})
}

// Advance moves the harness's clock forward by d.
func (h *Harness) Advance(d time.Duration) { h.offset += d }

// Expire delivers the expire command the server schedules for the run's
// pending interrupt, as if its deadline had passed: it moves the clock
// past the deadline first. It fails the test if the run has no deadline.
func (h *Harness) Expire(run string) engine.Outcome {
	h.t.Helper()
	cp := h.Checkpoint(run)
	if cp.Interrupt == nil || cp.Interrupt.ExpiresAt == nil {
		h.t.Fatalf("enginetest: run %s has no pending interrupt with a deadline", run)
	}
	if wait := time.Until(*cp.Interrupt.ExpiresAt) - h.offset; wait >= 0 {
		h.offset += wait + time.Millisecond
	}
	out, err := h.Runner.Expire(h.t.Context(), engine.Expire{Flow: h.flow, Run: run, RequestID: cp.Interrupt.RequestID,
		Inbound: engine.Inbound{EventID: h.nextID(), Source: "interlock/schedule"}})
	if err != nil {
		h.t.Fatalf("enginetest: expire: %v", err)
	}
	return out
}

// Audit returns the run's audit records, in order.
func (h *Harness) Audit(run string) []*protocol.AuditRecord {
	var out []*protocol.AuditRecord
	for _, m := range h.Publisher.Messages(run) {
		if rec, ok := m.Data.(*protocol.AuditRecord); ok && m.Stream == engine.AuditStream {
			out = append(out, rec)
		}
	}
	return out
}

// Checkpoint returns the run's checkpoint.
func (h *Harness) Checkpoint(run string) *engine.Checkpoint {
	h.t.Helper()
	cp, _, err := h.Store.Load(h.t.Context(), h.flow, run)
	if err != nil {
		h.t.Fatalf("enginetest: loading run %s: %v", run, err)
	}
	return cp
}

// State returns the run's state, decoded.
func (h *Harness) State(run string) map[string]any {
	h.t.Helper()
	b, _ := json.Marshal(h.Checkpoint(run).State)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// WantStatus fails the test unless the run has status want.
func (h *Harness) WantStatus(run string, want engine.Status) {
	h.t.Helper()
	cp := h.Checkpoint(run)
	if cp.Status != want {
		h.t.Fatalf("enginetest: run %s is %s, want %s (error: %q; events: %s)", run, cp.Status, want, cp.Error, strings.Join(h.Kinds(run), ","))
	}
}
