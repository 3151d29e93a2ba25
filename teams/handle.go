package teams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

// record is what the channel keeps of a run's interrupt: the request it
// posted and the roles whose channels it posted to, so that its
// follow-ups go to the same channels whatever the directory says since.
type record struct {
	Flow        string   `json:"flow"`
	Run         string   `json:"run"`
	RequestID   string   `json:"requestId"`
	Node        string   `json:"node"`
	Kind        string   `json:"kind"`
	Heading     string   `json:"heading"`
	Roles       []string `json:"roles"`
	Consequence string   `json:"consequence,omitempty"`
	Closed      bool     `json:"closed,omitempty"`
}

// open reports whether rec is the open record of request requestID.
func (r record) open(rev uint64, requestID string) bool {
	return rev != 0 && !r.Closed && r.RequestID == requestID
}

func recordKey(flow, run string) string { return notify.RecordKey(flow, run) }

// store keeps records in the channel's bucket, each write a
// compare-and-set on the revision read.
type store = notify.Records[record]

// handle shows one event in Teams.
func (t *Teams) handle(ctx context.Context, d notify.Delivery) error {
	decode := func(v any) error {
		if err := json.Unmarshal(d.Event.Data(), v); err != nil {
			return notify.Permanent(fmt.Errorf("decoding the %s event: %w", d.Kind, err))
		}
		return nil
	}
	switch d.Kind {
	case protocol.EventInterrupted:
		var in protocol.Interrupted
		if err := decode(&in); err != nil {
			return err
		}
		in.ResumeToken = ""
		return t.interrupted(ctx, d, in)
	case protocol.EventReminded:
		var r protocol.Reminded
		if err := decode(&r); err != nil {
			return err
		}
		return t.reminded(ctx, d, r)
	case protocol.EventVoted:
		var v protocol.Voted
		if err := decode(&v); err != nil {
			return err
		}
		return t.voted(ctx, d, v)
	case protocol.EventAssigned:
		var a protocol.Assigned
		if err := decode(&a); err != nil {
			return err
		}
		return t.assigned(ctx, d, a)
	case protocol.EventResumed:
		var r protocol.Resumed
		if err := decode(&r); err != nil {
			return err
		}
		line, color := resumedLine(r)
		detail := ""
		switch {
		case r.Reason != "":
			detail = "Reason: " + plain(r.Reason, maxLine)
		case r.Message != "":
			detail = "Answer: " + plain(r.Message, maxLine)
		}
		return t.settle(ctx, d, r.Flow, r.Run, r.RequestID, line, color, detail)
	case protocol.EventExpired:
		var x protocol.Expired
		if err := decode(&x); err != nil {
			return err
		}
		line := "Expired: nobody decided by " + x.ExpiresAt.UTC().Format(deadlineLayout)
		return t.settle(ctx, d, x.Flow, x.Run, x.RequestID, line, "Attention", "")
	case protocol.EventCancelled:
		var c protocol.Cancelled
		if err := decode(&c); err != nil {
			return err
		}
		line := "Cancelled"
		if c.By != "" {
			line += " by " + plain(c.By, maxLine)
		}
		detail := ""
		if c.Reason != "" {
			detail = "Reason: " + plain(c.Reason, maxLine)
		}
		return t.settle(ctx, d, c.Flow, c.Run, "", line, "Attention", detail)
	}
	return nil
}

// rolesOf are the roles whose channels an interrupt is posted to: its
// approver role and its quorum's roles.
func rolesOf(in protocol.Interrupted) []string {
	return protocol.DeciderRoles(in.ApproverRole, in.Quorum)
}

