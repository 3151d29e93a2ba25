// Package a2aserver serves Interlock as an agent of the Agent2Agent
// protocol (A2A): an agent of any runtime sends Interlock a message, and
// Interlock puts it in front of people as an ask (a question, a choice,
// or an approval of a tool call); the A2A task is that ask, kept in
// JetStream, so that tasks/get, tasks/cancel and a resubscription answer
// on any Interlock process, across restarts.
//
// A task's id is its ask's id, derived from the caller and the message's
// id, so that a message sent again is the same task. Its states follow
// the ask: working while it waits for a person, completed once answered
// (an approval approved or edited), rejected (an approval rejected),
// failed (expired: nobody answered in time), canceled. The answer is the
// task's artifact "answer", with the signed receipt of the decision.
// docs/a2a.md walks through it and gives the mapping.
//
// Callers authenticate as the rest of the HTTP API does (a bearer token
// of the directory of people), are agents in the one authority, and read
// and cancel only the tasks that authority lets them.
package a2aserver
