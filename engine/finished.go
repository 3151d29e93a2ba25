package engine

import (
	"context"

	"github.com/interlockhq/interlock/protocol"
)

// Finished is the entry of a finished run in the finished-runs index
// ([protocol.Finished]). The transition that finishes a run (completed,
// failed, cancelled or expired) adds it to its outbox, and a store that is
// a [FinishedIndex] writes it, stamped with the checkpoint number, when
// the transition is published: beside the pending index's update, before
// the run's events.
type Finished = protocol.Finished

// FinishedIndex is implemented by a [Store] that keeps the finished-runs
// index. The runner writes a finished run's entry with it once the
// checkpoint that finished the run is written, and again when that
// transition's message is delivered again (the id is the same, for the
// store to drop a repeat).
type FinishedIndex interface {
	PutFinished(ctx context.Context, id string, f *Finished) error
}

// finished is the finished-runs index entry of the run the transition
// finished. Free text is cut to maxEcho bytes: the entry is for lists,
// and the checkpoint and the events hold it whole.
func (t *txn) finished() *Finished {
	cp := t.cp
	f := &Finished{
		Flow: cp.Flow, Run: cp.Run, Status: cp.Status, Node: cp.Node,
		CreatedAt: cp.CreatedAt, FinishedAt: t.now, Error: truncate(cp.Error, maxEcho), StartedBy: cp.StartedBy,
	}
	if in := t.pending; in != nil {
		f.Interrupt = &protocol.FinishedInterrupt{RequestID: in.RequestID, Node: in.Node, Kind: in.Kind, ApproverRole: in.ApproverRole, Action: in.Action}
	}
	if n := len(cp.Decisions); n > 0 {
		d := cp.Decisions[n-1]
		f.Decision = &protocol.FinishedDecision{Verdict: d.Verdict, Approver: truncate(d.Approver, maxEcho),
			Reason: truncate(d.Reason, maxEcho), At: d.At, Timeout: d.Timeout}
	}
	for _, m := range cp.Outbox {
		if c, ok := m.Data.(*protocol.Cancelled); ok {
			f.By, f.Reason = truncate(c.By, maxEcho), truncate(c.Reason, maxEcho)
		}
	}
	f.Result = protocol.OutcomeOf(cp.Status, f.Decision, cp.Waited)
	return f
}
