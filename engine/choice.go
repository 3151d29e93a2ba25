package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// Option is one choice among several.
type Option = protocol.Option

// Choice is a choice interrupt: pick one option, or several if Multiple.
type Choice struct {
	Question string
	Options  []Option
	Multiple bool
	// Title, if set, says in one line what is asked, for surfaces.
	Title string
	// Timeout, if set, is how long the choice may wait; then the run ends
	// expired.
	Timeout time.Duration
}

// Choose pauses the run with a choice interrupt. On the run that follows the
// answer it returns the selected option ids. While the run must wait it
// returns [ErrInterrupted]: return it.
func (n *Node[S]) Choose(ctx context.Context, c Choice) ([]string, error) {
	return n.x.choose(ctx, c)
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
	if err := checkTimeout(KindChoice, c.Timeout, Policy{}); err != nil {
		return nil, x.fail(fmt.Errorf("node %q: choice: %w", x.cp.Node, err))
	}
	cur := x.current(i, KindChoice)
	if cur != nil && cur.Selected != nil {
		ids := cur.Selected
		if err := x.resolve(i, ids); err != nil {
			return nil, x.fail(err)
		}
		return ids, nil
	}
	return nil, x.pause(x.carry(cur, c.Timeout, &Interrupt{
		Kind: KindChoice, Index: i, Question: c.Question,
		Options: c.Options, Multiple: c.Multiple, Title: c.Title,
	}))
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

// choiceKind is the rules of a choice interrupt.
type choiceKind struct{}

// answer records the selected ids, which [protocol.Spec.Check] found
// among the options (rule 5), until the node runs again and takes them.
func (choiceKind) answer(_ *txn, in *Interrupt, cmd Resume) error {
	in.Selected = cmd.Selected
	return nil
}

func (choiceKind) describe(in *Interrupt, ev *protocol.Interrupted) {
	multiple := in.Multiple
	ev.Question, ev.Options, ev.Multiple = in.Question, in.Options, &multiple
}
