package protocol

import (
	"encoding/json"
	"fmt"
	"time"
)

// Actions of audit records: what happened to a run. An audit record's
// CloudEvent type is [AuditType] of its action.
const (
	ActionStarted = "started"
	// ActionInterrupted: the run paused on an interrupt. Interlock no
	// longer writes it: the record of the transition that paused the run
	// says so in its [AuditOutcome]. Chains written before hold one after
	// that record, and still verify.
	ActionInterrupted = "interrupted"
	// ActionAnswered: a question or choice was answered.
	ActionAnswered = "answered"
	// ActionApproved, ActionEdited and AuditRejected: an approval was decided.
	ActionApproved = "approved"
	ActionEdited   = "edited"
	ActionRejected = "rejected"
	// ActionExpired: an interrupt's deadline passed and the run ended.
	ActionExpired = "expired"
	// ActionEscalated: an approval's deadline passed and it went to another role.
	ActionEscalated   = "escalated"
	ActionCancelled   = "cancelled"
	ActionReannounced = "reannounced"
	// ActionClaimed, ActionReleased and ActionDelegated: who may decide
	// an approval changed.
	ActionClaimed   = "claimed"
	ActionReleased  = "released"
	ActionDelegated = "delegated"
	// ActionVoted: a vote that did not yet complete an approval's quorum.
	ActionVoted = "voted"
	// ActionReminded: a pending interrupt's reminder fell due.
	ActionReminded = "reminded"
	// ActionResponded: an approver answered with a message instead of a
	// verdict on the action.
	ActionResponded = "responded"
	// ActionRefused: a command on the run was refused. Refusals hang off
	// the chain: see [AuditRecord.Side].
	ActionRefused = "refused"
	// ActionConsumed: an approved tool call's approval was taken to run
	// it, once.
	ActionConsumed = "consumed"
	// ActionMigrated: a worker of a newer version of the run's flow moved
	// the run to it, by the flow's migration (see [AuditMigration]); its
	// pending interrupt stayed as it was.
	ActionMigrated = "migrated"
)

// AuditActions returns every action an audit record may have, in the
// order of a run's life.
func AuditActions() []string {
	return []string{ActionStarted, ActionInterrupted, ActionAnswered, ActionApproved, ActionEdited, ActionRejected,
		ActionResponded, ActionVoted, ActionClaimed, ActionReleased, ActionDelegated, ActionReminded,
		ActionExpired, ActionEscalated, ActionCancelled, ActionReannounced, ActionRefused, ActionConsumed, ActionMigrated}
}

// AuditRecord is one record of the audit stream (subject
// <prefix>.audit.<flow>.<run>), the data of an io.interlock.audit.<action>
// event: what happened to a run, who did it, and where the run ended up.
//
// A run's records form a hash chain. Each chained record holds its
// position (Seq, from 1), the hash of the record before it (Prev, "" for
// the first) and its own Hash: the hex SHA-256 of its canonical JSON
// without the hash and sig members. A side record (Side, a refusal) names
// the chain's head at the time in Prev but takes no position. The
// checkpoint holds the chain's head ([Checkpoint.Audit]). Each record is
// signed: Kid names the deployment's audit key ([AuditKey]) and Sig is
// the Ed25519 signature of the hash.
type AuditRecord struct {
	Flow   string    `json:"flow"`
	Run    string    `json:"run"`
	Action string    `json:"action"`
	At     time.Time `json:"at"`
	// By names who acted: the approver or canceller when given, else the
	// command's source; Interlock's own source for an interrupt, and
	// interlock/timeout for a deadline's policy.
	By string `json:"by,omitempty"`
	// Source is the CloudEvents source of the command.
	Source    string `json:"source,omitempty"`
	EventID   string `json:"eventId,omitempty"`
	Node      string `json:"node,omitempty"`
	RequestID string `json:"requestId,omitempty"`
	Kind      string `json:"kind,omitempty"`
	// Trusted is set when an authenticated caller resumed without a token.
	Trusted bool `json:"trusted,omitempty"`
	// Auth is how the caller named in By was authenticated (see
	// [AuthMethod]); Named is a name the sender typed that is not its
	// identity (where callers are identified, a NATS sender's approver or
	// by), kept as a label.
	Auth  AuthMethod `json:"auth,omitempty"`
	Named string     `json:"named,omitempty"`
	// Reason is a decision's or cancel's reason, an approval's reason on
	// its interrupt, and a refusal's message.
	Reason string `json:"reason,omitempty"`
	// Message is a respond's answer.
	Message string `json:"message,omitempty"`
	// To is whom a delegation handed the approval to: a person, or a
	// role written role:<name>.
	To string `json:"to,omitempty"`
	// Replaces is the request id a reannounce or an escalation replaced.
	Replaces string `json:"replaces,omitempty"`
	// ApproverRole is the role an approval is (or was) waiting on;
	// EscalatedFrom the role an escalation took it from.
	ApproverRole  string `json:"approverRole,omitempty"`
	EscalatedFrom string `json:"escalatedFrom,omitempty"`
	// Timeout is set when a deadline's policy acted.
	Timeout bool `json:"timeout,omitempty"`
	// Approval is the proposal an approval's records are about.
	Approval *AuditApproval `json:"approval,omitempty"`
	// ExpiresAt is an interrupt's deadline.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Migration is what a migrated record moved.
	Migration *AuditMigration `json:"migration,omitempty"`
	// Code is a refusal's code.
	Code    Code          `json:"code,omitempty"`
	Outcome *AuditOutcome `json:"outcome,omitempty"`

	Seq  uint64 `json:"seq,omitempty"`
	Prev string `json:"prev,omitempty"`
	Side bool   `json:"side,omitempty"`
	Hash string `json:"hash,omitempty"`
	// Kid is the id of the key that signed the record ([AuditKeyID]);
	// Sig is the Ed25519 signature over the 32 bytes of the SHA-256
	// digest that Hash spells in hex, in standard base64. The hash covers
	// Kid, not Sig. Records written before Interlock signed them have
	// neither.
	Kid string `json:"kid,omitempty"`
	Sig string `json:"sig,omitempty"`

	// Data is the record exactly as it was stored, the input of its hash.
	// Readers fill it, with StreamSeq (the message's sequence in the audit
	// stream) and EventType (the CloudEvent type that carried it); none of
	// the three is part of the record.
	Data      json.RawMessage `json:"-"`
	StreamSeq uint64          `json:"-"`
	EventType string          `json:"-"`
}

