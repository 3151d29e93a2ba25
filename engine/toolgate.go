package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/interlockhq/interlock/protocol"
)

// GateFlowName is the name of the built-in flow that holds tool calls
// waiting for approval: one run per call, whose run id is the call's id.
const GateFlowName = protocol.GateFlow

// Decisions of a tool-call gate's decided event.
const (
	ToolAllowed  = "allowed"
	ToolApproved = "approved"
	ToolEdited   = "edited"
	ToolRejected = "rejected"
	// ToolResponded: the approver answered the agent with a message
	// instead; the call does not run.
	ToolResponded = "responded"
	ToolExpired   = "expired"
)

// ToolRequest asks whether an agent may run a tool call.
type ToolRequest struct {
	CallID, Tool string
	// Args are the call's arguments.
	Args map[string]json.RawMessage
	// ConversationID, Agent, Messages and Context describe the call for
	// the approver; Origin is echoed in every event of the call.
	ConversationID, Agent string
	Messages, Context     json.RawMessage
	Origin                json.RawMessage
	// Rule is the gate rule that fires for the call; nil allows it.
	Rule *GateRule
	Inbound
}

// GateRule is what a firing gate rule asks for: who decides, why, and how
// long they have.
type GateRule struct {
	Name         string
	Reason       string
	ApproverRole string
	Timeout      time.Duration
	OnTimeout    Policy
	// Decisions are the verdicts the approver may give (all but respond
	// when empty); listing respond lets them answer the agent instead.
	Decisions []Verdict
	// Title and Description (Markdown) say what the call proposes, as
	// the rule wrote them for this call's args; ArgsSchema is a JSON
	// Schema of the args (see [Approval]). The requester is the call's
	// agent.
	Title, Description string
	ArgsSchema         json.RawMessage
	// Assignees, Quorum and Reminders are the approval's (see
	// [Approval]): people named to decide beside ApproverRole, the
	// approvals the call takes (the agent may not vote), and how long
	// before the deadline the people who may decide are reminded.
	Assignees []string
	Quorum    *protocol.Quorum
	Reminders []time.Duration
	// RemindEvery, if set, reminds them every so often while the call
	// waits.
	RemindEvery time.Duration
}

// gateState is the state of a gate run.
type gateState struct {
	CallID         string                     `json:"callId"`
	Tool           string                     `json:"tool"`
	Args           map[string]json.RawMessage `json:"args"`
	ConversationID string                     `json:"conversationId,omitempty"`
	Agent          string                     `json:"agent,omitempty"`
	Messages       json.RawMessage            `json:"messages,omitempty"`
	Context        json.RawMessage            `json:"context,omitempty"`
	Rule           gateRuleState              `json:"rule"`
	// Decided is the decided event's data once the call is decided.
	Decided *protocol.Decided `json:"decided,omitempty"`
}

type gateRuleState struct {
	Name         string           `json:"name,omitempty"`
	Reason       string           `json:"reason"`
	ApproverRole string           `json:"approverRole,omitempty"`
	Timeout      string           `json:"timeout,omitempty"`
	OnTimeout    *Policy          `json:"onTimeout,omitempty"`
	Decisions    []Verdict        `json:"decisions,omitempty"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description,omitempty"`
	ArgsSchema   json.RawMessage  `json:"argsSchema,omitempty"`
	Assignees    []string         `json:"assignees,omitempty"`
	Quorum       *protocol.Quorum `json:"quorum,omitempty"`
	Reminders    []string         `json:"reminders,omitempty"`
	RemindEvery  string           `json:"remindEvery,omitempty"`
}

// GateFlow returns the built-in gate flow. A worker that serves the tool
// gate registers it; its runs start only through [Runner.Request].
func GateFlow() *Flow {
	f := NewFlow[gateState](GateFlowName).
		Node("decide", decideTool).
		Start("decide").
		MustBuild()
	f.expired = func(t *txn, in *Interrupt) {
		var s gateState
		if err := json.Unmarshal(mustJSON(t.cp.State), &s); err != nil {
			return
		}
		d := &protocol.Decided{CallID: s.CallID, Decision: ToolExpired, Tool: s.Tool, Rule: s.Rule.Name,
			Reason: fmt.Sprintf("no decision by %s", in.ExpiresAt.Format(time.RFC3339)), Origin: t.cp.Origin}
		if raw, err := json.Marshal(d); err == nil {
			t.cp.State["decided"] = raw
		}
		t.emit(protocol.EventDecided, d)
	}
	return f
}

