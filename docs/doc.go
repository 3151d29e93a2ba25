// Package docs holds Interlock's machine-readable wire contract, built into
// every binary so that a client can fetch the contract of the version it
// talks to (`interlock schema`):
//
//   - asyncapi.yaml, an AsyncAPI 3.0 document: the NATS subjects, who
//     sends what on them, and the CloudEvents envelope in structured and
//     binary mode;
//   - schema/*.json, JSON Schemas (draft 2020-12) of the data of every
//     event Interlock reads and publishes, every audit record, the
//     checkpoint document and the pending index entry, with
//     schema/index.json listing them.
//
// [AsyncAPI] returns the document, [Index] the list of schemas and
// [Schema] one of them. The package's tests keep the files in step with
// the Go types of package events and package engine: a field added to a
// type and not to its schema fails them, and so does a schema example the
// strict decoders refuse.
package docs
