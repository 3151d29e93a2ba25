// Package events is Interlock's CloudEvents vocabulary: the event types of the
// wire protocol, a codec for CloudEvents 1.0 in NATS binary mode (ce- headers)
// and structured mode (application/cloudevents+json), and parsers for the data
// of each inbound event.
//
// The package does not import NATS: headers are plain map[string][]string
// (nats.Header has that shape), so the codec can be used and fuzzed on its own.
//
// Decoding an inbound message:
//
//	ev, err := events.Decode(msg.Header, msg.Data)
//	if err != nil { ... } // *events.Error, with a Reason for the dead-letter subject
//	r, err := events.ParseResume(ev.Data())
//
// Encoding an outbound event always produces structured JSON, so that
// `nats sub` shows a whole, readable event:
//
//	body, err := events.Encode(ev)
//
// A publisher encodes its events with an [Encoder], which writes the same
// bytes without building sdk-go events.
//
// Readers of what Interlock keeps have types too: [Checkpoint]
// ([DecodeCheckpoint]), [Pending], and [AuditRecord] ([DecodeAuditRecord])
// for the records of the audit stream and their hash chain.
//
// The data of every outbound event has a reader type: [Started],
// [Interrupted], [Resumed], [Completed], [Failed], [Cancelled], [Expired],
// [Refused], [Decided] and [NodeEvent]. The JSON Schemas in docs/schema
// describe the same data for readers in other languages; the tests of
// package docs keep the two in step.
package events
