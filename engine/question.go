package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// Question asks for one state field.
type Question struct {
	// Field is the state field the answer fills: a top-level field, or
	// parent.child for one level of nesting.
	Field string `json:"field"`
	// Question is the text shown to the person.
	Question string `json:"question"`
	// Type is the JSON type of the answer ("string", "number", "integer",
	// "boolean", "object" or "array"), which surfaces use to read what a
	// person types (see [protocol.Value]). Left empty, it is the type of
	// the field in the flow's state type, if that tells.
	Type string `json:"type,omitempty"`
	// Suggestions are possible answers to offer.
	Suggestions []string `json:"suggestions,omitempty"`
	// Context is guidance for the model that phrases the question, never
	// shown verbatim to the person. After a rejected answer it starts with
	// "ERROR: <message>".
	Context string `json:"context,omitempty"`
	// Schema, if set, is a JSON Schema (draft 2020-12) the answer must
	// fit, as JSON: an answer that does not is refused invalid_answer
	// naming the path ("/email: is not a valid email"), and a value from
	// the start state that does not is cleared and its question asked
	// with the error. Left empty, Type is the schema's type.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Validate, if set, checks the answer once every field of the interrupt
	// is filled, before the run advances.
	Validate Validator `json:"-"`
}

// Questions is a question interrupt: one or more fields to fill.
type Questions struct {
	Questions []Question
	// Title, if set, says in one line what is asked, for surfaces.
	Title string
	// Context is interrupt-wide guidance ("Ask both in one natural message.").
	Context string
	// Timeout, if set, is how long the questions may wait for answers;
	// then the run ends expired. Partial answers and re-asks keep the
	// first deadline.
	Timeout time.Duration
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
		if len(q.Schema) > 0 {
			if _, err := compileSchema(q.Schema); err != nil {
				return fmt.Errorf("question %d (field %s): schema: %w", i, q.Field, err)
			}
			if t := protocol.SchemaType(q.Schema); t != "" && q.Type != "" && t != q.Type {
				return fmt.Errorf("question %d (field %s): type %s, but the schema's type is %s", i, q.Field, q.Type, t)
			}
		}
	}
	return nil
}

// Ask pauses the run with a question interrupt unless every field is already
// filled (by the start state or earlier answers) and valid. On the run that
// follows the answer, it returns the validated answers, which are also in the
// state. While the run must wait it returns [ErrInterrupted]: return it.
func (n *Node[S]) Ask(ctx context.Context, qs Questions) (Answers, error) {
	return n.x.ask(ctx, qs)
}

