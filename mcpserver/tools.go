package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// addTools registers the tools. What they list is model context on every
// turn: the descriptions say what a model needs to choose and call a tool,
// and the output schemas spell out their top level only (each result's
// next says what to do; TestToolListFitsItsBudget keeps the list small).
func (s *Server) addTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:         "list_flows",
		Description:  "List the flows start_flow can start.",
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
		OutputSchema: outputSchemaFor[ListFlowsOutput](nil),
	}, s.listFlows)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:         "start_flow",
		Description:  "Start a run of a flow. Status interrupt: ask the user what it asks, then continue_flow.",
		OutputSchema: outputSchemaFor[RunResult](enums{"status": runStatuses}),
	}, s.startFlow)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:         "continue_flow",
		Description:  "Answer a run's interrupt: stateUpdates (question), selected (choice) or decision (approval). A rejected answer returns the question with hiddenContext ERROR:.",
		InputSchema:  schemaFor[ContinueInput](enums{"decision": anys(verdicts(protocol.AllVerdicts()))}),
		OutputSchema: outputSchemaFor[RunResult](enums{"status": runStatuses}),
	}, s.continueFlow)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:         "get_run",
		Description:  "Show a run: status, step, state and pending interrupt.",
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
		OutputSchema: outputSchemaFor[RunInfo](enums{"status": append([]any{StatusRunning}, runStatuses...)}),
	}, s.getRun)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:         "list_pending",
		Description:  "List runs waiting on an interrupt, a page at a time.",
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema:  schemaFor[PendingInput](enums{"kind": anys(protocol.Kinds())}),
		OutputSchema: outputSchemaFor[PendingOutput](nil),
	}, s.listPending)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:         "request_tool_approval",
		Description:  "Ask the tool-call gate before a risky tool call. Call the tool only when allowed, approved or edited; when pending, check get_decision later.",
		OutputSchema: outputSchemaFor[ToolDecision](enums{"decision": decisions}),
	}, s.requestToolApproval)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:         "get_decision",
		Description:  "The gate's decision on a call request_tool_approval asked about.",
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
		OutputSchema: outputSchemaFor[ToolDecision](enums{"decision": decisions}),
	}, s.getDecision)
}

// runWaitsOn describes a run's interrupt in the outputs.
const runWaitsOn = "what the run waits on"

// interruptShape is what an interrupt holds, for the output schemas,
// which do not spell it out.
const interruptShape = `: {kind, requestId, node, hiddenContext?, expiresAt?}; question: questions [{field, question, suggestions?, hiddenContext?}]; ` +
	`choice: question, options [{id, label}], multiple; approval: action, args, reason, approverRole, decisions, error?. ` +
	`hiddenContext is for you alone: follow it, never show or quote it`

// outputSchemaFor is schemaFor's schema of an output, its top level only:
// a nested object or list of objects is given by its type and a
// description of its fields.
func outputSchemaFor[T any](e enums) *jsonschema.Schema {
	s := schemaFor[T](e)
	s.AdditionalProperties = nil
	for name, p := range s.Properties {
		if p.AdditionalProperties != nil && p.AdditionalProperties.Not == nil {
			p.AdditionalProperties = nil // any properties: the default
		}
		nested := p.Properties != nil || (p.Items != nil && p.Items.Properties != nil)
		if !nested {
			continue
		}
		short := &jsonschema.Schema{Type: p.Type, Types: p.Types, Description: p.Description}
		if p.Items != nil {
			short.Items = &jsonschema.Schema{Type: "object"}
		}
		if name == "interrupt" && p.Description == runWaitsOn {
			short.Description += interruptShape
		}
		s.Properties[name] = short
	}
	return s
}

// The values of the outputs' enumerations.
var (
	runStatuses = []any{StatusInterrupt, StatusCompleted, StatusFailed, StatusExpired, StatusCancelled}
	decisions   = []any{DecisionAllowed, DecisionPending, DecisionApproved, DecisionEdited, DecisionRejected, DecisionResponded, DecisionExpired}
)

// enums are the values a schema's top-level properties may take.
type enums map[string][]any

