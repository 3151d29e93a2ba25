// Package client speaks Interlock's protocol from Go: it publishes start,
// resume, assign and cancel CloudEvents to the inbound subjects, waits for
// the event that settles them, and reads checkpoints, the pending index and the
// audit stream, whose records [Client.VerifyAudit] checks: their
// signatures by the deployment's audit key, and their hash chain. The
// `interlock` command's client subcommands are built on it; a Go bot or
// service can use it the same way.
//
// A call learns its outcome from the events of the deployment, believing
// only what the deployment made. The workers sign each event that settles
// a command with the deployment's audit key (protocol.HeaderEventSignature,
// over the event's subject and body); a client that can read the audit
// keys (<prefix>_config, audit.keys) holds, with every copy made of it
// ([Client.As], [Client.WithWait], [Client.WithSource]), one core
// subscription to the live events (<prefix>.ev.>) while any of its calls
// waits (and 2 s after), and a signed event that names the call's command
// (the causationid extension, or a refusal's eventId) is its outcome at
// once, with no read. While it is subscribed the connection receives
// every event of the deployment; a process that sends from many places on
// one connection makes one client and copies of it. A client that cannot
// read the keys subscribes to the stored events instead (the events
// stream republishes each event, once stored, on <prefix>.stored.ev.>,
// where no client may publish), and believes what comes there; where the
// stream does not republish (a deployment that predates it) or the
// connection may not subscribe there, to the live events, believing an
// unsigned event that names its command once one direct get reads the
// same bytes back from the events stream; a connection that may subscribe
// to neither follows each call's run on a subscription of its own. Every
// call also reads its run's events from the stream every 500 ms, in case
// a message was lost.
//
// The package stands on [events], [wire] and nats.go alone: a program built
// on it carries neither a NATS server nor the engine.
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

	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// DefaultWait is how long a call waits for the event that settles it.
const DefaultWait = 10 * time.Second

// MaxNameLen is the longest flow name or run id.
const MaxNameLen = 128

// How often a call polls: the checkpoint, for a resume whose idempotency
// key may already be applied; the events stream, for the interrupted event
// a checkpoint names.
const (
	firstPoll = 25 * time.Millisecond
	maxPoll   = time.Second
)

// Errors of a [Client].
var (
	// ErrNoAnswer: no settling event came in time. The command stays queued
	// in the inbound stream and is applied when a worker runs.
	ErrNoAnswer = errors.New("client: no answer from Interlock in time")
	// ErrNotFound: no checkpoint for that run.
	ErrNotFound = errors.New("client: run not found")
	// ErrNotWaiting: the run is not waiting on an interrupt.
	ErrNotWaiting = errors.New("client: run not waiting")
	// ErrTooLarge: the command, as a message, is larger than the NATS
	// server takes in one (its max_payload). Nothing was sent; sending it
	// again as it is fails the same way.
	ErrTooLarge = errors.New("client: command too large for one NATS message")
)

// Client talks to one Interlock deployment.
type Client struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	names  wire.Names
	source string
	// by is the person the client acts for, named on what it sends.
	by string
	// vouch, if set, vouches for the caller on every command sent.
	vouch *vouching
	wait  time.Duration
	// hub wakes calls on the live events of their runs, through one
	// subscription shared by the client and its copies.
	hub *hub
}

// As returns a copy of the client that acts for the person named by: the
// name sent as by on starts, cancels and reannounces, and as approver on
// resumes that name none, so that the audit names the same person the
// same way whatever they do (a surface that authenticated them vouches
// for resumes with [Client.ResumeAs]). Without it, Interlock names the
// client's source.
func (c *Client) As(by string) *Client {
	cp := *c
	cp.by = by
	return &cp
}

// WithSource returns a copy of the client that names source as the
// CloudEvents source of what it sends. Copies share the client's one
// subscription to the deployment's events, so a process that sends from
// several sources on one connection makes one client with [New] and
// copies of it, rather than a client per source.
func (c *Client) WithSource(source string) *Client {
	cp := *c
	cp.source = cmp.Or(source, "/interlock/client")
	return &cp
}

