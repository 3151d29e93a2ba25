package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/interlockhq/interlock/command"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// Defaults of [WorkerConfig].
const (
	DefaultConcurrency    = 32
	DefaultAckWait        = 30 * time.Second
	DefaultHandlerTimeout = 25 * time.Second
	// DefaultMaxDeliver bounds the deliveries of one message: at the last,
	// a message that still fails is dead-lettered (ReasonDeliveryLimit).
	// With the back-off between deliveries that is about 45 minutes of
	// retrying.
	DefaultMaxDeliver = 100
)

// HeldConsumerInactive is how long the consumer of a version's held
// commands stays once no worker of the version pulls from it: a version
// deployed and retired leaves no consumer behind for long. The commands
// held for it stay in the inbound stream, for a worker of the version or
// a migration.
const HeldConsumerInactive = 24 * time.Hour

// consumePause is how long the worker waits after the consumer reports an error.
const consumePause = 250 * time.Millisecond

// Dead-letter reasons decided by the worker.
const (
	ReasonUnknownSubject = "unknown_subject"
	ReasonUnsupported    = "unsupported"
	// ReasonDeliveryLimit: the message failed on every delivery up to the
	// consumer's limit; the header Interlock-Error holds the last error.
	ReasonDeliveryLimit = "delivery_limit"
	// ReasonInvalidHeaders: the command carries a NATS header that no
	// client sends (see [CheckCommandHeaders]).
	ReasonInvalidHeaders = "invalid_headers"
)

// WorkerConfig configures a [Worker].
type WorkerConfig struct {
	// Names of the deployment's streams and subjects.
	Names wire.Names
	// Runner applies commands. Required.
	Runner *engine.Runner
	// Concurrency is how many messages are handled at once. Defaults to
	// DefaultConcurrency.
	Concurrency int
	// AckWait is how long a message may be in hand before JetStream
	// delivers it again. Defaults to DefaultAckWait.
	AckWait time.Duration
	// HandlerTimeout bounds the handling of one message; it must be shorter
	// than AckWait. Defaults to DefaultHandlerTimeout.
	HandlerTimeout time.Duration
	// MaxDeliver is how many times a message is delivered before a failing
	// one is dead-lettered. Defaults to DefaultMaxDeliver.
	MaxDeliver int
	// Tools, if set, answers tool requests on <prefix>.in.gate.request;
	// the runner must run [engine.GateFlow]. Without it the gate is off:
	// each request is refused unsupported, saying so, and dead-lettered.
	Tools command.ToolRules
	// Newest, if set, is the version of a flow the worker process that
	// started last runs ([Versions.Newest]): a start this worker takes
	// for a flow whose newest version is not its own is held for the
	// workers of the newest. Without it, a start runs on the worker that
	// takes it.
	Newest func(flow string) (version string, ok bool)
	// Observe, if set, is called once for every message the worker is done
	// with (acknowledged, dead-lettered or refused; not for one delivered
	// again), from the goroutine that handled it: metrics count outcomes
	// with it. It must not block.
	Observe func(Observation)
	// TracerProvider, if set, traces every message the worker handles:
	// one span per transition, a child of the command's traceparent, with
	// a link to the traceparent its run carries, whose context the events
	// of the transition carry (docs/operations.md, Tracing). The span is in
	// the context nodes run with. Defaults to a no-op provider.
	TracerProvider trace.TracerProvider
	// Logger receives one line per refused, dead-lettered or failed message.
	// Defaults to a disabled logger.
	Logger *zerolog.Logger
}

func (c WorkerConfig) withDefaults() WorkerConfig {
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.AckWait = cmp.Or(c.AckWait, DefaultAckWait)
	c.HandlerTimeout = cmp.Or(c.HandlerTimeout, DefaultHandlerTimeout)
	c.MaxDeliver = cmp.Or(c.MaxDeliver, DefaultMaxDeliver)
	if c.Names.Prefix == "" {
		c.Names.Prefix = wire.DefaultPrefix
	}
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
	}
	if c.TracerProvider == nil {
		c.TracerProvider = noop.NewTracerProvider()
	}
	return c
}