// interrupted posts an interrupt's card to its roles' channels, once per
// channel. An approval asked again after a vote short of its quorum
// keeps the card posted (the vote was followed up). An interrupt of the
// run that was still open and is now superseded (escalated, delegated to
// a role) is followed up in the channels the new card does not reach.
func (t *Teams) interrupted(ctx context.Context, d notify.Delivery, in protocol.Interrupted) error {
	key := recordKey(in.Flow, in.Run)
	rec, rev, err := t.store.Get(ctx, key)
	if err != nil {
		return err
	}
	if rev != 0 && rec.RequestID == in.RequestID {
		if rec.Closed {
			// Tried again after its request was settled (a channel that
			// was down): its outcome went out, and a card posted now
			// would show a request that no longer waits.
			return nil
		}
		// Delivered again: post where it was not yet posted.
		return t.postCard(ctx, d, in, rec.Roles)
	}
	roles := rolesOf(in)
	if rev != 0 && !rec.Closed && rec.Node == in.Node && rec.Kind == in.Kind && len(in.Votes) > 0 && slices.Equal(rec.Roles, roles) {
		rec.RequestID = in.RequestID
		return t.store.Put(ctx, key, rec, rev)
	}
	if rev != 0 && !rec.Closed {
		var gone []string
		for _, r := range rec.Roles {
			if !slices.Contains(roles, r) {
				gone = append(gone, r)
			}
		}
		if len(gone) > 0 {
			line := "Asked again in a newer card"
			if len(roles) > 0 {
				line = "Moved on: now for " + strings.Join(roles, ", ")
			}
			c := noteCard(line, "", rec.Heading+" · "+where(rec.Flow, rec.Run, nil), "", t.link(rec.Flow, rec.Run), settledButtonText, "", nil)
			if err := t.deliver(ctx, d, gone, "moved", c); err != nil {
				return err
			}
		}
	}
	if len(roles) == 0 && rev == 0 {
		return nil
	}
	next := record{Flow: in.Flow, Run: in.Run, RequestID: in.RequestID, Node: in.Node, Kind: in.Kind,
		Heading: heading(in), Roles: roles, Consequence: in.OnTimeout.Consequence()}
	if err := t.store.Put(ctx, key, next, rev); err != nil {
		return err
	}
	return t.postCard(ctx, d, in, roles)
}

func (t *Teams) postCard(ctx context.Context, d notify.Delivery, in protocol.Interrupted, roles []string) error {
	dir := t.dir()
	return t.deliver(ctx, d, roles, "card", openCard(in, roles, t.link(in.Flow, in.Run), dir))
}

// reminded posts a short reminder in the channels of the request's card,
// mentioning who it waits on.
func (t *Teams) reminded(ctx context.Context, d notify.Delivery, r protocol.Reminded) error {
	rec, rev, err := t.store.Get(ctx, recordKey(r.Flow, r.Run))
	if err != nil || !rec.open(rev, r.RequestID) {
		return err
	}
	dir := t.dir()
	who := r.Assignees
	if r.ClaimedBy != "" {
		who = []string{r.ClaimedBy}
	}
	if len(who) == 0 {
		for _, role := range rec.Roles {
			for _, p := range dir.Holders(role) {
				if !slices.Contains(who, p.Name) && len(who) < maxMentions {
					who = append(who, p.Name)
				}
			}
		}
	}
	detail := ""
	if dl := deadline(r.ExpiresAt, rec.Consequence); dl != "" {
		detail = "Decide by " + dl
	}
	text, ms := mentions(dir, who)
	if text != "" {
		text = "Waiting on " + text
	}
	c := noteCard("Reminder: "+rec.Heading+" still waits for a decision", "Warning", where(rec.Flow, rec.Run, rec.Roles),
		detail, t.link(r.Flow, r.Run), openButtonTitle, text, ms)
	return t.deliver(ctx, d, rec.Roles, "reminder", c)
}

// voted follows a vote short of the quorum up: who voted, and how many
// votes the approval has of how many it takes.
func (t *Teams) voted(ctx context.Context, d notify.Delivery, v protocol.Voted) error {
	rec, rev, err := t.store.Get(ctx, recordKey(v.Flow, v.Run))
	if err != nil || !rec.open(rev, v.RequestID) {
		return err
	}
	verdict := "approve"
	for _, vote := range v.Votes {
		if vote.Approver == v.Approver {
			verdict = string(vote.Verdict)
		}
	}
	line := fmt.Sprintf("%s voted %s · %s", plain(v.Approver, maxLine), verdict, votes(v.Votes, v.Required))
	c := noteCard(line, "", rec.Heading+" · "+where(rec.Flow, rec.Run, nil), "", t.link(v.Flow, v.Run), openButtonTitle, "", nil)
	return t.deliver(ctx, d, rec.Roles, "voted", c)
}

