package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// Kinds of interrupt.
const (
	KindQuestion = protocol.KindQuestion
	KindChoice   = protocol.KindChoice
	KindApproval = protocol.KindApproval
)

// ErrInterrupted is returned by [Node.Ask], [Node.Choose] and
// [Node.Approve] when the run
// must pause for an answer. A node returns it (or any error wrapping it) as
// is; the run resumes later by running the node again from its top.
var ErrInterrupted = errors.New("engine: run paused for an answer")

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

	// Action, Args, Reason, ApproverRole and Decisions: an approval.
	Action       string          `json:"action,omitempty"`
	Args         json.RawMessage `json:"args,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	ApproverRole string          `json:"approverRole,omitempty"`
	Decisions    []Verdict       `json:"decisions,omitempty"`
	// RejectReasonRequired makes a reject say why.
	RejectReasonRequired bool `json:"rejectReasonRequired,omitempty"`
	// Assignees are the people named to decide an approval; ClaimedBy is
	// who claimed it (only they may decide it then).
	Assignees []string `json:"assignees,omitempty"`
	ClaimedBy string   `json:"claimedBy,omitempty"`
	// Requester is who asked for the action.
	Requester string `json:"requester,omitempty"`
	// Quorum, SeparationOfDuties and Votes: an approval that takes several
	// approvers, and the votes cast so far.
	Quorum             *protocol.Quorum `json:"quorum,omitempty"`
	SeparationOfDuties bool             `json:"separationOfDuties,omitempty"`
	Votes              []protocol.Vote  `json:"votes,omitempty"`
	// Superseded are request ids this interrupt had before votes asked it
	// again: a vote racing another one names a superseded request, and
	// counts all the same.
	Superseded []string `json:"superseded,omitempty"`
	// Remind is when to remind the people who may answer; RemindedAt
	// when the latest reminder fell due.
	Remind     *Reminders `json:"remind,omitempty"`
	RemindedAt *time.Time `json:"remindedAt,omitempty"`
	// Gate is "before" or "after" for a static gate declared on the flow.
	Gate string `json:"gate,omitempty"`
	// Decision holds an approval's decision until the node takes it.
	Decision *Decision `json:"decision,omitempty"`
	// Error is why an approval is asked again (its edits were refused).
	Error string `json:"error,omitempty"`
	// Title, Description and ArgsSchema: what an approval says for the
	// person who decides it.
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	ArgsSchema  json.RawMessage `json:"argsSchema,omitempty"`

	AskedAt   time.Time  `json:"askedAt"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// OnTimeout is the deadline's policy.
	OnTimeout *Policy `json:"onTimeout,omitempty"`
	// Escalations counts how often the interrupt was escalated.
	Escalations int `json:"escalations,omitempty"`
	// Retired are request ids of this interrupt that expired by
	// escalation: a resume with their token is refused expired.
	Retired []string `json:"retired,omitempty"`
}

// kind is the engine's rules of one kind of interrupt, each in its own
// file: how a resume answers it, and what its interrupted event says. The
// shape of an answer is the kind's [protocol.Spec], checked first.
type kind interface {
	// answer records a resume's answer, already checked by the kind's
	// [protocol.Spec], on the pending interrupt, or says what else is
	// wrong with it (the resume is then refused invalid_answer and the
	// interrupt stays pending).
	answer(t *txn, in *Interrupt, cmd Resume) error
	// describe fills the kind's fields of the interrupted event.
	describe(in *Interrupt, ev *protocol.Interrupted)
}

// kindOf returns the rules of an interrupt kind.
func kindOf(name string) (kind, bool) {
	switch name {
	case KindQuestion:
		return questionKind{}, true
	case KindChoice:
		return choiceKind{}, true
	case KindApproval:
		return approvalKind{}, true
	}
	return nil, false
}

// asked returns what checking an answer to the interrupt needs.
func (in *Interrupt) asked() protocol.Asked {
	return protocol.Asked{Kind: in.Kind, Fields: in.Fields, Options: in.Options, Multiple: in.Multiple,
		Action: in.Action, Decisions: in.Decisions, Args: in.Args, RejectReasonRequired: in.RejectReasonRequired}
}

// Reminders say when to remind the people who may answer an interrupt:
// at each duration Before its deadline, and Every so often while it
// waits.
type Reminders struct {
	Before []time.Duration
	Every  time.Duration
}

type remindersJSON struct {
	Before []string `json:"before,omitempty"`
	Every  string   `json:"every,omitempty"`
}

// MarshalJSON writes durations as strings ("15m0s").
func (r Reminders) MarshalJSON() ([]byte, error) {
	j := remindersJSON{}
	for _, d := range r.Before {
		j.Before = append(j.Before, d.String())
	}
	if r.Every > 0 {
		j.Every = r.Every.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Reminders) UnmarshalJSON(b []byte) error {
	var j remindersJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Reminders{}
	for _, s := range j.Before {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("reminder %q: %w", s, err)
		}
		r.Before = append(r.Before, d)
	}
	if j.Every != "" {
		d, err := time.ParseDuration(j.Every)
		if err != nil {
			return fmt.Errorf("reminder every %q: %w", j.Every, err)
		}
		r.Every = d
	}
	return nil
}

// interruptedEvent returns the data of the interrupted event announcing in.
func interruptedEvent(cp *Checkpoint, in *Interrupt) *protocol.Interrupted {
	ev := &protocol.Interrupted{
		Flow: cp.Flow, Run: cp.Run, Node: in.Node, RequestID: in.RequestID,
		Kind: in.Kind, ExpiresAt: in.ExpiresAt, Origin: cp.Origin, Title: in.Title,
	}
	if k, ok := kindOf(in.Kind); ok {
		k.describe(in, ev)
	}
	if in.ExpiresAt != nil {
		ev.OnTimeout = in.OnTimeout.wire()
	}
	return ev
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

// carry gives an interrupt asked again the deadline of the one it
// follows, or a new interrupt its own deadline.
func (x *exec) carry(cur *Interrupt, timeout time.Duration, in *Interrupt) *Interrupt {
	if cur != nil && cur.ExpiresAt != nil {
		in.ExpiresAt, in.OnTimeout, in.Retired = cur.ExpiresAt, cur.OnTimeout, cur.Retired
		return in
	}
	x.deadline(in, timeout, Policy{})
	return in
}