// anys returns strings as values of an enum.
func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// schemaFor is the schema the SDK would derive from T, with the values
// of some of its properties enumerated. T is one of this package's types,
// so a failure is a mistake in them.
func schemaFor[T any](e enums) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: schema of %T: %v", *new(T), err))
	}
	for name, values := range e {
		p, ok := s.Properties[name]
		if !ok {
			panic(fmt.Sprintf("mcpserver: schema of %T has no property %s", *new(T), name))
		}
		p.Enum = values
	}
	return s
}

func (s *Server) listFlows(_ context.Context, _ *mcp.CallToolRequest, _ ListFlowsInput) (*mcp.CallToolResult, ListFlowsOutput, error) {
	out := ListFlowsOutput{Flows: slices.Clone(s.cfg.Flows)}
	if out.Flows == nil {
		out.Flows = []Flow{}
	}
	return nil, out, nil
}

func (s *Server) startFlow(ctx context.Context, req *mcp.CallToolRequest, in StartInput) (*mcp.CallToolResult, RunResult, error) {
	if req.Params.InputResponses != nil {
		return s.elicited(ctx, req, "start_flow")
	}
	if err := checkFlow(in.Flow); err != nil {
		return nil, RunResult{}, err
	}
	run := in.Run
	if run == "" {
		run = client.NewRunID()
	}
	if err := nameError(protocol.CheckName("run", run)); err != nil {
		return nil, RunResult{}, err
	}
	state, err := rawValues("stateUpdates", in.StateUpdates)
	if err != nil {
		return nil, RunResult{}, err
	}
	ev, err := s.client(s.cfg.Wait).Start(ctx, in.Flow, run, state, nil)
	if err != nil {
		return nil, RunResult{}, s.commandError("start_flow", in.Flow, run, err)
	}
	return s.result(req, "start_flow", in.Flow, run, ev)
}

func (s *Server) continueFlow(ctx context.Context, req *mcp.CallToolRequest, in ContinueInput) (*mcp.CallToolResult, RunResult, error) {
	if req.Params.InputResponses != nil {
		return s.elicited(ctx, req, "continue_flow")
	}
	return s.continueRun(ctx, req, "continue_flow", in)
}

// continueRun answers the interrupt a run waits on, for tool.
func (s *Server) continueRun(ctx context.Context, req *mcp.CallToolRequest, tool string, in ContinueInput) (*mcp.CallToolResult, RunResult, error) {
	if err := checkFlow(in.Flow); err != nil {
		return nil, RunResult{}, err
	}
	if err := nameError(protocol.CheckName("run", in.Run)); err != nil {
		return nil, RunResult{}, err
	}
	c := s.client(s.cfg.Wait)
	cp, err := c.Checkpoint(ctx, in.Flow, in.Run)
	if err != nil {
		return nil, RunResult{}, readError(err)
	}
	if err := s.mayRead(authority.RunOf(cp)); err != nil {
		return nil, RunResult{}, err
	}
	if !cp.Waiting() {
		return nil, RunResult{}, fmt.Errorf("run %s of flow %s is %s, not waiting on an interrupt: there is nothing to answer; get_run shows how it stands, and start_flow starts a new run", in.Run, in.Flow, cp.Status)
	}
	pending := cp.Interrupt
	if in.RequestID != "" && in.RequestID != pending.RequestID {
		return nil, RunResult{}, fmt.Errorf("run %s of flow %s no longer waits on request %s but on %s (it was answered meanwhile); get_run shows what it asks now", in.Run, in.Flow, in.RequestID, pending.RequestID)
	}
	r := protocol.Resume{RequestID: pending.RequestID, Selected: in.Selected, Decision: in.Decision, Reason: in.Reason, Message: in.Message}
	if err := checkAnswer(pending.Asked(), in); err != nil {
		return nil, RunResult{}, err
	}
	if r.Answers, err = rawValues("stateUpdates", in.StateUpdates); err != nil {
		return nil, RunResult{}, err
	}
	if r.Edits, err = rawValues("edits", in.Edits); err != nil {
		return nil, RunResult{}, err
	}
	// The deployment's authority decides whether the approver may answer;
	// Interlock asks it again when the answer arrives.
	if err := s.port.Authority().MayDecide(s.caller(), authority.RunOf(cp), protocol.Verdict(in.Decision)); err != nil {
		var ref *authority.Refusal
		if errors.As(err, &ref) {
			return nil, RunResult{}, s.decideRefusal(ref, pending, in.Flow, in.Run)
		}
		return nil, RunResult{}, err
	}
	role := pending.ApproverRole
	var ev client.Event
	if s.tokens == nil {
		r.Approver = ""
		ev, err = c.Resume(ctx, in.Flow, in.Run, r)
	} else {
		seen, ok := s.tokens.get(req.Session, in.Flow, in.Run)
		if !ok || seen.RequestID != pending.RequestID {
			return nil, RunResult{}, fmt.Errorf("this MCP session has not seen run %s of flow %s wait on request %s, and without the deployment's secret it answers only the interrupts its own start_flow and continue_flow returned: answer it where it was started", in.Run, in.Flow, pending.RequestID)
		}
		r.ResumeToken, r.Approver = seen.ResumeToken, s.cfg.Approver
		if protocol.RoleRestricted(pending.Kind) && role != "" {
			ev, err = c.ResumeWithRole(ctx, in.Flow, in.Run, role, r)
		} else {
			ev, err = c.Resume(ctx, in.Flow, in.Run, r)
		}
	}
	if err != nil {
		return nil, RunResult{}, s.commandError(tool, in.Flow, in.Run, err)
	}
	return s.result(req, tool, in.Flow, in.Run, ev)
}

