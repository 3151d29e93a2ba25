package notify_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var names = wire.Names{Prefix: wire.DefaultPrefix}

// deployment starts a server with Interlock's streams and buckets.
func deployment(t *testing.T) jetstream.JetStream {
	t.Helper()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	if err := bus.Provision(t.Context(), js, names, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	return js
}

// publish publishes an outbound event of kind for run, with a resume
// token in its data, and returns its id.
func publish(t *testing.T, js jetstream.JetStream, run, kind string) string {
	t.Helper()
	typ, _ := protocol.OutboundType(kind)
	id := "ev-" + run + "-" + kind
	ev, err := events.Outbound(id, "interlock/test", typ, "refund", run, "", time.Now().UTC(),
		map[string]any{"flow": "refund", "run": run, "requestId": "rq-1", "resumeToken": "tok-SECRET"})
	if err != nil {
		t.Fatal(err)
	}
	body, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(names.Event("refund", run, kind))
	msg.Data = body
	msg.Header.Set(jetstream.MsgIDHeader, id)
	if _, err := js.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	return id
}

func follow(t *testing.T, js jetstream.JetStream, cfg notify.Config, h notify.Handler) *notify.Follower {
	t.Helper()
	f, err := notify.Follow(t.Context(), js, names, cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Stop(context.WithoutCancel(t.Context())) })
	return f
}

func TestBackoffDoublesWithinAFifthAndStopsAtMaxRetry(t *testing.T) {
	js := deployment(t)
	f := follow(t, js, notify.Config{Name: "backoff", Kinds: []string{protocol.EventInterrupted},
		FirstRetry: time.Second, MaxRetry: 10 * time.Second}, func(context.Context, notify.Delivery) error { return nil })
	for attempt, base := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 60: 10 * time.Second} {
		lo, hi := base-base/5, base+base/5
		seen := map[time.Duration]bool{}
		for range 200 {
			d := f.Backoff(attempt)
			if d < lo || d > hi {
				t.Fatalf("attempt %d: backoff %s outside [%s, %s]", attempt, d, lo, hi)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Fatalf("attempt %d: 200 backoffs were all %v: no jitter", attempt, seen)
		}
	}
}

// deadLetters waits for n dead letters and returns them.
func deadLetters(t *testing.T, js jetstream.JetStream, n int) []natstest.Received {
	t.Helper()
	return natstest.WaitFor(t, js, names.DeadLetterStream(), names.DeadLetter(notify.ReasonUndeliverable), func(rs []natstest.Received) bool { return len(rs) >= n })
}

func TestPermanentDeadLettersAtOnceNamingTheConsumer(t *testing.T) {
	js := deployment(t)
	var calls atomic.Int32
	var observed sync.Map
	follow(t, js, notify.Config{
		Name: "interlock-webhook-crm", Kinds: []string{protocol.EventInterrupted}, FirstRetry: time.Hour,
		Observe: func(d notify.Delivery, err error, dead bool) { observed.Store(d.Event.ID(), dead) },
	}, func(context.Context, notify.Delivery) error {
		calls.Add(1)
		return notify.Permanent(errors.New("HTTP 410 Gone"))
	})
	id := publish(t, js, "r-1", protocol.EventInterrupted)
	dl := deadLetters(t, js, 1)[0]
	if got := dl.Header.Get(bus.HeaderConsumer); got != "interlock-webhook-crm" {
		t.Fatalf("dead letter's %s = %q, want the consumer", bus.HeaderConsumer, got)
	}
	if e := dl.Header.Get(bus.HeaderError); !strings.Contains(e, "HTTP 410 Gone") || !strings.Contains(e, "1 attempt") {
		t.Fatalf("dead letter's error %q does not say the receiver's answer after 1 attempt", e)
	}
	if strings.Contains(string(dl.Data), "tok-SECRET") {
		t.Fatalf("the dead letter holds the resume token: %s", dl.Data)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler called %d times, want 1", n)
	}
	natstest.Eventually(t, "the dead-lettering observed", func() bool { v, ok := observed.Load(id); return ok && v.(bool) })
}

