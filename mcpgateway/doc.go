// Package mcpgateway is an MCP server in front of other MCP servers that
// puts every tool call through Interlock's tool-call gate. It shows the
// tools of its upstreams (a command on stdio, or a streamable HTTP URL),
// as is or prefixed <upstream>__<tool>, and for each tools/call asks the
// gate with a [protocol.ToolRequest]: the tool's name as the gateway shows
// it, the args, the agent (the MCP client's name, or a configured one) and
// a callId derived from a digest of them.
//
//	gw, err := mcpgateway.New(svc, mcpgateway.Config{Upstreams: []mcpgateway.Upstream{
//		{Name: "files", Command: "mcp-server-filesystem", Args: []string{"/srv"}},
//	}})
//	...
//	err = gw.Start(ctx)                      // connect the upstreams, list their tools
//	err = gw.Run(ctx, &mcp.StdioTransport{}) // or http.Handle("/mcp", gw.Handler())
//
// What the model gets back:
//
//   - allowed (no rule fires), or approved: the upstream's own result;
//   - edited: the upstream's result for the args the approver set;
//   - rejected, responded or expired: a tool error with the approver's
//     reason or message, so that the model can tell the user;
//   - still pending after [Config.Wait]: a tool error saying the call
//     awaits approval, with its callId. The same call made again (same
//     tool, args and agent, within [Config.RepeatWindow] of its decision)
//     is the same gate run: it returns the decision, never asks twice, and
//     this holds across a restart of the gateway. An approval lets its
//     call run once through a gateway: made again after it ran, the call
//     is asked anew.
//
// Every result the gate touched carries [MetaKey] in its _meta.
//
// The gateway authenticates no client: the agent is a label. Interlock
// knows its calls by the gateway's sender (nats:/mcp-gateway/<agent>,
// where callers are identified), and the gateway asks the deployment's
// authority ([Port].Authority) what that sender may read. It shows its
// upstreams' tools and nothing that decides, claims, cancels or reads a
// run: an agent behind it never approves its own call.
//
// A client that names [TasksExtension] in its request's capabilities gets
// a [Task] at once for a call that waits for a person, and polls it with
// tasks/get: the task id is the callId, the task is the gate run stored in
// Interlock, and an approved call runs at the first poll after its
// decision, at most once per gateway (see docs/mcp-gateway.md).
package mcpgateway
