package events

import "time"

// Finished is an entry of the finished-runs index: a run that finished,
// and how, as readers such as inboxes and the client list it. Each
// finished status has a stream of its own (INTERLOCK_FINISHED_COMPLETED,
// _FAILED, _CANCELLED, _EXPIRED), subject <prefix>.finished.<status>.<flow>;
// an entry is appended when the run finishes and removed when its
// checkpoint is (after --keep-finished).
type Finished struct {
	// Flow and Run name the run.
	Flow string `json:"flow"`
	Run  string `json:"run"`
	// Status is completed, failed, cancelled or expired.
	Status string `json:"status"`
	// Node is the node the run ended at.
	Node string `json:"node,omitempty"`
	// Checkpoint is the number of the checkpoint that finished the run.
	Checkpoint uint64 `json:"checkpoint"`
	// CreatedAt is when the run started; FinishedAt when it finished.
	CreatedAt  time.Time `json:"createdAt"`
	FinishedAt time.Time `json:"finishedAt"`
	// Error says why a failed run failed, cut to 1 KiB.
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
}

// FinishedInterrupt is the interrupt a finished run last waited on.
type FinishedInterrupt struct {
	RequestID string `json:"requestId"`
	Node      string `json:"node"`
	// Kind is question, choice or approval.
	Kind string `json:"kind"`
	// ApproverRole is who could decide an approval.
	ApproverRole string `json:"approverRole,omitempty"`
	// Action is what an approval proposed.
	Action string `json:"action,omitempty"`
}

// FinishedDecision is a finished run's latest approval decision.
type FinishedDecision struct {
	// Verdict is approve, edit or reject.
	Verdict  string    `json:"verdict"`
	Approver string    `json:"approver,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
	// Timeout is set when a deadline's policy decided.
	Timeout bool `json:"timeout,omitempty"`
}