func TestRetryForExceededDeadLettersAfterSeveralAttempts(t *testing.T) {
	js := deployment(t)
	var attempts atomic.Int32
	var lastSeen atomic.Bool
	follow(t, js, notify.Config{
		Name: "interlock-mail", Kinds: []string{protocol.EventInterrupted},
		FirstRetry: 20 * time.Millisecond, MaxRetry: 50 * time.Millisecond, RetryFor: time.Second,
	}, func(_ context.Context, d notify.Delivery) error {
		attempts.Add(1)
		if d.Last {
			lastSeen.Store(true)
		}
		return errors.New("smtp: 421 try later")
	})
	id := publish(t, js, "r-2", protocol.EventInterrupted)
	dl := deadLetters(t, js, 1)[0]
	// The last attempt came from the retry stream; its dead letter is the
	// event's, as a first attempt's would be.
	if got := dl.Header.Get(bus.HeaderSubject); got != names.Event("refund", "r-2", protocol.EventInterrupted) {
		t.Fatalf("dead letter's subject %q, want the event's", got)
	}
	if got := dl.Header.Get(jetstream.MsgIDHeader); !strings.HasPrefix(got, "dlq-"+names.EventStream()+"-") || !strings.HasSuffix(got, "-interlock-mail") {
		t.Fatalf("dead letter's id %q, want the event's stream, sequence and the consumer", got)
	}
	if got := dl.Header.Get(bus.HeaderOriginal + jetstream.MsgIDHeader); got != id {
		t.Fatalf("dead letter keeps the original id %q, want %q", got, id)
	}
	for k := range dl.Header {
		if strings.Contains(k, "Retry") || strings.Contains(k, "Schedule") {
			t.Fatalf("dead letter carries the retry's header %s", k)
		}
	}
	if n := attempts.Load(); n < 3 {
		t.Fatalf("dead-lettered after %d attempts; the event should be tried until RetryFor", n)
	}
	if !lastSeen.Load() {
		t.Fatal("no attempt was marked Last before the event was dead-lettered")
	}
	if e := dl.Header.Get(bus.HeaderError); !strings.Contains(e, "421 try later") {
		t.Fatalf("dead letter's error %q does not hold the last error", e)
	}
}

func TestTwoChannelsDeadLetteringOneEventStoreTwoDeadLetters(t *testing.T) {
	js := deployment(t)
	fail := func(context.Context, notify.Delivery) error { return notify.Permanent(errors.New("refused")) }
	follow(t, js, notify.Config{Name: "interlock-mail", Kinds: []string{protocol.EventInterrupted}}, fail)
	follow(t, js, notify.Config{Name: "interlock-webhook-crm", Kinds: []string{protocol.EventInterrupted}}, fail)
	publish(t, js, "r-3", protocol.EventInterrupted)
	dls := deadLetters(t, js, 2)
	consumers := map[string]bool{}
	ids := map[string]bool{}
	for _, dl := range dls {
		consumers[dl.Header.Get(bus.HeaderConsumer)] = true
		ids[dl.Header.Get(jetstream.MsgIDHeader)] = true
	}
	if !consumers["interlock-mail"] || !consumers["interlock-webhook-crm"] || len(ids) != 2 {
		t.Fatalf("dead letters by %v with ids %v; want one per channel, with distinct ids", consumers, ids)
	}
}

func TestARetriedEventIsDeliveredOnceItSucceeds(t *testing.T) {
	js := deployment(t)
	var attempts atomic.Int32
	done := make(chan notify.Delivery, 1)
	follow(t, js, notify.Config{Name: "retry", Kinds: []string{protocol.EventInterrupted}, FirstRetry: 10 * time.Millisecond},
		func(_ context.Context, d notify.Delivery) error {
			if attempts.Add(1) < 3 {
				return errors.New("down")
			}
			done <- d
			return nil
		})
	publish(t, js, "r-4", protocol.EventInterrupted)
	select {
	case d := <-done:
		if d.Attempt != 3 || d.Kind != protocol.EventInterrupted || d.Last {
			t.Fatalf("delivered %+v; want attempt 3 of an interrupted event, not the last", d)
		}
	case <-time.After(natstest.Wait):
		t.Fatal("the event was not delivered after two failures")
	}
	if dl := natstest.Read(t, js, names.DeadLetterStream(), names.DeadLetter(notify.ReasonUndeliverable)); len(dl) != 0 {
		t.Fatalf("%d dead letters for an event that was delivered", len(dl))
	}
}