// New returns a client on a connection. source is the CloudEvents source
// of what it sends ("/cli/ann"); wait bounds how long calls wait for their
// outcome (0 for DefaultWait).
func New(nc *nats.Conn, js jetstream.JetStream, names wire.Names, source string, wait time.Duration) *Client {
	if names.Prefix == "" {
		names.Prefix = wire.DefaultPrefix
	}
	c := &Client{nc: nc, js: js, names: names, source: cmp.Or(source, "/interlock/client"), wait: cmp.Or(wait, DefaultWait)}
	c.hub = newHub(nc, names, c.AuditKeys)
	return c
}

// Event is the outcome of a command: the event Interlock published, or, for
// a repeat it acknowledged without effect, the run as it stands.
type Event struct {
	// Kind is the last token of the subject (protocol.EventInterrupted), or ""
	// for a repeat.
	Kind string
	// Event is the CloudEvent.
	Event events.Event
	// Repeat is set when Interlock acknowledged the command as a repeat of
	// one it had already applied (the same idempotency key or event id):
	// it had no effect and published nothing. Current then holds the run.
	Repeat bool
	// Current is the run's checkpoint as it stands, set with Repeat.
	Current *protocol.Checkpoint
}

// Decode decodes the event's data into v.
func (e Event) Decode(v any) error { return json.Unmarshal(e.Event.Data(), v) }

// settles reports whether an event of kind ends the wait for a command
// of verb: an assign is settled by assigned or refused, every other
// command by the event that says where the run now stands.
func settles(verb, kind string) bool {
	switch verb {
	case protocol.VerbAssign:
		return kind == protocol.EventAssigned || kind == protocol.EventRefused
	case protocol.VerbConsume:
		return kind == protocol.EventConsumed || kind == protocol.EventRefused
	}
	switch kind {
	case protocol.EventInterrupted, protocol.EventCompleted, protocol.EventFailed, protocol.EventCancelled,
		protocol.EventExpired, protocol.EventRefused, protocol.EventAssigned:
		return true
	}
	return false
}

// CheckName reports whether s is a valid flow name or run id (see
// [protocol.CheckName]); the error starts "client: ". what names the thing
// checked in the error ("flow", "run").
func CheckName(what, s string) error {
	if err := protocol.CheckName(what, s); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	return nil
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
	return c.send(ctx, flow, run, "start", protocol.TypeStart, protocol.Start{State: state, Origin: origin, By: c.by}, "", nil)
}

// Resume sends a resume for a run and returns the event that settles it:
// interrupted (a re-ask or the next interrupt), completed, failed or
// refused. A resume whose IdempotencyKey was already applied returns an
// Event with Repeat set and the run as it stands.
//
// A client made by [Client.Vouched] sends it vouched for its caller, with
// no token and no approver: it names the request pending now when r names
// none.
func (c *Client) Resume(ctx context.Context, flow, run string, r protocol.Resume) (Event, error) {
	if c.vouch != nil {
		return c.vouch.resume(ctx, c, flow, run, r)
	}
	r.Approver = cmp.Or(r.Approver, c.by)
	return c.send(ctx, flow, run, "resume", protocol.TypeResume, r, r.IdempotencyKey, nil)
}

// Reannounce asks for a waiting run's pending interrupt to be announced
// again, with a fresh token (the previous one is retired), and returns the
// new interrupted event, or refused. Use it when the run's interrupted
// event is no longer in the events stream.
func (c *Client) Reannounce(ctx context.Context, flow, run, reason string) (Event, error) {
	return c.send(ctx, flow, run, "reannounce", protocol.TypeReannounce, protocol.Reannounce{Reason: reason, By: c.by}, "", nil)
}

// Cancel cancels a waiting run and returns the cancelled or refused event.
func (c *Client) Cancel(ctx context.Context, flow, run, reason string) (Event, error) {
	return c.send(ctx, flow, run, "cancel", protocol.TypeCancel, protocol.Cancel{Reason: reason, By: cmp.Or(c.by, c.source)}, "", nil)
}

