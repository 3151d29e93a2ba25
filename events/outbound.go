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
	Flow        string          `json:"flow"`
	Run         string          `json:"run"`
	Node        string          `json:"node"`
	RequestID   string          `json:"requestId"`
	ResumeToken string          `json:"resumeToken"`
	Checkpoint  uint64          `json:"checkpoint"`
	Kind        string          `json:"kind"`
	Questions   []Question      `json:"questions,omitempty"`
	Context     string          `json:"context,omitempty"`
	Question    string          `json:"question,omitempty"`
	Options     []Option        `json:"options,omitempty"`
	Multiple    bool            `json:"multiple,omitempty"`
	ExpiresAt   string          `json:"expiresAt,omitempty"`
	Origin      json.RawMessage `json:"origin,omitempty"`
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

// Completed is the data of an io.interlock.run.completed event.
type Completed struct {
	Flow       string          `json:"flow"`
	Run        string          `json:"run"`
	Checkpoint uint64          `json:"checkpoint"`
	State      json.RawMessage `json:"state"`
	Origin     json.RawMessage `json:"origin,omitempty"`
}

// Failed is the data of an io.interlock.run.failed event.
type Failed struct {
	Flow       string `json:"flow"`
	Run        string `json:"run"`
	Checkpoint uint64 `json:"checkpoint"`
	Node       string `json:"node"`
	Error      string `json:"error"`
}
