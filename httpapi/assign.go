package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// AssignRequest is the body of POST /v1/runs/{flow}/{run}/assign: the
// protocol's assign data without by, which is always the authenticated
// caller.
type AssignRequest struct {
	// RequestID names the pending request; the one pending now when empty.
	RequestID string `json:"requestId,omitempty"`
	// Op is claim, release or delegate.
	Op string `json:"op"`
	// To is whom a delegation hands the approval to: a person, or a role
	// written role:<name>. Only with op delegate.
	To string `json:"to,omitempty"`
	// Reason says why, for the audit.
	Reason string `json:"reason,omitempty"`
}

// assignRun answers POST /v1/runs/{flow}/{run}/assign: the assign is sent
// vouched for the caller, with the caller's roles, so that the engine
// decides whether they may claim, release or delegate the approval, and
// audits it.
func (s *Server) assignRun(w http.ResponseWriter, r *http.Request, c Caller) {
	flow, run, wait, body, ok := s.command(w, r)
	if !ok {
		return
	}
	fields, err := assignFields(body)
	if err != nil {
		writeProblem(w, newProblem(CodeInvalidPayload, bodyError(err)))
		return
	}
	if _, ok := fields["by"]; ok {
		writeProblem(w, newProblem(CodeInvalidPayload, fmt.Sprintf("by is the authenticated caller, %s; leave it out", c.Name)))
		return
	}
	_, named := fields["requestId"]
	if !named {
		// Checked as the protocol's assign; the pending request is named
		// below.
		fields["requestId"] = json.RawMessage(`"pending"`)
	}
	data, _ := json.Marshal(fields)
	a, err := events.ParseAssign(data)
	if err != nil {
		writeProblem(w, newProblem(CodeInvalidPayload, bodyError(err)))
		return
	}
	cl, ok := s.clientAs(w, c, wait)
	if !ok {
		return
	}
	// Name the request pending now, so that an assign that loses a race to
	// a decision is refused rather than applied to the interrupt that
	// follows; a run that is not waiting is answered as a resume would be.
	cp, err := cl.Checkpoint(r.Context(), flow, run)
	if err != nil {
		s.fail(w, err)
		return
	}
	if !cp.Waiting() || cp.Interrupt == nil {
		code := codeNotWaiting
		if cp.Status == protocol.StatusExpired {
			code = codeExpired
		}
		p := newProblem(code, fmt.Sprintf("run %s of flow %s is %s, not waiting on an approval; there is nothing to assign", run, flow, cp.Status))
		p.Flow, p.Run = flow, run
		writeProblem(w, p)
		return
	}
	if !named {
		a.RequestID = cp.Interrupt.RequestID
	}
	a.By = ""
	ev, err := cl.Assign(r.Context(), flow, run, a)
	s.answer(w, flow, run, ev, err)
}

// assignFields reads an assign body as a JSON object.
func assignFields(body []byte) (map[string]json.RawMessage, error) {
	if isEmpty(body) {
		return nil, errors.New(`the body is empty; send {"op": "claim"|"release"|"delegate", "to"?, "reason"?, "requestId"?}`)
	}
	if err := events.CheckDuplicateKeys(body); err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, errors.New(`the body must be a JSON object: {"op": "claim"|"release"|"delegate", "to"?, "reason"?, "requestId"?}`)
	}
	return fields, nil
}