// decideRefusal words the authority's refusal of the approver's answer
// to run's pending interrupt: its code and reason, as every refusal
// reads, and what to tell the user.
func (s *Server) decideRefusal(ref *authority.Refusal, pending *protocol.CheckpointInterrupt, flow, run string) error {
	msg := fmt.Sprintf("refused (%s): %s", ref.Code, ref.Reason)
	if role := pending.ApproverRole; role != "" && !slices.Contains(s.cfg.Roles, role) {
		return fmt.Errorf("%s; the approval of run %s of flow %s is for the %s role, which this MCP server does not hold: a person with that role must decide it (or the server be started with --role %s); tell the user it waits for them", msg, run, flow, role, role)
	}
	return fmt.Errorf("%s; the %s of run %s of flow %s is not this MCP server's to decide: tell the user it waits for the people who may", msg, pending.Kind, run, flow)
}

// mayRead says why the approver may not read run, worded for the model
// as every refusal is; nil when the authority lets them.
func (s *Server) mayRead(run authority.Run) error {
	err := s.port.Authority().MayRead(s.caller(), run)
	var ref *authority.Refusal
	if errors.As(err, &ref) {
		return fmt.Errorf("refused (%s): %s; it is not for this MCP server to read: tell the user so, and do not ask for it again", ref.Code, ref.Reason)
	}
	return err
}

// checkAnswer says what is wrong with an answer that does not fit the
// interrupt, by its kind's rule, before it is sent.
func checkAnswer(asked protocol.Asked, in ContinueInput) error {
	spec, ok := protocol.SpecOf(asked.Kind)
	if !ok {
		return nil // a kind this version does not know: Interlock checks
	}
	answers, err := rawValues("stateUpdates", in.StateUpdates)
	if err != nil {
		return err
	}
	edits, err := rawValues("edits", in.Edits)
	if err != nil {
		return err
	}
	a := protocol.Answer{Answers: answers, Selected: in.Selected, Decision: in.Decision, Edits: edits, Reason: in.Reason, Message: in.Message}
	if err := spec.Check(asked, a); err != nil {
		return fmt.Errorf("the run waits on %s: %v. To answer it, %s; then call continue_flow again", spec.Noun, err, viewOf(asked.Kind).answer)
	}
	return nil
}

func (s *Server) getRun(ctx context.Context, _ *mcp.CallToolRequest, in RunRef) (*mcp.CallToolResult, RunInfo, error) {
	if err := nameError(protocol.CheckName("flow", in.Flow)); err != nil {
		return nil, RunInfo{}, err
	}
	if err := nameError(protocol.CheckName("run", in.Run)); err != nil {
		return nil, RunInfo{}, err
	}
	cp, err := s.client(s.cfg.Wait).Checkpoint(ctx, in.Flow, in.Run)
	if err != nil {
		return nil, RunInfo{}, readError(err)
	}
	if err := s.mayRead(authority.RunOf(cp)); err != nil {
		return nil, RunInfo{}, err
	}
	out := RunInfo{
		Flow: cp.Flow, Run: cp.Run, Status: status(cp.Status), Node: cp.Node, Error: cp.Error,
		CreatedAt: rfc3339(cp.CreatedAt), UpdatedAt: rfc3339(cp.UpdatedAt),
	}
	if out.State, err = object(cp.State); err != nil {
		return nil, RunInfo{}, fmt.Errorf("reading the state of run %s: %w", in.Run, err)
	}
	if cp.Waiting() {
		if out.Interrupt, err = checkpointInterrupt(cp.Interrupt); err != nil {
			return nil, RunInfo{}, err
		}
	}
	return nil, out, nil
}

