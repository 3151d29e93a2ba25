package slackbridge

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

// applyTimeout bounds the bucket writes and Slack calls an interaction
// makes once it has answered Slack.
const applyTimeout = 30 * time.Second

// Name is the bridge's channel name (see package notify): its consumer
// is <prefix>-slack, and a role's Slack channel is its slack address in
// the directory.
const Name = people.ChannelSlack

// Name is the bridge's channel name, [Name].
func (b *Bridge) Name() string { return Name }

// address is where a message goes: a channel id (C0REFUNDS), or a
// thread of one (C0REFUNDS/1712345678.000100).
func address(channel, thread string) string {
	if thread == "" {
		return channel
	}
	return channel + "/" + thread
}

// splitAddress is address's channel and thread.
func splitAddress(a string) (channel, thread string) {
	channel, thread, _ = strings.Cut(a, "/")
	return channel, thread
}

// Addresses are where an interrupt in reaches to in Slack: the thread
// the run came from (origin.slack), else the channel of each of its
// roles (the directory's, else Config.Channels'), else the default
// channel, which also takes an interrupt that names no role (the zero
// Recipient). A person is reached there, where the message mentions
// them: the bridge posts to channels, not to one person.
func (b *Bridge) Addresses(_ context.Context, to notify.Recipient, in protocol.Interrupted) ([]string, error) {
	if ch, thread := origin(in); ch != "" {
		return []string{address(ch, thread)}, nil
	}
	if to.Person != "" {
		return nil, nil
	}
	if ch := cmp.Or(b.channel(to.Role), b.cfg.DefaultChannel); ch != "" {
		return []string{ch}, nil
	}
	return nil, nil
}

// recordKeyAt is the key of the record of run's message at addr.
func recordKeyAt(flow, run, addr string) string {
	h := sha256.Sum256([]byte(addr))
	return recordKey(flow, run) + "." + hex.EncodeToString(h[:12])
}

// load reads the record of run's message at addr, and its key: a record
// an earlier version kept by run alone is read when it is at addr.
func (b *Bridge) load(ctx context.Context, flow, run, addr string) (record, uint64, string, error) {
	key := recordKeyAt(flow, run, addr)
	rec, rev, err := b.store.Get(ctx, key)
	if err != nil || rev != 0 {
		return rec, rev, key, err
	}
	legacy := recordKey(flow, run)
	old, oldRev, err := b.store.Get(ctx, legacy)
	if err != nil {
		return record{}, 0, key, err
	}
	if oldRev != 0 && address(old.Channel, old.Thread) == addr {
		return old, oldRev, legacy, nil
	}
	return record{}, 0, key, nil
}

// Post shows n in Slack at n.Address: an interrupt's message, posted
// once and then kept up to date (a quorum's vote, a claim, a release, a
// delegation redraw it), or a reminder in its thread. A message of an
// earlier request of the run at the same address is closed.
func (b *Bridge) Post(ctx context.Context, n notify.Notice) (string, error) {
	in := n.Interrupt
	rec, rev, key, err := b.load(ctx, in.Flow, in.Run, n.Address)
	if err != nil {
		return "", err
	}
	open := rev != 0 && !rec.Closed && rec.In != nil
	same := open && rec.RequestID == in.RequestID
	switch n.Why {
	case notify.WhyReminder:
		if same {
			return b.remind(ctx, key, rec, rev, n)
		}
	case notify.WhyDelegated, notify.WhyClaimed, notify.WhyReleased:
		if same {
			rec.In.Assignees, rec.In.ClaimedBy, rec.In.ApproverRole = in.Assignees, in.ClaimedBy, in.ApproverRole
			rec.Role = in.ApproverRole
			if n.Why == notify.WhyDelegated {
				rec.Delegated = delegationTo(in, n.By, n.Reason)
			}
			if err := b.redraw(ctx, rec, rec.messages()); err != nil {
				return "", err
			}
			return rec.TS, b.store.Put(ctx, key, rec, rev)
		}
	default:
		if same {
			// Posted already (a crash between the post and its record).
			return rec.TS, nil
		}
		if open && (n.Why == notify.WhyVote || askedAgainAfterVote(rec, in)) {
			conv, err := b.conversation(ctx, in)
			if err != nil {
				return "", err
			}
			rec.RequestID, rec.In, rec.Conv, rec.Role = in.RequestID, &in, conv, in.ApproverRole
			if err := b.redraw(ctx, rec, rec.messages()); err != nil {
				return "", err
			}
			return rec.TS, b.store.Put(ctx, key, rec, rev)
		}
	}
	if open && !same {
		outcome := ":leftwards_arrow_with_hook: Asked again in a newer message · " + slackDate(n.At)
		if protocol.RoleRestricted(in.Kind) && rec.Role != "" && in.ApproverRole != rec.Role {
			outcome = fmt.Sprintf(":arrow_double_up: Escalated to *%s* · %s", safe(in.ApproverRole), slackDate(n.At))
		}
		if err := b.close(ctx, key, rec, rev, outcome); err != nil {
			return "", err
		}
		// The new message's record replaces the closed one (or is made
		// under its own key, should the closed one be an earlier
		// version's).
		key = recordKeyAt(in.Flow, in.Run, n.Address)
		if _, rev, err = b.store.Get(ctx, key); err != nil {
			return "", err
		}
	}
	return b.postCard(ctx, key, rev, n)
}

