package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Node is a node's handle on its run, passed to [NodeFunc].
type Node[S any] struct{ x *exec }

// exec is one execution of one node.
type exec struct {
	flow *Flow
	cp   *Checkpoint
	now  time.Time
	// asks counts the node's interrupt calls, to match answers in order.
	asks int
	// paused is set when the node asked for something not yet answered.
	paused *Interrupt
	// err is the first invariant violation; it fails the node.
	err error
	// abort is set when a step could not be recorded; the transition is retried.
	abort error
	// persist records the checkpoint mid-node (after a step).
	persist func(context.Context) error
	// ensureStored creates the checkpoint if it was never written, so that a
	// second delivery of a start finds the run before repeating a step.
	ensureStored func(context.Context) error
	// requestID returns a new request id.
	requestID func() string
	steps     map[string]bool
}

func (x *exec) fail(err error) error {
	if x.err == nil {
		x.err = err
	}
	return err
}

// Name returns the node's name.
func (n *Node[S]) Name() string { return n.x.cp.Node }

// Run returns the run id.
func (n *Node[S]) Run() string { return n.x.cp.Run }

// State returns the run's current state.
func (n *Node[S]) State() S {
	s, err := decodeState[S](n.x.cp.State)
	if err != nil {
		n.x.fail(err)
	}
	return s
}

// Set updates one state field (or parent.child) through its reducer. It
// returns, and records against the node, an error naming the key path if v
// does not survive a JSON round trip or does not fit the state type.
func (n *Node[S]) Set(field string, v any) error {
	return n.Update(Update{field: v})
}

// Update applies u to the state through the flow's reducers; see [Node.Set].
func (n *Node[S]) Update(u Update) error {
	if err := n.x.apply(u); err != nil {
		return n.x.fail(err)
	}
	return nil
}

// apply encodes and applies an update. It checks each value before changing
// anything, and that the result still fits a typed state.
func (x *exec) apply(u Update) error {
	raws := make(map[string]json.RawMessage, len(u))
	for _, field := range sortedKeys(u) {
		if _, _, err := splitPath(field); err != nil {
			return fmt.Errorf("state.%s: %w", field, err)
		}
		raw, err := encodeValue("state."+field, u[field])
		if err != nil {
			return err
		}
		raws[field] = raw
	}
	return x.applyRaw(raws)
}

func (x *exec) applyRaw(raws map[string]json.RawMessage) error {
	return applyDoc(x.flow, x.cp, raws)
}

// applyDoc applies encoded values through the flow's reducers, all or nothing.
func applyDoc(f *Flow, cp *Checkpoint, raws map[string]json.RawMessage) error {
	next := cp.State.clone()
	for _, field := range sortedKeys(raws) {
		parent, _, _ := splitPath(field)
		if err := next.set(field, raws[field], f.reducers[parent]); err != nil {
			return fmt.Errorf("state.%s: %w", field, err)
		}
	}
	if f.fit != nil {
		if err := f.fit(next); err != nil {
			return err
		}
	}
	cp.State = next
	return nil
}

// Ask pauses the run with a question interrupt unless every field is already
// filled (by the start state or earlier answers) and valid. On the run that
// follows the answer, it returns the validated answers, which are also in the
// state. While the run must wait it returns [ErrInterrupted]: return it.
func (n *Node[S]) Ask(ctx context.Context, qs Questions) (Answers, error) {
	return n.x.ask(ctx, qs)
}

// Choose pauses the run with a choice interrupt. On the run that follows the
// answer it returns the selected option ids. While the run must wait it
// returns [ErrInterrupted]: return it.
func (n *Node[S]) Choose(ctx context.Context, c Choice) ([]string, error) {
	return n.x.choose(ctx, c)
}

// current returns the checkpoint's pending interrupt if it belongs to
// interrupt call index of this node and has the given kind.
func (x *exec) current(index int, kind string) *Interrupt {
	in := x.cp.Interrupt
	if in == nil || in.Node != x.cp.Node || in.Index != index || in.Kind != kind {
		return nil
	}
	return in
}

// resolved returns the recorded answer of interrupt call index, if any.
func (x *exec) resolved(index int) (json.RawMessage, bool) {
	if index < len(x.cp.Resumes) && x.cp.Resumes[index] != nil {
		return x.cp.Resumes[index], true
	}
	return nil, false
}