func (s *Server) listPending(ctx context.Context, _ *mcp.CallToolRequest, in PendingInput) (*mcp.CallToolResult, PendingOutput, error) {
	q := client.PendingQuery{Flow: in.Flow, Limit: in.Limit, After: in.Cursor}
	switch {
	case in.Limit == 0:
		q.Limit = DefaultPageSize
	case in.Limit < 0 || in.Limit > MaxPageSize:
		return nil, PendingOutput{}, fmt.Errorf("limit %d is out of range: use 1 to %d", in.Limit, MaxPageSize)
	}
	if in.Kind != "" {
		q.Kinds = []string{in.Kind}
	}
	page, err := s.client(s.cfg.Wait).ListPending(ctx, q)
	if err != nil {
		return nil, PendingOutput{}, readError(err)
	}
	// An ask's or a tool call's entry is listed for whoever asked and
	// whoever may decide it (a page may so come shorter than its limit).
	out := PendingOutput{Items: make([]PendingItem, 0, len(page.Items)), Next: page.Next}
	for _, p := range page.Items {
		if s.port.Authority().MayRead(s.caller(), authority.EntryOf(p)) != nil {
			continue
		}
		item := PendingItem{
			Flow: p.Flow, Run: p.Run, Node: p.Node, Kind: p.Kind, RequestID: p.RequestID, Fields: p.Fields,
			Question: p.Question, Action: p.Action, ApproverRole: p.ApproverRole, AskedAt: rfc3339(p.AskedAt),
		}
		if p.ExpiresAt != nil {
			item.ExpiresAt = rfc3339(*p.ExpiresAt)
		}
		out.Items = append(out.Items, item)
	}
	return nil, out, nil
}

func (s *Server) requestToolApproval(ctx context.Context, _ *mcp.CallToolRequest, in ToolRequestInput) (*mcp.CallToolResult, ToolDecision, error) {
	if in.Tool == "" {
		return nil, ToolDecision{}, errors.New("tool is missing: name the tool you want to call")
	}
	callID := in.CallID
	if callID == "" {
		callID = "call-" + strings.TrimPrefix(client.NewRunID(), "r-")
	}
	if err := nameError(protocol.CheckName("callId", callID)); err != nil {
		return nil, ToolDecision{}, err
	}
	req := protocol.ToolRequest{CallID: callID, Tool: in.Tool, ConversationID: in.ConversationID, Agent: "mcp"}
	var err error
	if req.Args, err = rawValues("args", in.Args); err != nil {
		return nil, ToolDecision{}, err
	}
	if in.Context != nil {
		if req.Context, err = json.Marshal(in.Context); err != nil {
			return nil, ToolDecision{}, fmt.Errorf("context: %w", err)
		}
	}
	ans, err := s.client(s.cfg.GateWait).AskTool(ctx, req, s.cfg.GateWait)
	switch {
	case errors.Is(err, client.ErrNoAnswer):
		return nil, ToolDecision{}, fmt.Errorf("the tool-call gate did not answer within %s: is `interlock serve --gate-rules FILE` running? The request is queued; do not call the tool, and ask get_decision with callId %s later", s.cfg.GateWait, callID)
	case err != nil:
		return nil, ToolDecision{}, s.commandError("request_tool_approval", client.GateFlow, callID, err)
	case ans.Decided != nil:
		out, err := decided(*ans.Decided)
		return nil, out, err
	case ans.Pending != nil:
		out, err := pendingDecision(callID, *ans.Pending)
		return nil, out, err
	}
	return nil, ToolDecision{}, fmt.Errorf("the tool-call gate gave no answer for call %s; ask get_decision later", callID)
}

