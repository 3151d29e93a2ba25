// Package mail mails Interlock's interrupts to the people they reach, with
// the facts an approver needs and a link to decide.
//
// A [Mailer] follows the events stream with a durable consumer of its own
// (<prefix>-mail, see package notify) and mails:
//
//   - each interrupted event (the first ask, an escalation to another
//     role, and a quorum's request for the next vote) to its claimant, else
//     its assignees, else the holders of its approver role and of its
//     quorum's roles, and to those roles' own addresses;
//   - each reminded event to the same people;
//   - each delegation (assigned, op delegate) to whom it was delegated.
//
// People and their addresses come from the directory (package people). A
// person gets their own decision link (package links, kind decide: bound
// to them and to the request, expiring with the interrupt, or after
// [Config.LinkTTL] when it has no deadline); a role's address gets a link
// to the run's page in the inbox, where each reader decides as themself.
// A question or a choice reaches the people of its roles or assignees the
// same way; one with neither reaches nobody by mail.
//
// The mail is HTML and plain text: the title, the description (Markdown,
// rendered safely), the arguments formatted by their schema, the
// requester, the deadline in UTC and what happens then, the votes so far,
// the conversation behind a gate call, and the link. Each mail has a
// stable Message-ID per event and recipient, and every later mail of a run
// to the same address answers the first (In-Reply-To, References), so
// that mail clients thread them.
//
// Sending is durable: each mail is recorded (notify.Sent) once the SMTP
// server took it, and an event delivered again (a restart, the server
// down) mails only those who did not have it. A recipient the server
// refuses for good (a 5xx answer) is recorded as refused and the event is
// dead-lettered naming them, once the others have theirs; any other
// failure is tried again with backoff until Config.RetryFor, then
// dead-lettered with the SMTP error.
//
// [LoadConfig] reads the SMTP server, credentials and sender from a file
// and the environment; [StartTryServer] is a loopback SMTP server that
// prints each mail's link, for trying Interlock out.
package mail
