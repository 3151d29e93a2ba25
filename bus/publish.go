package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/wire"
)

// Headers Interlock sets on dead letters.
const (
	// HeaderReason is the dead-letter reason, also the subject's last token.
	HeaderReason = "Interlock-Reason"
	// HeaderError says what was wrong, for a person.
	HeaderError = "Interlock-Error"
	// HeaderSubject is the subject the message was sent to.
	HeaderSubject = "Interlock-Subject"
	// HeaderStreamSeq is the message's sequence in the inbound stream.
	HeaderStreamSeq = "Interlock-Stream-Seq"
)

// JetStream is the part of a JetStream context the worker and the
// publisher use: publishing, binding a stream by name, and the connection.
// jetstream.JetStream implements it.
type JetStream interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
	PublishMsgAsync(msg *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
	// Conn is the connection under the JetStream context: the messages of
	// an atomic batch before its commit are published on it.
	Conn() *nats.Conn
}

var _ JetStream = jetstream.JetStream(nil)

// Publisher publishes events and audit records as structured CloudEvents,
// each with its event id as Nats-Msg-Id so JetStream drops a repeat. It
// implements [engine.Publisher].
type Publisher struct {
	js     JetStream
	names  wire.Names
	source string

	mu    sync.Mutex
	plain map[string]bool // streams that refused atomic batches
}

var _ engine.Publisher = (*Publisher)(nil)

// NewPublisher returns a publisher; source is the CloudEvents source of
// what it publishes ("interlock/<instance>").
func NewPublisher(js JetStream, n wire.Names, source string) *Publisher {
	return &Publisher{js: js, names: n, source: cmp.Or(source, engine.DefaultSource)}
}

func (p *Publisher) subject(m engine.Message) string {
	switch m.Stream {
	case engine.AuditStream:
		return p.names.Audit(m.Flow, m.Run)
	case engine.ScheduleStream:
		if s, ok := m.Data.(*engine.Schedule); ok {
			return p.names.Schedule(m.Flow, m.Run, s.RequestID)
		}
	}
	return p.names.Event(m.Flow, m.Run, m.Kind)
}

func (p *Publisher) stream(m engine.Message) string {
	switch m.Stream {
	case engine.AuditStream:
		return p.names.AuditStream()
	case engine.ScheduleStream:
		return p.names.InStream()
	}
	return p.names.EventStream()
}

// HeaderSchedule and HeaderScheduleTarget make a message a JetStream
// message schedule: the server publishes its body to the target subject at
// the time given (nats-server 2.12 and later).
const (
	HeaderSchedule       = "Nats-Schedule"
	HeaderScheduleTarget = "Nats-Schedule-Target"
)

func (p *Publisher) encode(m engine.Message) (*nats.Msg, error) {
	typ, ok := events.OutboundType(m.Kind)
	var data any = m.Data
	switch d := m.Data.(type) {
	case *engine.AuditRecord:
		typ, ok = events.AuditType(m.Kind), true
	case *engine.Schedule:
		typ, ok = events.TypeExpire, true
		data = events.Expire{RequestID: d.RequestID, ExpiresAt: d.ExpiresAt.UTC().Format(time.RFC3339), Flow: d.Flow, Run: d.Run}
	case *engine.NodeEvent:
		typ, ok = events.TypeNodePrefix+m.Kind, true
	}
	if !ok {
		return nil, fmt.Errorf("bus: no event type for kind %q", m.Kind)
	}
	ev, err := events.Outbound(m.ID, p.source, typ, m.Flow, m.Run, m.Traceparent, m.Time, data)
	if err != nil {
		return nil, err
	}
	body, err := events.Encode(ev)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(p.subject(m))
	msg.Data = body
	msg.Header.Set("Content-Type", events.Structured)
	msg.Header.Set(jetstream.MsgIDHeader, m.ID)
	if s, ok := m.Data.(*engine.Schedule); ok {
		msg.Header.Set(HeaderSchedule, "@at "+s.ExpiresAt.UTC().Format(time.RFC3339))
		msg.Header.Set(HeaderScheduleTarget, p.names.In(m.Flow, "expire"))
	}
	return msg, nil
}