// send publishes a command and waits for the event that settles it. With
// an idempotency key, a command Interlock will absorb as a repeat (the run
// has applied the key, through another message) is reported at once with
// the run as it stands: no event would come.
func (c *Client) send(ctx context.Context, flow, run, verb, typ string, data any, key string, header func(msg *nats.Msg, id string)) (Event, error) {
	return c.sendID(ctx, randomHex(16), flow, run, verb, typ, data, key, header)
}

// sendID is send with the command's event id, its Nats-Msg-Id too: a
// command sent again with the id of one JetStream stored is dropped as
// its duplicate, and the wait finds the first one's outcome.
func (c *Client) sendID(ctx context.Context, id, flow, run, verb, typ string, data any, key string, header func(msg *nats.Msg, id string)) (Event, error) {
	if err := CheckName("flow", flow); err != nil {
		return Event{}, err
	}
	if err := CheckName("run", run); err != nil {
		return Event{}, err
	}
	ev, err := events.New(id, c.source, typ, run, time.Now().UTC(), data)
	if err != nil {
		return Event{}, err
	}
	body, err := events.Encode(ev)
	if err != nil {
		return Event{}, err
	}
	w := c.hub.watch(ctx, flow, run, verb)
	if w == nil {
		return c.sendFollowing(ctx, flow, run, verb, id, body, key, header)
	}
	defer c.hub.unwatch(w)
	if err := c.publish(ctx, c.command(flow, verb, id, body, header), verb); err != nil {
		return Event{}, err
	}
	wt := c.startWait(ctx, key)
	defer wt.stop()
	// An event of the run that names this command is its outcome once
	// the events stream holds it: a stored event at once; a live one
	// (without the stored events) once read back, byte for byte, at
	// once and again, sooner than the stream is read, until it is stored
	// (the server may hand it to subscribers before it has stored it).
	var cand []*nats.Msg
	backoff := time.Duration(0)
	recheck := time.NewTimer(time.Hour)
	recheck.Stop()
	defer recheck.Stop()
	s := &scan{g: directGet{nc: c.nc, subject: "$JS.API.DIRECT.GET." + c.names.EventStream(), filter: c.names.Event(flow, run, ">"), what: "stream " + c.names.EventStream()}, next: 1}
	for {
		select {
		case m := <-w.live:
			ev, ok, mine, err := c.believe(ctx, m, verb, flow, run, id, key)
			if err != nil {
				return Event{}, err
			}
			if ok {
				return ev, nil
			}
			if mine {
				cand = append(cand, m)
				backoff = recheckFirst
				recheck.Reset(backoff)
			}
		case <-recheck.C:
			for _, m := range cand {
				ev, ok, _, err := c.believe(ctx, m, verb, flow, run, id, key)
				if err != nil {
					return Event{}, err
				}
				if ok {
					return ev, nil
				}
			}
			backoff = min(2*backoff, recheckMax)
			recheck.Reset(backoff)
		case <-wt.again.C:
			// Live messages may be lost (a reconnection, a slow
			// subscriber): read the run's events from the stream.
			ev, ok, err := c.scanOutcome(ctx, s, verb, flow, run, id)
			if err != nil {
				return Event{}, err
			}
			if ok {
				return ev, nil
			}
			wt.again.Reset(followPoll)
		case <-wt.timeout.C:
			return Event{}, noAnswer(verb, flow, run, id)
		case <-ctx.Done():
			return Event{}, fmt.Errorf("client: waiting for the outcome of %s %s.%s: %w", verb, flow, run, ctx.Err())
		case <-wt.tick.C:
			if ev, ok := c.absorbedNow(ctx, wt, flow, run, key, id); ok {
				return ev, nil
			}
		}
	}
}

