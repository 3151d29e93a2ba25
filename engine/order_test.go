package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/protocol"
)

// stallingPublisher fails to publish events of one kind until released,
// as a worker that stops between committing a transition and publishing
// its events would.
type stallingPublisher struct {
	*enginetest.Publisher
	mu    sync.Mutex
	stall string
}

func (p *stallingPublisher) Publish(ctx context.Context, msgs []engine.Message, recheck bool) error {
	p.mu.Lock()
	stall := p.stall
	p.mu.Unlock()
	for _, m := range msgs {
		if m.Stream == engine.EventStream && m.Kind == stall {
			return errors.New("worker stopped before publishing")
		}
	}
	return p.Publisher.Publish(ctx, msgs, recheck)
}

// unackedQueue reports the messages in its set as unacknowledged.
type unackedQueue struct {
	mu  sync.Mutex
	set map[uint64]bool
}

func (q *unackedQueue) Unacked(_ context.Context, c engine.Cause) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.set[c.Seq], nil
}

// TestARefusalNeverComesBeforeTheEventThatExplainsIt: a cancel commits but
// its cancelled event is not yet out when a resume arrives. The resume is
// held back (delivered again later), not refused not_waiting ahead of the
// cancelled event; once the cancel is published, it is refused after it.
func TestARefusalNeverComesBeforeTheEventThatExplainsIt(t *testing.T) {
	ctx := t.Context()
	store, pub := enginetest.NewStore(), &stallingPublisher{Publisher: enginetest.NewPublisher()}
	queue := &unackedQueue{set: map[uint64]bool{}}
	r, err := engine.NewRunner(engine.Config{Flows: []*engine.Flow{booking.Flow()}, Store: store, Publisher: pub, Queue: queue,
		Secret: []byte("order-test-secret-order-test-secret-01234")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(ctx, engine.Start{Flow: "booking", Run: "r-1", Inbound: engine.Inbound{EventID: "s", Seq: 1}}); err != nil {
		t.Fatal(err)
	}
	var token string
	for _, m := range pub.Messages("r-1") {
		if in, ok := m.Data.(*protocol.Interrupted); ok {
			token = in.ResumeToken
		}
	}

	pub.stall, queue.set[2] = protocol.EventCancelled, true
	cancel := engine.Cancel{Flow: "booking", Run: "r-1", Inbound: engine.Inbound{EventID: "c", Seq: 2}}
	if _, err := r.Cancel(ctx, cancel); err == nil {
		t.Fatal("the cancel's publishing failed, yet Cancel reported success")
	}
	resume := engine.Resume{Flow: "booking", Run: "r-1", Token: token, Answers: nil, Inbound: engine.Inbound{EventID: "r", Seq: 3}}
	out, err := r.Resume(ctx, resume)
	if err != nil {
		t.Fatal(err)
	}
	if out.Refused != nil || out.RetryAfter == 0 {
		t.Fatalf("resume while the cancel is unpublished: %+v; want it held back to be delivered again", out)
	}

	// The cancel is delivered again, publishes, and is acknowledged.
	pub.mu.Lock()
	pub.stall = ""
	pub.mu.Unlock()
	if _, err := r.Cancel(ctx, cancel); err != nil {
		t.Fatal(err)
	}
	queue.mu.Lock()
	delete(queue.set, 2)
	queue.mu.Unlock()
	out, err = r.Resume(ctx, resume)
	if err != nil {
		t.Fatal(err)
	}
	if out.Refused == nil || out.Refused.Code != protocol.CodeNotWaiting {
		t.Fatalf("resume of the cancelled run: %+v; want not_waiting", out)
	}
	var kinds []string
	for _, m := range pub.Messages("r-1") {
		if m.Stream == engine.EventStream {
			kinds = append(kinds, m.Kind)
		}
	}
	if c, f := slices.Index(kinds, protocol.EventCancelled), slices.Index(kinds, protocol.EventRefused); c < 0 || f < c {
		t.Fatalf("events %v: the refusal must follow the cancelled event", kinds)
	}
}

// TestARedeliveredTransitionPublishesWhatItCommitted: a resume commits
// but its events are not published; delivered again, it publishes them
// from the checkpoint's outbox, whole and with the ids they were committed
// with, and changes nothing else.
func TestARedeliveredTransitionPublishesWhatItCommitted(t *testing.T) {
	ctx := t.Context()
	store, pub := enginetest.NewStore(), &stallingPublisher{Publisher: enginetest.NewPublisher()}
	r, err := engine.NewRunner(engine.Config{Flows: []*engine.Flow{booking.Flow()}, Store: store, Publisher: pub,
		Secret: []byte("order-test-secret-order-test-secret-01234")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(ctx, engine.Start{Flow: "booking", Run: "r-1", Inbound: engine.Inbound{EventID: "s", Seq: 1}}); err != nil {
		t.Fatal(err)
	}
	var token string
	for _, m := range pub.Messages("r-1") {
		if in, ok := m.Data.(*protocol.Interrupted); ok {
			token = in.ResumeToken
		}
	}
	pub.stall = protocol.EventResumed
	resume := engine.Resume{Flow: "booking", Run: "r-1", Token: token, Answers: map[string]json.RawMessage{"email": json.RawMessage(`"ann@example.com"`)},
		Inbound: engine.Inbound{EventID: "r", Seq: 2}}
	if _, err := r.Resume(ctx, resume); err == nil {
		t.Fatal("the resume's publishing failed, yet Resume reported success")
	}
	committed, rev, err := store.Load(ctx, "booking", "r-1")
	if err != nil {
		t.Fatal(err)
	}
	pub.mu.Lock()
	pub.stall = ""
	pub.mu.Unlock()
	out, err := r.Resume(ctx, resume)
	if err != nil || !out.Duplicate || out.Checkpoint != rev {
		t.Fatalf("resume delivered again: %+v, %v; want a repeat at checkpoint %d", out, err, rev)
	}
	if _, again, err := store.Load(ctx, "booking", "r-1"); err != nil || again != rev {
		t.Fatalf("the repeat wrote the checkpoint: revision %d, want %d (%v)", again, rev, err)
	}
	published := map[string]engine.Message{}
	for _, m := range pub.Messages("r-1") {
		published[m.ID] = m
	}
	// What the events say, but for what is stamped on publishing.
	unstamped := func(d engine.EventData) map[string]any {
		var m map[string]any
		b, _ := json.Marshal(d)
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "checkpoint")
		delete(m, "resumeToken")
		return m
	}
	events := 0
	for _, m := range committed.Outbox {
		if m.Stream != engine.EventStream {
			continue
		}
		events++
		p, ok := published[m.ID]
		if !ok {
			t.Errorf("%s event %s of the outbox was not published", m.Kind, m.ID)
			continue
		}
		if got, want := unstamped(p.Data), unstamped(m.Data); p.Kind != m.Kind || !reflect.DeepEqual(got, want) {
			t.Errorf("event %s published as %s %v, committed as %s %v", m.ID, p.Kind, got, m.Kind, want)
		}
		if p.Cause != "r" {
			t.Errorf("%s event %s published again with cause %q, want the resume's event id %q", p.Kind, m.ID, p.Cause, "r")
		}
	}
	if events == 0 {
		t.Fatal("the committed outbox holds no event")
	}
}

// TestEveryEventNamesTheCommandThatCausedIt: each event of a transition
// carries the id of the command the transition applied, and a refusal the
// id of the command it refuses, so that a client can tell its command's
// outcome from another's of the same run.
func TestEveryEventNamesTheCommandThatCausedIt(t *testing.T) {
	ctx := t.Context()
	store, pub := enginetest.NewStore(), enginetest.NewPublisher()
	r, err := engine.NewRunner(engine.Config{Flows: []*engine.Flow{booking.Flow()}, Store: store, Publisher: pub,
		Secret: []byte("order-test-secret-order-test-secret-01234")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(ctx, engine.Start{Flow: "booking", Run: "r-1", Inbound: engine.Inbound{EventID: "start-1", Seq: 1}}); err != nil {
		t.Fatal(err)
	}
	var token string
	for _, m := range pub.Messages("r-1") {
		if in, ok := m.Data.(*protocol.Interrupted); ok {
			token = in.ResumeToken
		}
	}
	if _, err := r.Resume(ctx, engine.Resume{Flow: "booking", Run: "r-1", Token: "not-the-token",
		Inbound: engine.Inbound{EventID: "resume-bad", Seq: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resume(ctx, engine.Resume{Flow: "booking", Run: "r-1", Token: token,
		Answers: map[string]json.RawMessage{"email": json.RawMessage(`"ann@example.com"`)},
		Inbound: engine.Inbound{EventID: "resume-1", Seq: 3}}); err != nil {
		t.Fatal(err)
	}
	causes := map[string][]string{}
	for _, m := range pub.Messages("r-1") {
		if m.Stream == engine.EventStream {
			causes[m.Cause] = append(causes[m.Cause], m.Kind)
		}
	}
	for _, want := range []struct {
		cause string
		kind  string
	}{
		{"start-1", protocol.EventStarted},
		{"start-1", protocol.EventInterrupted},
		{"resume-bad", protocol.EventRefused},
		{"resume-1", protocol.EventResumed},
	} {
		if !slices.Contains(causes[want.cause], want.kind) {
			t.Errorf("no %s event caused by %s; events by cause: %v", want.kind, want.cause, causes)
		}
	}
	if len(causes[""]) > 0 {
		t.Errorf("events %v name no cause", causes[""])
	}
}

// TestAVoteWaitsForTheEventsOfTheVoteItRaced: a vote commits but its voted
// event is not yet out when a second vote, on the token both voters saw,
// arrives. The second is held back (delivered again later) rather than
// completing the run ahead of the voted event; once the first vote is
// published, it counts, and the events keep the order of the transitions.
func TestAVoteWaitsForTheEventsOfTheVoteItRaced(t *testing.T) {
	ctx := t.Context()
	store, pub := enginetest.NewStore(), &stallingPublisher{Publisher: enginetest.NewPublisher()}
	queue := &unackedQueue{set: map[uint64]bool{}}
	r, err := engine.NewRunner(engine.Config{Flows: []*engine.Flow{contractFlow(twoApprovers())}, Store: store, Publisher: pub, Queue: queue,
		Secret: []byte("order-test-secret-order-test-secret-01234")})
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]json.RawMessage{"value": json.RawMessage(`12000`)}
	if _, err := r.Start(ctx, engine.Start{Flow: "contract", Run: "r-1", State: state, Inbound: engine.Inbound{EventID: "s", Seq: 1}}); err != nil {
		t.Fatal(err)
	}
	var in *protocol.Interrupted
	for _, m := range pub.Messages("r-1") {
		if i, ok := m.Data.(*protocol.Interrupted); ok {
			in = i
		}
	}
	if in == nil {
		t.Fatal("the contract run did not ask for its approval")
	}

	pub.stall, queue.set[2] = protocol.EventVoted, true
	first := engine.Resume{Flow: "contract", Run: "r-1", Token: in.ResumeToken, RequestID: in.RequestID, Decision: "approve", Approver: "ana",
		Inbound: engine.Inbound{EventID: "v1", Seq: 2}}
	if _, err := r.Resume(ctx, first); err == nil {
		t.Fatal("the first vote's publishing failed, yet Resume reported success")
	}
	second := engine.Resume{Flow: "contract", Run: "r-1", Token: in.ResumeToken, RequestID: in.RequestID, Decision: "approve", Approver: "ben",
		Inbound: engine.Inbound{EventID: "v2", Seq: 3}}
	out, err := r.Resume(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if out.Refused != nil || out.RetryAfter == 0 || out.Status != engine.Waiting {
		t.Fatalf("a vote while the last vote is unpublished: %+v; want it held back to be delivered again", out)
	}

	pub.mu.Lock()
	pub.stall = ""
	pub.mu.Unlock()
	if _, err := r.Resume(ctx, first); err != nil {
		t.Fatal(err)
	}
	queue.mu.Lock()
	delete(queue.set, 2)
	queue.mu.Unlock()
	if out, err = r.Resume(ctx, second); err != nil || out.Refused != nil || out.Status != engine.Completed {
		t.Fatalf("the second vote once the first is out: %+v, %v; want the run completed", out, err)
	}
	var kinds []string
	for _, m := range pub.Messages("r-1") {
		if m.Stream == engine.EventStream {
			kinds = append(kinds, m.Kind)
		}
	}
	if v, c := slices.Index(kinds, protocol.EventVoted), slices.Index(kinds, protocol.EventCompleted); v < 0 || c < v {
		t.Fatalf("events %v: the voted event must come before completed", kinds)
	}
}