// assigned follows a claim, a release or a delegation up. A delegation
// to a role adds the role's channel to the request's channels: it gets
// this note, with the button, and the outcome.
func (t *Teams) assigned(ctx context.Context, d notify.Delivery, a protocol.Assigned) error {
	key := recordKey(a.Flow, a.Run)
	rec, rev, err := t.store.Get(ctx, key)
	if err != nil || !rec.open(rev, a.RequestID) {
		return err
	}
	if a.ApproverRole != "" && !slices.Contains(rec.Roles, a.ApproverRole) {
		rec.Roles = append(rec.Roles, a.ApproverRole)
		if err := t.store.Put(ctx, key, rec, rev); err != nil {
			return err
		}
	}
	dir := t.dir()
	by := plain(a.By, maxLine)
	var line, text string
	var ms []mention
	switch a.Op {
	case protocol.AssignClaim:
		line = "Claimed by " + by
	case protocol.AssignRelease:
		line = "Released by " + by + ": open again to whoever may decide it"
	default:
		line = "Delegated by " + by
		if len(a.Assignees) > 0 {
			text, ms = mentions(dir, a.Assignees)
			text = "Now assigned to " + text
		} else if a.ApproverRole != "" {
			line += " to role " + a.ApproverRole
		}
	}
	detail := ""
	if a.Reason != "" {
		detail = "Reason: " + plain(a.Reason, maxLine)
	}
	c := noteCard(line, "", rec.Heading+" · "+where(rec.Flow, rec.Run, nil), detail, t.link(a.Flow, a.Run), openButtonTitle, text, ms)
	return t.deliver(ctx, d, rec.Roles, "assigned", c)
}

// resumedLine says how a request was settled: "Approved by
// ann@example.com".
func resumedLine(r protocol.Resumed) (string, string) {
	by := ""
	if r.Approver != "" {
		by = " by " + plain(r.Approver, maxLine)
	}
	switch protocol.Verdict(r.Decision) {
	case protocol.VerdictApprove:
		return "Approved" + by, "Good"
	case protocol.VerdictEdit:
		return "Approved with edits" + by, "Good"
	case protocol.VerdictReject:
		return "Rejected" + by, "Attention"
	case protocol.VerdictRespond:
		return "Answered" + by + " without approving", "Accent"
	}
	return "Answered" + by, "Good"
}

// settle follows a settled request up in the channels of its card, and
// closes its record: requestID "" settles whatever is open for the run.
func (t *Teams) settle(ctx context.Context, d notify.Delivery, flow, run, requestID, line, color, detail string) error {
	key := recordKey(flow, run)
	rec, rev, err := t.store.Get(ctx, key)
	if err != nil || rev == 0 || rec.Closed || (requestID != "" && rec.RequestID != requestID) {
		return err
	}
	c := noteCard(line, color, rec.Heading+" · "+where(rec.Flow, rec.Run, nil), detail, t.link(flow, run), settledButtonText, "", nil)
	if err := t.deliver(ctx, d, rec.Roles, "settled", c); err != nil {
		return err
	}
	rec.Closed = true
	return t.store.Put(ctx, key, rec, rev)
}

// deliver posts c to the Teams channel of each of roles that has one,
// once per event and channel (tag tells apart the posts one event makes),
// trying every channel before it reports what failed: an error to try
// again if any channel may mend, permanent if none.
func (t *Teams) deliver(ctx context.Context, d notify.Delivery, roles []string, tag string, c card) error {
	dir := t.dir()
	m := wrapCard(c)
	var failed []string
	permanent := true
	var wait time.Duration
	seen := map[string]bool{}
	for _, r := range roles {
		role, _ := dir.Role(r)
		if role.Teams == "" || seen[role.Teams] {
			continue
		}
		seen[role.Teams] = true
		ch := channel{role: r, url: role.Teams}
		key := notify.Key("teams", d.Event.ID(), tag, role.Teams)
		done, err := t.sent.Done(ctx, key)
		if err != nil {
			failed, permanent = append(failed, err.Error()), false
			continue
		}
		if done {
			continue
		}
		if err := t.post(ctx, ch, m); err != nil {
			failed = append(failed, err.Error())
			if !notify.IsPermanent(err) {
				permanent = false
				wait = max(wait, notify.RetryAfterOf(err))
			}
			continue
		}
		if err := t.sent.Mark(ctx, key, fmt.Sprintf("%s %s posted to role %s", d.Kind, tag, r)); err != nil {
			failed, permanent = append(failed, err.Error()), false
		}
	}
	if len(failed) == 0 {
		return nil
	}
	// The messages only: a wrapped permanent error of one channel must
	// not make the others' failures permanent.
	err := errors.New(strings.Join(failed, "; "))
	if permanent {
		return notify.Permanent(err)
	}
	return notify.RetryAfter(err, wait)
}

// dir is the directory in force, or an empty one.
func (t *Teams) dir() *people.Directory {
	if d := t.cfg.Directory(); d != nil {
		return d
	}
	return people.Empty()
}
