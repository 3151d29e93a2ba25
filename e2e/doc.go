// Package e2e holds Interlock's end-to-end tests. Each runs against a real
// embedded nats-server (internal/natstest) with one or more Services on it,
// and speaks the wire protocol as a client does: it publishes CloudEvents
// on the inbound subjects and reads back what Interlock wrote to its
// streams and buckets. Nothing is mocked. The package has no code of its
// own; go test ./e2e/ runs it.
//
// What the tests hold Interlock to, by file:
//
//   - protocol_test.go, rules_test.go: a run interrupts and resumes over
//     JetStream, and the rules of docs/protocol.md (tokens, racing
//     resumes, stale checkpoints, idempotency, cancel, binary mode,
//     several workers, what is durable before an interrupt is announced);
//   - approval_bus_test.go, deadline_test.go: approvals, static gates and
//     reducers over the bus; deadlines that fire while no worker runs,
//     survive a server restart, escalate, and race a resume;
//   - gate_test.go: the tool-call gate and rules changed while it runs;
//   - badinput_test.go, hardening_test.go, size_test.go: bad input is
//     dead-lettered and answered, never redelivered; reannounce,
//     max_payload, the delivery limit, resume tokens only in interrupted
//     events; commands of every size up to the server's limit answered;
//   - faults_test.go: a worker killed between checkpoint and publish or in
//     the middle of a node, a redelivered resume and a server restart lose
//     and duplicate nothing (TestMain makes the test binary that worker);
//   - cluster_test.go: a 3-node cluster that loses a leader under load
//     loses nothing;
//   - contract_bus_test.go: every event, audit record and stored document
//     matches the JSON Schemas of docs/schema;
//   - tracing_test.go: spans follow a run across the human wait;
//   - readme_test.go, readme_start_test.go: README.md's commands work as
//     written, the walk replayed with the real nats CLI.
//
// The rig the files share (a service on an embedded server, a client
// connection, and readers of what a run published) is in rig_test.go;
// each scenario's flows are in its own file. Files the tests read are
// named relative to this directory (../README.md,
// ../examples/gate/rules.yaml).
package e2e