func (c WorkerConfig) validate() error {
	switch {
	case c.Runner == nil:
		return errors.New("bus: WorkerConfig.Runner is nil")
	case c.Concurrency < 1:
		return fmt.Errorf("bus: WorkerConfig.Concurrency is %d; it must be positive", c.Concurrency)
	case c.MaxDeliver < 2:
		return fmt.Errorf("bus: WorkerConfig.MaxDeliver is %d; allow at least 2 deliveries", c.MaxDeliver)
	case c.HandlerTimeout >= c.AckWait:
		return fmt.Errorf("bus: WorkerConfig.HandlerTimeout (%s) must be shorter than AckWait (%s)", c.HandlerTimeout, c.AckWait)
	}
	return nil
}

// Worker consumes inbound commands with a durable pull consumer shared by
// every worker of the deployment, and acknowledges each message only after
// its effects are durable.
type Worker struct {
	js     JetStream
	cfg    WorkerConfig
	log    zerolog.Logger
	tracer trace.Tracer

	mu    sync.Mutex
	iters []jetstream.MessagesContext
	loop  sync.WaitGroup
	// running are the Concurrency handlers, each taking messages from
	// msgs until consume closes it. Handlers live as long as the worker,
	// so their stacks, grown by the first messages, stay grown.
	running sync.WaitGroup
	msgs    chan jetstream.Msg
	base    context.Context
	abort   context.CancelFunc
	stopped bool
	verbs   command.Table
}

// NewWorker returns a worker; Start starts it.
func NewWorker(js JetStream, cfg WorkerConfig) (*Worker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Worker{js: js, cfg: cfg, log: *cfg.Logger, tracer: cfg.TracerProvider.Tracer(tracerName),
		verbs: command.Verbs(cfg.Tools)}, nil
}

