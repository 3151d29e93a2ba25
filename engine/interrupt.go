package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Kinds of interrupt.
const (
	KindQuestion = "question"
	KindChoice   = "choice"
	KindApproval = "approval"
)

// ErrInterrupted is returned by [Node.Ask] and [Node.Choose] when the run
// must pause for an answer. A node returns it (or any error wrapping it) as
// is; the run resumes later by running the node again from its top.
var ErrInterrupted = errors.New("engine: run paused for an answer")

// Question asks for one state field.
type Question struct {
	// Field is the state field the answer fills: a top-level field, or
	// parent.child for one level of nesting.
	Field string `json:"field"`
	// Question is the text shown to the person.
	Question string `json:"question"`
	// Suggestions are possible answers to offer.
	Suggestions []string `json:"suggestions,omitempty"`
	// Context is guidance for the model that phrases the question, never
	// shown verbatim to the person. After a rejected answer it starts with
	// "ERROR: <message>".
	Context string `json:"context,omitempty"`
	// Validate, if set, checks the answer once every field of the interrupt
	// is filled, before the run advances.
	Validate Validator `json:"-"`
}

// Questions is a question interrupt: one or more fields to fill.
type Questions struct {
	Questions []Question
	// Context is interrupt-wide guidance ("Ask both in one natural message.").
	Context string
}

// Option is one choice among several.
type Option struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// Choice is a choice interrupt: pick one option, or several if Multiple.
type Choice struct {
	Question string
	Options  []Option
	Multiple bool
}

// Validator checks an answer. value is the answer decoded from JSON (a
// string, float64, bool, map[string]any, []any or nil). It accepts by
// returning a nil error, optionally with extra state updates (for example the
// answer normalised), or rejects by returning [Reject]. Any other error fails
// the run.
type Validator func(ctx context.Context, value any) (Update, error)

// Rejection is a validator's refusal of an answer, with a message for the person.
type Rejection struct{ Message string }

// Error implements error.
func (r *Rejection) Error() string { return "answer rejected: " + r.Message }

// Reject returns a [Rejection] carrying message: the field is cleared and its
// question asked again with context "ERROR: <message>".
func Reject(message string) error { return &Rejection{Message: message} }

// Answers holds the validated answers of a question interrupt, by field.
type Answers map[string]any

// String returns the answer for field as a string ("" if absent or not a string).
func (a Answers) String(field string) string {
	s, _ := a[field].(string)
	return s
}

// Interrupt is a pending interrupt as recorded in the checkpoint. It never
// holds the resume token.
type Interrupt struct {
	RequestID string `json:"requestId"`
	Node      string `json:"node"`
	// Index is the interrupt's position among the node's interrupt calls.
	Index int    `json:"index"`
	Kind  string `json:"kind"`
	// Questions are the questions asked now (a re-ask holds only the
	// unanswered or rejected ones).
	Questions []Question `json:"questions,omitempty"`
	// Fields are all the fields of a question interrupt.
	Fields  []string `json:"fields,omitempty"`
	Context string   `json:"context,omitempty"`
	// Answers are the answers given so far to a question interrupt.
	Answers map[string]json.RawMessage `json:"answers,omitempty"`

	Question string   `json:"question,omitempty"`
	Options  []Option `json:"options,omitempty"`
	Multiple bool     `json:"multiple,omitempty"`
	// Selected holds a validated choice answer until the node takes it.
	Selected []string `json:"selected,omitempty"`

	AskedAt   time.Time  `json:"askedAt"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

func checkQuestions(qs Questions) error {
	if len(qs.Questions) == 0 {
		return errors.New("a question interrupt needs at least one question")
	}
	seen := map[string]bool{}
	for i, q := range qs.Questions {
		if _, _, err := splitPath(q.Field); err != nil {
			return fmt.Errorf("question %d: %w", i, err)
		}
		if seen[q.Field] {
			return fmt.Errorf("question %d: field %q is asked twice", i, q.Field)
		}
		seen[q.Field] = true
		if q.Question == "" {
			return fmt.Errorf("question %d (field %s): question text is empty", i, q.Field)
		}
	}
	return nil
}

func checkChoice(c Choice) error {
	if c.Question == "" {
		return errors.New("a choice needs question text")
	}
	if len(c.Options) == 0 {
		return errors.New("a choice needs at least one option")
	}
	seen := map[string]bool{}
	for i, o := range c.Options {
		if o.ID == "" {
			return fmt.Errorf("option %d has an empty id", i)
		}
		if seen[o.ID] {
			return fmt.Errorf("option id %q appears twice", o.ID)
		}
		seen[o.ID] = true
	}
	return nil
}

// checkSelection validates a choice answer against the interrupt.
func (in *Interrupt) checkSelection(ids []string) error {
	if len(ids) == 0 {
		return fmt.Errorf("nothing selected; choose %s", in.optionList())
	}
	if !in.Multiple && len(ids) > 1 {
		return fmt.Errorf("%d options selected but this choice takes one; choose one of %s", len(ids), in.optionList())
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			return fmt.Errorf("option %q selected twice", id)
		}
		seen[id] = true
		found := false
		for _, o := range in.Options {
			if o.ID == id {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%q is not an option; choose %s", truncate(id, 64), in.optionList())
		}
	}
	return nil
}

func (in *Interrupt) optionList() string {
	s := ""
	for i, o := range in.Options {
		if i > 0 {
			s += ", "
		}
		s += o.ID
	}
	if in.Multiple {
		return "one or more of " + s
	}
	return "one of " + s
}