func mustJSON(d Doc) []byte {
	b, _ := json.Marshal(d)
	return b
}

func decideTool(ctx context.Context, n *Node[gateState]) error {
	s := n.State()
	timeout := time.Duration(0)
	if s.Rule.Timeout != "" {
		d, err := time.ParseDuration(s.Rule.Timeout)
		if err != nil {
			return fmt.Errorf("gate rule %q: timeout: %w", s.Rule.Name, err)
		}
		timeout = d
	}
	p := Policy{}
	if s.Rule.OnTimeout != nil {
		p = *s.Rule.OnTimeout
	}
	var reminders []time.Duration
	for _, r := range s.Rule.Reminders {
		d, err := time.ParseDuration(r)
		if err != nil {
			return fmt.Errorf("gate rule %q: reminders: %w", s.Rule.Name, err)
		}
		reminders = append(reminders, d)
	}
	var every time.Duration
	if s.Rule.RemindEvery != "" {
		d, err := time.ParseDuration(s.Rule.RemindEvery)
		if err != nil {
			return fmt.Errorf("gate rule %q: remindEvery: %w", s.Rule.Name, err)
		}
		every = d
	}
	args := map[string]json.RawMessage{}
	for k, v := range s.Args {
		args[k] = v
	}
	d, err := n.Approve(ctx, Approval{Action: s.Tool, Args: args, Reason: s.Rule.Reason,
		ApproverRole: s.Rule.ApproverRole, Timeout: timeout, OnTimeout: p, Decisions: s.Rule.Decisions,
		Title: s.Rule.Title, Description: s.Rule.Description, Requester: cmp.Or(n.x.cp.StartedBy, s.Agent), ArgsSchema: s.Rule.ArgsSchema,
		Assignees: s.Rule.Assignees, Quorum: s.Rule.Quorum, Reminders: reminders, RemindEvery: every})
	if err != nil {
		return err
	}
	ev := &protocol.Decided{CallID: s.CallID, Tool: s.Tool, Approver: d.Approver, Reason: d.Reason, Rule: s.Rule.Name, Origin: n.x.cp.Origin}
	switch d.Verdict {
	case VerdictApprove:
		ev.Decision = ToolApproved
	case VerdictEdit:
		args, err := json.Marshal(d.Args)
		if err != nil {
			return fmt.Errorf("engine: the edited args of call %s: %w", s.CallID, err)
		}
		ev.Decision, ev.Args = ToolEdited, args
	case VerdictRespond:
		ev.Decision, ev.Message = ToolResponded, d.Message
	default:
		ev.Decision = ToolRejected
	}
	if err := n.Set("decided", ev); err != nil {
		return err
	}
	n.x.emit(protocol.EventDecided, ev)
	return nil
}