// Start binds the inbound stream and the schedule stream, creates or
// updates their durable consumers, and starts consuming both. It returns
// once consuming has begun.
func (w *Worker) Start(ctx context.Context) error {
	n := w.cfg.Names
	var iters []jetstream.MessagesContext
	stopAll := func() {
		for _, it := range iters {
			it.Stop()
		}
	}
	consumers := []struct {
		stream, durable, filter, what string
		inactive                      time.Duration
	}{
		{n.InStream(), n.Consumer(), n.Prefix + ".in.>", "Interlock workers", 0},
		{n.ScheduleStream(), n.DueConsumer(), n.Prefix + ".due.>", "Interlock workers: due deadlines", 0},
	}
	held := w.cfg.Runner.Held()
	for _, flow := range slices.Sorted(maps.Keys(held)) {
		for _, v := range held[flow] {
			consumers = append(consumers, struct {
				stream, durable, filter, what string
				inactive                      time.Duration
			}{n.InStream(), n.HeldConsumer(flow, v), n.HeldFilter(flow, v),
				"Interlock workers of flow " + flow + " version " + v + ": commands for its runs", HeldConsumerInactive})
		}
	}
	for _, c := range consumers {
		it, err := w.consumer(ctx, c.stream, c.durable, c.filter, c.what, c.inactive)
		if err != nil {
			stopAll()
			return err
		}
		iters = append(iters, it)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.iters != nil || w.stopped {
		stopAll()
		return errors.New("bus: worker started twice")
	}
	w.iters = iters
	w.base, w.abort = context.WithCancel(context.WithoutCancel(ctx))
	w.msgs = make(chan jetstream.Msg)
	for range w.cfg.Concurrency {
		w.running.Go(func() {
			for msg := range w.msgs {
				w.handle(msg)
			}
		})
	}
	for _, it := range iters {
		w.loop.Add(1)
		go w.consume(it)
	}
	// The handlers stop once both consumers have stopped handing out
	// messages.
	w.running.Go(func() {
		w.loop.Wait()
		close(w.msgs)
	})
	return nil
}

// consumer creates or updates one durable consumer of the workers and
// starts pulling from it.
func (w *Worker) consumer(ctx context.Context, stream, durable, filter, what string, inactive time.Duration) (jetstream.MessagesContext, error) {
	// A node that restarts into a busy cluster may not answer at once, as
	// at provisioning: wait for it the same way, bounded.
	wait := clusterWait{cfg: StreamConfig{ClusterWait: DefaultClusterWait, Logger: &w.log}, deadline: time.Now().Add(DefaultClusterWait)}
	var cons jetstream.Consumer
	err := wait.do(ctx, "consumer "+durable, func(ctx context.Context) error {
		st, err := w.js.Stream(ctx, stream)
		if err != nil {
			return fmt.Errorf("binding stream %s (was Provision called?): %w", stream, err)
		}
		cons, err = st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:       durable,
			Description:   what,
			FilterSubject: filter,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       w.cfg.AckWait,
			MaxDeliver:    w.cfg.MaxDeliver,
			MaxAckPending: 4 * w.cfg.Concurrency,
			// A version's consumer outlives its last worker by this much;
			// the commands held for it stay in the stream.
			InactiveThreshold: inactive,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(w.cfg.Concurrency))
	if err != nil {
		return nil, fmt.Errorf("bus: consuming %s: %w", durable, err)
	}
	return it, nil
}

// consume hands messages of one consumer to the handlers until its
// iterator is closed. A message taken from the iterator waits here for a
// free handler, so at most Concurrency+2 are in hand.
func (w *Worker) consume(iter jetstream.MessagesContext) {
	defer w.loop.Done()
	for {
		msg, err := iter.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return
		}
		if err != nil {
			// Heartbeats missed, a reconnect, a consumer recreated: the
			// iterator recovers; wait a moment rather than spin on it.
			w.log.Warn().Err(err).Msg("consumer: no messages; retrying")
			pause := time.NewTimer(consumePause)
			select {
			case <-pause.C:
			case <-w.base.Done():
				pause.Stop()
				return
			}
			continue
		}
		w.msgs <- msg
	}
}

// Stop stops taking messages and waits for those in hand to finish, or for
// ctx to end, when it abandons them to be delivered again. Stopping twice
// is safe.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	iters, first := w.iters, !w.stopped
	w.stopped = true
	w.mu.Unlock()
	if iters == nil {
		return nil
	}
	if first {
		for _, it := range iters {
			it.Drain()
		}
	}
	done := make(chan struct{})
	go func() {
		w.loop.Wait()
		w.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		w.abort()
		return nil
	case <-ctx.Done():
		w.abort()
		for _, it := range iters {
			it.Stop()
		}
		<-done
		return fmt.Errorf("bus: stopping worker: %w; messages in hand will be delivered again", ctx.Err())
	}
}

// backoff is how long a message waits after a failure, by delivery count.
func backoff(delivered uint64) time.Duration {
	steps := []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second, 10 * time.Second, 30 * time.Second}
	if delivered == 0 {
		delivered = 1
	}
	return steps[min(int(delivered-1), len(steps)-1)]
}

