package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/away"
)

// AwayPort is implemented by a port that keeps the people's absences
// (the *interlock.Service): GET, PUT and DELETE /v1/away need it.
type AwayPort interface {
	Away() *away.Set
}

// Absence is a person away and their delegate, as /v1/away shows it.
type Absence struct {
	Person   string    `json:"person"`
	Delegate string    `json:"delegate"`
	Roles    []string  `json:"roles,omitempty"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
}

// AwayView is the answer of GET /v1/away: the caller's absence, in force
// or to come, and those in force that name them delegate.
type AwayView struct {
	Away     *Absence  `json:"away"`
	Deciding []Absence `json:"deciding"`
}

func absenceOf(ab authority.Absence) Absence {
	return Absence{Person: ab.Person, Delegate: ab.Delegate, Roles: ab.Roles, From: ab.From, To: ab.To}
}

// awaySet is the port's absences, or a problem answered.
func (s *Server) awaySet(w http.ResponseWriter) (*away.Set, bool) {
	if p, ok := s.port.(AwayPort); ok && p.Away() != nil {
		return p.Away(), true
	}
	writeProblem(w, newProblem(CodeNotFound, "this API keeps no absences: it runs without an Interlock service that follows them"))
	return nil, false
}

// getAway answers GET /v1/away.
func (s *Server) getAway(w http.ResponseWriter, _ *http.Request, c Caller) {
	set, ok := s.awaySet(w)
	if !ok {
		return
	}
	now := time.Now()
	v := AwayView{Deciding: []Absence{}}
	if ab, _, ok := set.Coming(c.Name, now); ok {
		a := absenceOf(ab)
		v.Away = &a
	}
	for _, ab := range set.For(c.Name, now) {
		v.Deciding = append(v.Deciding, absenceOf(ab))
	}
	writeJSON(w, http.StatusOK, v)
}

// putAway answers PUT /v1/away: the caller names a delegate for a period.
func (s *Server) putAway(w http.ResponseWriter, r *http.Request, c Caller) {
	set, ok := s.awaySet(w)
	if !ok {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var req away.Request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeProblem(w, newProblem(CodeInvalidPayload, "the body is not an absence: "+err.Error()+`; send {"delegate": "ben", "to": "2026-12-24T18:00:00Z", "roles": ["finance"], "from": "..."} (roles and from are optional)`))
		return
	}
	dir := s.cfg.directory(&s.log)
	var roles []string
	if p, ok := dir.Person(c.Name); ok {
		roles = p.Roles // the caller's own roles, never the ones delegated to them
	}
	cl, ok := s.clientAs(w, c, s.cfg.Wait)
	if !ok {
		return
	}
	ab, err := away.Begin(r.Context(), cl, set, dir, c.Name, roles, req, time.Now())
	switch {
	case errors.Is(err, away.ErrInvalid):
		writeProblem(w, newProblem(CodeInvalidPayload, err.Error()))
	case errors.Is(err, away.ErrInForce):
		writeProblem(w, newProblem(codeRunExists, "you have an absence in force or to come already: end it first (DELETE /v1/away)"))
	case err != nil:
		s.fail(w, err)
	default:
		writeJSON(w, http.StatusCreated, absenceOf(ab))
	}
}

// deleteAway answers DELETE /v1/away: the caller ends their absence now,
// and is answered the absence ended.
func (s *Server) deleteAway(w http.ResponseWriter, r *http.Request, c Caller) {
	set, ok := s.awaySet(w)
	if !ok {
		return
	}
	cl, ok := s.clientAs(w, c, s.cfg.Wait)
	if !ok {
		return
	}
	switch ab, err := away.End(r.Context(), cl, set, c.Name, time.Now()); {
	case errors.Is(err, away.ErrNone):
		writeProblem(w, newProblem(CodeNotFound, "you have no absence in force or to come"))
	case err != nil:
		s.fail(w, err)
	default:
		writeJSON(w, http.StatusOK, absenceOf(ab))
	}
}
