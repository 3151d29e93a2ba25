// Package teams posts Interlock's interrupts to Microsoft Teams.
//
// Each approver role may have a Teams channel: the URL of a Workflows
// webhook ("Post to a channel when a webhook request is received") kept
// as the role's teams address in the directory of people (see package
// people). [Teams] is a channel of the notify seam: the
// [notify.Dispatcher] follows the events with a durable consumer and
// brings each request to the channels of its roles (its approver role
// and its quorum's roles, also when it is assigned to or claimed by a
// person), and Teams renders and posts:
//
//   - an interrupt: an Adaptive Card with its title, description, the
//     arguments formatted, who asked, the deadline and what happens then,
//     the votes of a quorum, the people assigned (mentioned by their
//     Teams account), and a button to the request's page in the inbox;
//   - a vote short of the quorum: the card again, headed by the vote;
//   - a reminder, a claim, a release or a delegation: a short follow-up
//     card;
//   - the outcome (approved, rejected, expired, cancelled, and by whom),
//     or the request moving on to other roles: a follow-up card, since a
//     Workflows webhook cannot update a card it posted.
//
// Each card goes to each channel once, even when an event is delivered
// again; a channel that is down or limits the rate is tried again (as
// long as it asks, with Retry-After), and a card it refuses for good is
// dead-lettered with the status and the start of its answer. A Workflows
// URL is a credential: it appears in no log, error or dead letter.
//
// Deciding happens on the request's page, where the person signs in:
// the cards carry no decision buttons.
//
//	t, err := teams.New(svc, teams.Config{Directory: live.Current, PublicURL: "https://interlock.example.com"})
//	if err != nil { ... }
//	err = svc.Attach(ctx, t)
package teams