// A failed event waits for its next attempt in the retry stream, not in
// the consumer: the next event gets the consumer's only place at once,
// while the first is still failing, and the first is tried again.
func TestAFailedEventWaitsWithoutHoldingBackTheNext(t *testing.T) {
	js := deployment(t)
	var down atomic.Int32
	delivered := make(chan string, 1)
	follow(t, js, notify.Config{Name: "interlock-webhook-one", Kinds: []string{protocol.EventInterrupted}, Parallel: 1,
		FirstRetry: 20 * time.Millisecond, MaxRetry: 100 * time.Millisecond, RetryFor: time.Hour},
		func(_ context.Context, d notify.Delivery) error {
			if d.Event.Subject() == "r-down" {
				down.Add(1)
				return errors.New("HTTP 500")
			}
			delivered <- d.Event.Subject()
			return nil
		})
	publish(t, js, "r-down", protocol.EventInterrupted)
	natstest.Eventually(t, "the failing event tried", func() bool { return down.Load() >= 1 })
	publish(t, js, "r-up", protocol.EventInterrupted)
	select {
	case run := <-delivered:
		if run != "r-up" {
			t.Fatalf("delivered %s", run)
		}
	case <-time.After(natstest.Wait):
		t.Fatal("the next event was not delivered while the first one failed")
	}
	tried := down.Load()
	natstest.Eventually(t, "the failing event tried again", func() bool { return down.Load() > tried })
	if dl := natstest.Read(t, js, names.DeadLetterStream(), names.DeadLetter(notify.ReasonUndeliverable)); len(dl) != 0 {
		t.Fatalf("%d dead letters", len(dl))
	}
}

// An attempt waiting in the retry stream when the channel stops is made
// once the channel follows again, as the next attempt of the same event:
// a restart loses nothing.
func TestAnAttemptWaitingForItsTimeSurvivesARestart(t *testing.T) {
	js := deployment(t)
	cfg := notify.Config{Name: "interlock-mail", Kinds: []string{protocol.EventInterrupted}, FirstRetry: 300 * time.Millisecond}
	failed := make(chan notify.Delivery, 1)
	f := follow(t, js, cfg, func(_ context.Context, d notify.Delivery) error {
		select {
		case failed <- d:
		default:
		}
		return errors.New("smtp: 421 try later")
	})
	publish(t, js, "r-5", protocol.EventInterrupted)
	first := <-failed
	natstest.Eventually(t, "the next attempt scheduled", func() bool {
		n, err := notify.Waiting(t.Context(), js, names, cfg.Name)
		return err == nil && n == 1
	})
	if err := f.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	done := make(chan notify.Delivery, 1)
	follow(t, js, cfg, func(_ context.Context, d notify.Delivery) error { done <- d; return nil })
	select {
	case d := <-done:
		if d.Attempt != 2 || d.Event.ID() != first.Event.ID() || !d.Published.Equal(first.Published) || d.Subject != first.Subject {
			t.Fatalf("after the restart: attempt %d of %s published %s; want attempt 2 of %s published %s", d.Attempt, d.Event.ID(), d.Published, first.Event.ID(), first.Published)
		}
	case <-time.After(natstest.Wait):
		t.Fatal("the waiting attempt was not made after the restart")
	}
	natstest.Eventually(t, "nothing left waiting", func() bool {
		n, err := notify.Waiting(t.Context(), js, names, cfg.Name)
		return err == nil && n == 0
	})
}

// A channel deleted (a webhook subscription removed) leaves no consumer
// and no attempt waiting.
func TestDeletingAChannelRemovesItsWaitingAttempts(t *testing.T) {
	js := deployment(t)
	cfg := notify.Config{Name: "interlock-webhook-gone", Kinds: []string{protocol.EventInterrupted}, FirstRetry: time.Hour}
	var tried atomic.Bool
	f := follow(t, js, cfg, func(context.Context, notify.Delivery) error { tried.Store(true); return errors.New("down") })
	publish(t, js, "r-6", protocol.EventInterrupted)
	natstest.Eventually(t, "the next attempt scheduled", func() bool {
		n, err := notify.Waiting(t.Context(), js, names, cfg.Name)
		return tried.Load() && err == nil && n == 1
	})
	if err := f.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := notify.Waiting(t.Context(), js, names, cfg.Name); err != nil || n != 0 {
		t.Fatalf("Waiting after Delete = %d, %v", n, err)
	}
	for _, stream := range []string{names.EventStream(), names.RetryStream()} {
		if _, err := js.Consumer(t.Context(), stream, cfg.Name); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatalf("the consumer of %s after Delete: %v", stream, err)
		}
	}
}

func TestSentRemembersADeliveryByKey(t *testing.T) {
	js := deployment(t)
	s, err := notify.OpenSent(t.Context(), js, names, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	k := notify.Key("mail", "ev-1", "ann@example.com")
	if k == notify.Key("mail", "ev-1", "bob@example.com") || !strings.HasPrefix(k, "mail.") {
		t.Fatalf("key %q: not distinct per recipient or not under the channel", k)
	}
	if done, err := s.Done(t.Context(), k); err != nil || done {
		t.Fatalf("Done before Mark = %v, %v", done, err)
	}
	if err := s.Mark(t.Context(), k, "250 OK"); err != nil {
		t.Fatal(err)
	}
	if done, err := s.Done(t.Context(), k); err != nil || !done {
		t.Fatalf("Done after Mark = %v, %v", done, err)
	}
}
