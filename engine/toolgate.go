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

	"github.com/interlockhq/interlock/authority"
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
	// Server names the server offering the tool, if the request says.
	Server string
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

// EditChecker checks an approver's edit of a tool call the gate holds
// against the rule that holds it: that the rule bounds the edit as it
// says, and that the edited call would need no other approval. It
// returns why not, for the approver.
type EditChecker interface {
	CheckEdit(ctx context.Context, rule string, req protocol.ToolRequest, final map[string]json.RawMessage) error
}

// checkGateEdit checks the final args of an edit of the gate run cp
// against its rule (see [EditChecker]).
func (r *Runner) checkGateEdit(ctx context.Context, cp *Checkpoint, final map[string]json.RawMessage) error {
	var s gateState
	if err := json.Unmarshal(mustJSON(cp.State), &s); err != nil {
		return fmt.Errorf("the call's state does not decode: %w", err)
	}
	if r.cfg.Edits == nil {
		return errors.New("this worker holds no gate rules to check an edit against: approve or reject the call as asked")
	}
	req := protocol.ToolRequest{CallID: s.CallID, Tool: s.Tool, Server: s.Server, Args: s.Args, ConversationID: s.ConversationID,
		Agent: s.Agent, Context: s.Context}
	return r.cfg.Edits.CheckEdit(ctx, s.Rule.Name, req, final)
}

// gateState is the state of a gate run.
type gateState struct {
	CallID string                     `json:"callId"`
	Tool   string                     `json:"tool"`
	Server string                     `json:"server,omitempty"`
	Args   map[string]json.RawMessage `json:"args"`
	// ArgsDigest is the digest of Args ([protocol.ArgsDigest]) that the
	// decision binds; a gate run of an earlier version has none, and it
	// is computed from Args.
	ArgsDigest     string          `json:"argsDigest,omitempty"`
	ConversationID string          `json:"conversationId,omitempty"`
	Agent          string          `json:"agent,omitempty"`
	Messages       json.RawMessage `json:"messages,omitempty"`
	Context        json.RawMessage `json:"context,omitempty"`
	Rule           gateRuleState   `json:"rule"`
	// Decided is the decided event's data once the call is decided.
	Decided *protocol.Decided `json:"decided,omitempty"`
	// Consumed is set once an approved call's approval was taken to run
	// it: an approval lets its call run once.
	Consumed *protocol.Consumed `json:"consumed,omitempty"`
}

