// Package slackbridge puts people in the loop in Slack: it posts each
// interrupt of Interlock as a Block Kit message, takes the decisions and
// answers people give there, and updates the message once the interrupt
// is settled, wherever that happened (Slack, HTTP, NATS, a deadline).
//
// A [Bridge] stands on a [Port] (the *interlock.Service): it is a client of
// the wire protocol like any other surface, and one code path decides.
//
//   - It is a channel of the notify seam ([notify.Channel],
//     [notify.Addresser], [notify.Settler]): the [notify.Dispatcher]
//     follows the events with a durable consumer, so a restart neither
//     posts a message twice nor misses one, skips what was settled
//     meanwhile, and retries and dead-letters; the bridge keeps the
//     channel and ts of each posted message in its own KV bucket (with a
//     TTL, [Config.Keep]) to update it later.
//   - An approval is posted as its card: title, description (Markdown
//     made safe mrkdwn), args as fields, requester, assignees, claimant,
//     votes, deadline and its consequence; with Approve, Edit (a modal of
//     one typed input per argument), Reject, Respond, Claim or Release,
//     and Delegate… (a mapped Slack user or a known role). a claim, a
//     release, a delegation and a quorum's vote redraw it, and a
//     delegation to a role with a channel posts it there too; reminded
//     posts in its thread. A question is posted with Answer (a modal of its fields); a
//     choice with Choose. It goes to the thread the run's origin names
//     (origin.slack.channel and threadTs), else to the channel of each
//     of its roles ([Config.Channels]), else to [Config.DefaultChannel].
//   - Every interaction is verified with the app's signing secret. The
//     Slack user is mapped to an approver name and roles ([Config.Users]),
//     and the decision is sent through a client of [Port].ClientAs, vouched for that
//     person: the engine checks the role, applies or refuses, and audits
//     the approver by name. A refusal comes back as an ephemeral message,
//     or as an error next to the field of a modal.
//
// docs/slack.md sets up the Slack app and the configuration file
// ([LoadConfig]); `interlock serve --slack-config FILE` runs the bridge.
package slackbridge
