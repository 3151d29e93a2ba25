// Package notify follows Interlock's events for the channels that carry
// them to people and to other systems: e-mail, outbound webhooks,
// Microsoft Teams, the POSTs to asks' callback URLs. Each channel (each
// webhook subscription) has a durable consumer of its own on the events
// stream, so a slow or failing channel never holds back the workers or
// another channel. An event that cannot be delivered is tried again with
// exponential backoff and jitter for as long as the channel allows, then
// dead-lettered with the last error.
//
// A failed attempt holds no place in the channel's consumer while it
// waits, so one receiver that fails (an agent's callback URL that is
// down, a Teams channel that limits the rate) never delays the deliveries
// to the channel's other receivers: the event is acknowledged, and its
// next attempt is a JetStream message schedule in the retry stream
// (<prefix>_RETRIES, [wire.Names.RetryStream]), which the server
// publishes when it is due, even if no process runs then, to a subject
// the channel follows with a second durable consumer. The schedule
// carries the attempt's number, the event's subject, sequence and time of
// publication in headers. First attempts and retries each have Parallel
// places of their own, so retries never take a first attempt's.
//
// A [Sent] bucket records what was delivered, so that a redelivered event
// (after a restart, or when one of several recipients failed) goes out
// once to each.
package notify

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
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
	// Parallel is how many events are handled at once, and as many again
	// of the attempts that come back from the retry stream: 1 (the
	// default) makes the first attempts of a run's events in order. An
	// event that failed is tried again later, after events published
	// since.
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

// Follower is one channel's consumer of the events stream, and of its
// attempts that come back from the retry stream. [Follow] starts it;
// [Follower.Stop] stops it.
type Follower struct {
	cfg   Config
	js    jetstream.JetStream
	names wire.Names
	h     Handler
	log   zerolog.Logger

	// its are the events' iterator and the retries'.
	its     [2]jetstream.MessagesContext
	work    context.Context
	endWork context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
	// taking orders taking an event with taking its run's turn, which
	// runs keeps.
	taking sync.Mutex
	runs   turns
}

// Headers of an attempt in the retry stream, set on its schedule and
// copied by the server onto the message it publishes when it is due.
const (
	// headerAttempt is the number of the attempt, from 2.
	headerAttempt = "Interlock-Retry-Attempt"
	// headerSubject is the event's subject in the events stream.
	headerSubject = "Interlock-Retry-Subject"
	// headerSeq is the event's sequence in the events stream.
	headerSeq = "Interlock-Retry-Seq"
	// headerPublished is when the event was stored, RFC 3339.
	headerPublished = "Interlock-Retry-Published"
	// headerMsgID is the event's Nats-Msg-Id, which the retry stream
	// does not keep under its own name.
	headerMsgID = "Interlock-Retry-Msg-Id"
	// headerRetryPrefix starts each of them.
	headerRetryPrefix = "Interlock-Retry-"
)

// scheduleTimeout bounds storing the schedule of a next attempt.
const scheduleTimeout = 10 * time.Second

