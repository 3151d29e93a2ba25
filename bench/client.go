package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	ilclient "github.com/interlockhq/interlock/client"
	ilprotocol "github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// protocol is how a system's clients encode commands and read events.
type protocol interface {
	// start returns the inbound message that starts run.
	start(names wire.Names, run string) (*nats.Msg, error)
	// resume returns the inbound message that answers the interrupt
	// announced by interrupted.
	resume(names wire.Names, run string, interrupted *nats.Msg) (*nats.Msg, error)
}

// client drives runs the way an agent service would: it subscribes to a
// run's events, publishes a command to the inbound stream, and waits for
// the event that settles it. One connection is shared by every client
// goroutine.
type client struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	names wire.Names
	flow  string
	proto protocol
	// il, when set, drives runs through the Go client package instead of
	// proto and a subscription of the benchmark's own.
	il *ilclient.Client
	w  workload
}

// useGoClient makes the client drive runs of w through the Go client
// package (client.Start, client.Resume) on its connection.
func (c *client) useGoClient(w workload) {
	c.il = ilclient.New(c.nc, c.js, c.names, clientSource, eventWait)
	c.w = w
}

// newClient connects a client running flow's runs with protocol p.
func newClient(ctx context.Context, url, name string, names wire.Names, flow string, p protocol) (*client, error) {
	nc, js, err := wire.Connect(ctx, connConfig(url, name))
	if err != nil {
		return nil, err
	}
	return &client{nc: nc, js: js, names: names, flow: flow, proto: p}, nil
}

func (c *client) close() { c.nc.Close() }

// full takes run from start to interrupted and from resume to completed,
// and returns the latency of each half.
func (c *client) full(ctx context.Context, run string) (toInterrupted, toCompleted time.Duration, err error) {
	if c.il != nil {
		return c.fullGo(ctx, run)
	}
	sub, err := c.subscribe(run)
	if err != nil {
		return 0, 0, err
	}
	defer sub.close()
	t0 := time.Now()
	in, err := c.send(ctx, sub, run, "start", func() (*nats.Msg, error) { return c.proto.start(c.names, run) }, "interrupted")
	if err != nil {
		return 0, 0, err
	}
	t1 := time.Now()
	if _, err := c.send(ctx, sub, run, "resume", func() (*nats.Msg, error) { return c.proto.resume(c.names, run, in) }, "completed"); err != nil {
		return 0, 0, err
	}
	return t1.Sub(t0), time.Since(t1), nil
}

// pause starts run and returns once it is interrupted, leaving it waiting.
func (c *client) pause(ctx context.Context, run string) error {
	if c.il != nil {
		_, err := c.startGo(ctx, run)
		return err
	}
	sub, err := c.subscribe(run)
	if err != nil {
		return err
	}
	defer sub.close()
	_, err = c.send(ctx, sub, run, "start", func() (*nats.Msg, error) { return c.proto.start(c.names, run) }, "interrupted")
	return err
}

// fullGo is full through the Go client package: the resume carries what
// the raw client's does (the token, and an answer or an approval).
func (c *client) fullGo(ctx context.Context, run string) (toInterrupted, toCompleted time.Duration, err error) {
	t0 := time.Now()
	in, err := c.startGo(ctx, run)
	if err != nil {
		return 0, 0, err
	}
	t1 := time.Now()
	r := ilprotocol.Resume{ResumeToken: in.ResumeToken}
	if c.w.approval {
		r.Decision, r.Approver = "approve", approverName
	} else {
		r.Answers = map[string]json.RawMessage{"answer": json.RawMessage(`"ok"`)}
	}
	ev, err := c.il.Resume(ctx, c.flow, run, r)
	if err != nil {
		return 0, 0, fmt.Errorf("run %s: resuming: %w", run, err)
	}
	if ev.Kind != ilprotocol.EventCompleted {
		return 0, 0, fmt.Errorf("run %s: got a %s event instead of completed after resume: %s", run, ev.Kind, truncate(ev.Event.Data(), 400))
	}
	return t1.Sub(t0), time.Since(t1), nil
}

// startGo starts run through the Go client package and returns its
// interrupt.
func (c *client) startGo(ctx context.Context, run string) (ilprotocol.Interrupted, error) {
	var state map[string]json.RawMessage
	if c.w.approval {
		state = map[string]json.RawMessage{}
		for k, v := range refundState(run) {
			b, err := json.Marshal(v)
			if err != nil {
				return ilprotocol.Interrupted{}, err
			}
			state[k] = b
		}
	}
	ev, err := c.il.Start(ctx, c.flow, run, state, nil)
	if err != nil {
		return ilprotocol.Interrupted{}, fmt.Errorf("run %s: starting: %w", run, err)
	}
	if ev.Kind != ilprotocol.EventInterrupted {
		return ilprotocol.Interrupted{}, fmt.Errorf("run %s: got a %s event instead of interrupted after start: %s", run, ev.Kind, truncate(ev.Event.Data(), 400))
	}
	var in ilprotocol.Interrupted
	if err := ev.Decode(&in); err != nil {
		return ilprotocol.Interrupted{}, fmt.Errorf("run %s: decoding the interrupted event: %w", run, err)
	}
	return in, nil
}

// eventBuffer is the room for a run's events not yet read: four are
// published per run.
const eventBuffer = 16

// subscription is a core NATS subscription to one run's events.
type subscription struct {
	sub *nats.Subscription
	ch  chan *nats.Msg
}

// subscribe subscribes to every event of run. The subscription and the
// publish that follows go over one connection, which the server reads in
// order, so the subscription is in place before any event can be
// published: no flush is needed. It delivers to a small channel of its
// own: SubscribeSync would allocate a channel of nats.DefaultMaxChanLen
// (65536) slots, 512 KB per run, and the garbage collection that causes
// would dominate the tail latency of both systems.
func (c *client) subscribe(run string) (*subscription, error) {
	subject := c.names.Event(c.flow, run, ">")
	ch := make(chan *nats.Msg, eventBuffer)
	sub, err := c.nc.ChanSubscribe(subject, ch)
	if err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	return &subscription{sub: sub, ch: ch}, nil
}

func (s *subscription) close() { _ = s.sub.Unsubscribe() }

// send publishes the command msg makes and waits for an event of kind want.
func (c *client) send(ctx context.Context, sub *subscription, run, verb string, msg func() (*nats.Msg, error), want string) (*nats.Msg, error) {
	m, err := msg()
	if err != nil {
		return nil, fmt.Errorf("run %s: encoding %s: %w", run, verb, err)
	}
	if _, err := c.js.PublishMsg(ctx, m); err != nil {
		return nil, fmt.Errorf("run %s: publishing %s to %s: %w", run, verb, m.Subject, err)
	}
	ctx, cancel := context.WithTimeout(ctx, eventWait)
	defer cancel()
	for {
		var ev *nats.Msg
		select {
		case ev = <-sub.ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("run %s: waiting for the %s event after %s: %w", run, want, verb, ctx.Err())
		}
		switch kind := ev.Subject[strings.LastIndexByte(ev.Subject, '.')+1:]; kind {
		case want:
			return ev, nil
		case "failed", "refused", "cancelled", "expired":
			return nil, fmt.Errorf("run %s: got a %s event instead of %s after %s: %s", run, kind, want, verb, truncate(ev.Data, 400))
		}
	}
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
