package channeltest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// EventHarness is a channel of events under test: one that delivers every
// event a subscription names to another system (webhooks), settled or
// not, rather than notices to people. [RunEvents] checks it on the half
// of the seam it stands on, [notify.Follow].
type EventHarness struct {
	// Name names the channel in the suite's messages.
	Name string
	// New makes a fake of the systems the channel delivers to, for one
	// scenario, stopped at t's cleanup.
	New func(t *testing.T) EventRemote
}

// EventRemote is a fake of the systems an event channel delivers to, and
// how to start the channel against them.
type EventRemote interface {
	// Receiver makes a receiver and returns its address.
	Receiver(t *testing.T) string
	// Start starts the channel on svc with one subscription to each of
	// addrs, for the events interrupted, resumed and completed, logging to
	// log, and returns what stops it.
	Start(t *testing.T, svc *interlock.Service, addrs []string, log *zerolog.Logger) (stop func())
	// Consumer is the durable consumer of the subscription to addr, and
	// Subscription how errors and dead letters name it.
	Consumer(names wire.Names, addr string) string
	Subscription(addr string) string
	// Received returns what the receivers took so far, in order.
	Received() []Delivered
	// Answer sets how addr answers from now on.
	Answer(addr string, a Answer)
	// Secret is a credential of the channel (a signing secret, an address
	// that is one) that no log or dead letter may show; "" when none.
	Secret() string
}

// Delivered is one event a receiver took.
type Delivered struct {
	// Address is the receiver's; ID the delivery's id, stable across
	// attempts; Kind the event's kind and Run its run.
	Address, ID, Kind, Run string
}

// eventRig is one scenario's Interlock and event channel.
type eventRig struct {
	t     *testing.T
	h     EventHarness
	rem   EventRemote
	svc   *interlock.Service
	addrs []string
	log   *natstest.Buffer
	mu    sync.Mutex
	stop  func()
}

func newEventRig(t *testing.T, h EventHarness, receivers int) *eventRig {
	t.Helper()
	srv := natstest.StartServer(t, "")
	r := &eventRig{t: t, h: h, rem: h.New(t), log: &natstest.Buffer{}}
	r.svc = natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{Flow()}, Secret: natstest.Secret})
	for range receivers {
		r.addrs = append(r.addrs, r.rem.Receiver(t))
	}
	r.start()
	t.Cleanup(r.halt)
	return r
}

func (r *eventRig) start() {
	r.t.Helper()
	logger := zerolog.New(r.log).Level(zerolog.DebugLevel)
	stop := r.rem.Start(r.t, r.svc, r.addrs, &logger)
	r.mu.Lock()
	r.stop = stop
	r.mu.Unlock()
}

