package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// followPoll is how often a follower reads the stream when no live message
// has woken it: live messages may be lost (a reconnection, a slow
// subscriber), the stream's are not.
const followPoll = 500 * time.Millisecond

// follower reads the events of one subject filter (a run's) from the
// events stream, in stream order, from the moment it was made. A call
// believes only what Interlock stored there: the live messages on the
// subjects only wake the follower up, since anyone who can make the server
// publish on them (a reply aimed at them, a copy of a stored message)
// could send one.
type follower struct {
	scan
	wake chan struct{}
	sub  *nats.Subscription
}

// scan reads the events of one subject filter from the events stream, in
// stream order, from sequence next on.
type scan struct {
	g    directGet
	next uint64
	buf  []batchMsg
}

// follow starts following filter, a subject filter of the events stream.
// Live messages of a kind wakes does not select (nil for every kind) do
// not wake the follower: their events are read from the stream with the
// next one that does. Stop the follower when done.
func (c *Client) follow(ctx context.Context, filter string, wakes func(kind string) bool) (*follower, error) {
	stream := c.names.EventStream()
	f := &follower{scan: scan{g: directGet{nc: c.nc, subject: "$JS.API.DIRECT.GET." + stream, filter: filter, what: "stream " + stream}},
		wake: make(chan struct{}, 1)}
	sub, err := c.nc.Subscribe(filter, func(m *nats.Msg) {
		if wakes != nil && !wakes(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]) {
			return
		}
		select {
		case f.wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, fmt.Errorf("client: subscribing to %s: %w", filter, err)
	}
	// No flush: the server reads this connection in order, so the
	// subscription is in place before it answers the read below, and
	// before anything published after that.
	f.sub = sub
	last, _, err := f.g.last(ctx)
	if err != nil {
		f.stop()
		return nil, err
	}
	f.next = last + 1
	return f, nil
}

// poll returns the next stored event, or ok false when there is none yet.
func (f *scan) poll(ctx context.Context) (m batchMsg, ok bool, err error) {
	if len(f.buf) == 0 {
		b, err := f.g.batch(ctx, f.next, 32)
		if err != nil {
			return batchMsg{}, false, err
		}
		if len(b.msgs) == 0 {
			return batchMsg{}, false, nil
		}
		f.buf = b.msgs
		f.next = b.msgs[len(b.msgs)-1].seq + 1
	}
	m, f.buf = f.buf[0], f.buf[1:]
	return m, true, nil
}

func (f *follower) stop() { _ = f.sub.Unsubscribe() }

// causedBy reports whether an event of kind is the outcome of the command
// with event id: it names the command as its cause (a refusal may name it
// only in its data). unknown is set for an event that names no cause, as
// workers that predate the causation extension publish.
func causedBy(kind string, ev events.Event, id string) (mine, unknown bool) {
	if cause := events.StringExtension(ev, protocol.ExtCausation); cause != "" {
		return cause == id, false
	}
	if kind == protocol.EventRefused {
		var r protocol.Refused
		if json.Unmarshal(ev.Data(), &r) == nil && r.EventID != "" {
			return r.EventID == id, false
		}
	}
	return false, true
}

// believe reports whether an event the hub received settles the command
// with event id (and idempotency key, if any) of verb: it names the
// command as its cause and the deployment made it. A live event signed
// with one of the deployment's audit keys, over its subject and body, is
// the deployment's at once. A stored event (on <prefix>.stored.ev.>,
// republished by the events stream once stored, its Nats-Stream and
// Nats-Subject headers naming the stream and the event's subject) is held
// by the stream as it is. Another live one (on <prefix>.ev.>) is the
// deployment's once the stream has it, byte for byte, as the last event
// on its subject (one direct get). mine is set for a live event that names the
// command but is not stored, or not yet: the server may hand an event to
// subscribers before it has stored it, so the call reads it back again.
// An event that names no cause (an older worker's) is believed, once
// stored, if the run's checkpoint has applied the command.
func (c *Client) believe(ctx context.Context, m *nats.Msg, verb, flow, run, id, key string) (_ Event, ok, mine bool, _ error) {
	kind := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	onStored := c.hub.isStored(m.Subject)
	if onStored && !c.republished(m) {
		return Event{}, false, false, nil // a reply aimed at the subject, not the stream's
	}
	// A signed event is read from its body alone, which the signature
	// covers with the subject: headers could be anyone's.
	signed := !onStored && c.hub.signed(m)
	var out events.Event
	var err error
	if signed {
		out, err = events.Decode(nil, m.Data)
	} else {
		out, err = events.Decode(m.Header, m.Data)
	}
	if err != nil {
		return Event{}, false, false, nil // not an event Interlock published
	}
	mine, unknown := causedBy(kind, out, id)
	if !mine && !unknown {
		return Event{}, false, false, nil
	}
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	if onStored || signed {
		if unknown && !c.applied(ctx, flow, run, cmp.Or(key, id)) {
			return Event{}, false, false, nil
		}
		return Event{Kind: kind, Event: out}, true, true, nil
	}
	stream := c.names.EventStream()
	g := directGet{nc: c.nc, subject: "$JS.API.DIRECT.GET." + stream, filter: m.Subject, what: "stream " + stream}
	stored, err := g.lastMsg(ctx)
	if err != nil {
		return Event{}, false, false, fmt.Errorf("client: waiting for the outcome of %s %s.%s: %w", verb, flow, run, err)
	}
	if stored == nil || !bytes.Equal(stored.data, m.Data) {
		return Event{}, false, mine, nil
	}
	if unknown && !c.applied(ctx, flow, run, cmp.Or(key, id)) {
		return Event{}, false, false, nil
	}
	return Event{Kind: kind, Event: out}, true, true, nil
}

// republished reports whether m, received on a stored event's subject,
// is the events stream's copy of what it stored there: it says it comes
// from the events stream (the server appends Nats-Stream, Nats-Subject and
// Nats-Sequence to what it republishes), from the subject m's is the copy
// of, and asks for no reply. No client may publish on these subjects; a
// reply aimed at them by a request (a direct get of another stream, say)
// names another stream or asks for nothing else.
func (c *Client) republished(m *nats.Msg) bool {
	if m.Reply != "" || m.Header.Get(jetstream.StreamHeader) != c.names.EventStream() || m.Header.Get(jetstream.SequenceHeader) == "" {
		return false
	}
	tail, ok := c.hub.tail(m.Subject)
	return ok && m.Header.Get(jetstream.SubjectHeader) == c.names.Prefix+".ev."+tail
}

// scanOutcome reads the run's events the scan has not read yet and returns
// the first stored one that names the command with event id as its cause
// and settles it, or ok false when none does yet. An event that names no
// cause is not taken: the scan starts before the command was sent.
func (c *Client) scanOutcome(ctx context.Context, s *scan, verb, flow, run, id string) (_ Event, ok bool, _ error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	for {
		m, ok, err := s.poll(ctx)
		if err != nil {
			return Event{}, false, fmt.Errorf("client: waiting for the outcome of %s %s.%s: %w", verb, flow, run, err)
		}
		if !ok {
			return Event{}, false, nil
		}
		kind := m.subject[strings.LastIndexByte(m.subject, '.')+1:]
		if !settles(verb, kind) {
			continue
		}
		out, err := events.Decode(m.header, m.data)
		if err != nil {
			return Event{}, false, fmt.Errorf("client: decoding %s: %w", m.subject, err)
		}
		if mine, _ := causedBy(kind, out, id); mine {
			return Event{Kind: kind, Event: out}, true, nil
		}
	}
}
