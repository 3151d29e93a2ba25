package bus_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/publishertest"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// TestPublisherRecheckSkipsWhatTheStreamAlreadyHolds publishes a
// transition's messages, lets the deduplication window pass, and publishes
// them again as a redelivered transition would: with recheck nothing is
// stored twice; without it, the repeat lands.
func TestPublisherRecheckSkipsWhatTheStreamAlreadyHolds(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	names, _ := wire.NewNames("")
	if err := bus.Provision(t.Context(), js, names, bus.StreamConfig{Duplicates: time.Second, EventMaxAge: time.Minute, AuditMaxAge: time.Minute}); err != nil {
		t.Fatal(err)
	}
	p := bus.NewPublisher(js, names, "interlock/test")
	at := time.Now().UTC()
	msgs := []engine.Message{
		{Stream: engine.EventStream, Kind: protocol.EventStarted, ID: "u-1", Flow: "booking", Run: "r-1", Time: at, Data: &protocol.Started{Flow: "booking", Run: "r-1"}},
		{Stream: engine.AuditStream, Kind: protocol.ActionStarted, ID: "u-2", Flow: "booking", Run: "r-1", Time: at, Data: &protocol.AuditRecord{Flow: "booking", Run: "r-1", Action: protocol.ActionStarted, At: at}},
	}
	count := func() int {
		return len(natstest.Read(t, js, names.EventStream(), ">")) + len(natstest.Read(t, js, names.AuditStream(), ">"))
	}
	if err := p.Publish(t.Context(), msgs, false); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(t.Context(), msgs, false); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d messages stored; the repeat within the window must be dropped", n)
	}
	// Past the window, only the recheck keeps the repeat out.
	natstest.Eventually(t, "past the deduplication window", func() bool { return time.Since(at) > 1500*time.Millisecond })
	if err := p.Publish(t.Context(), msgs, true); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d messages stored after a rechecked repeat, want 2", n)
	}
	if err := p.Publish(t.Context(), msgs, false); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 4 {
		t.Fatalf("%d messages stored after an unchecked repeat past the window, want 4 (the test is no test otherwise)", n)
	}
}

// failingJetStream fails the first publish to a subject with prefix,
// without sending it, as a publish lost to a leader change fails.
type failingJetStream struct {
	jetstream.JetStream
	prefix string
	failed atomic.Bool
}

func (f *failingJetStream) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if strings.HasPrefix(msg.Subject, f.prefix) && f.failed.CompareAndSwap(false, true) {
		return nil, nats.ErrNoResponders
	}
	return f.JetStream.PublishMsg(ctx, msg, opts...)
}

func (f *failingJetStream) PublishMsgAsync(msg *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	if strings.HasPrefix(msg.Subject, f.prefix) && f.failed.CompareAndSwap(false, true) {
		return failedFuture{msg: msg}, nil
	}
	return f.JetStream.PublishMsgAsync(msg, opts...)
}

// failedFuture is a publish that got no acknowledgement.
type failedFuture struct{ msg *nats.Msg }

func (f failedFuture) Ok() <-chan *jetstream.PubAck { return nil }
func (f failedFuture) Err() <-chan error {
	c := make(chan error, 1)
	c <- nats.ErrNoResponders
	return c
}
func (f failedFuture) Msg() *nats.Msg { return f.msg }