func (w *Worker) handle(msg jetstream.Msg) {
	ctx, cancel := context.WithTimeout(w.base, w.cfg.HandlerTimeout)
	defer cancel()
	md, err := msg.Metadata()
	if err != nil {
		w.log.Error().Err(err).Str("subject", msg.Subject()).Msg("message without JetStream metadata; terminated")
		if err := msg.Term(); err != nil {
			w.log.Warn().Err(err).Str("subject", msg.Subject()).Msg("terminating message failed")
		}
		return
	}
	log := w.log.With().Str("subject", msg.Subject()).Uint64("stream_seq", md.Sequence.Stream).Logger()
	began := time.Now()
	s := w.span(msg, md, began)
	var (
		out         outcome
		disposition = dispositionRedeliver
	)
	defer func() { s.end(ctx, out.Outcome, err, disposition) }()
	out, err = w.apply(ctx, msg, md, s)
	if err != nil {
		if md.NumDelivered < uint64(w.cfg.MaxDeliver) {
			delay := backoff(md.NumDelivered)
			log.Error().Err(err).Uint64("delivered", md.NumDelivered).Dur("retry_in", delay).Msg("message not applied; will be delivered again")
			w.nak(log, msg, delay)
			return
		}
		log.Error().Err(err).Uint64("delivered", md.NumDelivered).Msg("message failed on its last delivery")
		out = outcome{Outcome: engine.Outcome{DeadLetter: ReasonDeliveryLimit},
			detail: fmt.Sprintf("failed on each of %d deliveries; last error: %v", md.NumDelivered, err)}
	}
	msgLog := log
	log = log.With().Str("flow", out.Flow).Str("run", out.Run).Logger()
	if out.DeadLetter != "" {
		if err := DeadLetter(ctx, w.js, w.cfg.Names, msg, out.DeadLetter, out.detail); err != nil {
			log.Error().Err(err).Msg("dead letter not written; will be delivered again")
			w.nak(log, msg, backoff(md.NumDelivered))
			return
		}
		log.Warn().Str("reason", out.DeadLetter).Str("error", out.detail).Msg("message dead-lettered")
		disposition = dispositionDeadLetter
	}
	if out.Elsewhere != "" && out.DeadLetter == "" {
		if err := w.hold(ctx, msg, md, out.Flow, out.Elsewhere); err != nil {
			log.Error().Err(err).Msg("command for another version not moved; will be delivered again")
			w.nak(log, msg, backoff(md.NumDelivered))
			return
		}
		log.Info().Str("version", out.Elsewhere).Msg("command held for the workers of the run's version")
	}
	if out.RetryAfter > 0 && out.DeadLetter == "" {
		delay := busyDelay(out.RetryAfter, md.NumDelivered)
		log.Debug().Dur("retry_in", delay).Msg("run busy")
		w.nak(log, msg, delay)
		return
	}
	if w.cfg.Observe != nil {
		_, verb, _, _, _ := parseSubject(w.cfg.Names, md.Stream, msg.Subject())
		w.cfg.Observe(Observation{Verb: verb, Outcome: out.Outcome, Took: time.Since(began)})
	}
	switch {
	case out.Refused != nil:
		log.Info().Str("code", string(out.Refused.Code)).Str("reason", out.Refused.Message).Msg("refused")
	case out.Duplicate:
		log.Debug().Msg("repeat acknowledged")
	case out.DeadLetter == "":
		logRun(msgLog, out.Outcome)
	}
	if err := msg.Ack(); err != nil {
		log.Warn().Err(err).Msg("ack failed; the message will be delivered again and acknowledged as a repeat")
		return
	}
	if disposition != dispositionDeadLetter {
		disposition = dispositionAcked
	}
}

// origin is the subject a message was first sent to and its stream: a
// command held for a version ([wire.Names.Held]) was sent to an inbound
// subject (of the inbound stream) or fell due (of the schedule stream).
func origin(n wire.Names, stream, subject string) (string, string) {
	if stream != n.InStream() {
		return subject, stream
	}
	orig, _, _, ok := n.ParseHeld(subject)
	if !ok {
		return subject, stream
	}
	if strings.HasPrefix(orig, n.Prefix+".due.") {
		return orig, n.ScheduleStream()
	}
	return orig, stream
}

// hold moves a command for a run of a version of flow this worker does
// not take to the workers of that version: the same message (its headers
// but the server's, its data), on [wire.Names.Held] of the subject it was
// first sent to, deduplicated by where it was stored, so that a message
// delivered again is held once.
func (w *Worker) hold(ctx context.Context, msg jetstream.Msg, md *jetstream.MsgMetadata, flow, version string) error {
	n := w.cfg.Names
	subject, _ := origin(n, md.Stream, msg.Subject())
	out := nats.NewMsg(n.Held(flow, version, subject))
	for k, vs := range msg.Headers() {
		if strings.HasPrefix(textproto.CanonicalMIMEHeaderKey(k), "Nats-") {
			continue
		}
		out.Header[k] = vs
	}
	out.Data = msg.Data()
	_, err := w.js.PublishMsg(ctx, out, jetstream.WithMsgID(fmt.Sprintf("held-%s-%d", md.Stream, md.Sequence.Stream)),
		jetstream.WithExpectStream(n.InStream()))
	return err
}

