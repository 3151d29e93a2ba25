// Package a2aremote makes Interlock an A2A client of remote agents: an
// operator names the agents (their URLs, the environment variable that
// holds each one's token, and who answers for it), a caller asks
// Interlock to follow a task of one of them, and when the task enters
// input-required (or auth-required) Interlock puts the agent's question
// to those people as an ask; their answer goes back to the agent as the
// next message of the task. One inbox then answers agents of any runtime
// that speaks A2A, beside Interlock's own flows, asks and gate calls.
//
// The tasks followed are kept in JetStream (a bucket of the workers'),
// read by every process; the asks are idempotent (an ask's id derives
// from the agent, the task and the question), and each answer is sent
// once (the deliveries are recorded), by the one durable consumer of the
// answered events the processes share.
package a2aremote