// Follow binds the channel's durable consumer on the events stream
// (made the first time, it starts at the events published from then on)
// and its consumer of the same name on the retry stream (made, with the
// stream, if need be), and hands each event to h until Stop.
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
	// Made as provisioning makes its assets: a cluster whose leaders move
	// (a node paused or lost) answers again in a moment.
	var events, retries jetstream.Consumer
	err := bus.Ensure(ctx, "consumer "+cfg.Name, func(ctx context.Context) (err error) {
		events, err = js.CreateOrUpdateConsumer(ctx, names.EventStream(), jetstream.ConsumerConfig{
			Durable:        cfg.Name,
			Description:    cfg.Description,
			FilterSubjects: subjects,
			DeliverPolicy:  jetstream.DeliverNewPolicy,
			AckPolicy:      jetstream.AckExplicitPolicy,
			AckWait:        cfg.AckWait,
			MaxAckPending:  cfg.Parallel,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("notify: binding consumer %s on %s: %w", cfg.Name, names.EventStream(), err)
	}
	if err := ProvisionRetries(ctx, js, names); err != nil {
		return nil, err
	}
	err = bus.Ensure(ctx, "consumer "+cfg.Name, func(ctx context.Context) (err error) {
		retries, err = js.CreateOrUpdateConsumer(ctx, names.RetryStream(), jetstream.ConsumerConfig{
			Durable:       cfg.Name,
			Description:   strings.TrimPrefix(cfg.Description+": attempts after a failure", ": "),
			FilterSubject: names.RetryDue(cfg.Name),
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       cfg.AckWait,
			MaxAckPending: cfg.Parallel,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("notify: binding consumer %s on %s: %w", cfg.Name, names.RetryStream(), err)
	}
	f := &Follower{cfg: cfg, js: js, names: names, h: h, log: cfg.Logger.With().Str("consumer", cfg.Name).Logger()}
	for i, c := range []jetstream.Consumer{events, retries} {
		if f.its[i], err = c.Messages(jetstream.PullMaxMessages(cfg.Parallel)); err != nil {
			if f.its[0] != nil {
				f.its[0].Stop()
			}
			return nil, fmt.Errorf("notify: following %s with %s: %w", c.CachedInfo().Stream, cfg.Name, err)
		}
	}
	f.work, f.endWork = context.WithCancel(context.Background())
	for i, it := range f.its {
		for range cfg.Parallel {
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				f.follow(it, i == 1)
			}()
		}
	}
	return f, nil
}

// ProvisionRetries creates the retry stream (wire.Names.RetryStream), or
// updates it to this configuration: a work queue of message schedules on
// <prefix>.retry.>, with as many replicas as the deployment's events
// stream (see [Replicas]). Follow calls it.
func ProvisionRetries(ctx context.Context, js jetstream.JetStream, names wire.Names) error {
	cfg := jetstream.StreamConfig{
		Name:        names.RetryStream(),
		Subjects:    []string{names.Retries()},
		Description: "Interlock's channels: deliveries waiting for their next attempt (message schedules) and the attempts they fire",
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    Replicas(ctx, js, names, 0),
		// A schedule needs roll-ups (the server forces them); only the
		// workers publish here.
		AllowMsgSchedules: true, AllowRollup: true,
	}
	err := bus.Ensure(ctx, "stream "+names.RetryStream(), func(ctx context.Context) error {
		_, err := js.CreateOrUpdateStream(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("notify: binding stream %s: %w", names.RetryStream(), err)
	}
	return nil
}

// Name is the follower's consumer.
func (f *Follower) Name() string { return f.cfg.Name }

// Stop stops following: the events in hand finish, or are left to be
// delivered again when ctx ends. Stopping twice is safe.
func (f *Follower) Stop(ctx context.Context) error {
	f.once.Do(func() {
		for _, it := range f.its {
			it.Stop()
		}
		stop := context.AfterFunc(ctx, f.endWork)
		f.wg.Wait()
		stop()
		f.endWork()
	})
	return nil
}

// Delete stops the follower and deletes its consumers and its waiting
// attempts: a webhook subscription that was removed.
func (f *Follower) Delete(ctx context.Context) error {
	_ = f.Stop(ctx)
	return Remove(ctx, f.js, f.names, f.cfg.Name)
}

// Remove deletes the consumers of the channel whose durable consumer is
// name, on the events stream and on the retry stream, and the attempts it
// has waiting there, whichever process follows it (it stops getting
// events).
func Remove(ctx context.Context, js jetstream.JetStream, names wire.Names, name string) error {
	var errs []error
	for _, stream := range []string{names.EventStream(), names.RetryStream()} {
		err := js.DeleteConsumer(ctx, stream, name)
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
			errs = append(errs, fmt.Errorf("notify: deleting consumer %s of %s: %w", name, stream, err))
		}
	}
	st, err := js.Stream(ctx, names.RetryStream())
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
	case err != nil:
		errs = append(errs, fmt.Errorf("notify: binding stream %s: %w", names.RetryStream(), err))
	default:
		waiting := names.RetriesOf(name)
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(waiting)); err != nil {
			errs = append(errs, fmt.Errorf("notify: purging %s of %s: %w", waiting, names.RetryStream(), err))
		}
	}
	return errors.Join(errs...)
}

// Waiting counts the attempts the channel whose durable consumer is name
// has in the retry stream: scheduled, or due and not yet done.
func Waiting(ctx context.Context, js jetstream.JetStream, names wire.Names, name string) (uint64, error) {
	st, err := js.Stream(ctx, names.RetryStream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("notify: binding stream %s: %w", names.RetryStream(), err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(names.RetriesOf(name)))
	if err != nil {
		return 0, fmt.Errorf("notify: reading stream %s: %w", names.RetryStream(), err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
}

// follow hands the messages of it to the channel until it stops; retried
// says it is the retry stream's.
func (f *Follower) follow(it jetstream.MessagesContext, retried bool) {
	pause := time.Second
	for {
		var (
			msg  jetstream.Msg
			err  error
			turn func() func()
		)
		if retried {
			msg, err = it.Next()
		} else {
			// Taken in the stream's order, a run's events are handled in
			// it too: a request's resumed before the next interrupt.
			f.taking.Lock()
			msg, err = it.Next()
			if err == nil {
				turn = f.runs.take(runOf(msg.Subject()))
			}
			f.taking.Unlock()
		}
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
			if turn != nil {
				done := turn()
				f.handle(msg, retried)
				done()
			} else {
				f.handle(msg, retried)
			}
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

// runOf is the run an event's subject names (<prefix>.ev.<flow>.<run>),
// its kind cut off.
func runOf(subject string) string {
	if i := strings.LastIndexByte(subject, '.'); i > 0 {
		return subject[:i]
	}
	return subject
}

// turns hands out, per run, turns in the order they were taken: a turn
// starts once the run's turn before it is done. Runs' turns do not wait
// on each other's, and a run is forgotten once its last turn is done.
type turns struct {
	mu   sync.Mutex
	last map[string]chan struct{}
}

// take takes the next turn of run. Calling the result waits for the
// turn, and returns the function that ends it.
func (t *turns) take(run string) func() func() {
	t.mu.Lock()
	if t.last == nil {
		t.last = map[string]chan struct{}{}
	}
	prev, mine := t.last[run], make(chan struct{})
	t.last[run] = mine
	t.mu.Unlock()
	return func() func() {
		if prev != nil {
			<-prev
		}
		return func() {
			close(mine)
			t.mu.Lock()
			if t.last[run] == mine {
				delete(t.last, run)
			}
			t.mu.Unlock()
		}
	}
}

// maxFollowPause is the longest a follower waits before it reads again
// after errors, so that a lasting one is not logged every second.
const maxFollowPause = 30 * time.Second

// attempt is one attempt in hand: its message (from the events stream,
// or from the retry stream for the attempts after a failure) and the
// event's place in the events stream.
type attempt struct {
	msg jetstream.Msg
	// retried: msg is the retry stream's.
	retried bool
	// subject and seq are the event's subject and sequence in the events
	// stream (seq 0 when unknown).
	subject string
	seq     uint64
	// n counts the attempts, from 1; published is when the event was
	// stored.
	n         int
	published time.Time
}

// msgID is the event's Nats-Msg-Id.
func (a attempt) msgID() string {
	if a.retried {
		return a.msg.Headers().Get(headerMsgID)
	}
	return a.msg.Headers().Get(jetstream.MsgIDHeader)
}

// attemptOf reads what msg is an attempt of.
func attemptOf(msg jetstream.Msg, retried bool) (attempt, error) {
	a := attempt{msg: msg, retried: retried, subject: msg.Subject(), n: 1, published: time.Now()}
	md, err := msg.Metadata()
	if !retried {
		if err == nil {
			a.n, a.seq, a.published = int(md.NumDelivered), md.Sequence.Stream, md.Timestamp
		}
		return a, nil
	}
	h := msg.Headers()
	n, nerr := strconv.Atoi(h.Get(headerAttempt))
	published, perr := time.Parse(time.RFC3339Nano, h.Get(headerPublished))
	a.seq, _ = strconv.ParseUint(h.Get(headerSeq), 10, 64)
	a.subject = h.Get(headerSubject)
	if nerr != nil || perr != nil || a.subject == "" {
		return a, fmt.Errorf("a message on %s without %s, %s and %s is no attempt of a channel", msg.Subject(), headerAttempt, headerSubject, headerPublished)
	}
	a.n, a.published = n, published
	if err == nil && md.NumDelivered > 1 {
		// Delivered again (the process that had it stopped): another
		// attempt.
		a.n += int(md.NumDelivered) - 1
	}
	return a, nil
}

// handle hands one event to the channel and settles it.
func (f *Follower) handle(msg jetstream.Msg, retried bool) {
	a, err := attemptOf(msg, retried)
	if err != nil {
		f.log.Error().Err(err).Msg("notify: dropping a message of the retry stream")
		_ = msg.Term()
		return
	}
	subject := a.subject
	d := Delivery{Kind: subject[strings.LastIndex(subject, ".")+1:], Subject: subject, Attempt: a.n, Published: a.published}
	ev, err := events.Decode(msg.Headers(), msg.Data())
	if err != nil {
		f.deadLetter(a, d, fmt.Errorf("the event does not decode: %w", err))
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
		f.deadLetter(a, d, err)
		return
	}
	f.observe(d, err, false)
	f.log.Warn().Err(err).Str("subject", subject).Str("ce_id", ev.ID()).Int("attempt", d.Attempt).
		Dur("retry_in", delay).Msg("notify: event not delivered; it will be tried again")
	f.retry(a, d, delay)
}

// retry schedules the next attempt of d in the retry stream, due after
// delay, and acknowledges the attempt in hand: the event then holds no
// place of the consumer while it waits. When the schedule cannot be
// stored, the event waits in the consumer instead.
func (f *Follower) retry(a attempt, d Delivery, delay time.Duration) {
	m := nats.NewMsg(f.names.RetryWait(f.cfg.Name, retryKey(d.Event.ID())))
	m.Data = a.msg.Data()
	for k, vs := range a.msg.Headers() {
		// NATS's own headers act on the stream (a schedule, a purge, a
		// message id): none is carried on.
		if strings.HasPrefix(strings.ToLower(k), "nats-") || strings.HasPrefix(k, headerRetryPrefix) {
			continue
		}
		m.Header[k] = slices.Clone(vs)
	}
	m.Header.Set(headerAttempt, strconv.Itoa(d.Attempt+1))
	m.Header.Set(headerSubject, d.Subject)
	m.Header.Set(headerSeq, strconv.FormatUint(a.seq, 10))
	m.Header.Set(headerPublished, d.Published.UTC().Format(time.RFC3339Nano))
	if id := a.msgID(); id != "" {
		m.Header.Set(headerMsgID, id)
	}
	m.Header.Set(bus.HeaderSchedule, "@at "+time.Now().Add(delay).UTC().Format(time.RFC3339Nano))
	m.Header.Set(bus.HeaderScheduleTarget, f.names.RetryDue(f.cfg.Name))
	// The same attempt scheduled twice (the event delivered again before
	// its acknowledgement reached the server) is stored once.
	m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("retry-%s-%s-%d", f.cfg.Name, d.Event.ID(), d.Attempt+1))
	ctx, cancel := context.WithTimeout(context.Background(), scheduleTimeout)
	defer cancel()
	if _, err := f.js.PublishMsg(ctx, m); err != nil {
		f.log.Error().Err(err).Str("subject", d.Subject).Str("stream", f.names.RetryStream()).
			Msg("notify: the next attempt could not be scheduled; the event waits in the consumer instead")
		_ = a.msg.NakWithDelay(delay)
		return
	}
	if err := a.msg.Ack(); err != nil {
		f.log.Warn().Err(err).Str("subject", d.Subject).Msg("notify: acknowledging an event whose next attempt is scheduled")
	}
}

// retryKey is the token of an event's id in the subject of its next
// attempt's schedule: one schedule per event and channel, whatever the
// id holds.
func retryKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
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

func (f *Follower) deadLetter(a attempt, d Delivery, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	detail := fmt.Sprintf("%s gave up after %d attempt(s): %v", f.cfg.Name, d.Attempt, cause)
	msg := a.msg
	if a.retried {
		msg = asEvent{Msg: a.msg, a: a, stream: f.names.EventStream(), consumer: f.cfg.Name}
	}
	if err := bus.DeadLetter(ctx, f.js, f.names, msg, ReasonUndeliverable, detail); err != nil {
		f.log.Error().Err(err).Str("subject", d.Subject).Msg("notify: dead-lettering an undeliverable event; it will be tried again")
		_ = a.msg.NakWithDelay(f.cfg.MaxRetry)
		return
	}
	f.observe(d, cause, true)
	f.log.Error().Err(cause).Str("subject", d.Subject).Int("attempt", d.Attempt).Msg("notify: event dead-lettered undeliverable")
	_ = a.msg.Term()
}

// asEvent is an attempt of the retry stream as the event it carries, for
// its dead letter: the event's subject, its sequence in the events stream,
// the channel's consumer, and the event's headers alone; so that the dead
// letter is the one the first attempt would have made.
type asEvent struct {
	jetstream.Msg
	a                attempt
	stream, consumer string
}

func (e asEvent) Subject() string { return e.a.subject }

func (e asEvent) Headers() nats.Header {
	h := nats.Header{}
	for k, vs := range e.Msg.Headers() {
		if strings.HasPrefix(k, headerRetryPrefix) || strings.HasPrefix(k, "Nats-Schedule") || k == "Nats-Scheduler" {
			continue
		}
		h[k] = vs
	}
	if id := e.a.msgID(); id != "" {
		h.Set(jetstream.MsgIDHeader, id)
	}
	return h
}

func (e asEvent) Metadata() (*jetstream.MsgMetadata, error) {
	md, err := e.Msg.Metadata()
	if err != nil {
		return nil, err
	}
	out := *md
	out.Stream, out.Consumer = e.stream, e.consumer
	out.Sequence.Stream = e.a.seq
	return &out, nil
}

func (f *Follower) observe(d Delivery, err error, dead bool) {
	if f.cfg.Observe != nil {
		f.cfg.Observe(d, err, dead)
	}
}
