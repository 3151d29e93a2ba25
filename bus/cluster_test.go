package bus_test

import (
	"context"
	"strings"
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

// TestWorkerStartWaitsForAClusterWithoutQuorum starts a worker on the one
// node of a 3-node cluster still up, as a worker restarted during a node
// loss would: its stream has no leader, so binding the consumer cannot
// succeed yet. Start waits (and says so) rather than failing, and once a
// second node is back it binds and the worker runs commands.
func TestWorkerStartWaitsForAClusterWithoutQuorum(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	names, _ := wire.NewNames("")
	_, js := natstest.Connect(t, c.Nodes[0].ClientURL())
	if err := bus.Provision(t.Context(), js, names, bus.StreamConfig{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	queue, err := bus.NewQueue(t.Context(), js, names)
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(1)
	c.Stop(2)
	r, err := engine.NewRunner(engine.Config{Flows: []*engine.Flow{booking.Flow()}, Store: enginetest.NewStore(),
		Publisher: bus.NewPublisher(js, names, "interlock/bus-test"), Queue: queue, Secret: natstest.Secret})
	if err != nil {
		t.Fatal(err)
	}
	var logs natstest.Buffer
	log := zerolog.New(&logs)
	// A short ack wait: a command the worker took while the events
	// stream still elected its leader is delivered again soon.
	w, err := bus.NewWorker(js, bus.WorkerConfig{Names: names, Runner: r, Concurrency: 2, Logger: &log, AckWait: 2 * time.Second, HandlerTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.WithoutCancel(t.Context())) })
	started := make(chan error, 1)
	go func() { started <- w.Start(t.Context()) }()

	natstest.Eventually(t, "the worker logging its wait for the cluster", func() bool {
		select {
		case err := <-started:
			t.Fatalf("Start without a quorum returned %v, want it to wait for the cluster", err)
		default:
		}
		return strings.Contains(logs.String(), "waiting for the JetStream cluster to form")
	})
	c.Start(1)
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("Start once a quorum was back: %v", err)
		}
	case <-time.After(natstest.Wait):
		t.Fatalf("Start still waiting %s after a quorum was back", natstest.Wait)
	}

	// The other streams elect their leaders too, each when its raft
	// election timer fires (seconds apart): wait for all before the run.
	for _, name := range []string{names.EventStream(), names.AuditStream(), "KV_" + names.ConfigBucket()} {
		natstest.Eventually(t, name+" led again", func() bool {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			s, err := js.Stream(ctx, name)
			if err != nil {
				return false
			}
			info, err := s.Info(ctx)
			return err == nil && info.Cluster != nil && info.Cluster.Leader != ""
		})
	}
	// Retry the start (the stream drops a repeat by its id) until the
	// inbound stream takes it.
	ev, err := events.New("after-quorum-start", "/bus-test", protocol.TypeStart, "after-quorum", time.Now().UTC(), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the start command taken", func() bool {
		msg := nats.NewMsg(names.In("booking", "start"))
		msg.Data = body
		msg.Header.Set("Content-Type", events.Structured)
		msg.Header.Set(jetstream.MsgIDHeader, ev.ID())
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := js.PublishMsg(ctx, msg)
		return err == nil
	})
	rs := natstest.WaitFor(t, js, names.EventStream(), names.Event("booking", "after-quorum", ">"), natstest.Nth("interrupted", 1))
	if n := natstest.Count(rs, "started"); n != 1 {
		t.Errorf("%d started events, want 1", n)
	}
}
