// Package notify follows Interlock's events for the channels that carry
// them to people and to other systems: e-mail, outbound webhooks,
// Microsoft Teams. Each channel (each webhook subscription) has a durable
// consumer of its own on the events stream, so a slow or failing receiver
// never holds back the workers or another channel; an event that cannot
// be delivered is tried again with exponential backoff and jitter for as
// long as the channel allows, then dead-lettered with the last error. A
// [Sent] bucket records what was delivered, so that a redelivered event
// (after a restart, or when one of several recipients failed) goes out
// once to each.
package notify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/egress"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/wire"
)

// ReasonUndeliverable is the dead-letter reason of an event a channel
// gave up on: <prefix>.dlq.undeliverable, with the channel's consumer in
// bus.HeaderConsumer and the last error in bus.HeaderError.
const ReasonUndeliverable = "undeliverable"

// Defaults of [Config].
const (
	DefaultFirstRetry = time.Second
	DefaultMaxRetry   = 10 * time.Minute
	DefaultRetryFor   = 24 * time.Hour
	DefaultAckWait    = time.Minute
)

// Delivery is one event handed to a channel.
type Delivery struct {
	// Kind is the event's kind, the last token of its subject
	// (protocol.EventInterrupted...).
	Kind string
	// Subject is the event's subject.
	Subject string
	// Event is the decoded CloudEvent.
	Event events.Event
	// Attempt counts the deliveries of the event to this channel, from 1.
	Attempt int
	// Published is when the event was stored.
	Published time.Time
	// Last is set when this attempt is the last: if it fails, the event
	// is dead-lettered, not tried again (RetryFor would be over before
	// the next).
	Last bool
}

// Handler delivers one event. It returns nil once the event is delivered
// (or is nothing for the channel), an error to try again later, or an
// error wrapped by [Permanent] to dead-letter the event at once. An
// error that wraps a refusal of the outbound policy (egress.ErrRefused)
// is permanent too: another attempt would be refused the same.
type Handler func(ctx context.Context, d Delivery) error

// permanent marks an error that another attempt will not mend.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps err so that the event is dead-lettered at once, not
// tried again: a receiver that answers 410 Gone, an address the mail
// server refuses for good.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err was wrapped by [Permanent].
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// Config configures a [Follower].
type Config struct {
	// Name is the durable consumer's name, unique per channel: for
	// example "interlock-mail" or "interlock-webhook-crm". A restart
	// carries on where the consumer stopped.
	Name string
	// Description of the consumer, for `nats consumer info`.
	Description string
	// Kinds are the event kinds followed (protocol.EventInterrupted...).
	// At least one.
	Kinds []string
	// Flows, if set, limits the events to these flows.
	Flows []string
	// FirstRetry is the delay before the second attempt; each next one
	// doubles it, up to MaxRetry, with up to a fifth taken off or added at
	// random so that receivers coming back are not hit all at once.
	// Defaults to DefaultFirstRetry and DefaultMaxRetry.
	FirstRetry, MaxRetry time.Duration
	// RetryFor is how long after its publication an event is still tried;
	// then it is dead-lettered. Defaults to DefaultRetryFor.
	RetryFor time.Duration
	// AckWait is how long one attempt may take before the event is
	// delivered again. Defaults to DefaultAckWait.
	AckWait time.Duration
	// Parallel is how many events are handled at once: 1 (the default)
	// keeps a run's events in order.
	Parallel int
	// Observe, if set, hears the end of every attempt: nil when the event
	// was delivered, the error otherwise, and whether the event was then
	// dead-lettered. It must not block.
	Observe func(d Delivery, err error, deadLettered bool)
	// Logger for the follower. Defaults to a disabled logger.
	Logger *zerolog.Logger
}

