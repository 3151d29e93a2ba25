package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/protocol"
)

// A question or choice meant for the user is asked with MCP elicitation
// when the client declares it can: the tool call returns an input request
// (a form the client shows the user), and the client calls the tool
// again with the user's answer, which the server sends as continue_flow
// would, so it is checked and validated like any answer. A client that
// cannot elicit, or an interrupt a form cannot ask (an approval, an answer
// that is an object or a list, a question asked again after a rejected
// answer, whose hidden context the model must put in its own words), gets
// the interrupt as the tool's result, as before.

// elicitKey names the input request of a form.
const elicitKey = "answer"

// maxElicitRounds bounds the forms one tool call shows (the SDK's client
// retries a call at most ten times).
const maxElicitRounds = 5

// elicitState is the request state of a form: the interrupt it asks, so
// that the retried call answers it and nothing else.
type elicitState struct {
	Flow      string `json:"flow"`
	Run       string `json:"run"`
	RequestID string `json:"requestId"`
	Kind      string `json:"kind"`
	Round     int    `json:"round"`
}

func (st elicitState) encode() string {
	b, _ := json.Marshal(st)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeElicitState(s string) (elicitState, error) {
	var st elicitState
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err == nil && (st.Flow == "" || st.Run == "" || st.RequestID == "") {
		err = errors.New("it names no interrupt")
	}
	return st, err
}

// canElicit reports whether the client of req asks forms of its user.
func canElicit(req *mcp.CallToolRequest) bool {
	if req == nil || req.Session == nil {
		return false
	}
	p := req.Session.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	e := p.Capabilities.Elicitation
	return e.Form != nil || e.URL == nil // neither: form, as the SDK reads it
}

// elicitRound is the round of the form a retried call answers, 0 on the
// first call.
func elicitRound(req *mcp.CallToolRequest) int {
	if req == nil || req.Params.RequestState == "" {
		return 0
	}
	st, err := decodeElicitState(req.Params.RequestState)
	if err != nil {
		return maxElicitRounds
	}
	return st.Round
}

// elicitation returns the input request that asks in of the user, or
// nil when a form cannot ask it.
func elicitation(req *mcp.CallToolRequest, in protocol.Interrupted) *mcp.CallToolResult {
	round := elicitRound(req)
	if !canElicit(req) || round >= maxElicitRounds {
		return nil
	}
	form := viewOf(in.Kind).form
	if form == nil {
		return nil
	}
	params := form(in)
	if params == nil {
		return nil
	}
	st := elicitState{Flow: in.Flow, Run: in.Run, RequestID: in.RequestID, Kind: in.Kind, Round: round + 1}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{elicitKey: params}, RequestState: st.encode()}
}

// questionForm is the form of a question interrupt: one field per
// question, of the answer's type. The questions' hidden context is never
// in it.
func questionForm(qs []protocol.Question) *mcp.ElicitParams {
	if len(qs) == 0 {
		return nil
	}
	schema := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}}
	var msg []string
	for _, q := range qs {
		if strings.HasPrefix(q.Context, "ERROR:") {
			return nil // the model explains the rejection in its own words
		}
		p := &jsonschema.Schema{Type: q.Type, Title: q.Question}
		switch q.Type {
		case "":
			p.Type = "string"
		case "string", "number", "integer", "boolean":
		default:
			return nil // an object or a list: not a form's field
		}
		narrow(p, q.Schema)
		if len(q.Suggestions) > 0 {
			p.Description = "For example: " + strings.Join(q.Suggestions, ", ")
		}
		schema.Properties[q.Field] = p
		schema.Required = append(schema.Required, q.Field)
		msg = append(msg, q.Question)
	}
	return &mcp.ElicitParams{Mode: "form", Message: strings.Join(msg, "\n"), RequestedSchema: schema}
}

