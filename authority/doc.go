// Package authority decides, in one place, who a caller is and what they
// may do to a run: start, read, decide (answer, approve, edit, reject,
// respond, vote), claim, release, delegate, cancel, mint a callback URL
// and reannounce. Every surface asks it (the engine for what reaches the
// workers, the HTTP API, the inbox, decision links and callback URLs,
// Slack, the MCP server and gateway) and maps its [Refusal], which carries
// a protocol code, the same way.
//
// A [Caller] is what the surface authenticated: a name, how
// ([protocol.AuthMethod]: a bearer token, the inbox's session, a signed
// link, a Slack user, a role subject, or nothing but a NATS sender) and
// the approver roles held. A name a caller types (a resume's approver, an
// ask's agent) is a label wherever callers are identified (a directory of
// people is in force, or the NATS server authenticates role subjects):
// [Authority.NATSCaller] makes the sender itself the caller then, once,
// whatever name it types.
//
//	a := authority.New(authority.Config{Identified: dir.InForce})
//	if err := a.MayDecide(caller, authority.RunOf(cp), protocol.VerdictApprove); err != nil {
//		var ref *authority.Refusal
//		errors.As(err, &ref) // ref.Code is protocol.CodeForbidden
//	}
package authority
