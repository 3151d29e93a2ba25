package engine

import (
	"context"
	"time"
)

// Finished is the entry of a finished run in the finished-runs index: how
// it ended, what a list of runs shows of it. The transition that finishes
// a run (completed, failed, cancelled or expired) adds it to its outbox,
// and a store that is a [FinishedIndex] writes it, stamped with the
// checkpoint number, when the transition is published: beside the pending
// index's update, before the run's events. events.Finished is the same
// document, for clients.
type Finished struct {
	Flow   string `json:"flow"`
	Run    string `json:"run"`
	Status Status `json:"status"`
	// Node is the node the run ended at.
	Node string `json:"node,omitempty"`
	// Checkpoint is the number of the checkpoint that finished the run.
	Checkpoint uint64    `json:"checkpoint"`
	CreatedAt  time.Time `json:"createdAt"`
	FinishedAt time.Time `json:"finishedAt"`
	// Error says why a failed run failed, cut to 1 KiB (the checkpoint
	// holds all of it).
	Error string `json:"error,omitempty"`
	// Interrupt is the interrupt the run waited on when the transition
	// that finished it began: the one answered, decided, expired or
	// cancelled. Absent when the run finished without waiting since.
	Interrupt *FinishedInterrupt `json:"interrupt,omitempty"`
	// Decision is the run's latest approval decision, if it had one.
	Decision *FinishedDecision `json:"decision,omitempty"`
	// By and Reason say who cancelled the run, and why.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// FinishedInterrupt is the interrupt a finished run last waited on.
type FinishedInterrupt struct {
	RequestID    string `json:"requestId"`
	Node         string `json:"node"`
	Kind         string `json:"kind"`
	ApproverRole string `json:"approverRole,omitempty"`
	Action       string `json:"action,omitempty"`
}

// FinishedDecision is a finished run's latest approval decision.
type FinishedDecision struct {
	Verdict  Verdict   `json:"verdict"`
	Approver string    `json:"approver,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
	// Timeout is set when a deadline's policy decided.
	Timeout bool `json:"timeout,omitempty"`
}

func (f *Finished) stamp(rev uint64, _ string) EventData {
	c := *f
	c.Checkpoint = rev
	return &c
}

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
		CreatedAt: cp.CreatedAt, FinishedAt: t.now, Error: truncate(cp.Error, maxEcho),
	}
	if in := t.pending; in != nil {
		f.Interrupt = &FinishedInterrupt{RequestID: in.RequestID, Node: in.Node, Kind: in.Kind, ApproverRole: in.ApproverRole, Action: in.Action}
	}
	if n := len(cp.Decisions); n > 0 {
		d := cp.Decisions[n-1]
		f.Decision = &FinishedDecision{Verdict: d.Verdict, Approver: truncate(d.Approver, maxEcho),
			Reason: truncate(d.Reason, maxEcho), At: d.At, Timeout: d.Timeout}
	}
	for _, m := range cp.Outbox {
		if c, ok := m.Data.(*CancelledEvent); ok {
			f.By, f.Reason = truncate(c.By, maxEcho), truncate(c.Reason, maxEcho)
		}
	}
	return f
}
