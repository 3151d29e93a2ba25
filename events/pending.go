package events

import "time"

// Pending is an entry of the pending index (the interlock_pending bucket,
// key <flow>.<run>): a run waiting on an interrupt, as readers such as
// inboxes and the client list it. The document is present exactly while
// the run waits.
type Pending struct {
	// Flow and Run name the run.
	Flow string `json:"flow"`
	Run  string `json:"run"`
	// Node is the node that asked.
	Node string `json:"node"`
	// RequestID is the interrupt's request id, as in the interrupted event.
	RequestID string `json:"requestId"`
	// Kind is the interrupt kind: question, choice or approval.
	Kind string `json:"kind"`
	// Checkpoint is the run's checkpoint number when it asked.
	Checkpoint uint64 `json:"checkpoint"`
	// Fields are the state fields a question interrupt still asks for.
	Fields []string `json:"fields,omitempty"`
	// Question is the question of a choice interrupt.
	Question string `json:"question,omitempty"`
	// ApproverRole is who may decide an approval interrupt.
	ApproverRole string `json:"approverRole,omitempty"`
	// Action is what an approval interrupt proposes (a tool name, or the
	// node's name for a gate declared on the flow).
	Action string `json:"action,omitempty"`
	// AskedAt is when the interrupt was asked.
	AskedAt time.Time `json:"askedAt"`
	// ExpiresAt is when the interrupt expires, if it has a timeout.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}
