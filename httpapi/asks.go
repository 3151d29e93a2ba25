package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// AskAnswer is the answer of POST /v1/asks and GET /v1/asks/{askId}: how
// the ask settled (200), or the interrupt it waits on (202), or neither
// when nothing came within the wait (202: read it again later).
type AskAnswer struct {
	AskID string `json:"askId"`
	// Answered is set once the ask settled: answered, expired or
	// cancelled.
	Answered *protocol.Answered `json:"answered,omitempty"`
	// Pending is the interrupt the ask waits on, as its interrupted event
	// announced it, resume token redacted: answer it with POST
	// /v1/runs/ask/{askId}/resume.
	Pending *protocol.Interrupted `json:"pending,omitempty"`
}

// postAsk answers POST /v1/asks: it sends the ask and returns once its
// interrupt is announced (202), or, with ?wait=, waits that long for the
// answer (200). A caller's ask without agent is asked by the caller.
func (s *Server) postAsk(w http.ResponseWriter, r *http.Request, c Caller) {
	waitAnswer := r.URL.Query().Has("wait")
	wait, ok := s.wait(w, r, s.cfg.Wait)
	if !ok {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	req, err := events.ParseAsk(body)
	if err != nil {
		writeProblem(w, newProblem(CodeInvalidPayload, bodyError(err)))
		return
	}
	if err := protocol.CheckName("askId", req.AskID); err != nil {
		writeProblem(w, newProblem(CodeInvalidPayload, strings.TrimPrefix(err.Error(), "client: ")))
		return
	}
	if req.Agent == "" {
		req.Agent = c.Name
	}
	cl, ok := s.clientAs(w, c, wait)
	if !ok {
		return
	}
	var ans client.AskAnswer
	if waitAnswer {
		ans, err = cl.Ask(r.Context(), req, wait)
	} else {
		ans, err = cl.AskNoWait(r.Context(), req, wait)
	}
	s.answerAsk(w, req.AskID, ans, err)
}

// getAsk answers GET /v1/asks/{askId}: how the ask settled, waiting
// ?wait= (none by default) for it to.
func (s *Server) getAsk(w http.ResponseWriter, r *http.Request, c Caller) {
	id := r.PathValue("askId")
	if err := protocol.CheckName("askId", id); err != nil {
		writeProblem(w, newProblem(CodeInvalidName, strings.TrimPrefix(err.Error(), "client: ")))
		return
	}
	wait, ok := s.wait(w, r, time.Millisecond)
	if !ok {
		return
	}
	cl := s.client(c, max(wait, s.cfg.Wait))
	if cp, err := cl.Checkpoint(r.Context(), client.AskFlow, id); err == nil && !s.mayRead(w, c, authority.RunOf(cp)) {
		return
	}
	ans, err := cl.WaitAsk(r.Context(), id, wait)
	s.answerAsk(w, id, ans, err)
}

func (s *Server) answerAsk(w http.ResponseWriter, id string, ans client.AskAnswer, err error) {
	switch {
	case err == nil && ans.Answered != nil:
		writeJSON(w, http.StatusOK, AskAnswer{AskID: id, Answered: ans.Answered})
	case err == nil:
		out := AskAnswer{AskID: id}
		if ans.Pending != nil {
			in := *ans.Pending
			in.ResumeToken = events.Redacted
			out.Pending = &in
		}
		writeJSON(w, http.StatusAccepted, out)
	case errors.Is(err, client.ErrNoAnswer):
		writeJSON(w, http.StatusAccepted, AskAnswer{AskID: id})
	default:
		s.fail(w, err)
	}
}