func (s *Server) getDecision(ctx context.Context, _ *mcp.CallToolRequest, in CallRef) (*mcp.CallToolResult, ToolDecision, error) {
	if err := nameError(protocol.CheckName("callId", in.CallID)); err != nil {
		return nil, ToolDecision{}, err
	}
	c := s.client(s.cfg.Wait)
	// A call a rule held is a run of the gate flow, read by whoever asked
	// for it and whoever may decide it; a call no rule held (allowed at
	// once, or refused) has no run, and its events say no more than that.
	cp, cpErr := c.Checkpoint(ctx, client.GateFlow, in.CallID)
	noRun := errors.Is(cpErr, client.ErrNotFound)
	switch {
	case cpErr == nil:
		if err := s.mayRead(authority.RunOf(cp)); err != nil {
			return nil, ToolDecision{}, err
		}
	case !noRun:
		return nil, ToolDecision{}, readError(cpErr)
	}
	evs, _, err := c.RunEvents(ctx, client.GateFlow, in.CallID, client.MaxPendingLimit)
	if err != nil {
		return nil, ToolDecision{}, readError(err)
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == protocol.EventRefused && i == len(evs)-1 && noRun {
			// The call's last word is a refusal (the gate is off, or the
			// request was bad): say it, rather than that there is no call.
			var ref protocol.Refused
			if err := json.Unmarshal(evs[i].Event.Data(), &ref); err == nil {
				return nil, ToolDecision{}, refusalError(ref, "request_tool_approval")
			}
		}
		if evs[i].Kind != protocol.EventDecided {
			continue
		}
		var d protocol.Decided
		if err := json.Unmarshal(evs[i].Event.Data(), &d); err != nil {
			return nil, ToolDecision{}, fmt.Errorf("reading the decision on call %s: %w", in.CallID, err)
		}
		out, err := decided(d)
		return nil, out, err
	}
	if noRun {
		return nil, ToolDecision{}, fmt.Errorf("there is no tool call %s: check the callId that request_tool_approval returned, or ask request_tool_approval first", in.CallID)
	}
	if !cp.Waiting() {
		return nil, ToolDecision{}, fmt.Errorf("tool call %s is %s, and its decision is no longer kept: do not call the tool; ask request_tool_approval again with a new callId", in.CallID, cp.Status)
	}
	pending, err := checkpointInterrupt(cp.Interrupt)
	if err != nil {
		return nil, ToolDecision{}, err
	}
	return nil, ToolDecision{CallID: in.CallID, Decision: DecisionPending, Interrupt: pending, Next: pendingNext}, nil
}

const pendingNext = "Do not call the tool yet: a person must decide. Tell the user it waits for approval, and ask get_decision later."

// decided is the output of a gate's decision.
func decided(d protocol.Decided) (ToolDecision, error) {
	out := ToolDecision{CallID: d.CallID, Decision: d.Decision, Approver: d.Approver, Reason: d.Reason, Message: d.Message, Rule: d.Rule}
	switch d.Decision {
	case DecisionAllowed, DecisionApproved:
		out.Next = "Call the tool with your arguments."
	case DecisionEdited:
		out.Next = "Call the tool with args, the arguments the approver changed, instead of yours."
		var err error
		if out.Args, err = object(d.Args); err != nil {
			return ToolDecision{}, fmt.Errorf("reading the edited args of call %s: %w", d.CallID, err)
		}
	case DecisionResponded:
		out.Next = "Do not call the tool. The approver answered you instead of deciding: read message, and act on it (tell the user, or change your plan and ask again with a new callId)."
	default:
		out.Next = "Do not call the tool. Tell the user it was " + d.Decision + "."
	}
	return out, nil
}

// pendingDecision is the output of a call waiting on an approval.
func pendingDecision(callID string, in protocol.Interrupted) (ToolDecision, error) {
	it, err := interrupt(in)
	if err != nil {
		return ToolDecision{}, err
	}
	return ToolDecision{CallID: callID, Decision: DecisionPending, Interrupt: it, Next: pendingNext}, nil
}

