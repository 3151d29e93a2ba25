// Package publishertest is the conformance suite of [engine.Publisher]:
// the promises the engine relies on (see the interface's doc), run against
// any implementation. bus.Publisher (on JetStream) and
// enginetest.Publisher (in memory) both pass it; so must a publisher of
// your own.
//
//	func TestMyPublisher(t *testing.T) {
//		publishertest.Run(t, func(t *testing.T) (engine.Publisher, publishertest.Reader) {
//			p := newMyPublisher(t)
//			return p, publishertest.Reader{Stored: p.storedOf, Window: time.Second}
//		})
//	}
//
// The suite checks what a [Reader] reads back, so a check can only see
// what stays stored. On JetStream a deadline is a message schedule, and a
// later schedule of the same request replaces the earlier one: a
// deadline published twice is read back once however often it was sent.
// The checks that count repeats count events and audit records.
package publishertest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/protocol"
)

// Stored is a message as the publisher stored it.
type Stored struct {
	Stream engine.Stream
	// ID is the message's deduplication id (engine.Message.ID).
	ID string
}

// Reader reads back what a publisher stored.
type Reader struct {
	// Stored returns the messages stored for one run of flow, of every
	// stream, in the order they were stored: within a stream, its order;
	// across streams, the order in time. Required.
	Stored func(t *testing.T, flow, run string) []Stored
	// Window is how long the publisher drops a message whose ID it has
	// stored (on JetStream, the streams' duplicate window; keep it short,
	// a second, since the recheck checks wait it out). 0 means for ever:
	// a publisher that never forgets an ID has no window to wait out, and
	// the recheck checks then check that the repeat is dropped.
	Window time.Duration
}

// flow is the flow of every message the suite publishes.
const flow = "booking"

// wait bounds how long the suite waits for a publish to return.
const wait = 30 * time.Second

// batch builds the messages of one run, each with an ID made of the run
// and a name.
type batch struct{ run string }

func (b batch) id(name string) string { return b.run + "-" + name }

// event is an event of kind, named name.
func (b batch) event(name, kind string) engine.Message {
	var data engine.EventData
	switch kind {
	case protocol.EventStarted:
		data = &protocol.Started{Flow: flow, Run: b.run}
	case protocol.EventInterrupted:
		data = &protocol.Interrupted{Flow: flow, Run: b.run, Node: "ask", RequestID: "rq_" + name, Kind: protocol.KindQuestion}
	case protocol.EventResumed:
		data = &protocol.Resumed{Flow: flow, Run: b.run, Node: "ask", RequestID: "rq_" + name, Kind: protocol.KindQuestion}
	case protocol.EventRefused:
		data = &protocol.Refused{Flow: flow, Run: b.run, Code: protocol.CodeNotWaiting, Message: "the run is not waiting"}
	case protocol.EventCompleted:
		data = &protocol.Completed{Flow: flow, Run: b.run, State: json.RawMessage(`{}`)}
	default: // a node's own event
		data = &protocol.NodeEvent{Flow: flow, Run: b.run, Node: "work", Data: json.RawMessage(`{"step":1}`)}
	}
	return engine.Message{Stream: engine.EventStream, Kind: kind, ID: b.id(name), Flow: flow, Run: b.run, Time: time.Now().UTC(), Data: data}
}

// audit is an audit record of action, named name.
func (b batch) audit(name, action string) engine.Message {
	at := time.Now().UTC()
	return engine.Message{Stream: engine.AuditStream, Kind: action, ID: b.id(name), Flow: flow, Run: b.run, Time: at,
		Data: &protocol.AuditRecord{Flow: flow, Run: b.run, Action: action, At: at}}
}

// deadline is the deadline of request rq_<name>, an hour from now.
func (b batch) deadline(name string) engine.Message {
	return engine.Message{Stream: engine.ScheduleStream, Kind: "expire", ID: b.id(name), Flow: flow, Run: b.run, Time: time.Now().UTC(),
		Data: &protocol.Expire{Flow: flow, Run: b.run, RequestID: "rq_" + name, ExpiresAt: time.Now().UTC().Add(time.Hour).Truncate(time.Second)}}
}