func (r *eventRig) halt() {
	r.mu.Lock()
	stop := r.stop
	r.stop = nil
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// startRefund starts a refund run and returns its approval.
func (r *eventRig) startRefund(run string) protocol.Interrupted {
	r.t.Helper()
	if _, err := r.svc.Client("/channeltest").Start(r.t.Context(), "refund", run, map[string]json.RawMessage{"amount": json.RawMessage("4800")}, nil); err != nil {
		r.t.Fatal(err)
	}
	var in protocol.Interrupted
	natstest.Eventually(r.t, run+" waiting", func() bool {
		var err error
		in, err = r.svc.Client("/channeltest").LastInterrupt(r.t.Context(), "refund", run)
		return err == nil
	})
	return in
}

// decide approves run's approval as ann, of the finance role.
func (r *eventRig) decide(run string, in protocol.Interrupted) {
	r.t.Helper()
	ev, err := r.svc.ResumeAs(r.t.Context(), r.svc.Client("/channeltest"), "refund", run, protocol.Resume{RequestID: in.RequestID, Decision: "approve"}, "ann", []string{Role})
	if err != nil || ev.Kind == protocol.EventRefused {
		r.t.Fatalf("deciding %s: %s %v", run, ev.Kind, err)
	}
}

// of is what addr took of run's events of kind.
func (r *eventRig) of(addr, run, kind string) []Delivered {
	var out []Delivered
	for _, d := range r.rem.Received() {
		if d.Address == addr && d.Run == run && d.Kind == kind {
			out = append(out, d)
		}
	}
	return out
}

func (r *eventRig) waitFor(addr, run, kind string) {
	r.t.Helper()
	natstest.Eventually(r.t, fmt.Sprintf("%s of %s at %s", kind, run, r.rem.Subscription(addr)), func() bool { return len(r.of(addr, run, kind)) > 0 })
}

// idle waits until no subscription's consumer has anything pending, in
// hand or waiting to be tried again.
func (r *eventRig) idle() {
	r.t.Helper()
	names := r.svc.Names()
	natstest.Eventually(r.t, "the channel is idle", func() bool {
		for _, addr := range r.addrs {
			name := r.rem.Consumer(names, addr)
			c, err := r.svc.JetStream().Consumer(r.t.Context(), names.EventStream(), name)
			if err != nil {
				return false
			}
			info, err := c.Info(r.t.Context())
			waiting, werr := notify.Waiting(r.t.Context(), r.svc.JetStream(), names, name)
			if err != nil || werr != nil || info.NumPending != 0 || info.NumAckPending != 0 || waiting != 0 {
				return false
			}
		}
		return true
	})
}

// once fails unless every receiver took each of run's events of kinds
// once, each with an id of its own.
func (r *eventRig) once(run string, kinds ...string) {
	r.t.Helper()
	for _, addr := range r.addrs {
		ids := map[string]bool{}
		for _, k := range kinds {
			got := r.of(addr, run, k)
			if len(got) != 1 {
				r.t.Errorf("%s took %s of %s %d times, want once", r.rem.Subscription(addr), k, run, len(got))
				continue
			}
			if ids[got[0].ID] || got[0].ID == "" {
				r.t.Errorf("%s took %s of %s with id %q, used already or empty", r.rem.Subscription(addr), k, run, got[0].ID)
			}
			ids[got[0].ID] = true
		}
	}
}

// RunEvents runs the suite of event channels against the channel of h.
func RunEvents(t *testing.T, h EventHarness) {
	t.Run("EveryEventOnce", func(t *testing.T) { t.Parallel(); everyEventOnce(t, h) })
	t.Run("BacklogDeliversWhatHappened", func(t *testing.T) { t.Parallel(); backlogDeliversWhatHappened(t, h) })
	t.Run("RestartDoesNotDeliverTwice", func(t *testing.T) { t.Parallel(); restartDoesNotDeliverTwice(t, h) })
	t.Run("RetryAfter", func(t *testing.T) { t.Parallel(); eventsRetryAfter(t, h) })
	t.Run("RefusalIsDeadLettered", func(t *testing.T) { t.Parallel(); eventsRefusalDeadLettered(t, h) })
	t.Run("SlowReceiverDelaysNoOther", func(t *testing.T) { t.Parallel(); eventsSlowReceiver(t, h) })
}

// everyEventOnce: each subscription takes each event of a run once, each
// with a delivery id of its own, and no secret reaches the log.
func everyEventOnce(t *testing.T, h EventHarness) {
	r := newEventRig(t, h, 2)
	in := r.startRefund("r-once")
	r.decide("r-once", in)
	for _, addr := range r.addrs {
		r.waitFor(addr, "r-once", protocol.EventCompleted)
	}
	r.idle()
	r.once("r-once", protocol.EventInterrupted, protocol.EventResumed, protocol.EventCompleted)
	if s := r.rem.Secret(); s != "" && strings.Contains(r.log.String(), s) {
		t.Errorf("the channel's secret was logged")
	}
	if strings.Contains(r.log.String(), "resumeToken") {
		t.Errorf("a resume token was logged")
	}
}

// backlogDeliversWhatHappened: stopped, the channel misses nothing; started
// again, it delivers every event since, settled work included (a system
// wants the history, not only what waits).
func backlogDeliversWhatHappened(t *testing.T, h EventHarness) {
	r := newEventRig(t, h, 1)
	r.halt()
	in := r.startRefund("r-backlog")
	r.decide("r-backlog", in)
	r.start()
	r.waitFor(r.addrs[0], "r-backlog", protocol.EventCompleted)
	r.idle()
	r.once("r-backlog", protocol.EventInterrupted, protocol.EventResumed, protocol.EventCompleted)
}

// restartDoesNotDeliverTwice: a receiver failing while another takes its
// events; the channel restarted; the receiver back: each takes each once.
func restartDoesNotDeliverTwice(t *testing.T, h EventHarness) {
	r := newEventRig(t, h, 2)
	failing, other := r.addrs[0], r.addrs[1]
	r.rem.Answer(failing, Fail)
	r.startRefund("r-restart")
	r.waitFor(other, "r-restart", protocol.EventInterrupted)
	names := r.svc.Names()
	natstest.Eventually(t, "an attempt scheduled after a failure", func() bool {
		n, err := notify.Waiting(t.Context(), r.svc.JetStream(), names, r.rem.Consumer(names, failing))
		return err == nil && n > 0
	})
	r.halt()
	r.rem.Answer(failing, Accept)
	r.start()
	r.waitFor(failing, "r-restart", protocol.EventInterrupted)
	r.idle()
	r.once("r-restart", protocol.EventInterrupted)
}

// eventsRetryAfter: a receiver's Retry-After sets when the next attempt
// is due.
func eventsRetryAfter(t *testing.T, h EventHarness) {
	r := newEventRig(t, h, 1)
	addr := r.addrs[0]
	r.rem.Answer(addr, Throttle)
	r.startRefund("r-throttled")
	names := r.svc.Names()
	st, err := r.svc.JetStream().Stream(t.Context(), names.RetryStream())
	if err != nil {
		t.Fatal(err)
	}
	var due, stored time.Time
	natstest.Eventually(t, "the next attempt scheduled", func() bool {
		m, err := st.GetLastMsgForSubject(t.Context(), names.RetriesOf(r.rem.Consumer(names, addr)))
		if err != nil {
			return false
		}
		at, ok := strings.CutPrefix(m.Header.Get(bus.HeaderSchedule), "@at ")
		if !ok {
			return false
		}
		due, err = time.Parse(time.RFC3339Nano, at)
		stored = m.Time
		return err == nil
	})
	if wait := due.Sub(stored); wait < ThrottleFor-time.Second {
		t.Errorf("the next attempt is due %s after the throttled one, want about the %s the receiver asked for", wait, ThrottleFor)
	}
	r.rem.Answer(addr, Accept)
	r.waitFor(addr, "r-throttled", protocol.EventInterrupted)
	r.idle()
	r.once("r-throttled", protocol.EventInterrupted)
}

// eventsRefusalDeadLettered: a receiver that refuses for good has the
// event dead-lettered at once, naming its subscription and consumer and
// no secret; another subscription takes it.
func eventsRefusalDeadLettered(t *testing.T, h EventHarness) {
	r := newEventRig(t, h, 2)
	refused, other := r.addrs[0], r.addrs[1]
	r.rem.Answer(refused, Refuse)
	r.startRefund("r-refused")
	names := r.svc.Names()
	var m *jetstream.RawStreamMsg
	natstest.Eventually(t, "the event dead-lettered", func() bool {
		s, err := r.svc.JetStream().Stream(t.Context(), names.DeadLetterStream())
		if err != nil {
			return false
		}
		m, err = s.GetLastMsgForSubject(t.Context(), names.DeadLetter(notify.ReasonUndeliverable))
		return err == nil
	})
	if got := m.Header.Get(bus.HeaderConsumer); got != r.rem.Consumer(names, refused) {
		t.Errorf("dead letter of consumer %q, want the refused subscription's", got)
	}
	why := m.Header.Get(bus.HeaderError)
	if !strings.Contains(why, r.rem.Subscription(refused)) {
		t.Errorf("the dead letter's error does not name %s: %q", r.rem.Subscription(refused), why)
	}
	if s := r.rem.Secret(); s != "" && strings.Contains(why, s) {
		t.Errorf("the dead letter shows the channel's secret: %q", why)
	}
	r.waitFor(other, "r-refused", protocol.EventInterrupted)
	r.idle()
	if got := r.of(refused, "r-refused", protocol.EventInterrupted); len(got) != 0 {
		t.Errorf("the refusing receiver took %d events", len(got))
	}
}

// eventsSlowReceiver: a receiver that does not answer holds back no other
// subscription, on the same event nor the next; answered, it takes each.
func eventsSlowReceiver(t *testing.T, h EventHarness) {
	r := newEventRig(t, h, 2)
	slow, other := r.addrs[0], r.addrs[1]
	r.rem.Answer(slow, Hang)
	r.startRefund("r-slow-1")
	r.startRefund("r-slow-2")
	r.waitFor(other, "r-slow-1", protocol.EventInterrupted)
	r.waitFor(other, "r-slow-2", protocol.EventInterrupted)
	r.rem.Answer(slow, Accept)
	r.waitFor(slow, "r-slow-1", protocol.EventInterrupted)
	r.waitFor(slow, "r-slow-2", protocol.EventInterrupted)
	r.idle()
	r.once("r-slow-1", protocol.EventInterrupted)
	r.once("r-slow-2", protocol.EventInterrupted)
}