// TestPublisherStoresATransitionsRecordsInOrderThroughAFailure loses the
// first publish of a batch's two audit records and two events, then
// publishes the batch again as a redelivery does: the stream holds each
// pair once, in order (sent together, the second would be stored first,
// and the first after it on the retry).
func TestPublisherStoresATransitionsRecordsInOrderThroughAFailure(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	names, _ := wire.NewNames("")
	if err := bus.Provision(t.Context(), js, names, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC()
	for _, tc := range []struct{ run, stream, prefix string }{
		{"r-audit", names.AuditStream(), names.Prefix + ".audit."},
		{"r-events", names.EventStream(), names.Prefix + ".ev."},
	} {
		run := tc.run
		msgs := []engine.Message{
			{Stream: engine.AuditStream, Kind: protocol.ActionStarted, ID: run + "-a1", Flow: "booking", Run: run, Time: at, Data: &protocol.AuditRecord{Flow: "booking", Run: run, Action: protocol.ActionStarted, At: at}},
			{Stream: engine.AuditStream, Kind: protocol.ActionInterrupted, ID: run + "-a2", Flow: "booking", Run: run, Time: at, Data: &protocol.AuditRecord{Flow: "booking", Run: run, Action: protocol.ActionInterrupted, At: at}},
			{Stream: engine.EventStream, Kind: protocol.EventStarted, ID: run + "-e1", Flow: "booking", Run: run, Time: at, Data: &protocol.Started{Flow: "booking", Run: run}},
			{Stream: engine.EventStream, Kind: protocol.EventCompleted, ID: run + "-e2", Flow: "booking", Run: run, Time: at, Data: &protocol.Completed{Flow: "booking", Run: run}},
		}
		p := bus.NewPublisher(&failingJetStream{JetStream: js, prefix: tc.prefix}, names, "interlock/test")
		if err := p.Publish(t.Context(), msgs, false); err == nil {
			t.Fatalf("%s: publishing with a lost publish succeeded; the test lost nothing", tc.stream)
		}
		if err := p.Publish(t.Context(), msgs, true); err != nil {
			t.Fatal(err)
		}
		filter := names.Audit("booking", run)
		if tc.stream == names.EventStream() {
			filter = names.Event("booking", run, ">")
		}
		var got []string
		for _, r := range natstest.Read(t, js, tc.stream, filter) {
			got = append(got, r.Header.Get(jetstream.MsgIDHeader))
		}
		want := []string{run + "-a1", run + "-a2"}
		if tc.stream == names.EventStream() {
			want = []string{run + "-e1", run + "-e2"}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s holds %v after a lost publish and the retry, want %v", tc.stream, got, want)
		}
	}
}

// TestPublisherConformsToTheEngine runs the publisher conformance suite on
// a server of its own for each check, whose streams deduplicate over a
// second. The reader reads the run's audit records, deadlines and events
// back from their streams, merged in the order the server stored them.
func TestPublisherConformsToTheEngine(t *testing.T) {
	t.Parallel()
	const window = time.Second
	publishertest.Run(t, func(t *testing.T) (engine.Publisher, publishertest.Reader) {
		srv := natstest.StartServer(t, "")
		_, js := natstest.Connect(t, srv.ClientURL())
		names, _ := wire.NewNames("")
		if err := bus.Provision(t.Context(), js, names, bus.StreamConfig{Duplicates: window, EventMaxAge: time.Minute, AuditMaxAge: time.Minute}); err != nil {
			t.Fatal(err)
		}
		read := func(t *testing.T, flow, run string) []publishertest.Stored {
			type stored struct {
				publishertest.Stored
				at time.Time
			}
			var got []stored
			for _, s := range []struct {
				stream       engine.Stream
				name, filter string
			}{
				{engine.AuditStream, names.AuditStream(), names.Audit(flow, run)},
				{engine.ScheduleStream, names.ScheduleStream(), names.Schedule(flow, run, "*")},
				{engine.EventStream, names.EventStream(), names.Event(flow, run, ">")},
			} {
				for _, r := range natstest.Read(t, js, s.name, s.filter) {
					id := r.Header.Get(jetstream.MsgIDHeader)
					if r.Event.ID() != id {
						t.Errorf("%s: Nats-Msg-Id %q, CloudEvent id %q; want the same", r.Subject, id, r.Event.ID())
					}
					got = append(got, stored{publishertest.Stored{Stream: s.stream, ID: id}, r.Stored})
				}
			}
			slices.SortStableFunc(got, func(a, b stored) int { return a.at.Compare(b.at) })
			out := make([]publishertest.Stored, len(got))
			for i, s := range got {
				out[i] = s.Stored
			}
			return out
		}
		return bus.NewPublisher(js, names, "interlock/test"), publishertest.Reader{Stored: read, Window: window}
	})
}

// A run is not moved on while its last transition's message is still
// unacknowledged, and the queue asks the stream's leader whether it is: a
// replica of the schedules stream that fell behind does not have a due
// deadline yet, and would call it acknowledged (the network soak lost an
// escalation's events so).
func TestAnUnacknowledgedDeadlineIsNotTakenForAcknowledgedByAReplicaThatFellBehind(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	names := wire.Names{Prefix: wire.DefaultPrefix}
	if err := bus.Provision(t.Context(), js, names, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(t.Context(), names.Prefix+".due.refund.expire", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	q, err := bus.NewQueue(t.Context(), js, names)
	if err != nil {
		t.Fatal(err)
	}
	natstest.LaggingReplica(t, js, names.ScheduleStream())
	missed := 0
	for range 40 {
		m, err := js.Conn().Request("$JS.API.DIRECT.GET."+names.ScheduleStream(), fmt.Appendf(nil, `{"seq":%d}`, ack.Sequence), natstest.Wait)
		if err == nil && m.Header.Get("Status") == "404" {
			missed++
		}
	}
	if missed == 0 {
		t.Fatal("no direct get of the deadline missed it: the replica does not lag")
	}
	for i := range 40 {
		if unacked, err := q.Unacked(t.Context(), engine.Cause{Seq: ack.Sequence, Due: true}); err != nil || !unacked {
			t.Fatalf("read %d: unacknowledged %v, %v; want true (%d of 40 direct gets missed the deadline)", i+1, unacked, err, missed)
		}
	}
}
