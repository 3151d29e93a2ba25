package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/wire"
)

// Defaults of [WorkerConfig].
const (
	DefaultConcurrency    = 32
	DefaultAckWait        = 30 * time.Second
	DefaultHandlerTimeout = 25 * time.Second
)

// consumePause is how long the worker waits after the consumer reports an error.
const consumePause = 250 * time.Millisecond

// Dead-letter reasons decided by the worker.
const (
	ReasonUnknownSubject = "unknown_subject"
	ReasonUnsupported    = "unsupported"
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
	// Logger receives one line per refused, dead-lettered or failed message.
	// Defaults to a disabled logger.
	Logger *zerolog.Logger
}

func (c WorkerConfig) withDefaults() WorkerConfig {
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.AckWait = cmp.Or(c.AckWait, DefaultAckWait)
	c.HandlerTimeout = cmp.Or(c.HandlerTimeout, DefaultHandlerTimeout)
	if c.Names.Prefix == "" {
		c.Names.Prefix = wire.DefaultPrefix
	}
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
	}
	return c
}

func (c WorkerConfig) validate() error {
	switch {
	case c.Runner == nil:
		return errors.New("bus: WorkerConfig.Runner is nil")
	case c.Concurrency < 1:
		return fmt.Errorf("bus: WorkerConfig.Concurrency is %d; it must be positive", c.Concurrency)
	case c.HandlerTimeout >= c.AckWait:
		return fmt.Errorf("bus: WorkerConfig.HandlerTimeout (%s) must be shorter than AckWait (%s)", c.HandlerTimeout, c.AckWait)
	}
	return nil
}

// Worker consumes inbound commands with a durable pull consumer shared by
// every worker of the deployment, and acknowledges each message only after
// its effects are durable.
type Worker struct {
	js  jetstream.JetStream
	cfg WorkerConfig
	log zerolog.Logger

	mu      sync.Mutex
	iter    jetstream.MessagesContext
	loop    sync.WaitGroup
	running sync.WaitGroup
	sem     chan struct{}
	base    context.Context
	abort   context.CancelFunc
	stopped bool
}

// NewWorker returns a worker; Start starts it.
func NewWorker(js jetstream.JetStream, cfg WorkerConfig) (*Worker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Worker{js: js, cfg: cfg, log: *cfg.Logger, sem: make(chan struct{}, cfg.Concurrency)}, nil
}

// Start binds the inbound stream, creates or updates the durable consumer,
// and starts consuming. It returns once consuming has begun.
func (w *Worker) Start(ctx context.Context) error {
	n := w.cfg.Names
	stream, err := w.js.Stream(ctx, n.InStream())
	if err != nil {
		return fmt.Errorf("bus: binding stream %s (was Provision called?): %w", n.InStream(), err)
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       n.Consumer(),
		Description:   "Interlock workers",
		FilterSubject: n.Prefix + ".in.>",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       w.cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 4 * w.cfg.Concurrency,
	})
	if err != nil {
		return fmt.Errorf("bus: creating consumer %s: %w", n.Consumer(), err)
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(w.cfg.Concurrency))
	if err != nil {
		return fmt.Errorf("bus: consuming %s: %w", n.Consumer(), err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.iter != nil || w.stopped {
		iter.Stop()
		return errors.New("bus: worker started twice")
	}
	w.iter = iter
	w.base, w.abort = context.WithCancel(context.WithoutCancel(ctx))
	w.loop.Add(1)
	go w.consume(iter)
	return nil
}

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
		w.sem <- struct{}{}
		w.running.Add(1)
		go func() {
			defer w.running.Done()
			defer func() { <-w.sem }()
			w.handle(msg)
		}()
	}
}

// Stop stops taking messages and waits for those in hand to finish, or for
// ctx to end, when it abandons them to be delivered again. Stopping twice
// is safe.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	iter, first := w.iter, !w.stopped
	w.stopped = true
	w.mu.Unlock()
	if iter == nil {
		return nil
	}
	if first {
		iter.Drain()
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
		iter.Stop()
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
		w.log.Error().Err(err).Str("subject", msg.Subject()).Msg("message without JetStream metadata")
		_ = msg.Term()
		return
	}
	log := w.log.With().Str("subject", msg.Subject()).Uint64("stream_seq", md.Sequence.Stream).Logger()
	out, err := w.apply(ctx, msg, md)
	if err != nil {
		delay := backoff(md.NumDelivered)
		log.Error().Err(err).Uint64("delivered", md.NumDelivered).Dur("retry_in", delay).Msg("message not applied; will be delivered again")
		_ = msg.NakWithDelay(delay)
		return
	}
	log = log.With().Str("flow", out.Flow).Str("run", out.Run).Logger()
	if out.DeadLetter != "" {
		detail := out.detail
		if err := DeadLetter(ctx, w.js, w.cfg.Names, msg, out.DeadLetter, detail); err != nil {
			log.Error().Err(err).Msg("dead letter not written; will be delivered again")
			_ = msg.NakWithDelay(backoff(md.NumDelivered))
			return
		}
		log.Warn().Str("reason", out.DeadLetter).Str("error", detail).Msg("message dead-lettered")
	}
	if out.RetryAfter > 0 {
		log.Debug().Dur("retry_in", out.RetryAfter).Msg("run busy")
		_ = msg.NakWithDelay(out.RetryAfter)
		return
	}
	switch {
	case out.Refused != nil:
		log.Info().Str("code", out.Refused.Code).Str("reason", out.Refused.Message).Msg("refused")
	case out.Duplicate:
		log.Debug().Msg("repeat acknowledged")
	default:
		log.Debug().Str("status", string(out.Status)).Uint64("checkpoint", out.Checkpoint).Msg("applied")
	}
	if err := msg.Ack(); err != nil {
		log.Warn().Err(err).Msg("ack failed; the message will be delivered again and acknowledged as a repeat")
	}
}

