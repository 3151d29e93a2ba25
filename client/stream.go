package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/interlockhq/interlock/events"
)

// StreamEvent is an event read back from the events stream.
type StreamEvent struct {
	// Seq is the event's sequence in the events stream: a reader that saw
	// it can carry on from there.
	Seq uint64
	// Subject is the subject it was published on,
	// <prefix>.ev.<flow>.<run>.<kind>.
	Subject string
	// Kind is the last token of Subject (protocol.EventInterrupted, ...).
	Kind string
	// Event is the CloudEvent.
	Event events.Event
}

// WithWait returns a copy of the client whose calls wait up to wait (0 for
// DefaultWait) for the event that settles them.
func (c *Client) WithWait(wait time.Duration) *Client {
	cp := *c
	if wait <= 0 {
		wait = DefaultWait
	}
	cp.wait = wait
	return &cp
}

// RunEvents returns the events of a run that the events stream still
// holds, oldest first: at most limit of them (1 to MaxPendingLimit), and
// whether there are more. It reads with batched direct gets filtered by the
// run's subjects, so its cost follows the run's events, not the stream's.
func (c *Client) RunEvents(ctx context.Context, flow, run string, limit int) ([]StreamEvent, bool, error) {
	if err := CheckName("flow", flow); err != nil {
		return nil, false, err
	}
	if err := CheckName("run", run); err != nil {
		return nil, false, err
	}
	if limit < 1 || limit > MaxPendingLimit {
		return nil, false, fmt.Errorf("client: RunEvents limit %d is out of range: use 1 to %d", limit, MaxPendingLimit)
	}
	return c.Events(ctx, WatchQuery{Flow: flow, Run: run}, limit)
}

func decodeStreamEvent(subject string, seq uint64, header map[string][]string, data []byte) (StreamEvent, error) {
	ev, err := events.Decode(header, data)
	if err != nil {
		return StreamEvent{}, fmt.Errorf("client: event %d on %s: %w", seq, subject, err)
	}
	return StreamEvent{Seq: seq, Subject: subject, Kind: subject[strings.LastIndex(subject, ".")+1:], Event: ev}, nil
}

// Events returns up to limit (1 to MaxPendingLimit) events of the events
// stream that q selects, after q.After, oldest first, and whether more
// follow: a reader carries on with After set to the last one's Seq. It
// reads with batched direct gets, which any client that may read events
// may send.
func (c *Client) Events(ctx context.Context, q WatchQuery, limit int) ([]StreamEvent, bool, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	if limit < 1 || limit > MaxPendingLimit {
		return nil, false, fmt.Errorf("client: Events limit %d is out of range: use 1 to %d", limit, MaxPendingLimit)
	}
	w, err := c.watcher(q)
	if err != nil {
		return nil, false, err
	}
	out := []StreamEvent{}
	for {
		b, err := w.g.batch(ctx, w.next, limit+1-len(out))
		if err != nil {
			return nil, false, err
		}
		for _, m := range b.msgs {
			kind := m.subject[strings.LastIndex(m.subject, ".")+1:]
			if w.kinds != nil && !w.kinds[kind] {
				continue
			}
			if len(out) == limit {
				return out, true, nil
			}
			ev, err := decodeStreamEvent(m.subject, m.seq, m.header, m.data)
			if err != nil {
				return nil, false, err
			}
			out = append(out, ev)
		}
		if len(b.msgs) == 0 || b.pending == 0 {
			return out, false, nil
		}
		w.next = b.msgs[len(b.msgs)-1].seq + 1
	}
}

