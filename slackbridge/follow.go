package slackbridge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/slack-go/slack"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
)

// applyTimeout bounds the handling of one event (a few Slack calls and
// bucket writes).
const applyTimeout = 30 * time.Second

// follow handles the events of the bridge's consumer, one at a time, until
// the iterator stops.
func (b *Bridge) follow(it jetstream.MessagesContext) {
	for {
		msg, err := it.Next()
		switch {
		case errors.Is(err, jetstream.ErrMsgIteratorClosed), b.work.Err() != nil:
			return
		case err != nil:
			// Missed heartbeats and the like: the iterator carries on.
			b.log.Warn().Err(err).Msg("slack bridge: following events")
			select {
			case <-b.work.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		b.handle(msg)
	}
}

// handle applies one event to Slack, and acknowledges it once Slack and
// the bucket hold the result; a failure leaves it to be delivered again.
func (b *Bridge) handle(msg jetstream.Msg) {
	subject := msg.Subject()
	kind := subject[strings.LastIndex(subject, ".")+1:]
	ev, err := events.Decode(msg.Headers(), msg.Data())
	if err != nil {
		// Poison: dead-lettered, as every channel does with what it
		// cannot read, so that an operator sees it; tried again only if
		// the dead letter cannot be written.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(b.work), 10*time.Second)
		defer cancel()
		if dlErr := bus.DeadLetter(ctx, b.port.JetStream(), b.port.Names(), msg, notify.ReasonUndeliverable,
			fmt.Sprintf("the slack bridge cannot read the event: %v", err)); dlErr != nil {
			b.log.Error().Err(dlErr).Str("subject", subject).Msg("slack bridge: dead-lettering an event that does not decode; it will be tried again")
			_ = msg.NakWithDelay(time.Minute)
			return
		}
		b.log.Error().Err(err).Str("subject", subject).Msg("slack bridge: an event that does not decode is dead-lettered")
		_ = msg.Term()
		return
	}
	ctx, cancel := context.WithTimeout(b.work, applyTimeout)
	err = b.apply(ctx, kind, ev)
	cancel()
	if err != nil {
		delivered := uint64(1)
		if md, mdErr := msg.Metadata(); mdErr == nil {
			delivered = md.NumDelivered
		}
		delay := retryDelay(delivered, err)
		b.log.Warn().Err(err).Str("subject", subject).Str("ce_id", ev.ID()).Uint64("delivered", delivered).
			Dur("retry_in", delay).Msg("slack bridge: event not applied; it will be delivered again")
		_ = msg.NakWithDelay(delay)
		return
	}
	if err := msg.Ack(); err != nil {
		b.log.Warn().Err(err).Str("subject", subject).Msg("slack bridge: acknowledging an event")
	}
}

// retryDelay is how long a failed event waits: what Slack asks when it
// limits the rate, else a back-off.
func retryDelay(delivered uint64, err error) time.Duration {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) && rl.RetryAfter > 0 {
		return rl.RetryAfter
	}
	steps := []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}
	if delivered > uint64(len(steps)) {
		return time.Minute
	}
	return steps[delivered-1]
}

// apply makes Slack show one event.
func (b *Bridge) apply(ctx context.Context, kind string, ev events.Event) error {
	at := ev.Time().UTC()
	switch kind {
	case protocol.EventInterrupted:
		var in protocol.Interrupted
		if err := json.Unmarshal(ev.Data(), &in); err != nil {
			return fmt.Errorf("decoding %s: %w", kind, err)
		}
		return b.post(ctx, in, at)
	case protocol.EventResumed:
		var r protocol.Resumed
		if err := json.Unmarshal(ev.Data(), &r); err != nil {
			return fmt.Errorf("decoding %s: %w", kind, err)
		}
		return b.settle(ctx, r.Flow, r.Run, r.RequestID, func(rec record) string {
			var votes []protocol.Vote
			if rec.In != nil {
				votes = rec.In.Votes
			}
			return resumedOutcome(r, votes, at)
		})
	case protocol.EventExpired:
		var x protocol.Expired
		if err := json.Unmarshal(ev.Data(), &x); err != nil {
			return fmt.Errorf("decoding %s: %w", kind, err)
		}
		return b.settle(ctx, x.Flow, x.Run, x.RequestID, func(record) string {
			return ":hourglass: Expired: no decision by the deadline · " + slackDate(at)
		})
	case protocol.EventCancelled:
		var c protocol.Cancelled
		if err := json.Unmarshal(ev.Data(), &c); err != nil {
			return fmt.Errorf("decoding %s: %w", kind, err)
		}
		return b.settle(ctx, c.Flow, c.Run, "", func(record) string { return cancelledOutcome(c, at) })
	case protocol.EventAssigned:
		var a protocol.Assigned
		if err := json.Unmarshal(ev.Data(), &a); err != nil {
			return fmt.Errorf("decoding %s: %w", kind, err)
		}
		return b.assigned(ctx, a)
	case protocol.EventVoted:
		var v protocol.Voted
		if err := json.Unmarshal(ev.Data(), &v); err != nil {
			return fmt.Errorf("decoding %s: %w", kind, err)
		}
		return b.change(ctx, v.Flow, v.Run, v.RequestID, func(in *protocol.Interrupted) { in.Votes = v.Votes })
	case protocol.EventReminded:
		var r protocol.Reminded
		if err := json.Unmarshal(ev.Data(), &r); err != nil {
			return fmt.Errorf("decoding %s: %w", kind, err)
		}
		return b.remind(ctx, r, ev.ID())
	}
	return nil
}