// outcome is an engine outcome plus what the worker found before the engine.
type outcome struct {
	engine.Outcome
	detail string
}

func (w *Worker) apply(ctx context.Context, msg jetstream.Msg, md *jetstream.MsgMetadata) (outcome, error) {
	n := w.cfg.Names
	r := w.cfg.Runner
	flow, verb, ok := n.ParseIn(msg.Subject())
	typ, known := events.InboundType(verb)
	if !ok || !known {
		return outcome{Outcome: engine.Outcome{DeadLetter: ReasonUnknownSubject},
			detail: fmt.Sprintf("subject %s is not %s.in.<flow>.start|resume|cancel or %s", msg.Subject(), n.Prefix, n.GateRequest())}, nil
	}
	if flow == "gate" && verb == "request" {
		return outcome{Outcome: engine.Outcome{DeadLetter: ReasonUnsupported},
			detail: "the tool-call gate is not enabled on this worker"}, nil
	}
	ev, err := events.Decode(msg.Headers(), msg.Data())
	if err != nil {
		var e *events.Error
		reason := events.ReasonUnparseable
		if errors.As(err, &e) {
			reason = e.Reason
		}
		return w.reject(ctx, flow, verb, headerRun(msg), engine.Inbound{Seq: md.Sequence.Stream}, reason, err.Error())
	}
	in := engine.Inbound{
		EventID: ev.ID(), Source: ev.Source(), Seq: md.Sequence.Stream,
		Traceparent:   events.StringExtension(ev, events.ExtTraceparent),
		FirstDelivery: md.NumDelivered == 1,
	}
	if ev.Type() != typ {
		return w.reject(ctx, flow, verb, ev.Subject(), in, events.ReasonInvalidPayload,
			fmt.Sprintf("event type %q was sent to %s, which takes %q", ev.Type(), msg.Subject(), typ))
	}
	var out engine.Outcome
	switch verb {
	case "start":
		d, perr := events.ParseStart(ev.Data())
		if perr != nil {
			return w.reject(ctx, flow, verb, ev.Subject(), in, events.ReasonInvalidPayload, perr.Error())
		}
		out, err = r.Start(ctx, engine.Start{Flow: flow, Run: ev.Subject(), State: d.State, Origin: d.Origin, Inbound: in})
	case "resume":
		if ev.Subject() == "" {
			return w.reject(ctx, flow, verb, "", in, events.ReasonInvalidPayload, "the event's subject must be the run id to resume")
		}
		d, perr := events.ParseResume(ev.Data())
		if perr != nil {
			return w.reject(ctx, flow, verb, ev.Subject(), in, events.ReasonInvalidPayload, perr.Error())
		}
		out, err = r.Resume(ctx, engine.Resume{
			Flow: flow, Run: ev.Subject(), Token: d.ResumeToken, RequestID: d.RequestID,
			Answers: d.Answers, Selected: d.Selected, Decision: d.Decision, Edits: d.Edits,
			Update: d.Update, Approver: d.Approver, Reason: d.Reason,
			ExpectedCheckpoint: d.ExpectedCheckpoint, IdempotencyKey: d.IdempotencyKey, Inbound: in,
		})
	case "cancel":
		if ev.Subject() == "" {
			return w.reject(ctx, flow, verb, "", in, events.ReasonInvalidPayload, "the event's subject must be the run id to cancel")
		}
		d, perr := events.ParseCancel(ev.Data())
		if perr != nil {
			return w.reject(ctx, flow, verb, ev.Subject(), in, events.ReasonInvalidPayload, perr.Error())
		}
		out, err = r.Cancel(ctx, engine.Cancel{Flow: flow, Run: ev.Subject(), Reason: d.Reason, By: d.By, Inbound: in})
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

// reject dead-letters a message found bad before the runner, and answers it
// with refused where the run can be named.
func (w *Worker) reject(ctx context.Context, flow, verb, run string, in engine.Inbound, reason, detail string) (outcome, error) {
	o := outcome{Outcome: engine.Outcome{Flow: flow, Run: run, DeadLetter: reason}, detail: detail}
	if verb == "start" && run == "" || engine.CheckName("flow", flow) != nil || engine.CheckName("run", run) != nil {
		return o, nil
	}
	if err := w.cfg.Runner.Refuse(ctx, flow, run, in, engine.CodeInvalidPayload, detail); err != nil {
		return outcome{}, err
	}
	o.Refused = &engine.Refusal{Code: engine.CodeInvalidPayload, Message: detail}
	return o, nil
}

func nameError(flow, run string) string {
	if err := engine.CheckName("flow", flow); err != nil {
		return err.Error()
	}
	if err := engine.CheckName("run", run); err != nil {
		return err.Error()
	}
	return "invalid name"
}

// headerRun returns the run id of a binary-mode message that did not decode.
func headerRun(msg jetstream.Msg) string {
	for k, v := range msg.Headers() {
		if len(v) > 0 && (k == "ce-subject" || k == "Ce-Subject") {
			return v[0]
		}
	}
	return ""
}
