// Package inbox is Interlock's web inbox: server-rendered pages where
// people answer questions, pick choices and decide approvals, served by
// `interlock serve` at / on the HTTP API's port and with its callers.
//
// [New] makes an inbox on an [httpapi.Port] (the *interlock.Service);
// [Inbox.Register] mounts its pages on the API's server
// ([httpapi.Server.Handle]), behind the API's loopback and cross-origin
// checks:
//
//	api, _ := httpapi.New(svc, httpapi.Config{Auth: auth})
//	in, _ := inbox.New(svc, inbox.Config{Auth: auth})
//	in.Register(api)
//	_ = svc.Attach(ctx, api)
//
// With an auth file, a person signs in with their bearer token, which the
// browser keeps in an HttpOnly, SameSite=Strict cookie (Secure on TLS);
// every form carries a CSRF token derived from it. Without one, the local
// user needs no sign-in. The queue lists the pending interrupts the caller
// may act on (approvals they are assigned, or of roles they hold; every
// question and choice), oldest first, each approval saying what it
// proposes, who has it and how far its votes are, with views of the
// caller's own (Mine) and of their roles (My roles); it updates itself
// from a server-sent event stream. The
// done view (/done) lists the runs that finished, newest first, each with
// how it ended, a page at a time, leaving out as the queue does the runs
// that ended at an approval of a role the caller does not hold. A run's
// page shows its pending interrupt with forms to answer or decide (an
// approval as a card: its title, its description rendered from Markdown
// safely, each argument by its schema, edited in a field of its type,
// the votes so far, and forms to claim, release, delegate and respond),
// and its events and audit records. Answers, decisions, claims and
// delegations go through a client of the [Port]'s ClientAs, vouched for
// the caller, exactly as the API's; which forms a page shows, the
// deployment's authority says.
package inbox