func (x *exec) ask(ctx context.Context, qs Questions) (Answers, error) {
	i, err := x.begin()
	if err != nil {
		return nil, err
	}
	if raw, ok := x.resolved(i); ok {
		var a Answers
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, x.fail(fmt.Errorf("recorded answers of interrupt %d: %w", i, err))
		}
		return a, nil
	}
	if err := checkQuestions(qs); err != nil {
		return nil, x.fail(fmt.Errorf("node %q: %w", x.cp.Node, err))
	}
	if err := checkTimeout(KindQuestion, qs.Timeout, Policy{}); err != nil {
		return nil, x.fail(fmt.Errorf("node %q: questions: %w", x.cp.Node, err))
	}
	given := map[string]json.RawMessage{}
	cur := x.current(i, KindQuestion)
	if cur != nil {
		for f, v := range cur.Answers {
			if filled(v) {
				given[f] = v
			}
		}
	}
	fields := make([]string, len(qs.Questions))
	values := map[string]json.RawMessage{}
	var missing []Question
	qs.Questions = slices.Clone(qs.Questions)
	for k := range qs.Questions {
		q := &qs.Questions[k]
		if len(q.Schema) > 0 {
			q.Schema = compact(q.Schema)
			if q.Type == "" {
				q.Type = protocol.SchemaType(q.Schema)
			}
		}
		if q.Type == "" && x.flow.typeOf != nil {
			q.Type = x.flow.typeOf(q.Field)
		}
	}
	for k, q := range qs.Questions {
		fields[k] = q.Field
		if v, ok := given[q.Field]; ok {
			values[q.Field] = v
		} else if v, ok := x.cp.State.get(q.Field); ok && filled(v) {
			values[q.Field] = v
		} else {
			missing = append(missing, q)
		}
	}
	if len(missing) > 0 {
		return nil, x.pause(x.carry(cur, qs.Timeout, &Interrupt{
			Kind: KindQuestion, Index: i, Questions: missing, Fields: fields,
			Context: qs.Context, Answers: given, Title: qs.Title,
		}))
	}

	// Every field is filled: validate.
	extra := Update{}
	var rejected []Question
	for _, q := range qs.Questions {
		if err := q.checkAnswer(values[q.Field]); err != nil {
			q.Context = joinContext("ERROR: "+err.Error(), q.Context)
			rejected = append(rejected, q)
			continue
		}
		if q.Validate == nil {
			continue
		}
		var v any
		if err := json.Unmarshal(values[q.Field], &v); err != nil {
			return nil, x.fail(fmt.Errorf("answer for %s: %w", q.Field, err))
		}
		u, err := q.Validate(ctx, v)
		var rej *Rejection
		switch {
		case errors.As(err, &rej):
			q.Context = joinContext("ERROR: "+rej.Message, q.Context)
			rejected = append(rejected, q)
		case err != nil:
			return nil, x.fail(fmt.Errorf("validating %s: %w", q.Field, err))
		default:
			for k, val := range u {
				extra[k] = val
			}
		}
	}
	if len(rejected) > 0 {
		for _, q := range rejected {
			delete(given, q.Field)
			x.cp.State.clear(q.Field)
		}
		return nil, x.pause(x.carry(cur, qs.Timeout, &Interrupt{
			Kind: KindQuestion, Index: i, Questions: rejected, Fields: fields,
			Context: qs.Context, Answers: given, Title: qs.Title,
		}))
	}
	if err := x.applyRaw(given); err != nil {
		return nil, x.fail(err)
	}
	if err := x.apply(extra); err != nil {
		return nil, x.fail(err)
	}
	answers := Answers{}
	for _, f := range fields {
		var v any
		if raw, ok := x.cp.State.get(f); ok {
			_ = json.Unmarshal(raw, &v)
		}
		answers[f] = v
	}
	if err := x.resolve(i, answers); err != nil {
		return nil, x.fail(err)
	}
	return answers, nil
}

func joinContext(a, b string) string {
	if b == "" {
		return a
	}
	return a + " " + b
}

// questionKind is the rules of a question interrupt.
type questionKind struct{}

// answer records answers to some or all of the fields asked, which
// [protocol.Spec.Check] found asked, once they fit the state. Validators
// run when the node runs again, once every field is filled (rule 3).
func (questionKind) answer(t *txn, in *Interrupt, cmd Resume) error {
	f, cp := t.f, t.cp
	for _, q := range in.Questions {
		if a, ok := cmd.Answers[q.Field]; ok {
			if err := q.checkAnswer(a); err != nil {
				return err
			}
		}
	}
	trial := cp.State.clone()
	for _, field := range sortedKeys(cmd.Answers) {
		if err := trial.set(field, cmd.Answers[field], Replace); err != nil {
			return fmt.Errorf("answer for %s: %w", field, err)
		}
	}
	if f.fit != nil {
		if err := f.fit(trial); err != nil {
			return fmt.Errorf("answers do not fit the state: %w", err)
		}
	}
	if in.Answers == nil {
		in.Answers = map[string]json.RawMessage{}
	}
	for field, v := range cmd.Answers {
		in.Answers[field] = v
	}
	return nil
}

func (questionKind) describe(in *Interrupt, ev *protocol.Interrupted) {
	ev.Questions, ev.Context = wireQuestions(in.Questions), in.Context
}
