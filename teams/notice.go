package teams

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

// Addresses are where the channel reaches to: the Workflows URL of a
// role's Teams channel. A person is reached through their roles'
// channels, where the cards mention them: a Workflows webhook posts to a
// channel, not to one person.
func (t *Teams) Addresses(_ context.Context, to notify.Recipient, _ protocol.Interrupted) ([]string, error) {
	if to.Person != "" {
		return nil, nil
	}
	role, _ := t.dir().Role(to.Role)
	if u := role.Address(Name); u != "" {
		return []string{u}, nil
	}
	return nil, nil
}

// Post posts n's card to the Teams channel at n.Address: an interrupt's
// card, or a short follow-up of a reminder, a vote, a delegation, a
// claim or a release.
func (t *Teams) Post(ctx context.Context, n notify.Notice) (string, error) {
	c := t.render(n)
	if err := t.post(ctx, channel{role: n.Role, url: n.Address}, wrapCard(c)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s card posted to role %s", n.Why, n.Role), nil
}

// Settle follows a settled request up in a channel its card was posted
// to: a Workflows webhook cannot update a card it posted.
func (t *Teams) Settle(ctx context.Context, s notify.Settled) (string, error) {
	about := plain(s.Heading, maxLine)
	if about == "" {
		about = fallbackHeading
	}
	detail := ""
	if s.Detail != "" {
		detail = plain(s.Detail, maxLine)
	}
	c := noteCard(plain(s.What, maxLine), settledColor(s), about+" · "+where(s.Flow, s.Run, nil), detail, s.Link, settledButtonText, "", nil)
	if err := t.post(ctx, channel{role: s.Role, url: s.Address}, wrapCard(c)); err != nil {
		return "", err
	}
	return "follow-up posted to role " + s.Role, nil
}

// settledColor is the color of a follow-up's line: good for an approval,
// attention for what did not go through.
func settledColor(s notify.Settled) string {
	switch {
	case s.Kind == protocol.EventInterrupted:
		return ""
	case strings.HasPrefix(s.What, "Approved"):
		return "Good"
	case strings.HasPrefix(s.What, "Answered"):
		return "Accent"
	}
	return "Attention"
}

// render is the card of n.
func (t *Teams) render(n notify.Notice) card {
	in := n.Interrupt
	dir := t.dir()
	roles := protocol.DeciderRoles(in.ApproverRole, in.Quorum)
	about := heading(in) + " · " + where(in.Flow, in.Run, nil)
	by := plain(n.By, maxLine)
	detail := ""
	if n.Reason != "" {
		detail = "Reason: " + plain(n.Reason, maxLine)
	}
	switch n.Why {
	case notify.WhyVote:
		c := openCard(in, roles, n.Link, dir)
		if len(in.Votes) == 0 || in.Quorum == nil {
			return c
		}
		last := in.Votes[len(in.Votes)-1]
		line := fmt.Sprintf("%s voted %s · %s", plain(last.Approver, maxLine), last.Verdict, votes(in.Votes, in.Quorum.Total()))
		c.Body = append([]element{{Type: "TextBlock", Text: line, Weight: "Bolder", Wrap: true}}, c.Body...)
		return c
	case notify.WhyReminder:
		who := in.Assignees
		if in.ClaimedBy != "" {
			who = []string{in.ClaimedBy}
		}
		if len(who) == 0 {
			for _, role := range roles {
				for _, p := range dir.Holders(role) {
					if !slices.Contains(who, p.Name) && len(who) < maxMentions {
						who = append(who, p.Name)
					}
				}
			}
		}
		text, ms := mentions(dir, who)
		if text != "" {
			text = "Waiting on " + text
		}
		if d := deadline(in.ExpiresAt, in.OnTimeout.Consequence()); d != "" {
			detail = "Decide by " + d
		}
		return noteCard("Reminder: "+heading(in)+" still waits for a decision", "Warning", where(in.Flow, in.Run, roles),
			detail, n.Link, openButtonTitle, text, ms)
	case notify.WhyDelegated:
		line := "Delegated by " + by
		var text string
		var ms []mention
		if len(in.Assignees) > 0 {
			text, ms = mentions(dir, in.Assignees)
			text = "Now assigned to " + text
		} else if in.ApproverRole != "" {
			line += " to role " + plain(in.ApproverRole, maxLine)
		}
		return noteCard(line, "", about, detail, n.Link, openButtonTitle, text, ms)
	case notify.WhyClaimed:
		return noteCard("Claimed by "+by, "", about, detail, n.Link, openButtonTitle, "", nil)
	case notify.WhyReleased:
		return noteCard("Released by "+by+": open again to whoever may decide it", "", about, detail, n.Link, openButtonTitle, "", nil)
	}
	return openCard(in, roles, n.Link, dir)
}

// dir is the directory in force, or an empty one.
func (t *Teams) dir() *people.Directory {
	if d := t.cfg.Directory(); d != nil {
		return d
	}
	return people.Empty()
}
