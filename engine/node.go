package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/interlockhq/interlock/protocol"
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
	// receipt signs a receipt of the transition's decision.
	receipt func(protocol.Receipt) string
	steps   map[string]bool
	// persisted is set once this transition wrote the checkpoint mid-node.
	persisted bool
	// rejected is set when an approval of this visit was rejected.
	rejected bool
	// invalid is the message of edits the approval's validator refused:
	// the resume is refused invalid_answer.
	invalid string
	// emit adds an event to the transition's outbox.
	emit func(kind string, data EventData)
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

// Local returns the node-local value name as set by [SetLocal] in this
// visit of the node, and false when it is not set (or does not decode
// into T). Node-local values survive the node's re-runs (on every resume)
// and are dropped when the node completes, so a node can do a thing once
// per visit and remember it across its interrupts: announce a pre-event,
// count re-asks.
func Local[T any](n Stepper, name string) (T, bool) {
	x := n.stepper()
	var v T
	raw, ok := x.cp.Locals[name]
	if !ok || json.Unmarshal(raw, &v) != nil {
		return v, false
	}
	return v, true
}

// SetLocal sets the node-local value name (see [Local]). The value must
// survive a JSON round trip.
func SetLocal(n Stepper, name string, v any) error {
	x := n.stepper()
	raw, err := encodeValue("local."+name, v)
	if err != nil {
		return x.fail(fmt.Errorf("node %q: %w", x.cp.Node, err))
	}
	if x.cp.Locals == nil {
		x.cp.Locals = map[string]json.RawMessage{}
	}
	x.cp.Locals[name] = raw
	return nil
}

// Emit publishes an event of the node's own, of type
// io.interlock.node.<kind> on interlock.ev.<flow>.<run>.<kind>, with the
// transition (after its checkpoint is written). kind is lower case letters,
// digits and '_', and none of the protocol's kinds. A node that emits and
// then pauses emits again on its re-run unless it remembers having done
// so: use [Local], or [Step] for work that must happen once.
func (n *Node[S]) Emit(kind string, data any) error {
	x := n.x
	if err := checkNodeKind(kind); err != nil {
		return x.fail(fmt.Errorf("node %q: %w", x.cp.Node, err))
	}
	raw, err := encodeValue("event."+kind, data)
	if err != nil {
		return x.fail(fmt.Errorf("node %q: %w", x.cp.Node, err))
	}
	if x.emit == nil {
		return x.fail(fmt.Errorf("node %q: Emit outside a transition", x.cp.Node))
	}
	x.emit(kind, &protocol.NodeEvent{Flow: x.cp.Flow, Run: x.cp.Run, Node: x.cp.Node, Data: raw, Origin: x.cp.Origin})
	return nil
}

func checkNodeKind(kind string) error {
	if kind == "" || len(kind) > 64 {
		return fmt.Errorf("event kind %q: use 1 to 64 of a-z 0-9 _", kind)
	}
	for i := 0; i < len(kind); i++ {
		c := kind[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("event kind %q: use only a-z 0-9 _", kind)
		}
	}
	if reservedKind(kind) {
		return fmt.Errorf("event kind %q is one of the protocol's; choose another", kind)
	}
	return nil
}

func reservedKind(kind string) bool {
	return slices.Contains(protocol.Events(), kind)
}
