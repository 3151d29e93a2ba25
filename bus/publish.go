package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// JetStream is the part of a JetStream context the worker and the
// publisher use: publishing, and binding a stream by name.
// jetstream.JetStream implements it.
type JetStream interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
	PublishMsgAsync(msg *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
	// Conn is the connection, whose MaxPayload bounds a dead letter.
	Conn() *nats.Conn
}

var _ JetStream = jetstream.JetStream(nil)

// Publisher publishes events and audit records as structured CloudEvents,
// each with its event id as Nats-Msg-Id so JetStream drops a repeat. It
// implements [engine.Publisher].
type Publisher struct {
	js    JetStream
	names wire.Names
	enc   *events.Encoder
	// sign, when set, signs the events that settle a command.
	sign func(subject string, body []byte) string
}

var _ engine.Publisher = (*Publisher)(nil)

// NewPublisher returns a publisher; source is the CloudEvents source of
// what it publishes ("interlock/<instance>").
func NewPublisher(js JetStream, n wire.Names, source string) *Publisher {
	return &Publisher{js: js, names: n, enc: events.NewEncoder(cmp.Or(source, engine.DefaultSource))}
}

// SignEvents makes the publisher sign each event that settles a command
// ([protocol.SignedKind]) with sign, in [protocol.HeaderEventSignature]
// ([engine.EventSigner.Sign] signs with the deployment's audit key). It
// returns p.
func (p *Publisher) SignEvents(sign func(subject string, body []byte) string) *Publisher {
	p.sign = sign
	return p
}

func (p *Publisher) subject(m engine.Message) string {
	switch m.Stream {
	case engine.AuditStream:
		return p.names.Audit(m.Flow, m.Run)
	case engine.ScheduleStream:
		switch s := m.Data.(type) {
		case *protocol.Expire:
			return p.names.Schedule(m.Flow, m.Run, s.RequestID)
		case *protocol.Remind:
			return p.names.Reminder(m.Flow, m.Run, s.RequestID, s.N)
		}
	}
	return p.names.Event(m.Flow, m.Run, m.Kind)
}

func (p *Publisher) stream(m engine.Message) string {
	switch m.Stream {
	case engine.AuditStream:
		return p.names.AuditStream()
	case engine.ScheduleStream:
		return p.names.ScheduleStream()
	}
	return p.names.EventStream()
}

// HeaderSchedule and HeaderScheduleTarget make a message a JetStream
// message schedule: the server publishes its body to the target subject
// (in the same stream) at the time given (nats-server 2.12 and later).
const (
	HeaderSchedule       = "Nats-Schedule"
	HeaderScheduleTarget = "Nats-Schedule-Target"
)

// bodySize is room for one encoded message: most are smaller.
const bodySize = 768

// encode encodes m as a structured CloudEvent, appending its body to slab,
// whose bytes it returns with the message.
func (p *Publisher) encode(m engine.Message, slab []byte) (*nats.Msg, []byte, error) {
	typ, ok := protocol.OutboundType(m.Kind)
	var data any = m.Data
	switch d := m.Data.(type) {
	case *protocol.AuditRecord:
		typ, ok = protocol.AuditType(m.Kind), true
	case *protocol.Expire:
		typ, ok = protocol.TypeExpire, true
		data = &protocol.Expire{RequestID: d.RequestID, ExpiresAt: d.ExpiresAt.UTC(), Flow: d.Flow, Run: d.Run}
	case *protocol.Remind:
		typ, ok = protocol.TypeRemind, true
		data = &protocol.Remind{RequestID: d.RequestID, At: d.At.UTC(), N: d.N, Flow: d.Flow, Run: d.Run}
	case *protocol.NodeEvent:
		typ, ok = protocol.TypeNodePrefix+m.Kind, true
	}
	if !ok {
		return nil, slab, fmt.Errorf("bus: no event type for kind %q", m.Kind)
	}
	start := len(slab)
	slab, err := p.enc.AppendOutbound(slab, m.ID, typ, m.Flow, m.Run, m.Traceparent, m.Cause, m.Time, data)
	if err != nil {
		return nil, slab, err
	}
	msg := nats.NewMsg(p.subject(m))
	msg.Data = slab[start:len(slab):len(slab)]
	msg.Header.Set("Content-Type", events.Structured)
	msg.Header.Set(jetstream.MsgIDHeader, m.ID)
	if p.sign != nil && m.Stream == engine.EventStream && protocol.SignedKind(m.Kind) {
		msg.Header.Set(protocol.HeaderEventSignature, p.sign(msg.Subject, msg.Data))
	}
	switch s := m.Data.(type) {
	case *protocol.Expire:
		msg.Header.Set(HeaderSchedule, "@at "+s.ExpiresAt.UTC().Format(time.RFC3339))
		msg.Header.Set(HeaderScheduleTarget, p.names.Due(m.Flow, protocol.VerbExpire))
	case *protocol.Remind:
		msg.Header.Set(HeaderSchedule, "@at "+s.At.UTC().Format(time.RFC3339))
		msg.Header.Set(HeaderScheduleTarget, p.names.Due(m.Flow, protocol.VerbRemind))
	}
	return msg, slab, nil
}

