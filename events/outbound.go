package events

import "encoding/json"

// Question is one question of an interrupted event.
type Question struct {
	Field       string   `json:"field"`
	Question    string   `json:"question"`
	Suggestions []string `json:"suggestions,omitempty"`
	Context     string   `json:"context,omitempty"`
}

// Option is one option of a choice.
type Option struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// Interrupted is the data of an io.interlock.run.interrupted event.
type Interrupted struct {
	Flow        string     `json:"flow"`
	Run         string     `json:"run"`
	Node        string     `json:"node"`
	RequestID   string     `json:"requestId"`
	ResumeToken string     `json:"resumeToken"`
	Checkpoint  uint64     `json:"checkpoint"`
	Kind        string     `json:"kind"`
	Questions   []Question `json:"questions,omitempty"`
	Context     string     `json:"context,omitempty"`
	Question    string     `json:"question,omitempty"`
	Options     []Option   `json:"options,omitempty"`
	Multiple    bool       `json:"multiple,omitempty"`
	// Action, Args, Reason, ApproverRole and Decisions: an approval. Gate
	// is "before" or "after" for a gate declared on the flow; Error says
	// why an approval is asked again.
	Action       string          `json:"action,omitempty"`
	Args         json.RawMessage `json:"args,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	ApproverRole string          `json:"approverRole,omitempty"`
	Decisions    []string        `json:"decisions,omitempty"`
	Gate         string          `json:"gate,omitempty"`
	Error        string          `json:"error,omitempty"`
	ExpiresAt    string          `json:"expiresAt,omitempty"`
	Origin       json.RawMessage `json:"origin,omitempty"`
}

// Fields returns the fields the interrupt asks for, in order.
func (in Interrupted) Fields() []string {
	fs := make([]string, 0, len(in.Questions))
	for _, q := range in.Questions {
		fs = append(fs, q.Field)
	}
	return fs
}

// Refused is the data of an io.interlock.resume.refused event.
type Refused struct {
	Flow      string `json:"flow"`
	Run       string `json:"run"`
	RequestID string `json:"requestId,omitempty"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	EventID   string `json:"eventId,omitempty"`
}

// Started is the data of an io.interlock.run.started event.
type Started struct {
	Flow       string          `json:"flow"`
	Run        string          `json:"run"`
	Checkpoint uint64          `json:"checkpoint"`
	Origin     json.RawMessage `json:"origin,omitempty"`
}

// Completed is the data of an io.interlock.run.completed event.
type Completed struct {
	Flow       string          `json:"flow"`
	Run        string          `json:"run"`
	Checkpoint uint64          `json:"checkpoint"`
	State      json.RawMessage `json:"state"`
	Rejection  json.RawMessage `json:"rejection,omitempty"`
	Origin     json.RawMessage `json:"origin,omitempty"`
}

// Resumed is the data of an io.interlock.run.resumed event.
type Resumed struct {
	Flow       string          `json:"flow"`
	Run        string          `json:"run"`
	Node       string          `json:"node"`
	RequestID  string          `json:"requestId"`
	Kind       string          `json:"kind"`
	Checkpoint uint64          `json:"checkpoint"`
	Decision   string          `json:"decision,omitempty"`
	Approver   string          `json:"approver,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Edits      json.RawMessage `json:"edits,omitempty"`
	Origin     json.RawMessage `json:"origin,omitempty"`
}

// Expired is the data of an io.interlock.run.expired event.
type Expired struct {
	Flow         string          `json:"flow"`
	Run          string          `json:"run"`
	Checkpoint   uint64          `json:"checkpoint"`
	Node         string          `json:"node"`
	RequestID    string          `json:"requestId"`
	Kind         string          `json:"kind"`
	ExpiresAt    string          `json:"expiresAt"`
	ApproverRole string          `json:"approverRole,omitempty"`
	Origin       json.RawMessage `json:"origin,omitempty"`
}

// Decided is the data of an io.interlock.tool.decided event: the gate's
// answer to a tool-call request.
type Decided struct {
	CallID string `json:"callId"`
	// Decision is allowed, approved, edited, rejected or expired.
	Decision string          `json:"decision"`
	Tool     string          `json:"tool,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"`
	Approver string          `json:"approver,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Rule     string          `json:"rule,omitempty"`
	Origin   json.RawMessage `json:"origin,omitempty"`
}

// Failed is the data of an io.interlock.run.failed event.
type Failed struct {
	Flow       string          `json:"flow"`
	Run        string          `json:"run"`
	Checkpoint uint64          `json:"checkpoint"`
	Node       string          `json:"node"`
	Error      string          `json:"error"`
	Origin     json.RawMessage `json:"origin,omitempty"`
}

// Cancelled is the data of an io.interlock.run.cancelled event.
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

// NodeEvent is the data of an event a node emits, of type
// io.interlock.node.<kind> ([TypeNodePrefix]) on
// interlock.ev.<flow>.<run>.<kind>.
type NodeEvent struct {
	Flow       string `json:"flow"`
	Run        string `json:"run"`
	Node       string `json:"node"`
	Checkpoint uint64 `json:"checkpoint"`
	// Data is what the node emitted, any JSON value.
	Data   json.RawMessage `json:"data"`
	Origin json.RawMessage `json:"origin,omitempty"`
}
