package protocol

import (
	"encoding/json"
	"time"
)

// Interrupt kinds.
const (
	// KindQuestion: one or more fields to fill.
	KindQuestion = "question"
	// KindChoice: pick one option, or several.
	KindChoice = "choice"
	// KindApproval: decide on a proposed action.
	KindApproval = "approval"
)

// Question is one question of a question interrupt.
type Question struct {
	// Field is the state field the answer fills: a top-level field, or
	// parent.child for one level of nesting.
	Field string `json:"field"`
	// Question is the text shown to the person.
	Question string `json:"question"`
	// Type is the JSON type of the answer ("string", "number", "integer",
	// "boolean", "object" or "array"), when the flow says or its state's
	// type tells; empty when any JSON value may fit. A surface reads what
	// a person types with [Value].
	Type string `json:"type,omitempty"`
	// Suggestions are possible answers to offer.
	Suggestions []string `json:"suggestions,omitempty"`
	// Context is guidance for the model that phrases the question, never
	// shown verbatim to the person. After a rejected answer it starts with
	// "ERROR: <message>".
	Context string `json:"context,omitempty"`
	// Schema is a JSON Schema (draft 2020-12) the answer must fit, with
	// the display hints of [Arg]; Interlock refuses an answer that does
	// not, invalid_answer naming the path.
	Schema json.RawMessage `json:"schema,omitempty"`
}

// Option is one option of a choice.
type Option struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// Verdict is what an approver decided.
type Verdict string

// Verdicts of an approval.
const (
	// VerdictApprove runs the action with the proposed args.
	VerdictApprove Verdict = "approve"
	// VerdictEdit runs the action with the approver's edits merged over
	// the proposed args.
	VerdictEdit Verdict = "edit"
	// VerdictReject never runs the action; the flow takes its reject path.
	VerdictReject Verdict = "reject"
)

// Verdicts returns every verdict, in the order an approval offers them
// by default.
func Verdicts() []Verdict { return []Verdict{VerdictApprove, VerdictEdit, VerdictReject} }

// Decision is the decision taken on an approval, as a checkpoint and a
// completed event record it.
type Decision struct {
	Verdict Verdict `json:"verdict"`
	// Action is the approval's action (the node's name for a static gate).
	Action string `json:"action"`
	// Args are the final args: the proposed args with any edits merged
	// over them, key by key.
	Args map[string]any `json:"args"`
	// Edits are the approver's edits, for an edit.
	Edits map[string]any `json:"edits,omitempty"`
	// Approver names who decided: the resume's approver (or its source),
	// or interlock/timeout when a deadline's policy decided.
	Approver string `json:"approver,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// At is when the decision was taken.
	At        time.Time `json:"at"`
	Node      string    `json:"node,omitempty"`
	RequestID string    `json:"requestId,omitempty"`
	// Timeout is set when a deadline's policy decided.
	Timeout bool `json:"timeout,omitempty"`
	// Message is a respond's answer to whoever asked.
	Message string `json:"message,omitempty"`
	// Votes are the votes of an approval with a quorum: those that made
	// it, or the votes cast before a reject vetoed it.
	Votes []Vote `json:"votes,omitempty"`
}

// Approved reports whether the action may run (approved or edited).
func (d Decision) Approved() bool { return d.Verdict == VerdictApprove || d.Verdict == VerdictEdit }

// Interrupted is the data of an interrupted event: the pending interrupt,
// with the resume token that answers it. The token is added when the
// event is published and never stored.
type Interrupted struct {
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
	// Question, Options and Multiple: a choice (Multiple is set on every
	// choice, false or true).
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
	// RejectReasonRequired is set when a reject must say why (a reason).
	RejectReasonRequired bool   `json:"rejectReasonRequired,omitempty"`
	Gate                 string `json:"gate,omitempty"`
	Error                string `json:"error,omitempty"`
	// Assignees are the people named to decide an approval, beside its
	// approver role; ClaimedBy the one who claimed it, who alone may
	// decide it then.
	Assignees []string `json:"assignees,omitempty"`
	ClaimedBy string   `json:"claimedBy,omitempty"`
	// Requester is who asked for the approval; with a quorum's separation
	// of duties, they may not vote.
	Requester string `json:"requester,omitempty"`
	// Quorum, SeparationOfDuties and Votes: an approval that takes several
	// approvers, and the votes cast so far.
	Quorum             *Quorum `json:"quorum,omitempty"`
	SeparationOfDuties bool    `json:"separationOfDuties,omitempty"`
	Votes              []Vote  `json:"votes,omitempty"`
	// Title (one line), Description (Markdown) and ArgsSchema (a JSON
	// Schema of Args, with display hints): an approval a person can
	// decide on (v1.1).
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	ArgsSchema  json.RawMessage `json:"argsSchema,omitempty"`
	ExpiresAt   *time.Time      `json:"expiresAt,omitempty"`
	// OnTimeout is what happens at ExpiresAt.
	OnTimeout *Policy         `json:"onTimeout,omitempty"`
	Origin    json.RawMessage `json:"origin,omitempty"`
}

// Fields returns the fields a question interrupt asks for, in order.
func (in Interrupted) Fields() []string {
	fs := make([]string, 0, len(in.Questions))
	for _, q := range in.Questions {
		fs = append(fs, q.Field)
	}
	return fs
}

// Heading is the interrupt's title, or for an approval without one
// "Approve <action>?".
func (in Interrupted) Heading() string {
	switch {
	case in.Title != "":
		return in.Title
	case in.Kind == KindApproval:
		return "Approve " + in.Action + "?"
	}
	return ""
}

// IsMultiple reports whether a choice takes several options.
func (in Interrupted) IsMultiple() bool { return in.Multiple != nil && *in.Multiple }