// postCard posts n's interrupt as a new message at n.Address and
// records it under key, revision rev.
func (b *Bridge) postCard(ctx context.Context, key string, rev uint64, n notify.Notice) (string, error) {
	in := n.Interrupt
	conv, err := b.conversation(ctx, in)
	if err != nil {
		return "", err
	}
	next := record{Flow: in.Flow, Run: in.Run, RequestID: in.RequestID, Kind: in.Kind, Role: in.ApproverRole, In: &in, Conv: conv}
	if n.Why == notify.WhyDelegated {
		next.Delegated = delegationTo(in, n.By, n.Reason)
	}
	channel, thread := splitAddress(n.Address)
	opts := []slack.MsgOption{slack.MsgOptionText(fallbackText(in), true), slack.MsgOptionBlocks(openBlocks(in, next.card(), refOf(in))...)}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	ch, ts, err := b.api.PostMessageContext(ctx, channel, opts...)
	if err != nil {
		return "", slackError(fmt.Sprintf("posting to %s (chat.postMessage)", channel), err)
	}
	next.Channel, next.TS, next.Thread = ch, ts, thread
	if err := b.store.Put(ctx, key, next, rev); err != nil {
		return "", err
	}
	return ts, nil
}

// close rewrites rec's messages as closed with outcome, and records so.
func (b *Bridge) close(ctx context.Context, key string, rec record, rev uint64, outcome string) error {
	if err := b.update(ctx, rec, outcome); err != nil {
		return err
	}
	rec.Closed, rec.Outcome = true, outcome
	return b.store.Put(ctx, key, rec, rev)
}

// Settle closes the message at s.Address of a request decided, answered,
// expired, cancelled or moved on, wherever that happened: its buttons
// go, and the outcome says who did what.
func (b *Bridge) Settle(ctx context.Context, s notify.Settled) (string, error) {
	rec, rev, key, err := b.load(ctx, s.Flow, s.Run, s.Address)
	if err != nil || rev == 0 || rec.Closed {
		return "", err
	}
	if err := b.close(ctx, key, rec, rev, outcomeOf(rec, s)); err != nil {
		return "", err
	}
	return rec.TS, nil
}