func (c Config) withDefaults() Config {
	c.FirstRetry = cmp.Or(c.FirstRetry, DefaultFirstRetry)
	c.MaxRetry = max(cmp.Or(c.MaxRetry, DefaultMaxRetry), c.FirstRetry)
	c.RetryFor = cmp.Or(c.RetryFor, DefaultRetryFor)
	c.AckWait = cmp.Or(c.AckWait, DefaultAckWait)
	c.Parallel = max(c.Parallel, 1)
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
	}
	return c
}

// Follower is one channel's consumer of the events stream. [Follow]
// starts it; [Follower.Stop] stops it.
type Follower struct {
	cfg   Config
	js    jetstream.JetStream
	names wire.Names
	h     Handler
	log   zerolog.Logger

	it      jetstream.MessagesContext
	work    context.Context
	endWork context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
}

// Follow binds the channel's durable consumer on the events stream
// (made the first time, it starts at the events published from then on)
// and hands each event to h until Stop.
func Follow(ctx context.Context, js jetstream.JetStream, names wire.Names, cfg Config, h Handler) (*Follower, error) {
	cfg = cfg.withDefaults()
	if cfg.Name == "" || strings.ContainsAny(cfg.Name, ". *>") {
		return nil, fmt.Errorf("notify: consumer name %q: use A-Z a-z 0-9 _ -", cfg.Name)
	}
	if len(cfg.Kinds) == 0 {
		return nil, errors.New("notify: Config.Kinds names no event kind to follow")
	}
	if h == nil {
		return nil, errors.New("notify: Follow needs a Handler")
	}
	flows := cfg.Flows
	if len(flows) == 0 {
		flows = []string{"*"}
	}
	var subjects []string
	for _, f := range flows {
		for _, k := range cfg.Kinds {
			subjects = append(subjects, names.Event(f, "*", k))
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, names.EventStream(), jetstream.ConsumerConfig{
		Durable:        cfg.Name,
		Description:    cfg.Description,
		FilterSubjects: subjects,
		DeliverPolicy:  jetstream.DeliverNewPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        cfg.AckWait,
		MaxAckPending:  cfg.Parallel,
	})
	if err != nil {
		return nil, fmt.Errorf("notify: binding consumer %s on %s: %w", cfg.Name, names.EventStream(), err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(max(cfg.Parallel, 1)))
	if err != nil {
		return nil, fmt.Errorf("notify: following %s with %s: %w", names.EventStream(), cfg.Name, err)
	}
	f := &Follower{cfg: cfg, js: js, names: names, h: h, log: cfg.Logger.With().Str("consumer", cfg.Name).Logger(), it: it}
	f.work, f.endWork = context.WithCancel(context.Background())
	for range cfg.Parallel {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.follow()
		}()
	}
	return f, nil
}

// Name is the follower's consumer.
func (f *Follower) Name() string { return f.cfg.Name }

// Stop stops following: the events in hand finish, or are left to be
// delivered again when ctx ends. Stopping twice is safe.
func (f *Follower) Stop(ctx context.Context) error {
	f.once.Do(func() {
		f.it.Stop()
		stop := context.AfterFunc(ctx, f.endWork)
		f.wg.Wait()
		stop()
		f.endWork()
	})
	return nil
}

// Delete stops the follower and deletes its consumer: a webhook
// subscription that was removed.
func (f *Follower) Delete(ctx context.Context) error {
	_ = f.Stop(ctx)
	err := f.js.DeleteConsumer(ctx, f.names.EventStream(), f.cfg.Name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("notify: deleting consumer %s: %w", f.cfg.Name, err)
	}
	return nil
}

func (f *Follower) follow() {
	pause := time.Second
	for {
		msg, err := f.it.Next()
		switch {
		case errors.Is(err, jetstream.ErrMsgIteratorClosed), f.work.Err() != nil:
			return
		case errors.Is(err, jetstream.ErrConsumerDeleted):
			f.log.Error().Err(err).Str("consumer", f.cfg.Name).Dur("retry_in", pause).
				Msg("notify: the channel's consumer was deleted; restart the process to create it again (events published meanwhile are not sent)")
		case err != nil:
			f.log.Warn().Err(err).Dur("retry_in", pause).Msg("notify: following events")
		default:
			pause = time.Second
			f.handle(msg)
			continue
		}
		select {
		case <-f.work.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, maxFollowPause)
	}
}

// maxFollowPause is the longest a follower waits before it reads again
// after errors, so that a lasting one is not logged every second.
const maxFollowPause = 30 * time.Second

// handle hands one event to the channel and settles it.
func (f *Follower) handle(msg jetstream.Msg) {
	subject := msg.Subject()
	d := Delivery{Kind: subject[strings.LastIndex(subject, ".")+1:], Subject: subject, Attempt: 1, Published: time.Now()}
	if md, err := msg.Metadata(); err == nil {
		d.Attempt = int(md.NumDelivered)
		d.Published = md.Timestamp
	}
	ev, err := events.Decode(msg.Headers(), msg.Data())
	if err != nil {
		f.deadLetter(msg, d, fmt.Errorf("the event does not decode: %w", err))
		return
	}
	d.Event = ev
	delay := f.Backoff(d.Attempt)
	d.Last = time.Since(d.Published)+delay > f.cfg.RetryFor
	ctx, cancel := context.WithTimeout(f.work, f.cfg.AckWait)
	err = f.h(ctx, d)
	cancel()
	if err == nil {
		f.observe(d, nil, false)
		if err := msg.Ack(); err != nil {
			f.log.Warn().Err(err).Str("subject", subject).Msg("notify: acknowledging an event")
		}
		return
	}
	if f.work.Err() != nil {
		// Stopping: the event is delivered again after the restart.
		return
	}
	if after := RetryAfterOf(err); after > 0 {
		delay = max(after, f.cfg.FirstRetry)
	}
	if IsPermanent(err) || egress.IsRefused(err) || d.Last || time.Since(d.Published)+delay > f.cfg.RetryFor {
		f.deadLetter(msg, d, err)
		return
	}
	f.observe(d, err, false)
	f.log.Warn().Err(err).Str("subject", subject).Str("ce_id", ev.ID()).Int("attempt", d.Attempt).
		Dur("retry_in", delay).Msg("notify: event not delivered; it will be tried again")
	_ = msg.NakWithDelay(delay)
}

// Backoff is the delay after the attempt-th failed attempt: FirstRetry
// doubled attempt-1 times, at most MaxRetry, ±20% at random.
func (f *Follower) Backoff(attempt int) time.Duration {
	d := f.cfg.FirstRetry
	for i := 1; i < attempt && d < f.cfg.MaxRetry; i++ {
		d *= 2
	}
	d = min(d, f.cfg.MaxRetry)
	jitter := time.Duration(rand.Int64N(int64(d)/5 + 1))
	if rand.IntN(2) == 0 {
		return d - jitter
	}
	return d + jitter
}

func (f *Follower) deadLetter(msg jetstream.Msg, d Delivery, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	detail := fmt.Sprintf("%s gave up after %d attempt(s): %v", f.cfg.Name, d.Attempt, cause)
	if err := bus.DeadLetter(ctx, f.js, f.names, msg, ReasonUndeliverable, detail); err != nil {
		f.log.Error().Err(err).Str("subject", msg.Subject()).Msg("notify: dead-lettering an undeliverable event; it will be tried again")
		_ = msg.NakWithDelay(f.cfg.MaxRetry)
		return
	}
	f.observe(d, cause, true)
	f.log.Error().Err(cause).Str("subject", msg.Subject()).Int("attempt", d.Attempt).Msg("notify: event dead-lettered undeliverable")
	_ = msg.Term()
}

func (f *Follower) observe(d Delivery, err error, dead bool) {
	if f.cfg.Observe != nil {
		f.cfg.Observe(d, err, dead)
	}
}
