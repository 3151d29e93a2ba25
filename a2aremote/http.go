package a2aremote

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/interlockhq/interlock/authority"
)

// Mux is where the follow route is mounted: the HTTP API's server
// (*httpapi.Server) is one, and authenticates its callers.
type Mux interface {
	Handle(pattern string, h http.Handler)
	Authenticate(r *http.Request) (authority.Caller, bool)
}

// FollowPath is the route that follows a task of a remote agent: POST
// {"agent": "<name>", "taskId": "<the agent's task id>"}.
const FollowPath = "/a2a/follow"

// Register mounts the follow route on m, for the callers m
// authenticates; the asks are the caller's, vouched for them, so the one
// authority sees who asked (a requester of an approval does not decide
// it).
func (r *Remote) Register(m Mux) {
	m.Handle("POST "+FollowPath, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		c, ok := m.Authenticate(req)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="interlock"`)
			problem(w, http.StatusUnauthorized, "send Authorization: Bearer <token>, a token of the directory of people (`interlock people add --token`)")
			return
		}
		var body struct {
			Agent  string `json:"agent"`
			TaskID string `json:"taskId"`
		}
		dec := json.NewDecoder(io.LimitReader(req.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			problem(w, http.StatusBadRequest, `the body is {"agent": "<a remote agent's name>", "taskId": "<its task id>"}: `+err.Error())
			return
		}
		if err := r.Follow(req.Context(), body.Agent, body.TaskID, c.Protocol()); err != nil {
			problem(w, http.StatusBadRequest, err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]any{"agent": body.Agent, "taskId": body.TaskID, "followed": true})
	}))
}

// problem answers with a problem document saying what is wrong.
func problem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "title": http.StatusText(status), "detail": detail})
}
