package protocol

import (
	"encoding/json"
	"time"
)

// Start is the data of a start command (io.interlock.run.start).
type Start struct {
	// State is the run's initial state, a JSON object. Its values fill
	// question fields, so an interrupt whose fields are all given is skipped.
	State map[string]json.RawMessage `json:"state,omitempty"`
	// Origin is any JSON object, echoed unchanged in every event of the run.
	Origin json.RawMessage `json:"origin,omitempty"`
	// By names who started the run, for the audit record (the source
	// when absent). A command a service of the deployment vouches for is
	// recorded by the caller it vouches for, never by this name.
	By string `json:"by,omitempty"`
}

// Resume is the data of a resume command (io.interlock.run.resume). Only
// the parts that fit the pending interrupt's kind are needed.
type Resume struct {
	ResumeToken string                     `json:"resumeToken,omitempty"`
	RequestID   string                     `json:"requestId,omitempty"`
	Answers     map[string]json.RawMessage `json:"answers,omitempty"`
	Selected    []string                   `json:"selected,omitempty"`
	Decision    string                     `json:"decision,omitempty"`
	Edits       map[string]json.RawMessage `json:"edits,omitempty"`
	Update      map[string]json.RawMessage `json:"update,omitempty"`
	Approver    string                     `json:"approver,omitempty"`
	Reason      string                     `json:"reason,omitempty"`
	// Message is a respond's answer to whoever asked (decision respond).
	Message            string  `json:"message,omitempty"`
	ExpectedCheckpoint *uint64 `json:"expectedCheckpoint,omitempty"`
	IdempotencyKey     string  `json:"idempotencyKey,omitempty"`
}

// Cancel is the data of a cancel command (io.interlock.run.cancel).
type Cancel struct {
	Reason string `json:"reason,omitempty"`
	// By names who cancelled, for the audit record.
	By string `json:"by,omitempty"`
}

// Migrate is the data of a migrate command (io.interlock.run.migrate on
// <prefix>.in.<flow>.migrate, the run as the CloudEvent subject): move the
// waiting run from version From of its flow to version To, which a worker
// of To does (by the flow's migration from From, or as it is when the
// run's node is one of To's). Its outcome is the run's audit record
// migrated, or a refusal.
type Migrate struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason,omitempty"`
	// By names who moved it, for the audit record.
	By string `json:"by,omitempty"`
}

// Reannounce is the data of a reannounce command
// (io.interlock.run.reannounce): announce a waiting run's pending interrupt
// again, with a fresh resume token.
type Reannounce struct {
	// RequestID, if set, must be the pending request's id.
	RequestID string `json:"requestId,omitempty"`
	// Reason is recorded in the audit stream.
	Reason string `json:"reason,omitempty"`
	// By names who asked, for the audit record (the source when absent).
	By string `json:"by,omitempty"`
}

// ToolRequest is the data of a tool request (io.interlock.tool.requested):
// an agent asks whether it may run a tool call.
type ToolRequest struct {
	// CallID names the call; it is the run id of the gate run when a rule
	// fires, and repeating it never starts a second run.
	CallID string `json:"callId"`
	// Tool is the tool's name.
	Tool string `json:"tool"`
	// Server, if set, names the server that offers the tool (an MCP
	// server's name, as the MCP gateway's configuration gives it): rules
	// may match it, and the decision binds it.
	Server string `json:"server,omitempty"`
	// Args are the call's arguments, a JSON object.
	Args           map[string]json.RawMessage `json:"args,omitempty"`
	ConversationID string                     `json:"conversationId,omitempty"`
	Agent          string                     `json:"agent,omitempty"`
	// Messages are the conversation so far, for the approver.
	Messages json.RawMessage `json:"messages,omitempty"`
	// Context is any JSON object the rules may read.
	Context json.RawMessage `json:"context,omitempty"`
	// Origin is echoed in every event of the call.
	Origin json.RawMessage `json:"origin,omitempty"`
}

// Consume is the data of a consume (io.interlock.tool.consume, on
// <prefix>.in.gate.consume): the agent about to run an approved or edited
// tool call takes its approval. An approval is taken once: a second take
// is refused not_waiting.
type Consume struct {
	// CallID names the call.
	CallID string `json:"callId"`
	// ArgsDigest is [ArgsDigest] of the args about to run: the decision's
	// final args (its finalDigest).
	ArgsDigest string `json:"argsDigest"`
}

// Expire is the data of a deadline (io.interlock.run.expire): the
// deadline of one pending request has passed. Interlock stores it as a
// message schedule, and the server publishes it at ExpiresAt.
type Expire struct {
	RequestID string    `json:"requestId"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Flow and Run repeat the subject's flow and the event's subject.
	Flow string `json:"flow,omitempty"`
	Run  string `json:"run,omitempty"`
}