// post posts an interrupt, once: a message already posted for its request
// (an event delivered again after a restart) is left alone. An approval
// asked again after a vote short of its quorum keeps its message, now
// with the new request. A message of an earlier request of the run
// (escalated, or asked again) is closed.
func (b *Bridge) post(ctx context.Context, in protocol.Interrupted, at time.Time) error {
	key := recordKey(in.Flow, in.Run)
	rec, rev, err := b.store.Get(ctx, key)
	if err != nil {
		return err
	}
	if rev != 0 && rec.RequestID == in.RequestID {
		return nil
	}
	in.ResumeToken = ""
	conv, err := b.conversation(ctx, in)
	if err != nil {
		return err
	}
	if rev != 0 && !rec.Closed && askedAgainAfterVote(rec, in) {
		rec.RequestID, rec.In, rec.Conv = in.RequestID, &in, conv
		if err := b.redraw(ctx, rec, rec.messages()); err != nil {
			return err
		}
		return b.store.Put(ctx, key, rec, rev)
	}
	if rev != 0 && !rec.Closed {
		outcome := ":leftwards_arrow_with_hook: Asked again in a newer message · " + slackDate(at)
		if protocol.RoleRestricted(in.Kind) && rec.Role != "" && in.ApproverRole != rec.Role {
			outcome = fmt.Sprintf(":arrow_double_up: Escalated to *%s* · %s", safe(in.ApproverRole), slackDate(at))
		}
		if err := b.update(ctx, rec, outcome); err != nil {
			return err
		}
	}
	channel, thread := b.target(in)
	if channel == "" {
		b.log.Warn().Str("flow", in.Flow).Str("run", in.Run).Str("approver_role", in.ApproverRole).
			Msg("slack bridge: no channel for this interrupt (map its approver role, set a default channel, or start the run with origin.slack)")
		return nil
	}
	opts := []slack.MsgOption{slack.MsgOptionText(fallbackText(in), true), slack.MsgOptionBlocks(openBlocks(in, card{conv: conv}, refOf(in))...)}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	ch, ts, err := b.api.PostMessageContext(ctx, channel, opts...)
	if err != nil {
		return fmt.Errorf("posting to %s (chat.postMessage): %w", channel, err)
	}
	next := record{Flow: in.Flow, Run: in.Run, RequestID: in.RequestID, Kind: in.Kind, Role: in.ApproverRole,
		Channel: ch, TS: ts, Thread: thread, In: &in, Conv: conv}
	return b.store.Put(ctx, key, next, rev)
}

// askedAgainAfterVote reports whether in is the approval of rec's
// message asked again after a vote: the same node and role, with votes.
func askedAgainAfterVote(rec record, in protocol.Interrupted) bool {
	return rec.In != nil && len(in.Votes) > 0 && rec.Kind == in.Kind && rec.In.Node == in.Node && rec.Role == in.ApproverRole
}

// refOf is the ref of an interrupt's buttons.
func refOf(in protocol.Interrupted) ref {
	return ref{Flow: in.Flow, Run: in.Run, RequestID: in.RequestID, Kind: in.Kind, Role: in.ApproverRole, Why: in.RejectReasonRequired}
}

