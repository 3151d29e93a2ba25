// Package teams posts Interlock's interrupts to Microsoft Teams.
//
// Each approver role may have a Teams channel: the URL of a Workflows
// webhook ("Post to a channel when a webhook request is received") kept
// as the role's teams handle in the directory of people (see package
// people). [Teams] follows the events with a durable consumer of its own
// (see package notify) and posts to the channels of an interrupt's roles
// (its approver role and its quorum's roles):
//
//   - an interrupt: an Adaptive Card with its title, description, the
//     arguments formatted, who asked, the deadline and what happens then,
//     the votes of a quorum, the people assigned (mentioned by their
//     Teams account), and a button to the request's page in the inbox;
//   - a reminder, a vote, a claim or a delegation: a short follow-up card;
//   - the outcome (approved, rejected, expired, cancelled, and by whom):
//     a follow-up card, since a Workflows webhook cannot update a card it
//     posted.
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