// streams is every stream, in the order the suite reports them.
var streams = []engine.Stream{engine.AuditStream, engine.ScheduleStream, engine.EventStream}

// byStream returns the IDs of msgs, stream by stream, in order.
func byStream[M any](msgs []M, of func(M) (engine.Stream, string)) map[engine.Stream][]string {
	out := map[engine.Stream][]string{}
	for _, m := range msgs {
		s, id := of(m)
		out[s] = append(out[s], id)
	}
	return out
}

func ofMessage(m engine.Message) (engine.Stream, string) { return m.Stream, m.ID }
func ofStored(m Stored) (engine.Stream, string)          { return m.Stream, m.ID }

// holds fails the test unless the run holds, in each stream, exactly the
// messages of want, once each, in the order of want.
func holds(t *testing.T, r Reader, run, after string, want ...engine.Message) {
	t.Helper()
	got := byStream(r.Stored(t, flow, run), ofStored)
	exp := byStream(want, ofMessage)
	for _, s := range streams {
		if !slices.Equal(got[s], exp[s]) {
			t.Errorf("after %s, the %s stream holds %q, want %q", after, s, got[s], exp[s])
		}
	}
}

// publish publishes msgs and fails the test on an error.
func publish(t *testing.T, p engine.Publisher, recheck bool, msgs ...engine.Message) {
	t.Helper()
	if err := p.Publish(t.Context(), msgs, recheck); err != nil {
		t.Fatalf("Publish(recheck %t) = %v", recheck, err)
	}
}

// forget waits until the publisher no longer drops a message whose ID it
// stored before the call: it publishes a probe (an event and an audit
// record of a run of its own) and publishes it again until both streams
// hold it twice. A publisher that never forgets has nothing to wait for.
func forget(t *testing.T, p engine.Publisher, r Reader) {
	t.Helper()
	if r.Window == 0 {
		return
	}
	b := batch{run: "probe-" + fmt.Sprint(time.Now().UnixNano())}
	probe := []engine.Message{b.audit("a", protocol.ActionStarted), b.event("e", protocol.EventStarted)}
	deadline := time.Now().Add(wait + 10*r.Window)
	tick := max(r.Window/10, 10*time.Millisecond)
	for {
		publish(t, p, false, probe...)
		got := byStream(r.Stored(t, flow, b.run), ofStored)
		if len(got[engine.AuditStream]) >= 2 && len(got[engine.EventStream]) >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the publisher still drops a repeated ID %s after publishing it (Reader.Window is %s): %q", wait+10*r.Window, r.Window, got)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(tick):
		}
	}
}