// LastEventSeq returns the sequence of the last event in the events
// stream (0 when it is empty): a [Client.Watch] after it sees every event
// published from now on.
func (c *Client) LastEventSeq(ctx context.Context) (uint64, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	s, err := c.js.Stream(ctx, c.names.EventStream())
	if err != nil {
		return 0, fmt.Errorf("client: binding %s (has `interlock serve` run once?): %w", c.names.EventStream(), err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("client: reading %s: %w", c.names.EventStream(), err)
	}
	return info.State.LastSeq, nil
}

// WatchQuery selects the events a [Watcher] follows.
type WatchQuery struct {
	// Flow, if set, keeps only that flow's events.
	Flow string
	// Run, if set, keeps only that run's events; it needs Flow.
	Run string
	// Kinds, if set, keeps only events of these kinds (protocol.EventInterrupted,
	// ...); otherwise every kind.
	Kinds []string
	// After is the sequence the watch starts after: the Seq of the last
	// event the reader saw, or LastEventSeq for what is published from now
	// on. 0 starts at the oldest event the stream holds.
	After uint64
}

// watchPoll is how often a watcher reads the stream when no live message
// has told it of a new event: live messages are not delivered again after
// a reconnection.
const watchPoll = 2 * time.Second

// watchBatch is how many events a watcher reads at once.
const watchBatch = 64

// Watcher follows the events stream: every matching event once, in stream
// order, with no gap. It reads the stream with batched direct gets, which
// any client that may read events may send (it creates no consumer), and
// reads again whenever a live event of its subjects is published, or
// every watchPoll.
type Watcher struct {
	g     directGet
	kinds map[string]bool
	next  uint64
	buf   []batchMsg
	wake  chan struct{}
	sub   *nats.Subscription
}

// Watch starts following the events stream. Stop the watcher when done.
func (c *Client) Watch(ctx context.Context, q WatchQuery) (*Watcher, error) {
	w, err := c.watcher(q)
	if err != nil {
		return nil, err
	}
	sub, err := c.nc.Subscribe(w.g.filter, func(*nats.Msg) {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, fmt.Errorf("client: following %s: %w", c.names.EventStream(), err)
	}
	w.sub = sub
	return w, nil
}

// watcher checks q and returns a watcher of it, not yet subscribed.
func (c *Client) watcher(q WatchQuery) (*Watcher, error) {
	flow, run := "*", "*"
	if q.Flow != "" {
		if err := CheckName("flow", q.Flow); err != nil {
			return nil, err
		}
		flow = q.Flow
	}
	if q.Run != "" {
		if q.Flow == "" {
			return nil, errors.New("client: WatchQuery.Run needs Flow")
		}
		if err := CheckName("run", q.Run); err != nil {
			return nil, err
		}
		run = q.Run
	}
	w := &Watcher{next: q.After + 1, wake: make(chan struct{}, 1)}
	kind := ">"
	if len(q.Kinds) > 0 {
		w.kinds = map[string]bool{}
		for _, k := range q.Kinds {
			if err := CheckName("event kind", k); err != nil {
				return nil, err
			}
			w.kinds[k] = true
		}
		if len(q.Kinds) == 1 {
			kind = q.Kinds[0]
		}
	}
	filter := c.names.Event(flow, run, kind)
	stream := c.names.EventStream()
	w.g = directGet{nc: c.nc, subject: "$JS.API.DIRECT.GET." + stream, filter: filter, what: "stream " + stream}
	return w, nil
}

// Next returns the next event, waiting for it until ctx ends (then it
// returns ctx's error and the watcher can be used again).
func (w *Watcher) Next(ctx context.Context) (StreamEvent, error) {
	for {
		for len(w.buf) > 0 {
			m := w.buf[0]
			w.buf = w.buf[1:]
			kind := m.subject[strings.LastIndex(m.subject, ".")+1:]
			if w.kinds != nil && !w.kinds[kind] {
				continue
			}
			return decodeStreamEvent(m.subject, m.seq, m.header, m.data)
		}
		b, err := w.g.batch(ctx, w.next, watchBatch)
		if err != nil {
			if ctx.Err() != nil {
				return StreamEvent{}, ctx.Err()
			}
			return StreamEvent{}, fmt.Errorf("client: following the events stream: %w", err)
		}
		if len(b.msgs) > 0 {
			w.buf = b.msgs
			w.next = b.msgs[len(b.msgs)-1].seq + 1
			continue
		}
		poll := time.NewTimer(watchPoll)
		select {
		case <-w.wake:
			poll.Stop()
		case <-poll.C:
		case <-ctx.Done():
			poll.Stop()
			return StreamEvent{}, ctx.Err()
		}
	}
}

// Stop stops the watcher. Stopping twice is safe.
func (w *Watcher) Stop() { _ = w.sub.Unsubscribe() }
