package events

import (
	"github.com/cloudevents/sdk-go/v2/event"
)

// Event is a CloudEvents 1.0 event, the sdk-go type.
type Event = event.Event

// Inbound event types: commands sent to Interlock.
const (
	TypeStart  = "io.interlock.run.start"
	TypeResume = "io.interlock.run.resume"
	TypeCancel = "io.interlock.run.cancel"
	// TypeReannounce asks for a waiting run's interrupt to be announced
	// again with a fresh resume token.
	TypeReannounce  = "io.interlock.run.reannounce"
	TypeToolRequest = "io.interlock.tool.requested"
	// TypeExpire applies an interrupt's deadline. Interlock schedules it
	// with the server (a JetStream message schedule) when it publishes an
	// interrupt with a deadline; clients do not send it.
	TypeExpire = "io.interlock.run.expire"
)

// TypeNodePrefix begins the type of an event a node emits: a node's
// "message" event has type io.interlock.node.message.
const TypeNodePrefix = "io.interlock.node."

// Outbound event types: what Interlock announces.
const (
	TypeStarted     = "io.interlock.run.started"
	TypeInterrupted = "io.interlock.run.interrupted"
	TypeResumed     = "io.interlock.run.resumed"
	TypeCompleted   = "io.interlock.run.completed"
	TypeFailed      = "io.interlock.run.failed"
	TypeCancelled   = "io.interlock.run.cancelled"
	TypeExpired     = "io.interlock.run.expired"
	TypeRefused     = "io.interlock.resume.refused"
	TypeToolDecided = "io.interlock.tool.decided"
)

// Extension attribute names used by Interlock.
const (
	// ExtFlow carries the flow name on every event Interlock publishes.
	ExtFlow = "flow"
	// ExtTraceparent is the W3C trace context of the CloudEvents
	// distributed-tracing extension.
	ExtTraceparent = "traceparent"
)

// JSON is the content type of event data.
const JSON = "application/json"

// Structured is the content type of a structured-mode CloudEvent.
const Structured = "application/cloudevents+json"

// OutboundType returns the CloudEvent type of an outbound event kind, the last
// token of its subject ("interrupted" -> TypeInterrupted), and false for an
// unknown kind.
func OutboundType(kind string) (string, bool) {
	switch kind {
	case "started":
		return TypeStarted, true
	case "interrupted":
		return TypeInterrupted, true
	case "resumed":
		return TypeResumed, true
	case "completed":
		return TypeCompleted, true
	case "failed":
		return TypeFailed, true
	case "cancelled":
		return TypeCancelled, true
	case "expired":
		return TypeExpired, true
	case "refused":
		return TypeRefused, true
	case "decided":
		return TypeToolDecided, true
	}
	return "", false
}

// TypeAuditPrefix begins the type of every audit record: the record of a
// resume has type io.interlock.audit.resumed.
const TypeAuditPrefix = "io.interlock.audit."

// AuditType returns the CloudEvent type of an audit record of action.
func AuditType(action string) string { return TypeAuditPrefix + action }

// InboundType returns the CloudEvent type expected on an inbound subject verb
// ("start" -> TypeStart), and false for an unknown verb.
func InboundType(verb string) (string, bool) {
	switch verb {
	case "start":
		return TypeStart, true
	case "resume":
		return TypeResume, true
	case "cancel":
		return TypeCancel, true
	case "reannounce":
		return TypeReannounce, true
	case "request":
		return TypeToolRequest, true
	case "expire":
		return TypeExpire, true
	}
	return "", false
}
