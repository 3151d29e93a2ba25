// Package protocol is the one vocabulary of Interlock's wire protocol
// (docs/protocol.md): the names and rules every part of Interlock, and
// every client, speaks the same way.
//
//   - Names: [CheckName], the rule for flow names, run ids and approver
//     roles.
//   - Runs: [Status], the statuses of a run.
//   - Interrupts: the kinds ([KindQuestion], [KindChoice],
//     [KindApproval]) and, for each, how its answer is checked and
//     presented ([Spec], [SpecOf]); the decisions on an approval
//     ([Verdict], [Decision]).
//   - Commands, the data of inbound CloudEvents: [Start], [Resume],
//     [Cancel], [Reannounce], [ToolRequest], [Expire].
//   - Events, the data of outbound CloudEvents: [Started], [Interrupted],
//     [Resumed], [Completed], [Failed], [Cancelled], [Expired],
//     [Refused], [Decided], [NodeEvent]; their kinds and CloudEvent types
//     ([OutboundType], [InboundType]).
//   - Refusals: [Code], the codes of a refused event.
//   - Stored documents: [Checkpoint], the reader's view of a run's
//     checkpoint, and [Pending], an entry of the pending index.
//   - Audit: [AuditRecord], its actions, its hash ([AuditHash]) and the
//     signing keys ([AuditKey]).
//
// The package uses the standard library only (and internal/jsonw, which
// does too): the engine writes these types, and readers, in Go or from
// the JSON Schemas in docs/schema, read them.
package protocol