// How soon a call reads a live event of its command back from the stream
// again, when it was not stored yet: first after recheckFirst, then twice
// as late each time, up to recheckMax.
const (
	recheckFirst = time.Millisecond
	recheckMax   = 50 * time.Millisecond
)

// command returns the message of a command.
func (c *Client) command(flow, verb, id string, body []byte, header func(msg *nats.Msg, id string)) *nats.Msg {
	msg := nats.NewMsg(c.names.In(flow, verb))
	if strings.Contains(verb, ".") {
		msg.Subject = c.names.In(flow, "") + verb
	}
	msg.Data = body
	msg.Header.Set("Content-Type", events.Structured)
	msg.Header.Set(jetstream.MsgIDHeader, id)
	if header != nil {
		header(msg, id)
	}
	c.vouch.sign(msg, id)
	return msg
}

// sendFollowing publishes a command and waits for the event that settles
// it, following the run on a subscription of its own from the last event
// the stream holds: the way of a connection that may not subscribe to
// every event subject.
func (c *Client) sendFollowing(ctx context.Context, flow, run, verb, id string, body []byte, key string, header func(msg *nats.Msg, id string)) (Event, error) {
	f, err := c.follow(ctx, c.names.Event(flow, run, ">"), func(kind string) bool { return settles(verb, kind) })
	if err != nil {
		return Event{}, err
	}
	defer f.stop()
	if err := c.publish(ctx, c.command(flow, verb, id, body, header), verb); err != nil {
		return Event{}, err
	}
	wt := c.startWait(ctx, key)
	defer wt.stop()
	// The follower subscribed before the command was published, so every
	// settling event stored from then on wakes it: the stream is read only
	// once woken, or every followPoll in case a live message was lost.
	read := false
	for {
		if read {
			ev, ok, err := c.outcome(ctx, f, verb, flow, run, id, key)
			if err != nil {
				return Event{}, err
			}
			if ok {
				return ev, nil
			}
		}
		read = true
		wt.again.Reset(followPoll)
		select {
		case <-f.wake:
		case <-wt.again.C:
		case <-wt.timeout.C:
			return Event{}, noAnswer(verb, flow, run, id)
		case <-ctx.Done():
			return Event{}, fmt.Errorf("client: waiting for the outcome of %s %s.%s: %w", verb, flow, run, ctx.Err())
		case <-wt.tick.C:
			if ev, ok := c.absorbedNow(ctx, wt, flow, run, key, id); ok {
				return ev, nil
			}
		}
	}
}

// wait holds the timers of a call waiting for its outcome: its deadline
// (the client's wait, or the context's if sooner), the poll of whether
// the run absorbed the call's idempotency key through another command
// (none without a key), and the next read of the run's events from the
// stream.
type wait struct {
	timeout, tick, again *time.Timer
	poll                 time.Duration
}

