package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

// ConsumeRequest is the body of POST /v1/gate/requests/{callId}/consume:
// the digest of the args about to run, the decision's finalDigest.
type ConsumeRequest struct {
	ArgsDigest string `json:"argsDigest"`
}

// ConsumeAnswer is the answer of POST /v1/gate/requests/{callId}/consume:
// the approval was taken by the caller, once.
type ConsumeAnswer struct {
	Consumed protocol.Consumed `json:"consumed"`
}

// consumeTool answers POST /v1/gate/requests/{callId}/consume: the caller,
// about to run an approved call, takes its approval (docs/protocol.md §4):
// 200 with the consumed event's data, 409 not_waiting when it was taken
// already (run nothing), 403 forbidden for other args or another caller.
// The caller checks the decision's receipt before (GET /v1/audit/keys).
func (s *Server) consumeTool(w http.ResponseWriter, r *http.Request, c Caller) {
	id := r.PathValue("callId")
	if err := protocol.CheckName("callId", id); err != nil {
		writeProblem(w, newProblem(CodeInvalidName, strings.TrimPrefix(err.Error(), "client: ")))
		return
	}
	if !checkQuery(w, r) {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var req ConsumeRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeProblem(w, newProblem(CodeInvalidPayload, "the body is "+err.Error()+`; send {"argsDigest": "<the decided event's finalDigest>"}`))
		return
	}
	if _, err := events.ParseConsume([]byte(fmt.Sprintf(`{"callId":%q,"argsDigest":%q}`, id, req.ArgsDigest))); err != nil {
		writeProblem(w, newProblem(CodeInvalidPayload, bodyError(err)))
		return
	}
	cl, ok := s.clientAs(w, c, s.cfg.Wait)
	if !ok {
		return
	}
	got, err := cl.Take(r.Context(), id, req.ArgsDigest)
	var ref *client.RefusedError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, ConsumeAnswer{Consumed: got})
	case errors.As(err, &ref):
		writeProblem(w, refusal(ref.Refused))
	default:
		s.fail(w, err)
	}
}

// AuditKeys is the answer of GET /v1/audit/keys: the public keys the
// deployment signs its audit records and its receipts with.
type AuditKeys struct {
	Keys []protocol.AuditKey `json:"keys"`
}

// auditKeys answers GET /v1/audit/keys, with no token needed: public keys
// to verify receipts and audit records with. A verifier that does not
// trust the deployment pins the key serve printed instead.
func (s *Server) auditKeys(w http.ResponseWriter, r *http.Request, _ Caller) {
	if !checkQuery(w, r) {
		return
	}
	keys, err := s.port.Client("/http").AuditKeys(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, AuditKeys{Keys: keys})
}