// digest is the digest of the call's args.
func (s gateState) digest() (string, error) {
	if s.ArgsDigest != "" {
		return s.ArgsDigest, nil
	}
	return protocol.ArgsDigest(s.Args)
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
		Migrate(AnyVersion, Migration{}).
		MustBuild()
	f.expired = func(t *txn, in *Interrupt) {
		var s gateState
		if err := json.Unmarshal(mustJSON(t.cp.State), &s); err != nil {
			return
		}
		digest, _ := s.digest()
		d := &protocol.Decided{CallID: s.CallID, Decision: ToolExpired, Tool: s.Tool, Server: s.Server, ArgsDigest: digest, Rule: s.Rule.Name,
			Reason: fmt.Sprintf("no decision by %s", in.ExpiresAt.Format(time.RFC3339)), Origin: t.cp.Origin}
		d.Receipt = t.receipt(protocol.Receipt{Kind: protocol.KindApproval, Tool: s.Tool, Server: s.Server, ArgsDigest: digest,
			Decision: protocol.ReceiptExpired, Approver: TimeoutActor, Rule: s.Rule.Name, RequestID: in.RequestID})
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
	digest, err := s.digest()
	if err != nil {
		return fmt.Errorf("engine: the args of call %s: %w", s.CallID, err)
	}
	ev := &protocol.Decided{CallID: s.CallID, Tool: s.Tool, Server: s.Server, ArgsDigest: digest, Approver: d.Approver, Reason: d.Reason, Rule: s.Rule.Name, Origin: n.x.cp.Origin}
	switch d.Verdict {
	case VerdictApprove, VerdictEdit:
		// What runs is what was approved: the args the approver saw, as
		// they were requested, or their edit of them.
		args, err := json.Marshal(s.Args)
		if d.Verdict == VerdictEdit {
			args, err = json.Marshal(d.Args)
		}
		if err != nil {
			return fmt.Errorf("engine: the final args of call %s: %w", s.CallID, err)
		}
		if ev.FinalDigest, err = protocol.RawArgsDigest(args); err != nil {
			return fmt.Errorf("engine: the final args of call %s: %w", s.CallID, err)
		}
		ev.Decision, ev.Args = ToolApproved, args
		if d.Verdict == VerdictEdit {
			ev.Decision = ToolEdited
		}
	case VerdictRespond:
		ev.Decision, ev.Message = ToolResponded, d.Message
	default:
		ev.Decision = ToolRejected
	}
	raw, _ := json.Marshal(s.Args)
	rc := approvalReceipt(s.Tool, s.Server, raw, d)
	rc.Decision, rc.FinalDigest, rc.Rule = ev.Decision, ev.FinalDigest, s.Rule.Name
	ev.Receipt = n.x.receipt(rc)
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
	digest, err := protocol.ArgsDigest(req.Args)
	if err != nil {
		return r.refuse(ctx, GateFlowName, req.CallID, "", req.Inbound, CodeInvalidPayload, string(CodeInvalidPayload), "args: "+err.Error())
	}
	if req.Rule == nil {
		d := &protocol.Decided{CallID: req.CallID, Decision: ToolAllowed, Tool: req.Tool, Server: req.Server, ArgsDigest: digest, Origin: req.Origin}
		// No rule held the call: the gate itself allows it, and says so
		// in a receipt, as it does a person's decision.
		d.Receipt = r.signReceipt(protocol.Receipt{Flow: GateFlowName, Run: req.CallID, Tool: req.Tool, Server: req.Server, ArgsDigest: digest,
			Decision: protocol.ReceiptAllowed, Auth: protocol.AuthServer}, r.cfg.Now().UTC())
		return r.answerCall(ctx, req, d, Completed)
	}
	state := gateState{CallID: req.CallID, Tool: req.Tool, Server: req.Server, Args: req.Args, ArgsDigest: digest, ConversationID: req.ConversationID,
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
	return r.Start(ctx, Start{Flow: GateFlowName, Run: req.CallID, State: doc, Origin: req.Origin, By: req.Agent, Inbound: req.Inbound,
		exists: func(cp *Checkpoint, rev uint64) (Outcome, error) {
			// Another worker started the call meanwhile (another message
			// of the same call, say): answer as a repeat, never refuse it
			// as another call's.
			return r.requestAgain(ctx, f, cp, rev, req)
		}})
}

// requestAgain answers a request for a call the gate already holds: the
// same call (tool, server and args, and, where callers are identified,
// its requester), or it is refused run_exists: a call id names one call,
// and its decision is about that call alone.
func (r *Runner) requestAgain(ctx context.Context, f *Flow, cp *Checkpoint, rev uint64, req ToolRequest) (Outcome, error) {
	if out, done, err := r.repeat(ctx, f, cp, rev, req.EventID, req.Inbound); done || err != nil {
		out.RunTraceparent = cp.Traceparent
		return out, err
	}
	if msg := r.otherCall(cp, req); msg != "" {
		return r.refuse(ctx, GateFlowName, req.CallID, "", req.Inbound, CodeRunExists, "", msg)
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

// otherCall says why a request for a call the gate holds is not that call
// ("" when it is): another tool or server, other args, or, where callers
// are identified, another requester.
func (r *Runner) otherCall(cp *Checkpoint, req ToolRequest) string {
	var s gateState
	if err := json.Unmarshal(mustJSON(cp.State), &s); err != nil {
		return ""
	}
	want, err := s.digest()
	if err != nil {
		return ""
	}
	got, err := protocol.ArgsDigest(req.Args)
	if err != nil {
		return "args: " + err.Error()
	}
	switch {
	case req.Tool != s.Tool || req.Server != s.Server:
		return fmt.Sprintf("call %s is a call of %s; this request is of %s: a callId names one call, and its decision holds for it alone; use a new callId",
			req.CallID, toolOn(s.Tool, s.Server), toolOn(req.Tool, req.Server))
	case got != want:
		return fmt.Sprintf("call %s was requested with other args (digest %.12s; this request's %.12s): a callId names one call, and its decision holds for those args alone; use a new callId for another call",
			req.CallID, want, got)
	}
	if r.cfg.Authority.Identified() {
		if who := r.actor(req.Agent, req.Inbound); cp.StartedBy != "" && who != cp.StartedBy {
			return fmt.Sprintf("call %s was requested by %s, not %s: use a callId of your own", req.CallID, cp.StartedBy, who)
		}
	}
	return ""
}

// toolOn names a tool and the server offering it.
func toolOn(tool, server string) string {
	if server == "" {
		return tool
	}
	return tool + " of " + server
}

// Consume takes an approved or edited tool call's approval (see
// [protocol.Consume]).
type Consume struct {
	CallID string
	// ArgsDigest is the digest of the args about to run.
	ArgsDigest string
	Inbound
}

// Consume applies a consume: the approval of an approved or edited call
// is taken, once, by whoever requested the call (where callers are
// identified), for exactly its final args. It is recorded in the call's
// checkpoint with a compare-and-set, so that every gateway and every
// restart agrees: a second take is refused not_waiting, saying when and by
// whom the first was made.
func (r *Runner) Consume(ctx context.Context, cmd Consume) (Outcome, error) {
	if err := CheckName("run", cmd.CallID); err != nil {
		return Outcome{Flow: GateFlowName, Run: cmd.CallID, DeadLetter: ReasonInvalidName}, nil
	}
	if out, stop, err := r.authenticate(ctx, GateFlowName, cmd.CallID, &cmd.Inbound); stop {
		return out, err
	}
	return r.transact(ctx, GateFlowName, cmd.CallID, cmd.Inbound, cmd.EventID, protocol.VerbConsume, func(t *txn) (Outcome, error) {
		cp := t.cp
		t.caller = r.caller("", cmd.Inbound)
		t.actor = t.caller.Name
		if busy, err := r.busy(ctx, cp); err != nil || busy {
			return t.retry(), err
		}
		var s gateState
		if err := json.Unmarshal(mustJSON(cp.State), &s); err != nil {
			return Outcome{}, fmt.Errorf("engine: gate call %s: %w", cmd.CallID, err)
		}
		d := s.Decided
		switch {
		case d == nil || cp.Status != Completed:
			return t.refuse(ctx, "", CodeNotWaiting, "call %s is %s and not decided: an approval is taken once a person approved the call", cmd.CallID, cp.Status)
		case d.Decision != ToolApproved && d.Decision != ToolEdited:
			return t.refuse(ctx, "", CodeNotWaiting, "call %s was %s: only an approved or edited call's approval is taken, and this call may not run", cmd.CallID, d.Decision)
		case s.Consumed != nil:
			return t.refuse(ctx, "", CodeNotWaiting, "the approval of call %s was taken by %s at %s: an approval lets its call run once; request the call again, with a new callId, to ask anew",
				cmd.CallID, s.Consumed.By, s.Consumed.At.Format(time.RFC3339))
		}
		final := d.FinalDigest
		if final == "" {
			// A call decided by an earlier version: its final args are
			// the edit's, or the requested ones.
			var err error
			if len(d.Args) > 0 {
				final, err = protocol.RawArgsDigest(d.Args)
			} else {
				final, err = s.digest()
			}
			if err != nil {
				return Outcome{}, fmt.Errorf("engine: gate call %s: %w", cmd.CallID, err)
			}
		}
		if cmd.ArgsDigest != final {
			return t.refuse(ctx, "", CodeForbidden, "call %s was approved for the args of digest %.12s, not those of %.12s: run exactly the decided event's args", cmd.CallID, final, cmd.ArgsDigest)
		}
		var ref *authority.Refusal
		if err := r.cfg.Authority.MayConsume(t.caller, t.authorityRun()); errors.As(err, &ref) {
			return t.refuse(ctx, "", ref.Code, "%s", ref.Reason)
		}
		c := &protocol.Consumed{CallID: cmd.CallID, ArgsDigest: final, By: t.caller.Name, At: t.now, Origin: cp.Origin}
		raw, err := json.Marshal(c)
		if err != nil {
			return Outcome{}, err
		}
		t.begin(cmd.Traceparent, protocol.ActionConsumed)
		t.after = true
		cp.State["consumed"] = raw
		t.input += len(cmd.ArgsDigest)
		t.emit(protocol.EventConsumed, c)
		t.audit(&protocol.AuditRecord{Action: protocol.ActionConsumed, By: t.caller.Name, Source: cmd.Source, EventID: cmd.EventID,
			Trusted: cmd.trusted, Approval: &protocol.AuditApproval{Action: s.Tool, Final: d.Args},
			Outcome: &protocol.AuditOutcome{Status: cp.Status}})
		return r.commit(ctx, t)
	})
}
