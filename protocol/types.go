package protocol

// Event kinds: the last token of an outbound subject
// (<prefix>.ev.<flow>.<run>.<kind>). [OutboundType] maps each to its
// CloudEvent type.
const (
	// EventStarted: a run was started.
	EventStarted = "started"
	// EventInterrupted: a run paused on an interrupt (a first ask or a re-ask).
	EventInterrupted = "interrupted"
	// EventResumed: an answer was accepted and the run carries on.
	EventResumed = "resumed"
	// EventCompleted: a run finished; the data holds its final state.
	EventCompleted = "completed"
	// EventFailed: a run stopped on an error.
	EventFailed = "failed"
	// EventCancelled: a run was cancelled.
	EventCancelled = "cancelled"
	// EventExpired: a run's interrupt timed out and the run ended.
	EventExpired = "expired"
	// EventRefused: a command was refused; the data says why.
	EventRefused = "refused"
	// EventDecided: a tool-call request was decided (subject
	// <prefix>.ev.gate.<callId>.decided).
	EventDecided = "decided"
	// EventAssigned: a pending approval was claimed, released or
	// delegated.
	EventAssigned = "assigned"
	// EventVoted: a vote did not yet complete an approval's quorum.
	EventVoted = "voted"
	// EventReminded: a pending interrupt's reminder fell due.
	EventReminded = "reminded"
	// EventConsumed: an approved or edited tool call's approval was
	// taken, once, by the agent about to run it (subject
	// <prefix>.ev.gate.<callId>.consumed).
	EventConsumed = "consumed"
)

// Events returns every outbound event kind, in the order of the
// protocol's subject table.
func Events() []string {
	return []string{EventStarted, EventInterrupted, EventResumed, EventCompleted, EventFailed,
		EventCancelled, EventExpired, EventRefused, EventDecided, EventAssigned, EventVoted, EventReminded, EventAnswered, EventConsumed}
}

// Inbound verbs: the last token of an inbound subject
// (<prefix>.in.<flow>.<verb>), and of a due deadline's subject
// (<prefix>.due.<flow>.expire).
const (
	VerbStart      = "start"
	VerbResume     = "resume"
	VerbCancel     = "cancel"
	VerbReannounce = "reannounce"
	// VerbRequest is the tool-call gate's, on <prefix>.in.gate.request.
	VerbRequest = "request"
	// VerbExpire is a deadline's, which only the server publishes.
	VerbExpire = "expire"
	// VerbAssign claims, releases or delegates a pending approval.
	VerbAssign = "assign"
	// VerbRemind is a reminder's, which only the server publishes.
	VerbRemind = "remind"
	// VerbConsume takes an approved tool call's approval, once, on
	// <prefix>.in.gate.consume.
	VerbConsume = "consume"
	// VerbMigrate moves a waiting run of an earlier version of its flow to
	// a newer one, ahead of its next command.
	VerbMigrate = "migrate"
)

// Inbound CloudEvent types: commands sent to Interlock.
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
	// TypeMigrate moves a waiting run from one version of its flow to
	// another (data [Migrate]).
	TypeMigrate = "io.interlock.run.migrate"
	// TypeAssign claims, releases or delegates a pending approval.
	TypeAssign = "io.interlock.run.assign"
	// TypeRemind reminds the people a pending interrupt waits on; the
	// server publishes it from a schedule, as TypeExpire.
	TypeRemind = "io.interlock.run.remind"
	// TypeToolConsume takes an approved or edited tool call's approval,
	// once, before the call runs.
	TypeToolConsume = "io.interlock.tool.consume"
)

// Outbound CloudEvent types: what Interlock announces.
const (
	TypeStarted      = "io.interlock.run.started"
	TypeInterrupted  = "io.interlock.run.interrupted"
	TypeResumed      = "io.interlock.run.resumed"
	TypeCompleted    = "io.interlock.run.completed"
	TypeFailed       = "io.interlock.run.failed"
	TypeCancelled    = "io.interlock.run.cancelled"
	TypeExpired      = "io.interlock.run.expired"
	TypeRefused      = "io.interlock.resume.refused"
	TypeToolDecided  = "io.interlock.tool.decided"
	TypeAssigned     = "io.interlock.run.assigned"
	TypeVoted        = "io.interlock.run.voted"
	TypeReminded     = "io.interlock.run.reminded"
	TypeToolConsumed = "io.interlock.tool.consumed"
)

// TypeNodePrefix begins the type of an event a node emits: a node's
// "message" event has type io.interlock.node.message.
const TypeNodePrefix = "io.interlock.node."

// TypeAuditPrefix begins the type of every audit record: the record of an
// approval has type io.interlock.audit.approved.
const TypeAuditPrefix = "io.interlock.audit."

// Extension attribute names used by Interlock.
const (
	// ExtFlow carries the flow name on every event Interlock publishes.
	ExtFlow = "flow"
	// ExtTraceparent is the W3C trace context of the CloudEvents
	// distributed-tracing extension.
	ExtTraceparent = "traceparent"
	// ExtCausation names, on every run event a transition publishes and on
	// every refusal, the id of the CloudEvent that caused it: the command
	// the transition applied (a deadline's or reminder's, the schedule
	// message's), or the refused command. A client matches its command's
	// outcome by it.
	ExtCausation = "causationid"
)

// OutboundType returns the CloudEvent type of an outbound event kind, the
// last token of its subject ("interrupted" -> TypeInterrupted), and false
// for an unknown kind.
func OutboundType(kind string) (string, bool) {
	switch kind {
	case EventStarted:
		return TypeStarted, true
	case EventInterrupted:
		return TypeInterrupted, true
	case EventResumed:
		return TypeResumed, true
	case EventCompleted:
		return TypeCompleted, true
	case EventFailed:
		return TypeFailed, true
	case EventCancelled:
		return TypeCancelled, true
	case EventExpired:
		return TypeExpired, true
	case EventRefused:
		return TypeRefused, true
	case EventDecided:
		return TypeToolDecided, true
	case EventAssigned:
		return TypeAssigned, true
	case EventVoted:
		return TypeVoted, true
	case EventReminded:
		return TypeReminded, true
	case EventAnswered:
		return TypeAnswered, true
	case EventConsumed:
		return TypeToolConsumed, true
	}
	return "", false
}

// AuditType returns the CloudEvent type of an audit record of action.
func AuditType(action string) string { return TypeAuditPrefix + action }

// InboundType returns the CloudEvent type expected on an inbound subject
// verb ("start" -> TypeStart), and false for an unknown verb.
func InboundType(verb string) (string, bool) {
	switch verb {
	case VerbStart:
		return TypeStart, true
	case VerbResume:
		return TypeResume, true
	case VerbCancel:
		return TypeCancel, true
	case VerbReannounce:
		return TypeReannounce, true
	case VerbRequest:
		return TypeToolRequest, true
	case VerbExpire:
		return TypeExpire, true
	case VerbAssign:
		return TypeAssign, true
	case VerbRemind:
		return TypeRemind, true
	case VerbConsume:
		return TypeToolConsume, true
	case VerbMigrate:
		return TypeMigrate, true
	}
	return "", false
}