// outcomeOf says how the request of rec's message was settled.
func outcomeOf(rec record, s notify.Settled) string {
	at := s.At
	if at.IsZero() {
		at = time.Now()
	}
	switch s.Kind {
	case protocol.EventResumed:
		var r protocol.Resumed
		if json.Unmarshal(s.Data, &r) == nil {
			var votes []protocol.Vote
			if rec.In != nil {
				votes = rec.In.Votes
			}
			return resumedOutcome(r, votes, at)
		}
	case protocol.EventExpired:
		return ":hourglass: Expired: no decision by the deadline · " + slackDate(at)
	case protocol.EventCancelled:
		var c protocol.Cancelled
		if json.Unmarshal(s.Data, &c) == nil {
			return cancelledOutcome(c, at)
		}
	case protocol.EventInterrupted:
		if s.To != "" {
			return fmt.Sprintf(":arrow_double_up: Escalated to *%s* · %s", safe(s.To), slackDate(at))
		}
		return ":leftwards_arrow_with_hook: Asked again in a newer message · " + slackDate(at)
	}
	return ":information_source: " + safe(s.What) + " · " + slackDate(at)
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

// delegationTo is the delegation that made in: to its one assignee
// left, else to its role.
func delegationTo(in protocol.Interrupted, by, reason string) *delegation {
	return delegationOf(protocol.Assigned{Op: protocol.AssignDelegate, Assignees: in.Assignees, ApproverRole: in.ApproverRole, By: by, Reason: reason})
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

// redraw rewrites the open messages msgs of rec to show its interrupt.
func (b *Bridge) redraw(ctx context.Context, rec record, msgs []posted) error {
	in := *rec.In
	for _, m := range msgs {
		_, _, _, err := b.api.UpdateMessageContext(ctx, m.Channel, m.TS,
			slack.MsgOptionText(fallbackText(in), true), slack.MsgOptionBlocks(openBlocks(in, rec.card(), refOf(in))...))
		if err != nil {
			return slackError(fmt.Sprintf("updating message %s in %s (chat.update)", m.TS, m.Channel), err)
		}
	}
	return nil
}

// remind posts a reminder in the thread of rec's message, once per
// reminded event, mentioning who it waits on.
func (b *Bridge) remind(ctx context.Context, key string, rec record, rev uint64, n notify.Notice) (string, error) {
	if rec.Reminded == n.EventID {
		return rec.TS, nil
	}
	in := n.Interrupt
	msg := ":alarm_clock: " + b.mentions(in) + ": *" + safe(oneLine(rec.In.Heading())) + "* still waits on you"
	if in.ExpiresAt != nil {
		msg += " · decide by " + slackDate(*in.ExpiresAt)
		if c := rec.In.OnTimeout.Consequence(); c != "" {
			msg += ", " + safe(c)
		}
	}
	thread := cmp.Or(rec.Thread, rec.TS)
	_, ts, err := b.api.PostMessageContext(ctx, rec.Channel, slack.MsgOptionText(msg, false), slack.MsgOptionTS(thread),
		slack.MsgOptionBlocks(section(msg)))
	if err != nil {
		return "", slackError(fmt.Sprintf("posting a reminder in %s (chat.postMessage)", rec.Channel), err)
	}
	rec.Reminded = n.EventID
	return ts, b.store.Put(ctx, key, rec, rev)
}

// mentions names who a reminder is for: the claimant, else the
// assignees, else the holders of the approver role, each mentioned when
// the configuration maps them to a Slack user, by name otherwise.
func (b *Bridge) mentions(in protocol.Interrupted) string {
	people := in.Assignees
	if in.ClaimedBy != "" {
		people = []string{in.ClaimedBy}
	}
	var out []string
	for _, p := range people {
		out = append(out, b.mention(p))
	}
	if len(out) == 0 && in.ApproverRole != "" {
		var ids []string
		for _, p := range b.directory().Holders(in.ApproverRole) {
			if p.Slack != "" {
				ids = append(ids, p.Slack)
			}
		}
		for _, id := range slices.Sorted(maps.Keys(b.cfg.Users)) {
			if slices.Contains(b.cfg.Users[id].Roles, in.ApproverRole) && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		for _, id := range ids {
			out = append(out, "<@"+id+">")
		}
		if len(out) == 0 {
			out = append(out, "whoever holds the *"+safe(in.ApproverRole)+"* role")
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

// update rewrites a posted message, and its copies, as closed with
// outcome: no buttons.
func (b *Bridge) update(ctx context.Context, rec record, outcome string) error {
	for _, m := range rec.messages() {
		_, _, _, err := b.api.UpdateMessageContext(ctx, m.Channel, m.TS,
			slack.MsgOptionText(stripMarkup(outcome), true), slack.MsgOptionBlocks(closedBlocks(rec, outcome)...))
		if err != nil {
			return slackError(fmt.Sprintf("updating message %s in %s (chat.update)", m.TS, m.Channel), err)
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

// origin is the channel and thread of in's run's origin.slack, if any.
func origin(in protocol.Interrupted) (channel, thread string) {
	var o slackOrigin
	if len(in.Origin) > 0 && json.Unmarshal(in.Origin, &o) == nil && o.Slack != nil && o.Slack.Channel != "" &&
		!strings.Contains(o.Slack.Channel, "/") {
		return o.Slack.Channel, o.Slack.ThreadTS
	}
	return "", ""
}

// permanent are the Web API's errors another attempt will not mend: the
// channel, the message or the bot's rights are gone, or the message is
// one Slack refuses.
var permanent = []string{"channel_not_found", "not_in_channel", "is_archived", "invalid_auth", "account_inactive",
	"token_revoked", "missing_scope", "restricted_action", "msg_too_long", "invalid_blocks", "no_permission",
	"message_not_found", "cant_update_message", "edit_window_closed", "not_authed"}

// slackError is err of a Web API call, what: wrapped by notify.RetryAfter
// when Slack limits the rate, and by notify.Permanent when it refuses for
// good.
func slackError(what string, err error) error {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return notify.RetryAfter(fmt.Errorf("%s: %w", what, err), rl.RetryAfter)
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && slices.Contains(permanent, se.Err) {
		return notify.Permanent(fmt.Errorf("%s: %w", what, err))
	}
	return fmt.Errorf("%s: %w", what, err)
}