// startWait starts the timers of a call with idempotency key.
func (c *Client) startWait(ctx context.Context, key string) *wait {
	deadline := time.Now().Add(c.wait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	wt := &wait{timeout: time.NewTimer(time.Until(deadline)), poll: firstPoll, again: time.NewTimer(followPoll)}
	wt.tick = time.NewTimer(wt.poll)
	if key == "" {
		wt.tick.Stop()
	}
	return wt
}

func (wt *wait) stop() {
	wt.timeout.Stop()
	wt.tick.Stop()
	wt.again.Stop()
}

// absorbedNow is [Client.absorbed] when the poll's timer fires; it sets
// the next poll, twice as late, up to maxPoll.
func (c *Client) absorbedNow(ctx context.Context, wt *wait, flow, run, key, id string) (Event, bool) {
	if ev, ok := c.absorbed(ctx, flow, run, key, id); ok {
		return ev, true
	}
	wt.poll = min(2*wt.poll, maxPoll)
	wt.tick.Reset(wt.poll)
	return Event{}, false
}

// noAnswer is the error of a call whose outcome did not come in time.
func noAnswer(verb, flow, run, id string) error {
	return fmt.Errorf("%w: %s %s.%s was queued as event %s; is `interlock serve` running?", ErrNoAnswer, verb, flow, run, id)
}

// outcome reads the events the follower has not read yet and returns the
// first that settles the command with event id (and idempotency key, if
// any) of verb, or ok false when none does yet: the first that names the
// command as its cause, or, for an event of a worker that predates the
// causation extension, the first once the run's checkpoint has applied
// the command.
func (c *Client) outcome(ctx context.Context, f *follower, verb, flow, run, id, key string) (_ Event, ok bool, _ error) {
	for {
		m, ok, err := f.poll(ctx)
		if err != nil {
			return Event{}, false, fmt.Errorf("client: waiting for the outcome of %s %s.%s: %w", verb, flow, run, err)
		}
		if !ok {
			return Event{}, false, nil
		}
		kind := m.subject[strings.LastIndex(m.subject, ".")+1:]
		if !settles(verb, kind) {
			continue
		}
		out, err := events.Decode(m.header, m.data)
		if err != nil {
			return Event{}, false, fmt.Errorf("client: decoding %s: %w", m.subject, err)
		}
		mine, unknown := causedBy(kind, out, id)
		switch {
		case !unknown && !mine:
			continue // another command's outcome
		case unknown && kind != protocol.EventRefused && !c.applied(ctx, flow, run, cmp.Or(key, id)):
			// Another command's outcome: this one, refused or not yet
			// applied, has its own event to come. The checkpoint names
			// the command before its events are published.
			continue
		}
		return Event{Kind: kind, Event: out}, true, nil
	}
}

// publish publishes a command to the inbound stream. A command larger than
// the server takes is ErrTooLarge, saying by how much.
func (c *Client) publish(ctx context.Context, msg *nats.Msg, verb string) error {
	size := msg.Size() - len(msg.Subject) - len(msg.Reply)
	if limit := c.nc.MaxPayload(); limit > 0 && int64(size) > limit {
		return fmt.Errorf("%w: the %s is %d bytes as a message, more than the %d bytes the NATS server takes in one (max_payload); send less data (keep large data out of the state, origin, answers and arguments: store it elsewhere and send a reference), or raise the server's max_payload", ErrTooLarge, verb, size, limit)
	}
	_, err := c.js.PublishMsg(ctx, msg)
	if errors.Is(err, nats.ErrMaxPayload) {
		return fmt.Errorf("%w: the %s is %d bytes as a message, more than the NATS server takes in one (max_payload); send less data, or raise the server's max_payload", ErrTooLarge, verb, size)
	}
	if err != nil {
		return fmt.Errorf("client: publishing %s: %w", msg.Subject, err)
	}
	return nil
}

// applied reports whether the run has applied the command with key (its
// idempotency key, or its event id), so that an event of the run can be
// its outcome: the checkpoint names the command before the events of its
// transition are published. It reads the checkpoint with one direct get
// of the bucket's stream. A checkpoint that cannot be read does not hold
// the outcome back.
func (c *Client) applied(ctx context.Context, flow, run, key string) bool {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	bucket := c.names.RunsBucket()
	g := directGet{nc: c.nc, subject: "$JS.API.DIRECT.GET.KV_" + bucket, filter: "$KV." + bucket + "." + flow + "." + run, what: "bucket " + bucket}
	m, err := g.lastMsg(ctx)
	if err != nil || m == nil || m.marker {
		return true
	}
	// Only what HasApplied needs, and what tells a checkpoint document
	// (DecodeCheckpoint's check): a checkpoint is a few KB, and this
	// runs for every outcome.
	var cp struct {
		Flow    string   `json:"flow"`
		Run     string   `json:"run"`
		Status  string   `json:"status"`
		Applied []string `json:"applied"`
	}
	if json.Unmarshal(m.data, &cp) != nil || cp.Flow == "" || cp.Run == "" || cp.Status == "" {
		return true
	}
	return protocol.Checkpoint{Applied: cp.Applied}.HasApplied(key)
}

// absorbed reports whether the run has applied idempotency key through a
// command other than event id: Interlock acknowledges event id as a repeat
// and publishes nothing. It returns the run as it stands.
func (c *Client) absorbed(ctx context.Context, flow, run, key, id string) (Event, bool) {
	cp, err := c.Checkpoint(ctx, flow, run)
	if err != nil || !cp.HasApplied(key) || cp.Cause != nil && cp.Cause.ID == id {
		return Event{}, false
	}
	return Event{Repeat: true, Current: &cp}, true
}

// LastInterrupt returns the pending interrupt of a waiting run as its
// latest interrupted event announced it, with its resume token. It reads
// the checkpoint first, and waits (up to the client's wait) until the
// events stream holds the interrupted event of the request the checkpoint
// names, so that it never returns an earlier, used token. A run that is not
// waiting, or whose event has aged out of the stream, is an error saying
// what to do.
func (c *Client) LastInterrupt(ctx context.Context, flow, run string) (protocol.Interrupted, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	cp, err := c.Checkpoint(ctx, flow, run)
	if err != nil {
		return protocol.Interrupted{}, err
	}
	if !cp.Waiting() || cp.Interrupt == nil {
		return protocol.Interrupted{}, fmt.Errorf("%w: run %s of flow %s is %s, not waiting on an interrupt", ErrNotWaiting, run, flow, cp.Status)
	}
	s, err := c.js.Stream(ctx, c.names.EventStream())
	if err != nil {
		return protocol.Interrupted{}, fmt.Errorf("client: binding %s (has `interlock serve` run once?): %w", c.names.EventStream(), err)
	}
	want := cp.Interrupt.RequestID
	deadline := time.Now().Add(c.wait)
	poll := firstPoll
	for {
		in, err := c.lastInterrupted(ctx, s, flow, run)
		switch {
		case err == nil && in.RequestID == want:
			return in, nil
		case err != nil && !errors.Is(err, jetstream.ErrMsgNotFound):
			return protocol.Interrupted{}, err
		case time.Now().After(deadline):
			return protocol.Interrupted{}, fmt.Errorf("client: run %s of flow %s waits on request %s, but %s holds no interrupted event for it (older than the stream keeps events?); announce it again with `interlock reannounce %s %s`, or pass the token with --token", run, flow, want, c.names.EventStream(), flow, run)
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return protocol.Interrupted{}, ctx.Err()
		case <-t.C:
		}
		poll = min(2*poll, maxPoll)
	}
}

// lastInterrupted reads the last interrupted event of a run.
func (c *Client) lastInterrupted(ctx context.Context, s jetstream.Stream, flow, run string) (protocol.Interrupted, error) {
	m, err := s.GetLastMsgForSubject(ctx, c.names.Event(flow, run, protocol.EventInterrupted))
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return protocol.Interrupted{}, err
		}
		return protocol.Interrupted{}, fmt.Errorf("client: reading the last interrupt of %s.%s: %w", flow, run, err)
	}
	ev, err := events.Decode(m.Header, m.Data)
	if err != nil {
		return protocol.Interrupted{}, err
	}
	var in protocol.Interrupted
	if err := json.Unmarshal(ev.Data(), &in); err != nil {
		return protocol.Interrupted{}, fmt.Errorf("client: interrupted event of %s.%s: %w", flow, run, err)
	}
	return in, nil
}