// Run runs the suite; newPublisher returns a publisher that has stored
// nothing yet, each call a new one, and the reader of what it stores.
func Run(t *testing.T, newPublisher func(t *testing.T) (engine.Publisher, Reader)) {
	t.Run("EveryMessageOfABatchIsStoredInItsStreamInOrder", func(t *testing.T) {
		t.Parallel()
		p, r := newPublisher(t)
		b := batch{run: "r-order"}
		msgs := []engine.Message{
			b.audit("a1", protocol.ActionStarted),
			b.event("e1", protocol.EventStarted),
			b.deadline("d1"),
			b.event("e2", "checked"),
			b.event("e3", protocol.EventInterrupted),
			b.audit("a2", protocol.ActionReannounced),
			b.deadline("d2"),
			b.event("e4", "checked"),
			b.event("e5", protocol.EventInterrupted),
		}
		publish(t, p, false, msgs...)
		holds(t, r, b.run, "publishing one batch", msgs...)
	})

	t.Run("AuditRecordsAndDeadlinesAreStoredBeforeEvents", func(t *testing.T) {
		t.Parallel()
		p, r := newPublisher(t)
		b := batch{run: "r-audit-first"}
		// The events come first in the batch, as in a refusal (the
		// refused event, then its audit record).
		publish(t, p, false,
			b.event("e1", protocol.EventRefused),
			b.event("e2", protocol.EventInterrupted),
			b.audit("a1", protocol.ActionRefused),
			b.deadline("d1"),
		)
		got := r.Stored(t, flow, b.run)
		firstEvent := slices.IndexFunc(got, func(s Stored) bool { return s.Stream == engine.EventStream })
		lastOther := -1
		for i, s := range got {
			if s.Stream != engine.EventStream {
				lastOther = i
			}
		}
		if len(got) != 4 || firstEvent < lastOther {
			t.Fatalf("stored %q; want the audit record and the deadline before either event", got)
		}
	})

	t.Run("ARepeatedBatchIsStoredOnce", func(t *testing.T) {
		t.Parallel()
		p, r := newPublisher(t)
		b := batch{run: "r-repeat"}
		msgs := []engine.Message{
			b.audit("a1", protocol.ActionStarted),
			b.deadline("d1"),
			b.event("e1", protocol.EventStarted),
			b.event("e2", protocol.EventInterrupted),
		}
		publish(t, p, false, msgs...)
		publish(t, p, false, msgs...)
		holds(t, r, b.run, "publishing the same batch twice", msgs...)
		// A batch that repeats some messages stores only the new ones,
		// after the ones stored.
		more := []engine.Message{b.audit("a3", protocol.ActionAnswered), b.event("e3", protocol.EventResumed)}
		publish(t, p, false, slices.Concat(msgs, more)...)
		holds(t, r, b.run, "publishing the batch again with two more messages", slices.Concat(msgs[:2], more[:1], msgs[2:], more[1:])...)
	})

	t.Run("MessagesWithDifferentIDsAreEachStoredWhateverTheyHold", func(t *testing.T) {
		t.Parallel()
		p, r := newPublisher(t)
		b := batch{run: "r-same"}
		a1, e1 := b.audit("a1", protocol.ActionStarted), b.event("e1", "checked")
		a2, e2 := a1, e1
		a2.ID, e2.ID = b.id("a2"), b.id("e2")
		publish(t, p, false, a1, e1)
		publish(t, p, false, a2, e2)
		holds(t, r, b.run, "publishing two messages of the same kind and data with other IDs", a1, a2, e1, e2)
	})

	t.Run("ARecheckedRepeatPastTheWindowIsStoredOnce", func(t *testing.T) {
		t.Parallel()
		p, r := newPublisher(t)
		b := batch{run: "r-recheck"}
		msgs := []engine.Message{
			b.audit("a1", protocol.ActionStarted),
			b.deadline("d1"),
			b.event("e1", protocol.EventStarted),
			b.event("e2", protocol.EventInterrupted),
		}
		publish(t, p, false, msgs...)
		forget(t, p, r)
		publish(t, p, true, msgs...)
		holds(t, r, b.run, "publishing the batch again with recheck, past the deduplication window", msgs...)
	})

	t.Run("ARecheckedRetryPublishesWhatTheFirstTryDidNotStore", func(t *testing.T) {
		t.Parallel()
		p, r := newPublisher(t)
		b := batch{run: "r-retry"}
		msgs := []engine.Message{
			b.audit("a1", protocol.ActionAnswered),
			b.deadline("d1"),
			b.event("e1", protocol.EventResumed),
			b.event("e2", "checked"),
			b.event("e3", protocol.EventInterrupted),
		}
		// The first try stored the first message of each stream and died.
		publish(t, p, false, msgs[0], msgs[2])
		forget(t, p, r)
		publish(t, p, true, msgs...)
		holds(t, r, b.run, "a first try that stored a1 and e1, and a rechecked retry past the deduplication window", msgs...)
		got := r.Stored(t, flow, b.run)
		if i, j := slices.Index(got, Stored{engine.ScheduleStream, b.id("d1")}), slices.Index(got, Stored{engine.EventStream, b.id("e2")}); i < 0 || j < i {
			t.Errorf("stored %q; want the retry's deadline d1 before its events", got)
		}
	})

	t.Run("RecheckPublishesWhatAnEarlierTransitionLeftOnTheSameSubjects", func(t *testing.T) {
		t.Parallel()
		p, r := newPublisher(t)
		b := batch{run: "r-next"}
		first := []engine.Message{
			b.audit("a1", protocol.ActionStarted),
			b.event("e1", "checked"),
			b.event("e2", protocol.EventInterrupted),
		}
		publish(t, p, false, first...)
		// The next transition, of the same kinds, rechecked on its first
		// try (a redelivery of a command whose transition never got to
		// publish): nothing of it is stored, so all of it is published.
		next := []engine.Message{
			b.audit("a2", protocol.ActionAnswered),
			b.event("e3", protocol.EventResumed),
			b.event("e4", "checked"),
			b.event("e5", protocol.EventInterrupted),
		}
		publish(t, p, true, next...)
		holds(t, r, b.run, "a transition, and the next one of the same kinds published with recheck", slices.Concat(first, next)...)
	})

	t.Run("ADoneContextEndsThePublishPromptly", func(t *testing.T) {
		t.Parallel()
		p, r := newPublisher(t)
		b := batch{run: "r-cancel"}
		msgs := []engine.Message{
			b.audit("a1", protocol.ActionStarted),
			b.deadline("d1"),
			b.event("e1", protocol.EventStarted),
			b.event("e2", protocol.EventInterrupted),
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		done := make(chan error, 1)
		go func() { done <- p.Publish(ctx, msgs, false) }()
		var err error
		select {
		case err = <-done:
		case <-time.After(wait):
			t.Fatalf("Publish with a cancelled context has not returned after %s", wait)
		}
		got := byStream(r.Stored(t, flow, b.run), ofStored)
		want := byStream(msgs, ofMessage)
		for _, s := range streams {
			if err == nil && !slices.Equal(got[s], want[s]) {
				t.Errorf("Publish with a cancelled context returned nil, and the %s stream holds %q, want %q", s, got[s], want[s])
			}
			if len(got[s]) > len(want[s]) || !slices.Equal(got[s], want[s][:len(got[s])]) {
				t.Errorf("Publish with a cancelled context returned %v, and the %s stream holds %q, not a start of %q", err, s, got[s], want[s])
			}
		}
		if len(got[engine.EventStream]) > 0 && len(got[engine.AuditStream]) < len(want[engine.AuditStream]) {
			t.Errorf("Publish with a cancelled context stored events %q before every audit record (%q)", got[engine.EventStream], got[engine.AuditStream])
		}
		// The redelivery publishes the outbox again, with recheck.
		publish(t, p, true, msgs...)
		holds(t, r, b.run, fmt.Sprintf("a publish with a cancelled context (%v) and a rechecked retry", err), msgs...)
	})

	t.Run("ConcurrentPublishesAreEachStoredInOrder", func(t *testing.T) {
		t.Parallel()
		p, r := newPublisher(t)
		const n = 8
		batches := make([][]engine.Message, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			b := batch{run: fmt.Sprintf("r-c%d", i)}
			batches[i] = []engine.Message{
				b.audit("a1", protocol.ActionStarted),
				b.deadline("d1"),
				b.event("e1", protocol.EventStarted),
				b.event("e2", protocol.EventInterrupted),
			}
			wg.Go(func() { errs[i] = p.Publish(t.Context(), batches[i], false) })
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("Publish of r-c%d: %v", i, errs[i])
			}
			holds(t, r, batches[i][0].Run, fmt.Sprintf("%d batches published at once", n), batches[i]...)
		}
	})
}
