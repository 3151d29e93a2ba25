package httpapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// GateAnswer is the answer of POST /v1/gate/requests: the decision (200),
// or the approval the call waits on (202), or neither when nothing came
// within the wait (202: ask again with the same callId).
type GateAnswer struct {
	CallID string `json:"callId"`
	// Decided is the gate's decision: allowed, approved, edited, rejected
	// or expired.
	Decided *protocol.Decided `json:"decided,omitempty"`
	// Pending is the approval the call waits on, as its interrupted event
	// announced it, resume token redacted: decide it with POST
	// /v1/runs/gate/{callId}/resume.
	Pending *protocol.Interrupted `json:"pending,omitempty"`
}

// requestTool answers POST /v1/gate/requests: it asks the tool-call gate
// and waits (?wait=, 30s by default) for the decision.
func (s *Server) requestTool(w http.ResponseWriter, r *http.Request, c Caller) {
	wait, ok := s.wait(w, r, s.cfg.GateWait)
	if !ok {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	req, err := events.ParseToolRequest(body)
	if err != nil {
		writeProblem(w, newProblem(CodeInvalidPayload, bodyError(err)))
		return
	}
	if err := protocol.CheckName("callId", req.CallID); err != nil {
		writeProblem(w, newProblem(CodeInvalidPayload, strings.TrimPrefix(err.Error(), "client: ")))
		return
	}
	cl, ok := s.clientAs(w, c, wait)
	if !ok {
		return
	}
	ans, err := cl.RequestTool(r.Context(), req, wait)
	switch {
	case err == nil && ans.Decided != nil:
		writeJSON(w, http.StatusOK, GateAnswer{CallID: req.CallID, Decided: ans.Decided})
	case err == nil:
		out := GateAnswer{CallID: req.CallID, Pending: ans.Pending}
		if out.Pending != nil {
			in := *out.Pending
			in.ResumeToken = events.Redacted
			out.Pending = &in
		}
		writeJSON(w, http.StatusAccepted, out)
	case errors.Is(err, client.ErrNoAnswer):
		writeJSON(w, http.StatusAccepted, GateAnswer{CallID: req.CallID})
	default:
		s.fail(w, err)
	}
}