func (c *Client) bucket(ctx context.Context, name string) (jetstream.KeyValue, error) {
	b, err := c.js.KeyValue(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("client: binding bucket %s (has `interlock serve` run once, with the same --prefix?): %w", name, err)
	}
	return b, nil
}

// bounded bounds a read by twice the client's wait (DefaultWait when it
// has none), or by ctx's deadline when that is sooner: a read whose
// request or reply is lost (the server was killed in between) would
// otherwise wait as long as ctx allows, for ever without a deadline.
func (c *Client) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 2*cmp.Or(c.wait, DefaultWait))
}

// Checkpoint returns a run's checkpoint document, with its number in
// Checkpoint. For a run that does not exist it returns an error wrapping
// [ErrNotFound] that says whether the flow has any run at all.
func (c *Client) Checkpoint(ctx context.Context, flow, run string) (protocol.Checkpoint, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	if err := CheckName("flow", flow); err != nil {
		return protocol.Checkpoint{}, err
	}
	if err := CheckName("run", run); err != nil {
		return protocol.Checkpoint{}, err
	}
	runs, err := c.bucket(ctx, c.names.RunsBucket())
	if err != nil {
		return protocol.Checkpoint{}, err
	}
	key := flow + "." + run
	e, err := runs.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return protocol.Checkpoint{}, c.notFound(ctx, flow, run)
	}
	if err != nil {
		return protocol.Checkpoint{}, fmt.Errorf("client: reading checkpoint %s: %w", key, err)
	}
	cp, err := protocol.DecodeCheckpoint(e.Value(), e.Revision())
	if err != nil {
		return protocol.Checkpoint{}, fmt.Errorf("client: %s in %s: %w", key, c.names.RunsBucket(), err)
	}
	return cp, nil
}

