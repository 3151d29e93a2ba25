// Package httpapi is Interlock's HTTP API (protocol §7): the wire
// protocol's operations for inboxes, scripts and live UIs, JSON in and out.
//
// A [Server] stands on a [Port], which *interlock.Service implements: every
// operation goes through the protocol's client, publishing the same
// CloudEvents on the same subjects as any NATS client and reading outcomes
// back from the events stream, so one engine decides whatever the
// transport. Every command is sent vouched for the authenticated caller
// ([Port.ClientAs]): a resume needs no resume token, the audit stream
// names the caller (never a name the body types), and the engine itself
// refuses (and audits) what the deployment's authority says the caller
// may not do.
//
//	svc, _ := interlock.Start(ctx, cfg)
//	auth, _ := httpapi.LoadAuth("callers.yaml")
//	api, _ := httpapi.New(svc, httpapi.Config{Addr: "0.0.0.0:8080", Auth: auth})
//	_ = svc.Attach(ctx, api) // serves until svc.Stop
//
// Routes (the embedded [OpenAPI] document describes each):
//
//	GET  /v1/interrupts                 pending interrupts: ?flow= &kind= &role= &order= &limit= &cursor=
//	GET  /v1/runs                       runs of every status, newest first: ?flow= &status= &limit= &after=
//	GET  /v1/runs/{flow}/{run}          the checkpoint and the run's events
//	POST /v1/runs/{flow}                start a run
//	POST /v1/runs/{flow}/{run}/resume   answer or decide the pending interrupt
//	POST /v1/runs/{flow}/{run}/cancel   cancel a waiting run
//	POST /v1/gate/requests              ask the tool-call gate; ?wait=30s
//	GET  /v1/events                     server-sent events of interrupts coming and going
//	GET  /v1/openapi.json               the OpenAPI document
//
// Callers authenticate with bearer tokens of the directory of people
// ([Config.People], a people.Live's Current that follows the
// configuration bucket), or of an older [AuthFile] (YAML: name, roles,
// tokenSha256), which is read as a directory. Without either the API
// serves loopback only, and every caller is [LocalCaller] holding every
// role. Errors are RFC 9457 [Problem] details
// whose code is the protocol's refusal code; [StatusOf] maps codes to
// statuses.
//
// The package uses net/http's own routing patterns and no web framework:
// nine routes need nothing more, and the standard library's server,
// Shutdown and cross-origin protection are what the API leans on.
package httpapi
