package protocol

import (
	"encoding/json"
	"time"
)

// Started is the data of a started event.
type Started struct {
	Flow       string          `json:"flow"`
	Run        string          `json:"run"`
	Checkpoint uint64          `json:"checkpoint"`
	Origin     json.RawMessage `json:"origin,omitempty"`
}

// Resumed is the data of a resumed event: an answer was accepted.
type Resumed struct {
	Flow       string `json:"flow"`
	Run        string `json:"run"`
	Node       string `json:"node"`
	RequestID  string `json:"requestId"`
	Kind       string `json:"kind"`
	Checkpoint uint64 `json:"checkpoint"`
	// Decision, Approver, Reason and Edits: an approval's decision.
	Decision string          `json:"decision,omitempty"`
	Approver string          `json:"approver,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Edits    json.RawMessage `json:"edits,omitempty"`
	// Message is a respond's answer.
	Message string          `json:"message,omitempty"`
	Origin  json.RawMessage `json:"origin,omitempty"`
	// Receipt is an approval's decision's receipt ([Receipt]), a compact
	// JWS signed with the deployment's audit key.
	Receipt string `json:"receipt,omitempty"`
}

// Completed is the data of a completed event: the final state.
type Completed struct {
	Flow       string          `json:"flow"`
	Run        string          `json:"run"`
	Checkpoint uint64          `json:"checkpoint"`
	State      json.RawMessage `json:"state"`
	// Rejection is set when a gate's rejection completed the run.
	Rejection *Decision       `json:"rejection,omitempty"`
	Origin    json.RawMessage `json:"origin,omitempty"`
}

// Failed is the data of a failed event: the node that failed and why.
type Failed struct {
	Flow       string          `json:"flow"`
	Run        string          `json:"run"`
	Checkpoint uint64          `json:"checkpoint"`
	Node       string          `json:"node"`
	Error      string          `json:"error"`
	Origin     json.RawMessage `json:"origin,omitempty"`
}

// Cancelled is the data of a cancelled event.
type Cancelled struct {
	Flow       string `json:"flow"`
	Run        string `json:"run"`
	Checkpoint uint64 `json:"checkpoint"`
	Node       string `json:"node"`
	Reason     string `json:"reason,omitempty"`
	// By names who cancelled: the cancel's by, or its source.
	By     string          `json:"by,omitempty"`
	Origin json.RawMessage `json:"origin,omitempty"`
}

// Expired is the data of an expired event: an interrupt's deadline passed
// and its policy ended the run.
type Expired struct {
	Flow         string          `json:"flow"`
	Run          string          `json:"run"`
	Checkpoint   uint64          `json:"checkpoint"`
	Node         string          `json:"node"`
	RequestID    string          `json:"requestId"`
	Kind         string          `json:"kind"`
	ExpiresAt    time.Time       `json:"expiresAt"`
	ApproverRole string          `json:"approverRole,omitempty"`
	Origin       json.RawMessage `json:"origin,omitempty"`
}

// Refused is the data of a refused event: a command that was not applied,
// and why.
type Refused struct {
	Flow      string `json:"flow"`
	Run       string `json:"run"`
	RequestID string `json:"requestId,omitempty"`
	Code      Code   `json:"code"`
	Message   string `json:"message"`
	// EventID is the id of the refused command's CloudEvent.
	EventID string `json:"eventId,omitempty"`
}

// Decisions of a decided event.
const (
	// DecidedAllowed: no gate rule fired; the call may run.
	DecidedAllowed = "allowed"
	// DecidedApproved, DecidedEdited, DecidedRejected: a person decided
	// (Args holds the final args of an edited call).
	DecidedApproved = "approved"
	DecidedEdited   = "edited"
	DecidedRejected = "rejected"
	// DecidedExpired: nobody decided in time.
	DecidedExpired = "expired"
)

// Decided is the data of a tool-call gate's decided event
// (<prefix>.ev.gate.<callId>.decided).
type Decided struct {
	CallID string `json:"callId"`
	// Decision is allowed, approved, edited, rejected or expired.
	Decision string `json:"decision"`
	Tool     string `json:"tool,omitempty"`
	// Server is the request's server, if it named one.
	Server string `json:"server,omitempty"`
	// ArgsDigest is the canonical SHA-256 of the args the call was
	// requested with ([ArgsDigest]): the decision is about exactly them.
	ArgsDigest string `json:"argsDigest,omitempty"`
	// Args are the args to run an approved call with: the requested ones,
	// or an edit's final ones. FinalDigest is their canonical SHA-256.
	Args        json.RawMessage `json:"args,omitempty"`
	FinalDigest string          `json:"finalDigest,omitempty"`
	Approver    string          `json:"approver,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Rule        string          `json:"rule,omitempty"`
	// Message is a respond's answer to the agent (decision responded).
	Message string          `json:"message,omitempty"`
	Origin  json.RawMessage `json:"origin,omitempty"`
	// Receipt is the decision's receipt ([Receipt]): the gate's own for a
	// call it allowed, the approval's for a call a rule held. An agent
	// verifies it before it runs the call.
	Receipt string `json:"receipt,omitempty"`
}

// Consumed is the data of io.interlock.tool.consumed, on
// <prefix>.ev.gate.<callId>.consumed: an approved call's approval was
// taken, by whom and when, to run the args of ArgsDigest.
type Consumed struct {
	CallID     string          `json:"callId"`
	ArgsDigest string          `json:"argsDigest"`
	By         string          `json:"by"`
	At         time.Time       `json:"at"`
	Origin     json.RawMessage `json:"origin,omitempty"`
}

// NodeEvent is the data of an event a node emits, of type
// io.interlock.node.<kind> ([TypeNodePrefix]) on
// <prefix>.ev.<flow>.<run>.<kind>.
type NodeEvent struct {
	Flow       string `json:"flow"`
	Run        string `json:"run"`
	Node       string `json:"node"`
	Checkpoint uint64 `json:"checkpoint"`
	// Data is what the node emitted, any JSON value.
	Data   json.RawMessage `json:"data"`
	Origin json.RawMessage `json:"origin,omitempty"`
}
