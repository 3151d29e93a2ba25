package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// maxReminders bounds the reminders of one request.
const maxReminders = 24

// remindersOf is the reminders of a declaration, or nil for none.
func remindersOf(before []time.Duration, every time.Duration) *Reminders {
	if len(before) == 0 && every <= 0 {
		return nil
	}
	return &Reminders{Before: slices.Clone(before), Every: every}
}

// checkReminders checks an interrupt's reminders against its deadline.
func checkReminders(timeout time.Duration, r *Reminders) error {
	if r == nil {
		return nil
	}
	for _, d := range r.Before {
		switch {
		case d <= 0:
			return fmt.Errorf("reminder %v before the deadline is not positive", d)
		case timeout <= 0:
			return errors.New("reminders before the deadline need a deadline: set Timeout")
		case d >= timeout:
			return fmt.Errorf("reminder %v before the deadline comes before the interrupt is asked (Timeout is %v)", d, timeout)
		}
	}
	switch {
	case r.Every < 0:
		return fmt.Errorf("RemindEvery %v is negative", r.Every)
	case r.Every > 0 && r.Every < time.Minute:
		return fmt.Errorf("RemindEvery %v is shorter than a minute", r.Every)
	case len(r.Before) > maxReminders:
		return fmt.Errorf("%d reminders are more than %d", len(r.Before), maxReminders)
	}
	return nil
}

// reminderTimes are when to remind the people who may answer in, from
// now: each Before its deadline, and Every from when it was asked, while
// it waits and before its deadline; at most maxReminders, none at or
// after the deadline, none past.
func reminderTimes(in *Interrupt, now time.Time) []time.Time {
	r := in.Remind
	if r == nil {
		return nil
	}
	var at []time.Time
	if in.ExpiresAt != nil {
		for _, d := range r.Before {
			at = append(at, in.ExpiresAt.Add(-d))
		}
	}
	if r.Every > 0 {
		for t := in.AskedAt.Add(r.Every); len(at) < 4*maxReminders; t = t.Add(r.Every) {
			if in.ExpiresAt != nil && !t.Before(*in.ExpiresAt) {
				break
			}
			if t.After(now) {
				at = append(at, t)
			}
			if len(at) >= maxReminders {
				break
			}
		}
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	at = slices.CompactFunc(at, func(a, b time.Time) bool { return a.Equal(b) })
	out := at[:0]
	for _, t := range at {
		if t.After(now) && (in.ExpiresAt == nil || t.Before(*in.ExpiresAt)) {
			out = append(out, expiry(t, 0))
		}
	}
	if len(out) > maxReminders {
		out = out[:maxReminders]
	}
	return out
}

// Remind applies a reminder: what the server's schedule publishes at the
// reminder's time. It names the request it was scheduled for: a
// reminder of an interrupt answered (or asked again) meanwhile does
// nothing. One of the request still pending publishes a reminded event
// for every channel to pass on.
type Remind struct {
	Flow, Run string
	RequestID string
	Inbound
}

// Remind applies a remind command.
func (r *Runner) Remind(ctx context.Context, cmd Remind) (Outcome, error) {
	return r.transact(ctx, cmd.Flow, cmd.Run, cmd.Inbound, cmd.EventID, "remind", func(t *txn) (Outcome, error) {
		cp := t.cp
		if busy, err := r.busy(ctx, cp); err != nil || busy {
			return t.retry(), err
		}
		in := cp.Interrupt
		if cp.Status != Waiting || in == nil || in.RequestID != cmd.RequestID {
			return Outcome{Flow: cp.Flow, Run: cp.Run, Status: cp.Status, Checkpoint: t.rev, Node: cp.Node, Duplicate: true}, nil
		}
		now := t.now
		in.RemindedAt = &now
		t.asked = in.AskedAt
		t.begin(cmd.Traceparent, protocol.ActionReminded)
		t.emit(protocol.EventReminded, &protocol.Reminded{Flow: cp.Flow, Run: cp.Run, RequestID: in.RequestID, Kind: in.Kind,
			ExpiresAt: in.ExpiresAt, ApproverRole: in.ApproverRole, Assignees: in.Assignees, ClaimedBy: in.ClaimedBy, Origin: cp.Origin})
		t.audit(&protocol.AuditRecord{Action: protocol.ActionReminded, Node: in.Node, RequestID: in.RequestID, Kind: in.Kind,
			By: TimeoutActor, EventID: cmd.EventID, ApproverRole: in.ApproverRole, ExpiresAt: in.ExpiresAt,
			Outcome: &protocol.AuditOutcome{Status: Waiting, Node: in.Node, RequestID: in.RequestID, Kind: in.Kind}})
		return r.commit(ctx, t)
	})
}