// result turns the event that settled a command into the tool's output;
// a refusal is a tool error that says what to do.
func (s *Server) result(req *mcp.CallToolRequest, tool, flow, run string, ev client.Event) (*mcp.CallToolResult, RunResult, error) {
	out := RunResult{Flow: flow, Run: run}
	if ev.Repeat {
		return nil, RunResult{}, fmt.Errorf("this answer repeats one run %s of flow %s has already applied; get_run shows how it stands", run, flow)
	}
	var err error
	switch ev.Kind {
	case protocol.EventRefused:
		var ref protocol.Refused
		if err := ev.Decode(&ref); err != nil {
			return nil, RunResult{}, fmt.Errorf("reading the refusal: %w", err)
		}
		return nil, RunResult{}, refusalError(ref, tool)
	case protocol.EventInterrupted:
		var in protocol.Interrupted
		if err := ev.Decode(&in); err != nil {
			return nil, RunResult{}, fmt.Errorf("reading the interrupt: %w", err)
		}
		if s.tokens != nil {
			s.tokens.keep(req.Session, in)
		}
		if form := elicitation(req, in); form != nil {
			return form, RunResult{}, nil
		}
		out.Status = StatusInterrupt
		if out.Interrupt, err = interrupt(in); err != nil {
			return nil, RunResult{}, err
		}
		out.Next = nextFor(out.Interrupt, s.cfg.Roles)
	case protocol.EventCompleted:
		var c protocol.Completed
		if err := ev.Decode(&c); err != nil {
			return nil, RunResult{}, fmt.Errorf("reading the completed event: %w", err)
		}
		out.Status = StatusCompleted
		if out.State, err = object(c.State); err != nil {
			return nil, RunResult{}, err
		}
		out.Next = "The run is done: tell the user what was done, from state."
	case protocol.EventFailed:
		var f protocol.Failed
		if err := ev.Decode(&f); err != nil {
			return nil, RunResult{}, fmt.Errorf("reading the failed event: %w", err)
		}
		out.Status, out.Error = StatusFailed, f.Error
		out.Next = "The run failed: tell the user it could not be completed."
	case protocol.EventExpired:
		out.Status = StatusExpired
		out.Next = "The run expired: nobody answered in time. Tell the user; start_flow starts again."
	case protocol.EventCancelled:
		out.Status = StatusCancelled
		out.Next = "The run was cancelled. Tell the user; start_flow starts again."
	default:
		return nil, RunResult{}, fmt.Errorf("unexpected %s event for run %s of flow %s; get_run shows how it stands", ev.Kind, run, flow)
	}
	return nil, out, nil
}

// nextFor says what to do about an interrupt.
func nextFor(in *Interrupt, roles []string) string {
	if protocol.RoleRestricted(in.Kind) && in.ApproverRole != "" && !slices.Contains(roles, in.ApproverRole) {
		return "A person with the " + in.ApproverRole + " role must decide this. Tell the user it waits for them; get_run shows when it has moved on."
	}
	return viewOf(in.Kind).next
}

// interrupt is the model's view of an interrupted event: everything but
// the token.
func interrupt(in protocol.Interrupted) (*Interrupt, error) {
	out := &Interrupt{
		Kind: in.Kind, RequestID: in.RequestID, Node: in.Node, HiddenContext: in.Context, Question: in.Question,
		Multiple: in.IsMultiple(), Action: in.Action, Reason: in.Reason, ApproverRole: in.ApproverRole,
		Decisions: verdicts(in.Decisions), Error: in.Error, ExpiresAt: rfc3339Ptr(in.ExpiresAt),
		Questions: questions(in.Questions), Options: options(in.Options),
	}
	var err error
	if out.Args, err = object(in.Args); err != nil {
		return nil, fmt.Errorf("reading the approval's args: %w", err)
	}
	return out, nil
}

// checkpointInterrupt is the model's view of a checkpoint's interrupt.
func checkpointInterrupt(in *protocol.CheckpointInterrupt) (*Interrupt, error) {
	out := &Interrupt{
		Kind: in.Kind, RequestID: in.RequestID, Node: in.Node, HiddenContext: in.Context, Question: in.Question,
		Multiple: in.Multiple, Action: in.Action, Reason: in.Reason, ApproverRole: in.ApproverRole,
		Questions: questions(in.Questions), Options: options(in.Options),
	}
	if in.ExpiresAt != nil {
		out.ExpiresAt = rfc3339(*in.ExpiresAt)
	}
	var err error
	if out.Args, err = object(in.Args); err != nil {
		return nil, fmt.Errorf("reading the approval's args: %w", err)
	}
	return out, nil
}