// conversation is the conversation behind a gate run's call or an ask,
// its last messages, or nil for another run.
func (b *Bridge) conversation(ctx context.Context, in protocol.Interrupted) (*talk, error) {
	if in.Flow != protocol.GateFlow && in.Flow != protocol.AskFlow {
		return nil, nil
	}
	cp, err := b.port.Client("/slack").Checkpoint(ctx, in.Flow, in.Run)
	if err != nil {
		return nil, fmt.Errorf("reading the conversation of %s %s: %w", in.Flow, in.Run, err)
	}
	c, ok := cp.Conversation()
	if !ok {
		return nil, nil
	}
	t := &talk{ID: c.ID, Agent: c.Agent, Messages: c.Messages}
	if n := len(c.Messages); n > maxConversation {
		t.Messages, t.Earlier = c.Messages[n-maxConversation:], n-maxConversation
	}
	return t, nil
}

// change applies a voted event to the open message of request
// requestID, and shows it again.
func (b *Bridge) change(ctx context.Context, flow, run, requestID string, apply func(in *protocol.Interrupted)) error {
	key := recordKey(flow, run)
	rec, rev, err := b.store.Get(ctx, key)
	if err != nil || rev == 0 || rec.Closed || rec.In == nil || rec.RequestID != requestID {
		return err
	}
	apply(rec.In)
	if err := b.redraw(ctx, rec, rec.messages()); err != nil {
		return err
	}
	return b.store.Put(ctx, key, rec, rev)
}

// assigned applies an assigned event to the open message of its request
// and shows it again, saying who delegated it to whom. A delegation to a
// role that has a channel of its own also posts the card there, once,
// for the role's holders to see; the copy is updated with the message.
func (b *Bridge) assigned(ctx context.Context, a protocol.Assigned) error {
	key := recordKey(a.Flow, a.Run)
	rec, rev, err := b.store.Get(ctx, key)
	if err != nil || rev == 0 || rec.Closed || rec.In == nil || rec.RequestID != a.RequestID {
		return err
	}
	rec.In.Assignees, rec.In.ClaimedBy, rec.In.ApproverRole = a.Assignees, a.ClaimedBy, a.ApproverRole
	rec.Role = a.ApproverRole
	d := delegationOf(a)
	if d != nil {
		rec.Delegated = d
	}
	others := rec.messages()
	if ch := b.channel(a.ApproverRole); d != nil && len(a.Assignees) == 0 && ch != "" && !rec.postedIn(ch) {
		in := *rec.In
		ch, ts, err := b.api.PostMessageContext(ctx, ch, slack.MsgOptionText(fallbackText(in), true),
			slack.MsgOptionBlocks(openBlocks(in, rec.card(), refOf(in))...))
		if err != nil {
			return fmt.Errorf("posting the delegated approval to %s (chat.postMessage): %w", ch, err)
		}
		rec.Copies = append(rec.Copies, posted{Channel: ch, TS: ts})
		// Recorded at once, so that the event delivered again (a failed
		// update below) does not post it twice.
		if err := b.store.Put(ctx, key, rec, rev); err != nil {
			return err
		}
		return b.redraw(ctx, rec, others)
	}
	if err := b.redraw(ctx, rec, others); err != nil {
		return err
	}
	return b.store.Put(ctx, key, rec, rev)
}

// redraw rewrites the open messages msgs of rec to show its interrupt.
func (b *Bridge) redraw(ctx context.Context, rec record, msgs []posted) error {
	in := *rec.In
	for _, m := range msgs {
		_, _, _, err := b.api.UpdateMessageContext(ctx, m.Channel, m.TS,
			slack.MsgOptionText(fallbackText(in), true), slack.MsgOptionBlocks(openBlocks(in, rec.card(), refOf(in))...))
		if err != nil {
			return fmt.Errorf("updating message %s in %s (chat.update): %w", m.TS, m.Channel, err)
		}
	}
	return nil
}

// remind posts a reminder in the thread of the message of the request,
// once per reminded event (id), mentioning who it waits on.
func (b *Bridge) remind(ctx context.Context, r protocol.Reminded, id string) error {
	key := recordKey(r.Flow, r.Run)
	rec, rev, err := b.store.Get(ctx, key)
	if err != nil || rev == 0 || rec.Closed || rec.RequestID != r.RequestID || rec.Reminded == id {
		return err
	}
	heading := "this request"
	var consequence string
	if rec.In != nil {
		heading = "*" + safe(oneLine(rec.In.Heading())) + "*"
		consequence = rec.In.OnTimeout.Consequence()
	}
	msg := ":alarm_clock: " + b.mentions(r) + ": " + heading + " still waits on you"
	if r.ExpiresAt != nil {
		msg += " · decide by " + slackDate(*r.ExpiresAt)
		if consequence != "" {
			msg += ", " + safe(consequence)
		}
	}
	channel, thread := rec.Channel, cmp.Or(rec.Thread, rec.TS)
	for _, c := range rec.Copies {
		// Where the approval's role now has its copy of the card.
		if ch := b.channel(r.ApproverRole); ch != "" && c.Channel == ch {
			channel, thread = c.Channel, c.TS
		}
	}
	_, _, err = b.api.PostMessageContext(ctx, channel, slack.MsgOptionText(msg, false), slack.MsgOptionTS(thread),
		slack.MsgOptionBlocks(section(msg)))
	if err != nil {
		return fmt.Errorf("posting a reminder in %s (chat.postMessage): %w", channel, err)
	}
	rec.Reminded = id
	return b.store.Put(ctx, key, rec, rev)
}

