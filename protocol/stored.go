package protocol

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Checkpoint is the public part of a run's checkpoint document, the JSON kept
// under <flow>.<run> in the runs bucket (interlock_runs). It is what a
// reader (a bot, an inbox, `interlock show`) may rely on; the engine keeps
// more fields there for its own use, and [DecodeCheckpoint] ignores them.
type Checkpoint struct {
	Flow string `json:"flow"`
	Run  string `json:"run"`
	// Status is one of running, waiting, completed, failed, cancelled, expired.
	Status Status `json:"status"`
	// Node is the node the run is at (or ended at).
	Node string `json:"node,omitempty"`
	// State is the run's state, a JSON object.
	State json.RawMessage `json:"state"`
	// Interrupt is the interrupt a waiting run waits on.
	Interrupt *CheckpointInterrupt `json:"interrupt,omitempty"`
	// Error says why a failed run failed.
	Error     string    `json:"error,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Origin is the object given at start, echoed in every event of the run.
	Origin json.RawMessage `json:"origin,omitempty"`
	// StartedBy names who started the run: the caller a service of the
	// deployment vouched for, else the start's by, else its source.
	StartedBy string `json:"startedBy,omitempty"`
	// FlowVersion is the version of the flow of the worker that wrote
	// the checkpoint: declared by the flow, or derived from its structure
	// ("s-" and 12 hex digits).
	FlowVersion string `json:"flowVersion,omitempty"`
	// Checkpoint is the document's KV revision, the number that
	// expectedCheckpoint refers to. The stored document does not hold it;
	// readers fill it from the KV entry.
	Checkpoint uint64 `json:"checkpoint,omitempty"`
	// Applied are the idempotency keys of the latest commands applied to
	// the run (the engine keeps a bounded number of them).
	Applied []string `json:"applied,omitempty"`
	// Cause names the command of the run's last transition.
	Cause *CheckpointCause `json:"cause,omitempty"`
	// Rejection is the run's latest rejected approval.
	Rejection *Decision `json:"rejection,omitempty"`
	// Decisions are the run's latest approval decisions, oldest first.
	Decisions []Decision `json:"decisions,omitempty"`
	// Audit is the head of the run's audit chain.
	Audit *AuditHead `json:"audit,omitempty"`
	// Waited records that the run waited on a person at least once.
	Waited bool `json:"waited,omitempty"`
}

// AuditHead is the last record of a run's audit chain, as the checkpoint
// records it: how many records the chain holds and the last one's hash.
type AuditHead struct {
	Records uint64 `json:"records"`
	Hash    string `json:"hash"`
}

// CheckpointCause names the command of a run's last transition.
type CheckpointCause struct {
	// ID is the command's CloudEvent id.
	ID string `json:"id"`
	// Key is its idempotency key (the event id when none was given).
	Key string `json:"key"`
}

// CheckpointInterrupt is the pending interrupt as recorded in a checkpoint.
// It never holds the resume token.
type CheckpointInterrupt struct {
	// Kind is question, choice or approval.
	Kind      string `json:"kind"`
	RequestID string `json:"requestId"`
	Node      string `json:"node"`
	// Questions are the questions asked now (a re-ask holds only the
	// unanswered or rejected ones).
	Questions []Question `json:"questions,omitempty"`
	// Fields are all the fields of a question interrupt.
	Fields []string `json:"fields,omitempty"`
	// Context is interrupt-wide guidance.
	Context string `json:"context,omitempty"`
	// Question, Options and Multiple describe a choice.
	Question string   `json:"question,omitempty"`
	Options  []Option `json:"options,omitempty"`
	Multiple bool     `json:"multiple,omitempty"`
	// Action, Args, Reason, ApproverRole, Decisions, Gate and Error
	// describe an approval.
	Action       string          `json:"action,omitempty"`
	Args         json.RawMessage `json:"args,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	ApproverRole string          `json:"approverRole,omitempty"`
	Decisions    []Verdict       `json:"decisions,omitempty"`
	// RejectReasonRequired is set when a reject must say why.
	RejectReasonRequired bool   `json:"rejectReasonRequired,omitempty"`
	Gate                 string `json:"gate,omitempty"`
	Error                string `json:"error,omitempty"`
	// Assignees, ClaimedBy, Requester, Quorum, SeparationOfDuties and
	// Votes: who may decide an approval, and the votes cast so far.
	Assignees          []string `json:"assignees,omitempty"`
	ClaimedBy          string   `json:"claimedBy,omitempty"`
	Requester          string   `json:"requester,omitempty"`
	Quorum             *Quorum  `json:"quorum,omitempty"`
	SeparationOfDuties bool     `json:"separationOfDuties,omitempty"`
	Votes              []Vote   `json:"votes,omitempty"`
	// Superseded are, with a quorum, the request ids votes replaced with
	// a fresh one: a decision naming one still counts.
	Superseded []string `json:"superseded,omitempty"`
	// Title, Description and ArgsSchema describe an approval for the
	// person who decides it (v1.1).
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	ArgsSchema  json.RawMessage `json:"argsSchema,omitempty"`
	// RemindedAt is when the interrupt's latest reminder fell due.
	RemindedAt *time.Time `json:"remindedAt,omitempty"`
	AskedAt    time.Time  `json:"askedAt"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	// OnTimeout is what happens at ExpiresAt.
	OnTimeout *Policy `json:"onTimeout,omitempty"`
}

// Interrupted returns the interrupted event that announced the run's
// pending interrupt, as far as the checkpoint holds it: without the
// resume token, and with the checkpoint's number. ok is false when the
// run waits on nothing.
func (cp Checkpoint) Interrupted() (ev Interrupted, ok bool) {
	in := cp.Interrupt
	if in == nil {
		return Interrupted{}, false
	}
	ev = Interrupted{
		Flow: cp.Flow, Run: cp.Run, Node: in.Node, RequestID: in.RequestID, Checkpoint: cp.Checkpoint,
		Kind: in.Kind, Questions: in.Questions, Context: in.Context,
		Question: in.Question, Options: in.Options,
		Action: in.Action, Args: in.Args, Reason: in.Reason, ApproverRole: in.ApproverRole,
		Decisions: in.Decisions, RejectReasonRequired: in.RejectReasonRequired, Gate: in.Gate, Error: in.Error, ExpiresAt: in.ExpiresAt, Origin: cp.Origin,
		Assignees: in.Assignees, ClaimedBy: in.ClaimedBy, Requester: in.Requester, Quorum: in.Quorum,
		SeparationOfDuties: in.SeparationOfDuties, Votes: in.Votes,
		Title: in.Title, Description: in.Description, ArgsSchema: in.ArgsSchema, OnTimeout: in.OnTimeout,
	}
	if in.Kind == KindChoice {
		multiple := in.Multiple
		ev.Multiple = &multiple
	}
	return ev, true
}

// DecodeCheckpoint decodes a checkpoint document read at KV revision rev.
// Fields it does not know are ignored, so the engine may keep more.
func DecodeCheckpoint(data []byte, rev uint64) (Checkpoint, error) {
	var cp Checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return Checkpoint{}, fmt.Errorf("protocol: checkpoint at revision %d is not a checkpoint document: %w", rev, err)
	}
	if cp.Flow == "" || cp.Run == "" || cp.Status == "" {
		return Checkpoint{}, fmt.Errorf("protocol: checkpoint at revision %d lacks flow, run or status", rev)
	}
	cp.Checkpoint = rev
	return cp, nil
}

// Waiting reports whether the run waits on an interrupt.
func (cp Checkpoint) Waiting() bool { return cp.Status == StatusWaiting && cp.Interrupt != nil }

// Finished reports whether the run has ended (completed, failed, cancelled
// or expired).
func (cp Checkpoint) Finished() bool { return cp.Status.Finished() }

// HasApplied reports whether a command with idempotency key (or event id)
// key is among the latest applied to the run.
func (cp Checkpoint) HasApplied(key string) bool {
	return key != "" && slices.Contains(cp.Applied, key)
}

// Pending is an entry of the pending index (the interlock_pending bucket,
// key <flow>.<run>): a run waiting on an interrupt, as readers such as
// inboxes and the client list it. The document is present exactly while
// the run waits.
type Pending struct {
	// Flow and Run name the run.
	Flow string `json:"flow"`
	Run  string `json:"run"`
	// Node is the node that asked.
	Node string `json:"node"`
	// RequestID is the interrupt's request id, as in the interrupted event.
	RequestID string `json:"requestId"`
	// Kind is the interrupt kind: question, choice or approval.
	Kind string `json:"kind"`
	// Checkpoint is the run's checkpoint number when it asked.
	Checkpoint uint64 `json:"checkpoint"`
	// Fields are the state fields a question interrupt still asks for.
	Fields []string `json:"fields,omitempty"`
	// Question is the question of a choice interrupt.
	Question string `json:"question,omitempty"`
	// ApproverRole is who may decide an approval interrupt.
	ApproverRole string `json:"approverRole,omitempty"`
	// Assignees are the people named to decide it, ClaimedBy who claimed
	// it: a queue of one's own ("mine") lists them.
	Assignees []string `json:"assignees,omitempty"`
	ClaimedBy string   `json:"claimedBy,omitempty"`
	// Action is what an approval interrupt proposes (a tool name, or the
	// node's name for a gate declared on the flow).
	Action string `json:"action,omitempty"`
	// Title is an approval's title, and Requester who or what asked.
	Title     string `json:"title,omitempty"`
	Requester string `json:"requester,omitempty"`
	// StartedBy is who started the run (for an ask or a tool call, who
	// asked): an ask's and a tool call's entry is listed for them and
	// for whoever may decide it.
	StartedBy string `json:"startedBy,omitempty"`
	// KeyArgs are an approval's key arguments, formatted ([KeyArgs]).
	KeyArgs []KeyArg `json:"keyArgs,omitempty"`
	// Quorum is how many must approve an approval, and Voters who has
	// approved it so far (each once): a queue says "1 of 2 approvals",
	// and lists it for the holders of a quorum's roles.
	Quorum *Quorum  `json:"quorum,omitempty"`
	Voters []string `json:"voters,omitempty"`
	// RemindedAt is when the interrupt's latest reminder fell due.
	RemindedAt *time.Time `json:"remindedAt,omitempty"`
	// AskedAt is when the interrupt was asked.
	AskedAt time.Time `json:"askedAt"`
	// ExpiresAt is when the interrupt expires, if it has a timeout.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// OnTimeout is what happens at ExpiresAt.
	OnTimeout *Policy `json:"onTimeout,omitempty"`
	// FlowVersion is the version of the flow the run waits under (the
	// checkpoint's).
	FlowVersion string `json:"flowVersion,omitempty"`
}

// Interrupted returns the interrupted event that announced the entry's
// interrupt, as far as the entry holds it: questions name only their
// fields, and a choice only its question.
func (p Pending) Interrupted() Interrupted {
	ev := Interrupted{Flow: p.Flow, Run: p.Run, Node: p.Node, RequestID: p.RequestID, Checkpoint: p.Checkpoint,
		Kind: p.Kind, Question: p.Question, Action: p.Action, ApproverRole: p.ApproverRole, ExpiresAt: p.ExpiresAt,
		Assignees: p.Assignees, ClaimedBy: p.ClaimedBy, Title: p.Title, Requester: p.Requester, OnTimeout: p.OnTimeout}
	for _, f := range p.Fields {
		ev.Questions = append(ev.Questions, Question{Field: f})
	}
	return ev
}