// Observation is what became of one inbound message: the verb of its
// subject (start, resume, cancel, reannounce, expire, request; "" for an
// unknown subject), the engine's outcome (its Events, Refused, DeadLetter,
// Duplicate and AskedAt say what happened), and how long handling took.
type Observation struct {
	Verb    string
	Outcome engine.Outcome
	Took    time.Duration
}

// nak asks for the message to be delivered again after delay.
func (w *Worker) nak(log zerolog.Logger, msg jetstream.Msg, delay time.Duration) {
	if err := msg.NakWithDelay(delay); err != nil {
		log.Warn().Err(err).Msg("nak failed; the message will be delivered again after the ack wait")
	}
}

// busyDelay spaces out the deliveries of a message whose run stays busy
// (its last transition is in another worker's hands, or that worker died
// and JetStream has not yet given the message to another).
func busyDelay(base time.Duration, delivered uint64) time.Duration {
	switch {
	case delivered <= 10:
		return base
	case delivered <= 30:
		return max(base, 2*time.Second)
	}
	return max(base, 5*time.Second)
}

// logRun writes the operator's lines for a transition: one per event the
// run published (see [LogOutcome]). Never tokens, answers or arguments.
func logRun(log zerolog.Logger, out engine.Outcome) {
	for _, m := range out.Events {
		r := RunLog{Kind: m.Kind, Flow: m.Flow, Run: m.Run, Node: out.Node, Checkpoint: out.Checkpoint,
			Started: out.CreatedAt, Asked: out.AskedAt}
		switch d := m.Data.(type) {
		case *protocol.Interrupted:
			r.Node, r.RequestID = d.Node, d.RequestID
		case *protocol.Resumed:
			r.Node, r.RequestID = d.Node, d.RequestID
		case *protocol.Failed:
			r.Node, r.Error = d.Node, d.Error
		case *protocol.Cancelled:
			r.Node = d.Node
		}
		LogOutcome(log, m.Time, r)
	}
}

// outcome is an engine outcome plus what the worker found before the engine.
type outcome struct {
	engine.Outcome
	detail string
}