// mentions names who a reminder is for: the claimant, else the
// assignees, else the holders of the approver role, each mentioned when
// the configuration maps them to a Slack user, by name otherwise.
func (b *Bridge) mentions(r protocol.Reminded) string {
	people := r.Assignees
	if r.ClaimedBy != "" {
		people = []string{r.ClaimedBy}
	}
	var out []string
	for _, p := range people {
		out = append(out, b.mention(p))
	}
	if len(out) == 0 && r.ApproverRole != "" {
		var ids []string
		for _, p := range b.directory().Holders(r.ApproverRole) {
			if p.Slack != "" {
				ids = append(ids, p.Slack)
			}
		}
		for _, id := range slices.Sorted(maps.Keys(b.cfg.Users)) {
			if slices.Contains(b.cfg.Users[id].Roles, r.ApproverRole) && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		for _, id := range ids {
			out = append(out, "<@"+id+">")
		}
		if len(out) == 0 {
			out = append(out, "whoever holds the *"+safe(r.ApproverRole)+"* role")
		}
	}
	if len(out) == 0 {
		return "Reminder"
	}
	return strings.Join(out, " ")
}

// mention is a person in a message: a mention of their Slack user when
// the configuration maps one to them (the ids are checked, so a mention
// holds nothing else), else their name.
func (b *Bridge) mention(person string) string {
	if p, ok := b.directory().Person(person); ok && p.Slack != "" {
		return "<@" + p.Slack + ">"
	}
	for _, id := range slices.Sorted(maps.Keys(b.cfg.Users)) {
		if b.cfg.Users[id].Name == person {
			return "<@" + id + ">"
		}
	}
	return "*" + safe(person) + "*"
}

// settle closes the message of a request that has been decided, answered,
// expired or cancelled: requestID "" closes whatever is open for the run.
func (b *Bridge) settle(ctx context.Context, flow, run, requestID string, outcome func(rec record) string) error {
	key := recordKey(flow, run)
	rec, rev, err := b.store.Get(ctx, key)
	if err != nil || rev == 0 || rec.Closed || (requestID != "" && rec.RequestID != requestID) {
		return err
	}
	out := outcome(rec)
	if err := b.update(ctx, rec, out); err != nil {
		return err
	}
	rec.Closed = true
	rec.Outcome = out
	return b.store.Put(ctx, key, rec, rev)
}

// update rewrites a posted message, and its copies, as closed with
// outcome: no buttons.
func (b *Bridge) update(ctx context.Context, rec record, outcome string) error {
	for _, m := range rec.messages() {
		_, _, _, err := b.api.UpdateMessageContext(ctx, m.Channel, m.TS,
			slack.MsgOptionText(stripMarkup(outcome), true), slack.MsgOptionBlocks(closedBlocks(rec, outcome)...))
		if err != nil {
			return fmt.Errorf("updating message %s in %s (chat.update): %w", m.TS, m.Channel, err)
		}
	}
	return nil
}

// slackOrigin is origin.slack of a run: the thread it came from.
type slackOrigin struct {
	Slack *struct {
		Channel  string `json:"channel"`
		ThreadTS string `json:"threadTs"`
	} `json:"slack"`
}

// target is where an interrupt is posted: the thread of the run's
// origin.slack, else the channel of its approver role, else the default
// channel.
func (b *Bridge) target(in protocol.Interrupted) (channel, thread string) {
	var o slackOrigin
	if len(in.Origin) > 0 && json.Unmarshal(in.Origin, &o) == nil && o.Slack != nil && o.Slack.Channel != "" {
		return o.Slack.Channel, o.Slack.ThreadTS
	}
	if ch := b.channel(in.ApproverRole); ch != "" {
		return ch, ""
	}
	return b.cfg.DefaultChannel, ""
}
