package engine

import (
	"encoding/json"
	"fmt"
	"time"
)

// Kinds of outbound run event: the last token of an event's subject
// (interlock.ev.<flow>.<run>.<kind>).
const (
	EventStarted     = "started"
	EventInterrupted = "interrupted"
	EventResumed     = "resumed"
	EventCompleted   = "completed"
	EventFailed      = "failed"
	EventCancelled   = "cancelled"
	EventExpired     = "expired"
	EventRefused     = "refused"
	// EventDecided is a tool-call gate's answer (interlock.ev.gate.<callId>.decided).
	EventDecided = "decided"
)

// Actions of audit records: what happened to a run.
const (
	ActionStarted = "started"
	// ActionInterrupted: the run paused on an interrupt.
	ActionInterrupted = "interrupted"
	// ActionAnswered: a question or choice was answered.
	ActionAnswered = "answered"
	// ActionApproved, ActionEdited and ActionRejected: an approval was decided.
	ActionApproved    = "approved"
	ActionEdited      = "edited"
	ActionRejected    = "rejected"
	ActionExpired     = "expired"
	ActionEscalated   = "escalated"
	ActionCancelled   = "cancelled"
	ActionReannounced = "reannounced"
	// ActionRefused: a command on the run was refused. Refused records
	// hang off the chain (see [AuditRecord.Side]).
	ActionRefused = "refused"
)

// auditVerdict is the audit action of a verdict.
func auditVerdict(v Verdict) string {
	switch v {
	case VerdictEdit:
		return ActionEdited
	case VerdictReject:
		return ActionRejected
	}
	return ActionApproved
}

// EventData is the typed data of an outbound event, audit record or
// deadline: one of [*StartedEvent], [*InterruptedEvent], [*ResumedEvent],
// [*CompletedEvent], [*FailedEvent], [*CancelledEvent], [*ExpiredEvent],
// [*RefusedEvent], [*DecidedEvent], [*AuditRecord], [*Schedule] or
// [*Finished].
type EventData interface {
	// stamp returns a copy carrying the checkpoint number the event comes
	// from and, on an interrupted event, the resume token.
	stamp(rev uint64, token string) EventData
}

// StartedEvent is the data of a started event.
type StartedEvent struct {
	Flow       string          `json:"flow"`
	Run        string          `json:"run"`
	Checkpoint uint64          `json:"checkpoint"`
	Origin     json.RawMessage `json:"origin,omitempty"`
}

// InterruptedEvent is the data of an interrupted event: the pending
// interrupt, with the resume token that answers it. The token is added when
// the event is published and never stored.
type InterruptedEvent struct {
	Flow        string `json:"flow"`
	Run         string `json:"run"`
	Node        string `json:"node"`
	RequestID   string `json:"requestId"`
	ResumeToken string `json:"resumeToken,omitempty"`
	Checkpoint  uint64 `json:"checkpoint"`
	Kind        string `json:"kind"`
	// Questions and Context: a question interrupt.
	Questions []Question `json:"questions,omitempty"`
	Context   string     `json:"context,omitempty"`
	// Question, Options and Multiple: a choice.
	Question string   `json:"question,omitempty"`
	Options  []Option `json:"options,omitempty"`
	Multiple *bool    `json:"multiple,omitempty"`
	// Action, Args, Reason, ApproverRole and Decisions: an approval; Gate
	// is "before" or "after" for a gate declared on the flow, and Error
	// says why an approval is asked again.
	Action       string          `json:"action,omitempty"`
	Args         json.RawMessage `json:"args,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	ApproverRole string          `json:"approverRole,omitempty"`
	Decisions    []Verdict       `json:"decisions,omitempty"`
	Gate         string          `json:"gate,omitempty"`
	Error        string          `json:"error,omitempty"`
	ExpiresAt    *time.Time      `json:"expiresAt,omitempty"`
	Origin       json.RawMessage `json:"origin,omitempty"`
}

// ResumedEvent is the data of a resumed event: an answer was accepted.
type ResumedEvent struct {
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
	Origin   json.RawMessage `json:"origin,omitempty"`
}

// ExpiredEvent is the data of an expired event: an interrupt's deadline
// passed and its policy ended the run.
type ExpiredEvent struct {
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

// DecidedEvent is the data of a tool-call gate's decided event.
type DecidedEvent struct {
	CallID string `json:"callId"`
	// Decision is allowed, approved, edited, rejected or expired.
	Decision string `json:"decision"`
	Tool     string `json:"tool,omitempty"`
	// Args are the final args of an edited call.
	Args     map[string]any  `json:"args,omitempty"`
	Approver string          `json:"approver,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Rule     string          `json:"rule,omitempty"`
	Origin   json.RawMessage `json:"origin,omitempty"`
}