// AuditApproval is the proposal of an approval's records: the action and
// its args as proposed and, after an edit, the edits and the final args.
type AuditApproval struct {
	Action string          `json:"action"`
	Args   json.RawMessage `json:"args,omitempty"`
	Edits  json.RawMessage `json:"edits,omitempty"`
	Final  json.RawMessage `json:"final,omitempty"`
}

// AuditMigration is what a migration moved: the run from version From of
// its flow to version To, from node Node (the record's node is where it
// went).
type AuditMigration struct {
	From string `json:"from"`
	To   string `json:"to"`
	Node string `json:"node,omitempty"`
}

// AuditOutcome is where a transition left the run.
//
// When the transition paused the run on a new interrupt, the outcome
// also says what it waits for: the approver's role, the deadline, and
// for an approval its reason and proposal. The record is then the whole
// account of the pause, which chains written before Interlock folded it
// in gave in a separate [ActionInterrupted] record.
type AuditOutcome struct {
	// Status is the run's status afterwards (waiting, completed, ...).
	Status Status `json:"status"`
	Node   string `json:"node,omitempty"`
	// RequestID and Kind name the interrupt the run then waits on.
	RequestID string `json:"requestId,omitempty"`
	Kind      string `json:"kind,omitempty"`
	// ApproverRole is the role the new interrupt waits on, ExpiresAt its
	// deadline, and Reason and Approval an approval's reason and proposal.
	ApproverRole string         `json:"approverRole,omitempty"`
	ExpiresAt    *time.Time     `json:"expiresAt,omitempty"`
	Reason       string         `json:"reason,omitempty"`
	Approval     *AuditApproval `json:"approval,omitempty"`
	// Error says why the run failed.
	Error string `json:"error,omitempty"`
}

// Paused reports whether the record's transition paused the run on a new
// interrupt: it ran the flow's nodes (a start, an answer, a decision) and
// left the run waiting. Its outcome then says what the run waits for.
// Records of transitions on the pending interrupt itself (a vote, a
// claim, a reminder, a reannounce, an escalation) leave the run waiting
// too, but are not pauses.
func (r AuditRecord) Paused() bool {
	o := r.Outcome
	if o == nil || o.Status != StatusWaiting || o.RequestID == "" {
		return false
	}
	switch r.Action {
	case ActionStarted, ActionAnswered, ActionApproved, ActionEdited, ActionRejected, ActionResponded:
		return true
	}
	return false
}

// DecodeAuditRecord decodes the data of an audit record event, keeping
// the bytes in Data. Fields it does not know are ignored (they still count
// in the hash).
func DecodeAuditRecord(data []byte) (AuditRecord, error) {
	var r AuditRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return AuditRecord{}, fmt.Errorf("protocol: audit record is not a JSON object of a record: %w", err)
	}
	if r.Action == "" {
		return AuditRecord{}, fmt.Errorf("protocol: audit record has no action")
	}
	r.Data = append(json.RawMessage(nil), data...)
	return r, nil
}