// Request applies a tool request. With no rule firing it answers allowed
// at once. Otherwise it starts a run of the gate flow named after the
// call, which waits on an approval and answers approved, edited, rejected
// or expired. A request repeating a call already known starts nothing: it
// is acknowledged while the call waits, and answered again with the same
// decision once the call is decided.
func (r *Runner) Request(ctx context.Context, req ToolRequest) (Outcome, error) {
	if err := CheckName("run", req.CallID); err != nil {
		return Outcome{Flow: GateFlowName, Run: req.CallID, DeadLetter: ReasonInvalidName}, nil
	}
	f, ok := r.flows[GateFlowName]
	if !ok {
		return Outcome{}, errors.New("engine: the gate flow is not registered; add engine.GateFlow() to Config.Flows")
	}
	if out, stop, err := r.authenticate(ctx, GateFlowName, req.CallID, &req.Inbound); stop {
		return out, err
	}
	if err := checkOrigin(req.Origin); err != nil {
		return r.refuse(ctx, GateFlowName, req.CallID, "", req.Inbound, CodeInvalidPayload, string(CodeInvalidPayload), err.Error())
	}
	cp, rev, err := r.load(ctx, GateFlowName, req.CallID)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return Outcome{}, fmt.Errorf("engine: loading gate call %s: %w", req.CallID, err)
	default:
		return r.requestAgain(ctx, f, cp, rev, req)
	}
	if req.Rule == nil {
		d := &protocol.Decided{CallID: req.CallID, Decision: ToolAllowed, Tool: req.Tool, Origin: req.Origin}
		return r.answerCall(ctx, req, d, Completed)
	}
	state := gateState{CallID: req.CallID, Tool: req.Tool, Args: req.Args, ConversationID: req.ConversationID,
		Agent: req.Agent, Messages: req.Messages, Context: req.Context,
		Rule: gateRuleState{Name: req.Rule.Name, Reason: req.Rule.Reason, ApproverRole: req.Rule.ApproverRole, Decisions: req.Rule.Decisions,
			Title: req.Rule.Title, Description: req.Rule.Description, ArgsSchema: req.Rule.ArgsSchema,
			Assignees: req.Rule.Assignees, Quorum: req.Rule.Quorum}}
	for _, d := range req.Rule.Reminders {
		state.Rule.Reminders = append(state.Rule.Reminders, d.String())
	}
	if req.Rule.RemindEvery > 0 {
		state.Rule.RemindEvery = req.Rule.RemindEvery.String()
	}
	if state.Args == nil {
		state.Args = map[string]json.RawMessage{}
	}
	if req.Rule.Timeout > 0 {
		state.Rule.Timeout = req.Rule.Timeout.String()
		p := req.Rule.OnTimeout
		state.Rule.OnTimeout = &p
	}
	raw, err := json.Marshal(state)
	if err != nil {
		return Outcome{}, fmt.Errorf("engine: gate call %s: %w", req.CallID, err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return Outcome{}, fmt.Errorf("engine: gate call %s: %w", req.CallID, err)
	}
	req.FirstDelivery = false
	out, err := r.Start(ctx, Start{Flow: GateFlowName, Run: req.CallID, State: doc, Origin: req.Origin, By: req.Agent, Inbound: req.Inbound})
	if err == nil && out.Refused != nil && out.Refused.Code == CodeRunExists {
		// Another worker started the call meanwhile: answer as a repeat.
		if cp, rev, err := r.load(ctx, GateFlowName, req.CallID); err == nil {
			return r.requestAgain(ctx, f, cp, rev, req)
		}
	}
	return out, err
}

// requestAgain answers a request for a call the gate already holds.
func (r *Runner) requestAgain(ctx context.Context, f *Flow, cp *Checkpoint, rev uint64, req ToolRequest) (Outcome, error) {
	if out, done, err := r.repeat(ctx, f, cp, rev, req.EventID, req.Inbound); done || err != nil {
		out.RunTraceparent = cp.Traceparent
		return out, err
	}
	if !cp.Status.Finished() {
		if busy, err := r.busy(ctx, cp); err != nil || busy {
			return Outcome{Flow: cp.Flow, Run: cp.Run, Status: cp.Status, RetryAfter: DefaultBusyRetry}, err
		}
		return Outcome{Flow: cp.Flow, Run: cp.Run, Status: cp.Status, Checkpoint: rev, Node: cp.Node, Duplicate: true}, nil
	}
	var d protocol.Decided
	raw, ok := cp.State["decided"]
	if !ok || json.Unmarshal(raw, &d) != nil {
		// A call cancelled, or failed, before it was decided.
		d = protocol.Decided{CallID: req.CallID, Decision: ToolRejected, Tool: req.Tool,
			Approver: r.cfg.Source, Reason: fmt.Sprintf("the call's gate run is %s", cp.Status)}
	}
	d.Origin = cp.Origin
	return r.answerCall(ctx, req, &d, cp.Status)
}

// answerCall publishes a decided event answering one request, with an id
// of its own so that the request's redelivery is dropped and a new
// request is answered.
func (r *Runner) answerCall(ctx context.Context, req ToolRequest, d *protocol.Decided, status Status) (Outcome, error) {
	sum := sha256.Sum256([]byte(req.CallID + "\x00" + req.Source + "\x00" + req.EventID))
	m := Message{Stream: EventStream, Kind: protocol.EventDecided, ID: "decided-" + hex.EncodeToString(sum[:12]),
		Flow: GateFlowName, Run: req.CallID, Time: r.cfg.Now().UTC(), Data: d, Traceparent: cmp.Or(req.Span, req.Traceparent)}
	if err := r.cfg.Publisher.Publish(ctx, []Message{m}, false); err != nil {
		return Outcome{}, fmt.Errorf("engine: answering gate call %s: %w", req.CallID, err)
	}
	return Outcome{Flow: GateFlowName, Run: req.CallID, Status: status, Events: []Message{m}}, nil
}