// NodeEvent is the data of an event a node emits ([Node.Emit]).
type NodeEvent struct {
	Flow       string          `json:"flow"`
	Run        string          `json:"run"`
	Node       string          `json:"node"`
	Checkpoint uint64          `json:"checkpoint"`
	Data       json.RawMessage `json:"data"`
	Origin     json.RawMessage `json:"origin,omitempty"`
}

func (e *NodeEvent) stamp(rev uint64, _ string) EventData {
	c := *e
	c.Checkpoint = rev
	return &c
}

// Schedule is a deadline: the server publishes it as an expire command
// for the run at ExpiresAt.
type Schedule struct {
	Flow      string    `json:"flow"`
	Run       string    `json:"run"`
	RequestID string    `json:"requestId"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// CompletedEvent is the data of a completed event: the final state.
type CompletedEvent struct {
	Flow       string `json:"flow"`
	Run        string `json:"run"`
	Checkpoint uint64 `json:"checkpoint"`
	State      Doc    `json:"state"`
	// Rejection is set when a gate's rejection completed the run.
	Rejection *Decision       `json:"rejection,omitempty"`
	Origin    json.RawMessage `json:"origin,omitempty"`
}

// FailedEvent is the data of a failed event: the node that failed and why.
type FailedEvent struct {
	Flow       string          `json:"flow"`
	Run        string          `json:"run"`
	Checkpoint uint64          `json:"checkpoint"`
	Node       string          `json:"node"`
	Error      string          `json:"error"`
	Origin     json.RawMessage `json:"origin,omitempty"`
}

// CancelledEvent is the data of a cancelled event.
type CancelledEvent struct {
	Flow       string          `json:"flow"`
	Run        string          `json:"run"`
	Checkpoint uint64          `json:"checkpoint"`
	Node       string          `json:"node"`
	Reason     string          `json:"reason,omitempty"`
	By         string          `json:"by,omitempty"`
	Origin     json.RawMessage `json:"origin,omitempty"`
}

// RefusedEvent is the data of a refused event: a command that was not
// applied, and why.
type RefusedEvent struct {
	Flow      string `json:"flow"`
	Run       string `json:"run"`
	RequestID string `json:"requestId,omitempty"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	// EventID is the id of the refused command's CloudEvent.
	EventID string `json:"eventId,omitempty"`
}

// AuditRecord is one record of the audit stream: what happened to a run,
// who did it, and where the run ended up. It never holds a resume token or
// an answer; an approval's records hold the proposed args, and an edit's
// the args after the edit. A run's records form a hash chain: each holds
// its position, the hash of the record before it and its own hash, and
// is signed with the deployment's audit key (see [AuditKeyInfo]).
type AuditRecord struct {
	Flow   string    `json:"flow"`
	Run    string    `json:"run"`
	Action string    `json:"action"`
	At     time.Time `json:"at"`
	// By names who acted: the approver or canceller when given, else the
	// command's source.
	By string `json:"by,omitempty"`
	// Source is the CloudEvents source of the command.
	Source    string `json:"source,omitempty"`
	EventID   string `json:"eventId,omitempty"`
	Node      string `json:"node,omitempty"`
	RequestID string `json:"requestId,omitempty"`
	Kind      string `json:"kind,omitempty"`
	// Trusted is set when an authenticated caller resumed without a token.
	Trusted bool   `json:"trusted,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Replaces is the request id a reannounce or an escalation replaced.
	Replaces string `json:"replaces,omitempty"`
	// ApproverRole is the role an approval is (or was) waiting on;
	// EscalatedFrom the role an escalation took it from.
	ApproverRole  string `json:"approverRole,omitempty"`
	EscalatedFrom string `json:"escalatedFrom,omitempty"`
	// Timeout is set when a deadline's policy acted.
	Timeout bool `json:"timeout,omitempty"`
	// Approval is the proposal a decision was taken on.
	Approval *AuditApproval `json:"approval,omitempty"`
	// ExpiresAt is an interrupt's deadline.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Code is a refusal's code.
	Code    string        `json:"code,omitempty"`
	Outcome *AuditOutcome `json:"outcome,omitempty"`

	// Seq is the record's position in the run's chain (1 for the first);
	// Prev is the hash of the record before it ("" for the first), and
	// Hash the hex SHA-256 of this record's canonical JSON without Hash.
	// A side record (a refusal) names the chain's head in Prev but does not
	// move it, so that a refusal never writes the checkpoint; its Seq is 0.
	Seq  uint64 `json:"seq,omitempty"`
	Prev string `json:"prev,omitempty"`
	Side bool   `json:"side,omitempty"`
	Hash string `json:"hash,omitempty"`
	// Kid is the id of the key that signed the record ([AuditKeyID]), and
	// Sig the Ed25519 signature of its hash: over the 32 bytes of the
	// SHA-256 digest Hash spells in hex, in standard base64. The hash
	// covers Kid but not Sig.
	Kid string `json:"kid,omitempty"`
	Sig string `json:"sig,omitempty"`
}

// AuditApproval is the proposal of an approval record: the action and its
// args as proposed and, after an edit, as edited.
type AuditApproval struct {
	Action string          `json:"action"`
	Args   json.RawMessage `json:"args,omitempty"`
	Edits  json.RawMessage `json:"edits,omitempty"`
	Final  json.RawMessage `json:"final,omitempty"`
}

// AuditOutcome is where a transition left the run.
type AuditOutcome struct {
	Status Status `json:"status"`
	Node   string `json:"node,omitempty"`
	// RequestID and Kind name the interrupt the run now waits on.
	RequestID string `json:"requestId,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Error     string `json:"error,omitempty"`
}