// apply decodes the message and applies its command, in the message's
// span, started once the command's traceparent is known.
func (w *Worker) apply(ctx context.Context, msg jetstream.Msg, md *jetstream.MsgMetadata, s *span) (outcome, error) {
	n := w.cfg.Names
	flow, name, role, due, ok := parseSubject(n, md.Stream, msg.Subject())
	if role != "" && protocol.CheckName("approver role", role) != nil {
		ok = false
	}
	v, known := w.verbs.Lookup(name, flow, due)
	if !ok || !known {
		return outcome{Outcome: engine.Outcome{DeadLetter: ReasonUnknownSubject},
			detail: fmt.Sprintf("subject %s is not %s.in.<flow>.<%s>, %s.in.<flow>.resume.<role>, %s, %s or %s", msg.Subject(), n.Prefix, w.verbs.ClientVerbs(), n.Prefix, n.GateRequest(), n.GateConsume(), n.AskRequest())}, nil
	}
	if name == protocol.VerbStart && w.cfg.Newest != nil {
		// A new run starts on the newest version of its flow: a start
		// sent to the shared subject that a worker of another version
		// takes is held for the newest's workers.
		if _, _, _, held := n.ParseHeld(msg.Subject()); !held {
			if newest, ok := w.cfg.Newest(flow); ok {
				if own, runs := w.cfg.Runner.Version(flow); !runs || own != newest {
					return outcome{Outcome: engine.Outcome{Flow: flow, Elsewhere: newest}}, nil
				}
			}
		}
	}
	if !due {
		if err := CheckCommandHeaders(msg.Headers()); err != nil {
			id, run := events.Peek(msg.Headers(), msg.Data())
			ctx, span := s.start(ctx, "")
			out, rerr := w.reject(ctx, flow, name, run, engine.Inbound{EventID: id, Seq: md.Sequence.Stream, Span: span}, events.ReasonInvalidPayload, err.Error())
			out.DeadLetter = ReasonInvalidHeaders
			return out, rerr
		}
	}
	ev, err := events.Decode(msg.Headers(), msg.Data())
	if err != nil {
		reason := events.ReasonUnparseable
		var e *events.Error
		if errors.As(err, &e) {
			reason = e.Reason
		}
		id, run := events.Peek(msg.Headers(), msg.Data())
		ctx, span := s.start(ctx, "")
		return w.reject(ctx, flow, name, run, engine.Inbound{EventID: id, Seq: md.Sequence.Stream, Span: span}, reason, err.Error())
	}
	traceparent := events.StringExtension(ev, protocol.ExtTraceparent)
	ctx, span := s.start(ctx, traceparent)
	s.event(ev)
	in := engine.Inbound{
		EventID: ev.ID(), Source: ev.Source(), Seq: md.Sequence.Stream, Due: due,
		Traceparent: traceparent, Span: span,
		FirstDelivery: md.NumDelivered == 1,
	}
	if v.Unsupported != "" {
		run := ev.Subject()
		if d, err := events.ParseToolRequest(ev.Data()); err == nil && name == protocol.VerbRequest {
			run = d.CallID
		}
		return w.rejectCode(ctx, flow, name, run, in, protocol.CodeUnsupported, ReasonUnsupported, v.Unsupported)
	}
	if ev.Type() != v.Type {
		return w.reject(ctx, flow, name, ev.Subject(), in, events.ReasonInvalidPayload,
			fmt.Sprintf("event type %q was sent to %s, which takes %q", ev.Type(), msg.Subject(), v.Type))
	}
	if v.NeedsRun && ev.Subject() == "" {
		return w.reject(ctx, flow, name, "", in, events.ReasonInvalidPayload, fmt.Sprintf("the event's subject must be the run id to %s", name))
	}
	// The vouch binds the subject the command was sent to, not the one it
	// was held under for its version.
	subject, _ := origin(n, md.Stream, msg.Subject())
	in.Authority = engine.Authority{Role: role, Subject: subject, Body: msg.Data()}
	if vouch := msg.Headers().Get(protocol.HeaderVouch); vouch != "" {
		in.Authority.Vouch = vouch
		in.Authority.Approver = msg.Headers().Get(protocol.HeaderApprover)
		in.Authority.Roles = protocol.ParseRoles(msg.Headers().Get(protocol.HeaderRoles))
		in.Authority.Method = protocol.AuthMethod(msg.Headers().Get(protocol.HeaderAuth))
	}
	out, err := v.Apply(ctx, w.cfg.Runner, flow, ev, in)
	var perr *events.Error
	if errors.As(err, &perr) {
		return w.reject(ctx, flow, name, ev.Subject(), in, events.ReasonInvalidPayload, perr.Error())
	}
	if errors.Is(err, nats.ErrMaxPayload) {
		// An event the command makes is larger than the server takes, and
		// would be on every delivery: refuse it now rather than retry.
		return w.reject(ctx, flow, name, ev.Subject(), in, events.ReasonInvalidPayload,
			fmt.Sprintf("the command makes an event larger than the NATS server takes in one message (max_payload; %v): send less data (a shorter tool name, origin or state), or raise max_payload", err))
	}
	if err != nil {
		return outcome{}, err
	}
	o := outcome{Outcome: out}
	switch {
	case out.DeadLetter == engine.ReasonInvalidName:
		o.detail = nameError(flow, out.Run)
	case out.Refused != nil:
		o.detail = out.Refused.Message
	}
	if o.Flow == "" {
		o.Flow = flow
	}
	return o, nil
}

