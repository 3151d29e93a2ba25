package protocol

import (
	"encoding/json"
	"fmt"
	"time"
)

// Finished is an entry of the finished-runs index: a run that finished,
// and how, as lists of runs (the inbox's done view, GET /v1/runs,
// interlock runs) show it. Each finished status has a stream of its own
// (INTERLOCK_FINISHED_COMPLETED, _FAILED, _CANCELLED, _EXPIRED), subject
// <prefix>.finished.<status>.<flow>; the transition that finishes a run
// appends its entry, which goes when the run's checkpoint does (after
// --keep-finished).
type Finished struct {
	// Flow and Run name the run.
	Flow string `json:"flow"`
	Run  string `json:"run"`
	// Status is completed, failed, cancelled or expired.
	Status Status `json:"status"`
	// Node is the node the run ended at.
	Node string `json:"node,omitempty"`
	// Checkpoint is the number of the checkpoint that finished the run.
	Checkpoint uint64 `json:"checkpoint"`
	// CreatedAt is when the run started; FinishedAt when it finished.
	CreatedAt  time.Time `json:"createdAt"`
	FinishedAt time.Time `json:"finishedAt"`
	// Error says why a failed run failed, cut to 1 KiB (the checkpoint
	// holds all of it).
	Error string `json:"error,omitempty"`
	// Interrupt is the interrupt the run waited on when the transition
	// that finished it began (the one answered, decided, expired or
	// cancelled); absent when it finished without waiting since.
	Interrupt *FinishedInterrupt `json:"interrupt,omitempty"`
	// Decision is the run's latest approval decision, if it had one.
	Decision *FinishedDecision `json:"decision,omitempty"`
	// By and Reason say who cancelled the run, and why.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
	// StartedBy is who started the run (for an ask or a tool call, who
	// asked).
	StartedBy string `json:"startedBy,omitempty"`
	// Result is how the run ended ([Outcome]): approved, edited,
	// rejected, answered, completed, expired, cancelled or failed. Entries
	// written before it was recorded have none; [Finished.Outcome] then
	// says it from the status and the decision.
	Result Outcome `json:"outcome,omitempty"`
}

// FinishedInterrupt is the interrupt a finished run last waited on.
type FinishedInterrupt struct {
	RequestID string `json:"requestId"`
	Node      string `json:"node"`
	// Kind is the interrupt's kind.
	Kind string `json:"kind"`
	// ApproverRole is who could decide an approval.
	ApproverRole string `json:"approverRole,omitempty"`
	// Action is what an approval proposed.
	Action string `json:"action,omitempty"`
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

// DecodeFinished decodes an entry of the finished-runs index.
func DecodeFinished(data []byte) (Finished, error) {
	var f Finished
	if err := json.Unmarshal(data, &f); err != nil {
		return Finished{}, fmt.Errorf("protocol: not a finished-runs index entry: %w", err)
	}
	if f.Flow == "" || f.Run == "" || f.Status == "" {
		return Finished{}, fmt.Errorf("protocol: a finished-runs index entry lacks flow, run or status")
	}
	return f, nil
}