func (e *StartedEvent) stamp(rev uint64, _ string) EventData {
	c := *e
	c.Checkpoint = rev
	return &c
}

func (e *InterruptedEvent) stamp(rev uint64, token string) EventData {
	c := *e
	c.Checkpoint, c.ResumeToken = rev, token
	return &c
}

func (e *ResumedEvent) stamp(rev uint64, _ string) EventData {
	c := *e
	c.Checkpoint = rev
	return &c
}

func (e *CompletedEvent) stamp(rev uint64, _ string) EventData {
	c := *e
	c.Checkpoint = rev
	return &c
}

func (e *FailedEvent) stamp(rev uint64, _ string) EventData {
	c := *e
	c.Checkpoint = rev
	return &c
}

func (e *CancelledEvent) stamp(rev uint64, _ string) EventData {
	c := *e
	c.Checkpoint = rev
	return &c
}

func (e *RefusedEvent) stamp(uint64, string) EventData { return e }

func (e *ExpiredEvent) stamp(rev uint64, _ string) EventData {
	c := *e
	c.Checkpoint = rev
	return &c
}

func (e *DecidedEvent) stamp(uint64, string) EventData { return e }

func (e *Schedule) stamp(uint64, string) EventData { return e }

func (e *AuditRecord) stamp(uint64, string) EventData { return e }

// newEventData returns an empty value of the data type of an event kind
// (or, on the audit stream, of an audit record).
func newEventData(stream Stream, kind string) (EventData, error) {
	switch stream {
	case AuditStream:
		return &AuditRecord{}, nil
	case ScheduleStream:
		return &Schedule{}, nil
	case FinishedStream:
		return &Finished{}, nil
	}
	switch kind {
	case EventStarted:
		return &StartedEvent{}, nil
	case EventInterrupted:
		return &InterruptedEvent{}, nil
	case EventResumed:
		return &ResumedEvent{}, nil
	case EventCompleted:
		return &CompletedEvent{}, nil
	case EventFailed:
		return &FailedEvent{}, nil
	case EventCancelled:
		return &CancelledEvent{}, nil
	case EventRefused:
		return &RefusedEvent{}, nil
	case EventExpired:
		return &ExpiredEvent{}, nil
	case EventDecided:
		return &DecidedEvent{}, nil
	}
	if checkNodeKind(kind) == nil {
		return &NodeEvent{}, nil
	}
	return nil, fmt.Errorf("engine: no data type for %s event %q", stream, kind)
}

// UnmarshalJSON reads a message of a checkpoint's outbox, decoding its data
// into the type of its kind.
func (m *Message) UnmarshalJSON(b []byte) error {
	type plain Message
	var raw struct {
		plain
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = Message(raw.plain)
	d, err := newEventData(m.Stream, m.Kind)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw.Data, d); err != nil {
		return fmt.Errorf("engine: data of %s message %s: %w", m.Kind, m.ID, err)
	}
	m.Data = d
	return nil
}