func questions(qs []protocol.Question) []Question {
	var out []Question
	for _, q := range qs {
		out = append(out, Question{Field: q.Field, Question: q.Question, Suggestions: q.Suggestions, HiddenContext: q.Context})
	}
	return out
}

func options(os []protocol.Option) []Option {
	var out []Option
	for _, o := range os {
		out = append(out, Option{ID: o.ID, Label: o.Label})
	}
	return out
}

// status is the model's word for a checkpoint's status.
func status(s protocol.Status) string {
	if s == protocol.StatusWaiting {
		return StatusInterrupt
	}
	return string(s)
}

// object decodes a JSON object ("" or null: none).
func object(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// rawValues encodes each value of m as JSON.
func rawValues(what string, m map[string]any) (map[string]json.RawMessage, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", what, k, err)
		}
		out[k] = b
	}
	return out, nil
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// checkFlow checks a flow name the model gave for a command.
func checkFlow(flow string) error {
	if err := nameError(protocol.CheckName("flow", flow)); err != nil {
		return err
	}
	if flow == client.GateFlow {
		return errors.New("gate is the tool-call gate's flow: its approvals are decided by people, not through the model; ask it with request_tool_approval and read the decision with get_decision")
	}
	return nil
}

// nameError words a bad name for the model.
func nameError(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(strings.TrimPrefix(err.Error(), "client: "))
}

// readError words an error reading a run.
func readError(err error) error {
	if errors.Is(err, client.ErrNotFound) {
		return fmt.Errorf("%s; list_pending lists runs that wait, and start_flow starts one", strings.TrimPrefix(err.Error(), "client: run not found: "))
	}
	return fmt.Errorf("reading from Interlock failed: %s", strings.TrimPrefix(err.Error(), "client: "))
}

// commandError words an error of a command.
func (s *Server) commandError(tool, flow, run string, err error) error {
	var ref *client.RefusedError
	switch {
	case errors.As(err, &ref):
		return refusalError(ref.Refused, tool)
	case errors.Is(err, client.ErrNoAnswer):
		return fmt.Errorf("no answer from Interlock within %s: is `interlock serve` running? The command is queued and will apply when it runs: call get_run for run %s of flow %s later rather than calling %s again", s.cfg.Wait, run, flow, tool)
	}
	return fmt.Errorf("%s failed: %s", tool, strings.TrimPrefix(err.Error(), "client: "))
}

// refusalError words a refusal for the model: the deployment's message,
// and what to do.
func refusalError(ref protocol.Refused, tool string) error {
	hint := ""
	switch ref.Code {
	case protocol.CodeUnknownFlow:
		hint = "call list_flows and start one of those"
	case protocol.CodeUnknownRun:
		hint = "check the flow and run; list_pending lists runs that wait"
	case protocol.CodeRunExists:
		hint = "choose another run id, or leave run out for a fresh one"
	case protocol.CodeNotWaiting:
		hint = "the run has ended; get_run shows how, and start_flow starts a new one"
	case protocol.CodeTokenMismatch, protocol.CodeStaleCheckpoint:
		hint = "the run moved on meanwhile; get_run shows what it asks now"
	case protocol.CodeExpired:
		hint = "nobody answered in time; tell the user, and start_flow starts again"
	case protocol.CodeInvalidAnswer, protocol.CodeInvalidPayload:
		hint = "fix it and call " + tool + " again"
	case protocol.CodeForbidden:
		hint = "a person with the approver role must decide; tell the user it waits for them"
	case protocol.CodeUnsupported:
		hint = "do not call the tool, and do not ask again: tell the user this deployment cannot approve tool calls until its operator turns the gate on"
	}
	msg := fmt.Sprintf("refused (%s): %s", ref.Code, ref.Message)
	if hint != "" {
		msg += "; " + hint
	}
	return errors.New(msg)
}

// verdicts are an approval's decisions as the model reads them.
func verdicts(vs []protocol.Verdict) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// rfc3339Ptr is rfc3339 of a time that may be missing ("" then).
func rfc3339Ptr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return rfc3339(*t)
}
