package bus

import (
	"time"

	"github.com/interlockhq/interlock/protocol"
	"github.com/rs/zerolog"
)

// RunLog is one step of a run as the operator's log shows it. It holds
// names, numbers and times only: no resume token, answer, state or tool
// argument can reach the log through it.
type RunLog struct {
	// Kind is the event the step published: protocol.EventStarted,
	// KindInterrupted, KindResumed, KindCompleted, KindFailed,
	// KindCancelled or KindExpired. Other kinds are not logged here.
	Kind string
	Flow string
	Run  string
	// Node is the node the run is at after the step (the node that asks,
	// for interrupted; the node answered, for resumed).
	Node string
	// Checkpoint is the checkpoint number the step wrote.
	Checkpoint uint64
	// RequestID identifies the interrupt asked (interrupted) or answered
	// (resumed).
	RequestID string
	// Started is when the run started (the checkpoint's createdAt).
	Started time.Time
	// Asked is when the interrupt the step ends was asked (resumed,
	// cancelled or expired while waiting); zero if none.
	Asked time.Time
	// Error says why a failed run failed.
	Error string
}

// LogOutcome writes one line for a step of a run: info for started,
// interrupted, resumed, completed, cancelled and expired, warn for failed.
// The line has flow, run, node, checkpoint, request_id where set, since_start
// (how long the run has been going) and, when an interrupt was answered or
// ended, waited (how long it waited). now is the time of the step.
func LogOutcome(log zerolog.Logger, now time.Time, r RunLog) {
	var e *zerolog.Event
	switch r.Kind {
	case protocol.EventStarted, protocol.EventInterrupted, protocol.EventResumed, protocol.EventCompleted,
		protocol.EventCancelled, protocol.EventExpired:
		e = log.Info()
	case protocol.EventFailed:
		e = log.Warn()
	default:
		return
	}
	e = e.Str("flow", r.Flow).Str("run", r.Run)
	if r.Node != "" {
		e = e.Str("node", r.Node)
	}
	if r.Checkpoint != 0 {
		e = e.Uint64("checkpoint", r.Checkpoint)
	}
	if r.RequestID != "" {
		e = e.Str("request_id", r.RequestID)
	}
	if r.Kind != protocol.EventStarted && !r.Started.IsZero() {
		e = e.Dur("since_start", now.Sub(r.Started))
	}
	if r.Kind != protocol.EventStarted && r.Kind != protocol.EventInterrupted && !r.Asked.IsZero() {
		e = e.Dur("waited", now.Sub(r.Asked))
	}
	if r.Kind == protocol.EventFailed && r.Error != "" {
		e = e.Str("error", r.Error)
	}
	e.Msg("run " + r.Kind)
}