func (x *exec) resolve(index int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	for len(x.cp.Resumes) <= index {
		x.cp.Resumes = append(x.cp.Resumes, nil)
	}
	x.cp.Resumes[index] = b
	x.cp.Interrupt = nil
	return nil
}

func (x *exec) begin() (int, error) {
	if x.paused != nil {
		return 0, x.fail(fmt.Errorf("node %q asked again after an interrupt: return ErrInterrupted from the node when Ask or Choose returns it", x.cp.Node))
	}
	i := x.asks
	x.asks++
	return i, nil
}

func (x *exec) pause(in *Interrupt) error {
	in.RequestID = x.requestID()
	in.Node = x.cp.Node
	in.AskedAt = x.now
	x.paused = in
	return ErrInterrupted
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
	given := map[string]json.RawMessage{}
	if cur := x.current(i, KindQuestion); cur != nil {
		for f, v := range cur.Answers {
			if filled(v) {
				given[f] = v
			}
		}
	}
	fields := make([]string, len(qs.Questions))
	values := map[string]json.RawMessage{}
	var missing []Question
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
		return nil, x.pause(&Interrupt{
			Kind: KindQuestion, Index: i, Questions: missing, Fields: fields,
			Context: qs.Context, Answers: given,
		})
	}

	// Every field is filled: validate.
	extra := Update{}
	var rejected []Question
	for _, q := range qs.Questions {
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
		return nil, x.pause(&Interrupt{
			Kind: KindQuestion, Index: i, Questions: rejected, Fields: fields,
			Context: qs.Context, Answers: given,
		})
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

func (x *exec) choose(_ context.Context, c Choice) ([]string, error) {
	i, err := x.begin()
	if err != nil {
		return nil, err
	}
	if raw, ok := x.resolved(i); ok {
		var ids []string
		if err := json.Unmarshal(raw, &ids); err != nil {
			return nil, x.fail(fmt.Errorf("recorded choice of interrupt %d: %w", i, err))
		}
		return ids, nil
	}
	if err := checkChoice(c); err != nil {
		return nil, x.fail(fmt.Errorf("node %q: %w", x.cp.Node, err))
	}
	if cur := x.current(i, KindChoice); cur != nil && cur.Selected != nil {
		ids := cur.Selected
		if err := x.resolve(i, ids); err != nil {
			return nil, x.fail(err)
		}
		return ids, nil
	}
	return nil, x.pause(&Interrupt{
		Kind: KindChoice, Index: i, Question: c.Question,
		Options: c.Options, Multiple: c.Multiple,
	})
}

// Stepper is what [Step] records into: a [*Node] of any state type.
type Stepper interface{ stepper() *exec }

func (n *Node[S]) stepper() *exec { return n.x }

// Step runs fn once per visit of the node and records its result in the
// checkpoint before going on. When the node runs again (on a resume, or after
// a crash), Step returns the recorded result instead of calling fn: a charge,
// an email or a model call wrapped in a step is not repeated. name must be
// unique within the node. The result must survive a JSON round trip.
func Step[T any](ctx context.Context, n Stepper, name string, fn func(context.Context) (T, error)) (T, error) {
	x := n.stepper()
	var zero T
	if x.steps[name] {
		return zero, x.fail(fmt.Errorf("node %q: step %q runs twice in one visit; give each step its own name", x.cp.Node, name))
	}
	x.steps[name] = true
	if raw, ok := x.cp.Steps[name]; ok {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return zero, x.fail(fmt.Errorf("node %q: recorded result of step %q does not decode into %T: %w", x.cp.Node, name, v, err))
		}
		return v, nil
	}
	if x.ensureStored != nil {
		if err := x.ensureStored(ctx); err != nil {
			x.abort = fmt.Errorf("recording the run before step %q: %w", name, err)
			return zero, x.abort
		}
	}
	v, err := fn(ctx)
	if err != nil {
		return zero, err
	}
	raw, err := encodeValue("step."+name, v)
	if err != nil {
		return zero, x.fail(fmt.Errorf("node %q: %w", x.cp.Node, err))
	}
	if x.cp.Steps == nil {
		x.cp.Steps = map[string]json.RawMessage{}
	}
	x.cp.Steps[name] = raw
	if x.persist != nil {
		if err := x.persist(ctx); err != nil {
			x.abort = fmt.Errorf("recording step %q: %w", name, err)
			return zero, x.abort
		}
	}
	return v, nil
}
