package events

// Event kinds: the last token of an outbound subject
// (interlock.ev.<flow>.<run>.<kind>). [OutboundType] maps each to its
// CloudEvent type.
const (
	// KindStarted: a run was started.
	KindStarted = "started"
	// KindInterrupted: a run paused on an interrupt (a first ask or a re-ask).
	KindInterrupted = "interrupted"
	// KindResumed: an answer was accepted and the run carries on.
	KindResumed = "resumed"
	// KindCompleted: a run finished; the data holds its final state.
	KindCompleted = "completed"
	// KindFailed: a run stopped on an error.
	KindFailed = "failed"
	// KindCancelled: a run was cancelled.
	KindCancelled = "cancelled"
	// KindExpired: a run's interrupt timed out and the run ended.
	KindExpired = "expired"
	// KindRefused: a command was refused; the data says why.
	KindRefused = "refused"
	// KindDecided: a tool-call request was decided (subject
	// interlock.ev.gate.<run>.decided).
	KindDecided = "decided"
)

// Kinds returns every outbound event kind, in the order of the protocol's
// subject table.
func Kinds() []string {
	return []string{KindStarted, KindInterrupted, KindResumed, KindCompleted, KindFailed,
		KindCancelled, KindExpired, KindRefused, KindDecided}
}
