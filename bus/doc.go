// Package bus carries Interlock's protocol on NATS JetStream: an embedded
// nats-server ([StartServer]) or a connection to an external one
// ([Connect]), the streams and buckets of the protocol ([Provision]), a
// [Publisher] of CloudEvents with deduplication ids, and a [Worker] that
// consumes inbound commands with a durable pull consumer and explicit acks.
//
// A message is acknowledged only after its effects are durable: the
// checkpoint written with compare-and-set, the pending index updated, audit
// records and events published. A worker that stops at any point leaves the
// message unacknowledged; JetStream delivers it again and the engine
// finishes the transition from its outbox instead of redoing it. Bad input
// is acknowledged and copied to interlock.dlq.<reason> ([DeadLetter]): its
// body, and its headers under Interlock-Original-, without credentials,
// in one message however large it was.
//
// With a tracer provider ([WorkerConfig].TracerProvider), the worker
// handles each message in an OpenTelemetry span (interlock.start,
// interlock.resume, ...): a child of the command's traceparent, linked to
// the traceparent its run carries, whose context the events it causes
// carry (trace.go).
package bus
