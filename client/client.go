// Package client speaks Interlock's protocol from Go: it publishes start,
// resume and cancel CloudEvents to the inbound subjects, waits for the event
// that settles them, and reads checkpoints and the pending index. The
// `interlock` command's client subcommands are built on it; a Go bot or
// service can use it the same way.
package client

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/kv"
	"github.com/interlockhq/interlock/wire"
)

// DefaultWait is how long a call waits for the event that settles it.
const DefaultWait = 10 * time.Second

// ErrNoAnswer: no settling event came in time. The command stays queued in
// the inbound stream and is applied when a worker runs.
var ErrNoAnswer = errors.New("client: no answer from Interlock in time")

// Client talks to one Interlock deployment.
type Client struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	names  wire.Names
	source string
	wait   time.Duration
}

// New returns a client on a connection. source is the CloudEvents source
// of what it sends ("/cli/ann"); wait bounds how long calls wait for their
// outcome (0 for DefaultWait).
func New(nc *nats.Conn, js jetstream.JetStream, names wire.Names, source string, wait time.Duration) *Client {
	return &Client{nc: nc, js: js, names: names, source: cmp.Or(source, "/interlock/client"), wait: cmp.Or(wait, DefaultWait)}
}

// Event is an event Interlock published.
type Event struct {
	// Kind is the last token of the subject ("interrupted").
	Kind string
	// Event is the CloudEvent.
	Event events.Event
}

// Decode decodes the event's data into v.
func (e Event) Decode(v any) error { return json.Unmarshal(e.Event.Data(), v) }

// settles reports whether an event of kind ends the wait for a command.
func settles(kind string) bool {
	switch kind {
	case "interrupted", "completed", "failed", "cancelled", "expired", "refused":
		return true
	}
	return false
}

// NewRunID returns a fresh run id.
func NewRunID() string { return "r-" + randomHex(6) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Start starts a run of flow with the given initial state and origin (both
// may be nil) and returns the event that settles it: interrupted,
// completed, failed or refused. run may be "" for a fresh id.
func (c *Client) Start(ctx context.Context, flow, run string, state map[string]json.RawMessage, origin json.RawMessage) (Event, error) {
	run = cmp.Or(run, NewRunID())
	return c.send(ctx, flow, run, "start", events.TypeStart, events.Start{State: state, Origin: origin})
}

// Resume sends a resume for a run and returns the event that settles it:
// interrupted (a re-ask or the next interrupt), completed, failed or refused.
func (c *Client) Resume(ctx context.Context, flow, run string, r events.Resume) (Event, error) {
	return c.send(ctx, flow, run, "resume", events.TypeResume, r)
}

// Cancel cancels a waiting run and returns the cancelled or refused event.
func (c *Client) Cancel(ctx context.Context, flow, run, reason string) (Event, error) {
	return c.send(ctx, flow, run, "cancel", events.TypeCancel, events.Cancel{Reason: reason, By: c.source})
}

func (c *Client) send(ctx context.Context, flow, run, verb, typ string, data any) (Event, error) {
	if err := engine.CheckName("flow", flow); err != nil {
		return Event{}, err
	}
	if err := engine.CheckName("run", run); err != nil {
		return Event{}, err
	}
	id := randomHex(16)
	ev, err := events.New(id, c.source, typ, run, time.Now().UTC(), data)
	if err != nil {
		return Event{}, err
	}
	body, err := events.Encode(ev)
	if err != nil {
		return Event{}, err
	}
	// A small channel: the run publishes a handful of events per command.
	inbox := make(chan *nats.Msg, 64)
	sub, err := c.nc.ChanSubscribe(c.names.Event(flow, run, ">"), inbox)
	if err != nil {
		return Event{}, fmt.Errorf("client: subscribing to %s: %w", c.names.Event(flow, run, ">"), err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.nc.Flush(); err != nil {
		return Event{}, fmt.Errorf("client: %w", err)
	}
	msg := nats.NewMsg(c.names.In(flow, verb))
	msg.Data = body
	msg.Header.Set("Content-Type", events.Structured)
	msg.Header.Set(jetstream.MsgIDHeader, id)
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		return Event{}, fmt.Errorf("client: publishing %s: %w", msg.Subject, err)
	}
	deadline := time.Now().Add(c.wait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
	for {
		var m *nats.Msg
		select {
		case m = <-inbox:
		case <-timeout.C:
			return Event{}, fmt.Errorf("%w: %s %s.%s was queued as event %s; is `interlock serve` running?", ErrNoAnswer, verb, flow, run, id)
		case <-ctx.Done():
			return Event{}, fmt.Errorf("client: waiting for the outcome of %s %s.%s: %w", verb, flow, run, ctx.Err())
		}
		kind := m.Subject[strings.LastIndex(m.Subject, ".")+1:]
		if !settles(kind) {
			continue
		}
		out, err := events.Decode(m.Header, m.Data)
		if err != nil {
			return Event{}, fmt.Errorf("client: decoding %s: %w", m.Subject, err)
		}
		if kind == "refused" {
			var r events.Refused
			if json.Unmarshal(out.Data(), &r) == nil && r.EventID != "" && r.EventID != id {
				continue // someone else's refusal
			}
		}
		return Event{Kind: kind, Event: out}, nil
	}
}

// LastInterrupt returns the latest interrupted event of a run, with its
// resume token, from the events stream.
func (c *Client) LastInterrupt(ctx context.Context, flow, run string) (events.Interrupted, error) {
	s, err := c.js.Stream(ctx, c.names.EventStream())
	if err != nil {
		return events.Interrupted{}, fmt.Errorf("client: binding %s: %w", c.names.EventStream(), err)
	}
	m, err := s.GetLastMsgForSubject(ctx, c.names.Event(flow, run, "interrupted"))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return events.Interrupted{}, fmt.Errorf("client: run %s of flow %s has no interrupted event in %s (never interrupted, or older than the stream keeps events); check it with `interlock show %s %s`, or pass the token with --token", run, flow, c.names.EventStream(), flow, run)
	}
	if err != nil {
		return events.Interrupted{}, fmt.Errorf("client: reading the last interrupt of %s.%s: %w", flow, run, err)
	}
	ev, err := events.Decode(m.Header, m.Data)
	if err != nil {
		return events.Interrupted{}, err
	}
	var in events.Interrupted
	if err := json.Unmarshal(ev.Data(), &in); err != nil {
		return events.Interrupted{}, fmt.Errorf("client: interrupted event of %s.%s: %w", flow, run, err)
	}
	return in, nil
}

func (c *Client) store(ctx context.Context) (*kv.Store, error) {
	runs, err := c.js.KeyValue(ctx, c.names.RunsBucket())
	if err != nil {
		return nil, fmt.Errorf("client: binding bucket %s (has `interlock serve` run once?): %w", c.names.RunsBucket(), err)
	}
	pending, err := c.js.KeyValue(ctx, c.names.PendingBucket())
	if err != nil {
		return nil, fmt.Errorf("client: binding bucket %s: %w", c.names.PendingBucket(), err)
	}
	return kv.New(runs, pending), nil
}

// Checkpoint returns a run's checkpoint document and number.
func (c *Client) Checkpoint(ctx context.Context, flow, run string) (*engine.Checkpoint, uint64, error) {
	st, err := c.store(ctx)
	if err != nil {
		return nil, 0, err
	}
	cp, rev, err := st.Load(ctx, flow, run)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, 0, fmt.Errorf("client: no run %s of flow %s", run, flow)
	}
	return cp, rev, err
}
