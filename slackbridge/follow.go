package slackbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/slack-go/slack"

	"github.com/interlockhq/interlock/events"
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
		b.log.Error().Err(err).Str("subject", subject).Msg("slack bridge: an event that does not decode is skipped")
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
		return b.settle(ctx, r.Flow, r.Run, r.RequestID, resumedOutcome(r, at))
	case protocol.EventExpired:
		var x protocol.Expired
		if err := json.Unmarshal(ev.Data(), &x); err != nil {
			return fmt.Errorf("decoding %s: %w", kind, err)
		}
		return b.settle(ctx, x.Flow, x.Run, x.RequestID, ":hourglass: Expired: no decision by the deadline · "+slackDate(at))
	case protocol.EventCancelled:
		var c protocol.Cancelled
		if err := json.Unmarshal(ev.Data(), &c); err != nil {
			return fmt.Errorf("decoding %s: %w", kind, err)
		}
		return b.settle(ctx, c.Flow, c.Run, "", cancelledOutcome(c, at))
	}
	return nil
}

// post posts an interrupt, once: a message already posted for its request
// (an event delivered again after a restart) is left alone. A message of
// an earlier request of the run (escalated, or asked again) is closed.
func (b *Bridge) post(ctx context.Context, in protocol.Interrupted, at time.Time) error {
	key := recordKey(in.Flow, in.Run)
	rec, rev, err := b.store.get(ctx, key)
	if err != nil {
		return err
	}
	if rev != 0 && rec.RequestID == in.RequestID {
		return nil
	}
	if rev != 0 && !rec.Closed {
		outcome := ":leftwards_arrow_with_hook: Asked again in a newer message · " + slackDate(at)
		if protocol.RoleRestricted(in.Kind) && rec.Role != "" && in.ApproverRole != rec.Role {
			outcome = fmt.Sprintf(":arrow_double_up: Escalated to *%s* · %s", esc(in.ApproverRole), slackDate(at))
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
	r := ref{Flow: in.Flow, Run: in.Run, RequestID: in.RequestID, Kind: in.Kind, Role: in.ApproverRole, Why: in.RejectReasonRequired}
	text := bodyText(in)
	opts := []slack.MsgOption{slack.MsgOptionText(fallbackText(in), false), slack.MsgOptionBlocks(openBlocks(in, text, r)...)}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	ch, ts, err := b.api.PostMessageContext(ctx, channel, opts...)
	if err != nil {
		return fmt.Errorf("posting to %s (chat.postMessage): %w", channel, err)
	}
	next := record{Flow: in.Flow, Run: in.Run, RequestID: in.RequestID, Kind: in.Kind, Role: in.ApproverRole,
		Channel: ch, TS: ts, Thread: thread, Body: text}
	return b.store.put(ctx, key, next, rev)
}

// settle closes the message of a request that has been decided, answered,
// expired or cancelled: requestID "" closes whatever is open for the run.
func (b *Bridge) settle(ctx context.Context, flow, run, requestID, outcome string) error {
	key := recordKey(flow, run)
	rec, rev, err := b.store.get(ctx, key)
	if err != nil || rev == 0 || rec.Closed || (requestID != "" && rec.RequestID != requestID) {
		return err
	}
	if err := b.update(ctx, rec, outcome); err != nil {
		return err
	}
	rec.Closed = true
	rec.Outcome = outcome
	return b.store.put(ctx, key, rec, rev)
}

// update rewrites a posted message as closed with outcome: no buttons.
func (b *Bridge) update(ctx context.Context, rec record, outcome string) error {
	_, _, _, err := b.api.UpdateMessageContext(ctx, rec.Channel, rec.TS,
		slack.MsgOptionText(stripMarkup(outcome), false), slack.MsgOptionBlocks(closedBlocks(rec.Body, outcome)...))
	if err != nil {
		return fmt.Errorf("updating message %s in %s (chat.update): %w", rec.TS, rec.Channel, err)
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
	if ch := b.cfg.Channels[in.ApproverRole]; in.ApproverRole != "" && ch != "" {
		return ch, ""
	}
	return b.cfg.DefaultChannel, ""
}