// notFound says that a run does not exist, and whether its flow has any
// run: one get of the first message under the flow's keys, however many
// runs there are.
func (c *Client) notFound(ctx context.Context, flow, run string) error {
	s, err := c.js.Stream(ctx, "KV_"+c.names.RunsBucket())
	if err == nil {
		_, err = s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject("$KV."+c.names.RunsBucket()+"."+flow+".*"))
		switch {
		case err == nil:
			return fmt.Errorf("%w: there is no run %s of flow %s; `interlock pending --flow %s` lists its waiting runs", ErrNotFound, run, flow, flow)
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return fmt.Errorf("%w: there is no run %s of flow %s, and no run of a flow named %s at all: check the flow's name", ErrNotFound, run, flow, flow)
		}
	}
	return fmt.Errorf("%w: there is no run %s of flow %s", ErrNotFound, run, flow)
}

// FlowInfo returns what the workers serving flow say of it (see
// [protocol.FlowInfo]), and false when they have said nothing: the flow
// is not served, or by workers that predate flow descriptions.
func (c *Client) FlowInfo(ctx context.Context, flow string) (protocol.FlowInfo, bool, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	if err := CheckName("flow", flow); err != nil {
		return protocol.FlowInfo{}, false, err
	}
	bucket := c.names.ConfigBucket()
	b, err := c.bucket(ctx, bucket)
	if err != nil {
		return protocol.FlowInfo{}, false, err
	}
	key := protocol.FlowKey(flow)
	e, err := b.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return protocol.FlowInfo{}, false, nil
	}
	if err != nil {
		return protocol.FlowInfo{}, false, fmt.Errorf("client: reading %s in %s: %w", key, bucket, err)
	}
	fi, err := protocol.DecodeFlowInfo(e.Value())
	if err != nil {
		return protocol.FlowInfo{}, false, fmt.Errorf("client: %s in %s (revision %d): %w", key, bucket, e.Revision(), err)
	}
	return fi, true, nil
}

// LastEvent returns the run's latest event of kind (protocol.EventCancelled,
// ...) as the events stream holds it; an error wrapping [ErrNotFound]
// when the stream holds none.
func (c *Client) LastEvent(ctx context.Context, flow, run, kind string) (events.Event, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	s, err := c.js.Stream(ctx, c.names.EventStream())
	if err != nil {
		return events.Event{}, fmt.Errorf("client: binding %s: %w", c.names.EventStream(), err)
	}
	m, err := s.GetLastMsgForSubject(ctx, c.names.Event(flow, run, kind))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return events.Event{}, fmt.Errorf("%w: no %s event of run %s of flow %s", ErrNotFound, kind, run, flow)
	}
	if err != nil {
		return events.Event{}, fmt.Errorf("client: reading the last %s event of %s.%s: %w", kind, flow, run, err)
	}
	return events.Decode(m.Header, m.Data)
}
