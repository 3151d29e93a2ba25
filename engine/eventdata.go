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
)

// Actions of audit records: what happened to a run.
const (
	ActionStarted     = "started"
	ActionResumed     = "resumed"
	ActionCancelled   = "cancelled"
	ActionReannounced = "reannounced"
)

// EventData is the typed data of an outbound event or audit record: one of
// [*StartedEvent], [*InterruptedEvent], [*ResumedEvent], [*CompletedEvent],
// [*FailedEvent], [*CancelledEvent], [*RefusedEvent] or [*AuditRecord].
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
	Question  string          `json:"question,omitempty"`
	Options   []Option        `json:"options,omitempty"`
	Multiple  *bool           `json:"multiple,omitempty"`
	ExpiresAt *time.Time      `json:"expiresAt,omitempty"`
	Origin    json.RawMessage `json:"origin,omitempty"`
}

// ResumedEvent is the data of a resumed event: an answer was accepted.
type ResumedEvent struct {
	Flow       string          `json:"flow"`
	Run        string          `json:"run"`
	Node       string          `json:"node"`
	RequestID  string          `json:"requestId"`
	Kind       string          `json:"kind"`
	Checkpoint uint64          `json:"checkpoint"`
	Origin     json.RawMessage `json:"origin,omitempty"`
}

// CompletedEvent is the data of a completed event: the final state.
type CompletedEvent struct {
	Flow       string          `json:"flow"`
	Run        string          `json:"run"`
	Checkpoint uint64          `json:"checkpoint"`
	State      Doc             `json:"state"`
	Origin     json.RawMessage `json:"origin,omitempty"`
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

// AuditRecord is one record of the audit stream: one per transition, naming
// the command, who sent it, and where the run ended up. It never holds a
// resume token, an answer or a tool's arguments.
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
	// Replaces is the request id a reannounce replaced.
	Replaces string        `json:"replaces,omitempty"`
	Outcome  *AuditOutcome `json:"outcome,omitempty"`
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

func (e *AuditRecord) stamp(uint64, string) EventData { return e }

// newEventData returns an empty value of the data type of an event kind
// (or, on the audit stream, of an audit record).
func newEventData(stream Stream, kind string) (EventData, error) {
	if stream == AuditStream {
		return &AuditRecord{}, nil
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