// Publish implements [engine.Publisher]. Audit records and deadlines are
// stored before any event is published. The messages of a phase bound for
// one stream (a transition's audit records; its events) go out as one
// JetStream atomic batch: stored together and in order, or not at all.
// Published one by one, a failure of the first while the second is stored
// would leave them in the wrong order once the transition is retried, and
// a run's audit records must be in chain order. With recheck, messages the
// stream already holds, as the last on their subject or before it in the
// same batch, are skipped, which covers a repeat past the deduplication
// window.
func (p *Publisher) Publish(ctx context.Context, msgs []engine.Message, _ uint64, recheck bool) error {
	for _, phase := range [][]engine.Stream{{engine.AuditStream, engine.ScheduleStream}, {engine.EventStream}} {
		// The phase's messages by stream, in outbox order.
		var groups [][]engine.Message
		index := map[string]int{}
		for _, m := range msgs {
			if !slices.Contains(phase, m.Stream) {
				continue
			}
			name := p.stream(m)
			i, ok := index[name]
			if !ok {
				i = len(groups)
				index[name] = i
				groups = append(groups, nil)
			}
			groups[i] = append(groups[i], m)
		}
		var (
			futures []jetstream.PubAckFuture
			batches []batch
		)
		for _, g := range groups {
			if recheck {
				var err error
				if g, err = p.unstored(ctx, g); err != nil {
					return errors.Join(err, wait(ctx, futures))
				}
			}
			out := make([]*nats.Msg, 0, len(g))
			for _, m := range g {
				msg, err := p.encode(m)
				if err != nil {
					return errors.Join(err, wait(ctx, futures))
				}
				out = append(out, msg)
			}
			if len(out) > 1 && !p.noAtomic(p.stream(g[0])) {
				f, err := p.publishBatch(out)
				if err != nil {
					return errors.Join(err, wait(ctx, futures))
				}
				batches = append(batches, batch{stream: p.stream(g[0]), msgs: out, commit: f})
				continue
			}
			for _, msg := range out {
				f, err := p.js.PublishMsgAsync(msg)
				if err != nil {
					return errors.Join(fmt.Errorf("bus: publishing %s: %w", msg.Subject, err), wait(ctx, futures))
				}
				futures = append(futures, f)
			}
		}
		err := wait(ctx, futures)
		for _, b := range batches {
			err = errors.Join(err, p.settle(ctx, b))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Headers of a JetStream atomic batch (nats-server 2.12 and later, on a
// stream with AllowAtomicPublish).
const (
	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"
)

// JetStream's answers to an atomic batch that make the publisher send its
// messages one by one instead.
const (
	errCodeAtomicDisabled  jetstream.ErrorCode = 10174 // the stream does not allow atomic publishes
	errCodeBatchIncomplete jetstream.ErrorCode = 10176 // a message went missing, or the batch was not taken
	errCodeBatchDuplicate  jetstream.ErrorCode = 10201 // the batch holds a message already stored
	errCodeTooManyInflight jetstream.ErrorCode = 10210 // too many batches in flight on the stream
)

// batch is an atomic batch sent, waiting for its commit's acknowledgement.
type batch struct {
	stream string
	msgs   []*nats.Msg
	commit jetstream.PubAckFuture
}

// publishBatch sends msgs as one atomic batch: all but the last without
// an acknowledgement, on the connection the last, the commit, is then
// published on asynchronously, so the server sees them in order.
func (p *Publisher) publishBatch(msgs []*nats.Msg) (jetstream.PubAckFuture, error) {
	id := randomID()
	for i, msg := range msgs {
		msg.Header.Set(headerBatchID, id)
		msg.Header.Set(headerBatchSeq, strconv.Itoa(i+1))
		if i < len(msgs)-1 {
			if err := p.js.Conn().PublishMsg(msg); err != nil {
				return nil, fmt.Errorf("bus: publishing %s in batch %s: %w", msg.Subject, id, err)
			}
			continue
		}
		msg.Header.Set(headerBatchCommit, "1")
	}
	last := msgs[len(msgs)-1]
	f, err := p.js.PublishMsgAsync(last)
	if err != nil {
		return nil, fmt.Errorf("bus: committing batch %s with %s: %w", id, last.Subject, err)
	}
	return f, nil
}

// settle waits for b's commit. When the server did not take the batch as
// one (atomic publishes off on the stream, too many batches in flight, or
// a message of it stored before, by an earlier attempt), it publishes the
// messages one at a time, each acknowledged before the next: the order
// holds, and deduplication drops what is already stored.
func (p *Publisher) settle(ctx context.Context, b batch) error {
	var err error
	select {
	case <-b.commit.Ok():
		return nil
	case err = <-b.commit.Err():
	case <-ctx.Done():
		return fmt.Errorf("bus: publishing %s: %w", b.commit.Msg().Subject, ctx.Err())
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("bus: publishing %s: %w", b.commit.Msg().Subject, err)
	}
	switch apiErr.ErrorCode {
	case errCodeAtomicDisabled:
		p.mu.Lock()
		if p.plain == nil {
			p.plain = map[string]bool{}
		}
		p.plain[b.stream] = true
		p.mu.Unlock()
	case errCodeBatchIncomplete, errCodeBatchDuplicate, errCodeTooManyInflight:
	default:
		return fmt.Errorf("bus: publishing %s: %w", b.commit.Msg().Subject, err)
	}
	for _, msg := range b.msgs {
		msg.Header.Del(headerBatchID)
		msg.Header.Del(headerBatchSeq)
		msg.Header.Del(headerBatchCommit)
		if _, err := p.js.PublishMsg(ctx, msg); err != nil {
			return fmt.Errorf("bus: publishing %s: %w", msg.Subject, err)
		}
	}
	return nil
}

// noAtomic reports whether stream refused an atomic batch before.
func (p *Publisher) noAtomic(stream string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.plain[stream]
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

// unstored drops from g, messages of one stream in publishing order, those
// the stream holds already: the last message on a subject, and the
// messages on that subject before it in g (published in order, in one
// batch, they were stored before it).
func (p *Publisher) unstored(ctx context.Context, g []engine.Message) ([]engine.Message, error) {
	if len(g) == 0 {
		return g, nil
	}
	s, err := p.js.Stream(ctx, p.stream(g[0]))
	if err != nil {
		return nil, fmt.Errorf("bus: binding stream %s: %w", p.stream(g[0]), err)
	}
	stored := make([]bool, len(g))
	seen := map[string]bool{}
	for i := len(g) - 1; i >= 0; i-- {
		subject := p.subject(g[i])
		if seen[subject] {
			continue
		}
		seen[subject] = true
		last, err := s.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("bus: reading last message of %s: %w", subject, err)
		}
		id := last.Header.Get(jetstream.MsgIDHeader)
		for j := i; j >= 0; j-- {
			if p.subject(g[j]) == subject && g[j].ID == id {
				for k := j; k >= 0; k-- {
					if p.subject(g[k]) == subject {
						stored[k] = true
					}
				}
				break
			}
		}
	}
	var out []engine.Message
	for i, m := range g {
		if !stored[i] {
			out = append(out, m)
		}
	}
	return out, nil
}

// DeadLetter copies an inbound message whole (headers and body) to
// interlock.dlq.<reason>, adding the reason, the error and the original
// subject as headers. A resume token in the body is redacted: a dead letter
// never holds a credential.
func DeadLetter(ctx context.Context, js JetStream, n wire.Names, msg jetstream.Msg, reason, detail string) error {
	dl := nats.NewMsg(n.DeadLetter(reason))
	for k, vs := range msg.Headers() {
		for _, v := range vs {
			dl.Header.Add(k, v)
		}
	}
	dl.Header.Del(jetstream.MsgIDHeader)
	dl.Header.Set(HeaderReason, reason)
	dl.Header.Set(HeaderError, detail)
	dl.Header.Set(HeaderSubject, msg.Subject())
	if md, err := msg.Metadata(); err == nil {
		dl.Header.Set(HeaderStreamSeq, fmt.Sprint(md.Sequence.Stream))
		dl.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("dlq-%s-%d", md.Stream, md.Sequence.Stream))
	}
	dl.Data = events.RedactTokens(msg.Data())
	if _, err := js.PublishMsg(ctx, dl); err != nil {
		return fmt.Errorf("bus: dead-lettering message from %s: %w", msg.Subject(), err)
	}
	return nil
}

// Queue reports whether inbound messages are still unacknowledged. It
// implements [engine.Queue] on the work-queue stream, where an acknowledged
// message is removed.
type Queue struct {
	stream jetstream.Stream
}

var _ engine.Queue = (*Queue)(nil)

// NewQueue binds the inbound stream.
func NewQueue(ctx context.Context, js JetStream, n wire.Names) (*Queue, error) {
	s, err := js.Stream(ctx, n.InStream())
	if err != nil {
		return nil, fmt.Errorf("bus: binding stream %s: %w", n.InStream(), err)
	}
	return &Queue{stream: s}, nil
}

// Unacked implements [engine.Queue].
func (q *Queue) Unacked(ctx context.Context, seq uint64) (bool, error) {
	_, err := q.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// randomID is a batch id: unique per attempt, so that a batch abandoned
// by a failed attempt is never completed by the next.
func randomID() string { return nuid.Next() }