// parseSubject splits the subject of a message of stream into its flow,
// verb and approver role: <prefix>.in.<flow>.<verb>[.<role>] in the inbound
// stream, <prefix>.due.<flow>.<verb> in the schedule stream (due is then
// set); a command held for a version ([wire.Names.Held]) as the subject
// it was first sent to.
func parseSubject(n wire.Names, stream, subject string) (flow, verb, role string, due, ok bool) {
	subject, stream = origin(n, stream, subject)
	if stream == n.ScheduleStream() {
		flow, verb, ok = n.ParseDue(subject)
		return flow, verb, "", true, ok
	}
	flow, verb, role, ok = n.ParseCommand(subject)
	return flow, verb, role, false, ok
}

// commandHeaders are the NATS headers a client may put on a command: the
// deduplication id, expectations the server checks before storing it, and
// a message trace. Every other header starting with "Nats-" is either
// refused by the inbound stream (schedules, roll-ups, TTLs, counters,
// batches) or is one the server sets on a message it copies out of a
// stream (Nats-Stream, Nats-Subject, Nats-Sequence, ... on a direct get's
// reply): a command bearing one was not published by a client, but
// reflected off the server by someone who aimed a reply at an inbound
// subject.
var commandHeaders = map[string]bool{
	"Nats-Msg-Id":                                 true,
	"Nats-Expected-Stream":                        true,
	"Nats-Expected-Last-Sequence":                 true,
	"Nats-Expected-Last-Subject-Sequence":         true,
	"Nats-Expected-Last-Subject-Sequence-Subject": true,
	"Nats-Expected-Last-Msg-Id":                   true,
	"Nats-Trace-Dest":                             true,
	"Nats-Trace-Only":                             true,
}

// CheckCommandHeaders reports a NATS header that no client publishing a
// command sends (see the inbound stream's rules in docs/protocol.md):
// every "Nats-" header but Nats-Msg-Id, the Nats-Expected-* headers and the
// message-trace ones. The worker refuses such a command invalid_payload
// and dead-letters it (ReasonInvalidHeaders).
func CheckCommandHeaders(h nats.Header) error {
	for k := range h {
		canon := textproto.CanonicalMIMEHeaderKey(k)
		if !strings.HasPrefix(canon, "Nats-") || commandHeaders[canon] {
			continue
		}
		return fmt.Errorf("header %s is not one a command may carry: the NATS server sets it on messages it copies out of a stream, or acts on it in a stream (schedules, roll-ups, TTLs, counters, batches), and the inbound stream takes none of those; send a command with no Nats- header but Nats-Msg-Id (and Nats-Expected-*)", k)
	}
	return nil
}

// reject dead-letters a message found bad before the runner, and answers it
// with refused where the run can be named, so that a client waiting on the
// run learns why.
func (w *Worker) reject(ctx context.Context, flow, verb, run string, in engine.Inbound, reason, detail string) (outcome, error) {
	return w.rejectCode(ctx, flow, verb, run, in, protocol.CodeInvalidPayload, reason, detail)
}

// rejectCode is reject with the refusal's code.
func (w *Worker) rejectCode(ctx context.Context, flow, verb, run string, in engine.Inbound, code protocol.Code, reason, detail string) (outcome, error) {
	o := outcome{Outcome: engine.Outcome{Flow: flow, Run: run, DeadLetter: reason}, detail: detail}
	if verb == "start" && run == "" || protocol.CheckName("flow", flow) != nil || protocol.CheckName("run", run) != nil {
		return o, nil
	}
	if err := w.cfg.Runner.Refuse(ctx, flow, run, in, code, detail); err != nil {
		return outcome{}, err
	}
	o.Refused = &engine.Refusal{Code: code, Message: detail}
	return o, nil
}

func nameError(flow, run string) string {
	if err := protocol.CheckName("flow", flow); err != nil {
		return err.Error()
	}
	if err := protocol.CheckName("run", run); err != nil {
		return err.Error()
	}
	return "invalid name"
}