// Publish implements [engine.Publisher]. Audit records and deadlines are
// stored before any event is published. The messages of a transition
// bound for one stream (its audit records; its events) go out one at a
// time, each acknowledged before the next, so that the stream holds them in
// the order the transition made them whatever fails: sent together, a
// first message lost to a leader change while the second was stored would
// be stored after it once the transition is retried, and a run's audit
// records must be in chain order. A stream's only message goes out
// asynchronously, awaited with the others. With recheck, messages the
// stream already holds are skipped (the last message on a subject, and
// the messages before it on that subject), which covers a repeat past the
// deduplication window.
func (p *Publisher) Publish(ctx context.Context, msgs []engine.Message, recheck bool) error {
	// The bodies of all the messages share one allocation; each is
	// written once and kept by its message until it is acknowledged.
	slab := make([]byte, 0, bodySize*len(msgs))
	for _, phase := range [][]engine.Stream{{engine.AuditStream, engine.ScheduleStream}, {engine.EventStream}} {
		var futures []jetstream.PubAckFuture
		todo := make([]engine.Message, 0, len(msgs))
		count := map[engine.Stream]int{}
		for _, m := range msgs {
			if slices.Contains(phase, m.Stream) {
				todo = append(todo, m)
				count[m.Stream]++
			}
		}
		if recheck {
			var err error
			if todo, err = p.unstored(ctx, todo); err != nil {
				return err
			}
		}
		var inOrder []*nats.Msg // to a stream that gets several: one at a time
		for _, m := range todo {
			var msg *nats.Msg
			var err error
			if msg, slab, err = p.encode(m, slab); err != nil {
				return errors.Join(err, wait(ctx, futures))
			}
			if count[m.Stream] > 1 {
				inOrder = append(inOrder, msg)
				continue
			}
			f, err := p.js.PublishMsgAsync(msg)
			if err != nil {
				return errors.Join(fmt.Errorf("bus: publishing %s: %w", msg.Subject, err), wait(ctx, futures))
			}
			futures = append(futures, f)
		}
		for _, msg := range inOrder {
			if _, err := p.js.PublishMsg(ctx, msg); err != nil {
				return errors.Join(fmt.Errorf("bus: publishing %s: %w", msg.Subject, err), wait(ctx, futures))
			}
		}
		if err := wait(ctx, futures); err != nil {
			return err
		}
	}
	return nil
}

// wait waits for every publish acknowledgement, returning the first error.
func wait(ctx context.Context, futures []jetstream.PubAckFuture) error {
	var first error
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			if first == nil {
				first = fmt.Errorf("bus: publishing %s: %w", f.Msg().Subject, err)
			}
		case <-ctx.Done():
			return fmt.Errorf("bus: publishing %s: %w", f.Msg().Subject, ctx.Err())
		}
	}
	return first
}

// unstored drops from msgs those their stream holds already: the last
// message on a subject, and the messages before it on that subject
// (published in order, they were stored before it).
func (p *Publisher) unstored(ctx context.Context, msgs []engine.Message) ([]engine.Message, error) {
	stored := make([]bool, len(msgs))
	seen := map[string]bool{}
	for i := len(msgs) - 1; i >= 0; i-- {
		subject := p.subject(msgs[i])
		if seen[subject] {
			continue
		}
		seen[subject] = true
		// From the leader: a replica that fell behind would not have
		// the messages stored since, and one that led before a partition
		// may hold some that were never committed.
		last, err := wire.LeaderMsg(ctx, p.js.Conn(), p.stream(msgs[i]), 0, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("bus: reading last message of %s: %w", subject, err)
		}
		id := last.Header.Get(jetstream.MsgIDHeader)
		for j := i; j >= 0; j-- {
			if p.subject(msgs[j]) != subject || msgs[j].ID != id {
				continue
			}
			stored[j] = true
			for k := j - 1; k >= 0; k-- {
				if p.subject(msgs[k]) == subject {
					stored[k] = true
				}
			}
			break
		}
	}
	out := msgs[:0:0]
	for i, m := range msgs {
		if !stored[i] {
			out = append(out, m)
		}
	}
	return out, nil
}

// Queue reports whether inbound messages are still unacknowledged. It
// implements [engine.Queue] on the work-queue streams (the inbound stream,
// and the schedule stream for deadlines), where an acknowledged message
// is removed.
type Queue struct {
	in, due jetstream.Stream
	nc      *nats.Conn
}

var _ engine.Queue = (*Queue)(nil)

// NewQueue binds the inbound stream and the schedule stream.
func NewQueue(ctx context.Context, js JetStream, n wire.Names) (*Queue, error) {
	in, err := js.Stream(ctx, n.InStream())
	if err != nil {
		return nil, fmt.Errorf("bus: binding stream %s: %w", n.InStream(), err)
	}
	due, err := js.Stream(ctx, n.ScheduleStream())
	if err != nil {
		return nil, fmt.Errorf("bus: binding stream %s: %w", n.ScheduleStream(), err)
	}
	return &Queue{in: in, due: due, nc: js.Conn()}, nil
}

// Unacked implements [engine.Queue]. It asks the stream's leader: a
// replica that fell behind would not have the message yet, and so call
// it acknowledged (wire.LeaderMsg).
func (q *Queue) Unacked(ctx context.Context, c engine.Cause) (bool, error) {
	s := q.in
	if c.Due {
		s = q.due
	}
	_, err := wire.LeaderMsg(ctx, q.nc, s.CachedInfo().Config.Name, c.Seq, "")
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}