// narrow adds to a form's field what a question's schema says of its
// answer that a form can check: a format, bounds, the values allowed.
func narrow(p *jsonschema.Schema, raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	var s jsonschema.Schema
	if json.Unmarshal(raw, &s) != nil || (s.Type != "" && s.Type != p.Type) {
		return
	}
	switch p.Type {
	case "string":
		switch s.Format {
		case "email", "uri", "date", "date-time":
			p.Format = s.Format
		}
		p.MinLength, p.MaxLength = s.MinLength, s.MaxLength
		if p.MinLength != nil && p.MaxLength != nil && *p.MaxLength < *p.MinLength {
			p.MinLength, p.MaxLength = nil, nil
		}
		for _, v := range s.Enum {
			if _, ok := v.(string); !ok {
				return
			}
		}
		p.Enum = s.Enum
	case "number", "integer":
		p.Minimum, p.Maximum = s.Minimum, s.Maximum
		if p.Minimum != nil && p.Maximum != nil && *p.Maximum < *p.Minimum {
			p.Minimum, p.Maximum = nil, nil
		}
	}
}

// choiceForm is the form of a choice interrupt: one field, selected, of
// the options by their labels.
func choiceForm(in protocol.Interrupted) *mcp.ElicitParams {
	if len(in.Options) == 0 {
		return nil
	}
	var opts []*jsonschema.Schema
	for _, o := range in.Options {
		var id any = o.ID
		opts = append(opts, &jsonschema.Schema{Const: &id, Title: o.Label})
	}
	p := &jsonschema.Schema{Type: "string", Title: in.Question, OneOf: opts}
	if in.IsMultiple() {
		p = &jsonschema.Schema{Type: "array", Title: in.Question, Items: &jsonschema.Schema{AnyOf: opts}}
	}
	schema := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"selected": p}, Required: []string{"selected"}}
	return &mcp.ElicitParams{Mode: "form", Message: in.Question, RequestedSchema: schema}
}

// Next of a run whose form the user did not fill in.
const (
	declinedNext  = "The user declined to answer the form. The run still waits: ask them in conversation whether and how to go on, then answer with continue_flow, or leave it waiting."
	cancelledNext = "The user closed the form without answering. The run still waits: ask them in conversation, then answer with continue_flow, or leave it waiting."
)

// elicited answers the interrupt a form asked with what the user gave:
// the retried call of start_flow or continue_flow.
func (s *Server) elicited(ctx context.Context, req *mcp.CallToolRequest, tool string) (*mcp.CallToolResult, RunResult, error) {
	st, err := decodeElicitState(req.Params.RequestState)
	if err != nil {
		return nil, RunResult{}, fmt.Errorf("the answer to the form cannot be read (%v); call get_run to see what the run waits on", err)
	}
	res, ok := req.Params.InputResponses[elicitKey].(*mcp.ElicitResult)
	if !ok {
		return nil, RunResult{}, fmt.Errorf("the form of run %s of flow %s came back without an answer; call get_run to see what it waits on", st.Run, st.Flow)
	}
	if res.Action != "accept" {
		return s.stillWaiting(ctx, st, map[string]string{"decline": declinedNext}[res.Action])
	}
	in := ContinueInput{Flow: st.Flow, Run: st.Run, RequestID: st.RequestID}
	fromForm := viewOf(st.Kind).fromForm
	if fromForm == nil {
		return nil, RunResult{}, fmt.Errorf("the form of run %s of flow %s answered a %s, which no form asks; call get_run to see what it waits on", st.Run, st.Flow, st.Kind)
	}
	fromForm(res.Content, &in)
	return s.continueRun(ctx, req, tool, in)
}

// stillWaiting is the result of a run whose form was not filled in.
func (s *Server) stillWaiting(ctx context.Context, st elicitState, next string) (*mcp.CallToolResult, RunResult, error) {
	if next == "" {
		next = cancelledNext
	}
	cp, err := s.client(s.cfg.Wait).Checkpoint(ctx, st.Flow, st.Run)
	if err != nil {
		return nil, RunResult{}, readError(err)
	}
	// The form's state comes back from the client: the run it names is
	// read only if the approver may read it.
	if err := s.mayRead(authority.RunOf(cp)); err != nil {
		return nil, RunResult{}, err
	}
	out := RunResult{Flow: st.Flow, Run: st.Run, Status: status(cp.Status), Next: next}
	if cp.Waiting() {
		if out.Interrupt, err = checkpointInterrupt(cp.Interrupt); err != nil {
			return nil, RunResult{}, err
		}
	}
	return nil, out, nil
}
