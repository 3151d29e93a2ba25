// Package mcpserver serves Interlock to models over the Model Context
// Protocol: tools to list and start flows, answer their interrupts, read
// runs and the runs waiting, and ask the tool-call gate. It is a client of
// the wire protocol like the HTTP API, standing on a [Port] (Client,
// ClientAs and Authority; *interlock.Service is one), so one code path
// decides and the model only asks: what the approver may read and answer
// is the deployment's authority's to say.
//
//	srv, err := mcpserver.New(svc, mcpserver.Config{Flows: flows, Roles: []string{"supervisor"}})
//	...
//	err = srv.Run(ctx, &mcp.StdioTransport{})   // or http.Handle("/mcp", srv.Handler())
//
// A resume token never reaches the model: no tool takes or returns one.
// The server sends its commands vouched for the approver with the
// deployment's secret ([Port.ClientAs]), or, with [Config.KeepTokens], resumes with the tokens of the
// interrupts each session saw, kept in the server and bound to the session.
//
// Interrupts come back with their hidden context as hiddenContext, marked
// in the schema as guidance for the model that the user never sees; a
// validator's rejection is in it as "ERROR: ...", so the model asks again
// in its own words.
//
// A client that declares the elicitation capability gets a question or a
// choice meant for the user as a form (MCP elicitation, sent as the tool
// call's input request): the user's answer is sent as continue_flow would
// send it, checked and validated like any answer, and the run goes on;
// a declined or dismissed form leaves the run waiting and says so. A
// question asked again after a rejected answer goes to the model, which
// explains the rejection in its own words. Other clients keep the tool
// loop.
package mcpserver
