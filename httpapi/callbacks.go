package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/protocol"
)

// MaxLink is the longest link text a callback URL or a decision link may
// have: a longer one was not made by Interlock.
const MaxLink = 2048

// CallbackRequest is the body of POST /v1/runs/{flow}/{run}/callbacks:
// the request the callback URL settles, the pending one if left out.
type CallbackRequest struct {
	RequestID string `json:"requestId,omitempty"`
}

// mintCallback answers POST /v1/runs/{flow}/{run}/callbacks: a callback
// URL that settles the run's pending request once, as the caller, for a
// caller who may decide it now.
func (s *Server) mintCallback(w http.ResponseWriter, r *http.Request, c Caller) {
	flow, run, ok := pathNames(w, r)
	if !ok || !checkQuery(w, r) {
		return
	}
	if s.cfg.Links == nil || s.cfg.Uses == nil {
		writeProblem(w, newProblem(codeUnsupported, "this API was started without a link signer; callback URLs need the Service's Links and LinkUses"))
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var req CallbackRequest
	if !isEmpty(body) {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeProblem(w, newProblem(CodeInvalidPayload, "the body is "+err.Error()+`; send {} or {"requestId": "<the pending request>"}`))
			return
		}
	}
	cp, err := s.client(c, s.cfg.Wait).Checkpoint(r.Context(), flow, run)
	if err != nil {
		s.fail(w, err)
		return
	}
	if !cp.Waiting() {
		writeProblem(w, problemOf(codeNotWaiting, flow, run, req.RequestID, fmt.Sprintf("run %s is %s, not waiting: there is nothing for a callback URL to settle", run, cp.Status)))
		return
	}
	in := cp.Interrupt
	if req.RequestID != "" && req.RequestID != in.RequestID {
		writeProblem(w, problemOf(codeTokenMismatch, flow, run, req.RequestID, fmt.Sprintf("requestId %q is not the pending request %s", protocol.Truncate(req.RequestID, 64), in.RequestID)))
		return
	}
	if err := s.port.Authority().MayMintLink(c, authority.RunOf(cp)); err != nil {
		writeProblem(w, problemOf(codeForbidden, flow, run, in.RequestID, fmt.Sprintf("%s may not decide this %s, so may not hand out a URL that decides it as them: %v", c.Name, in.Kind, err)))
		return
	}
	var expires time.Time
	if in.ExpiresAt != nil {
		expires = *in.ExpiresAt
	}
	cb, err := s.cfg.Links.MintCallback(s.PublicURL(), flow, run, in.RequestID, c.Name, expires, time.Now())
	if err != nil {
		writeProblem(w, problemOf(codeExpired, flow, run, in.RequestID, err.Error()))
		return
	}
	writeJSON(w, http.StatusCreated, cb)
}

// problemOf is a problem of code about a run's request.
func problemOf(code, flow, run, requestID, detail string) Problem {
	p := newProblem(code, detail)
	p.Flow, p.Run, p.RequestID = flow, run, requestID
	return p
}

// useCallback answers POST /v1/callbacks/{link}: the resume body settles
// the link's request as the link's person, once. A forged link is 404
// with no detail, an expired one 410, one used already 409 not_waiting.
// The link is given back when the decision was not applied (the engine
// refused it, or Interlock could not be reached): it settles its request
// once, not fails once. A POST with the Idempotency-Key of the use that
// was made of the link is a retry of that use: it is sent again, and
// answered as the first was or as a repeat (the run as it stands).
func (s *Server) useCallback(w http.ResponseWriter, r *http.Request, _ Caller) {
	if s.cfg.Links == nil || s.cfg.Uses == nil {
		writeProblem(w, newProblem(codeUnsupported, "this API was started without a link signer, so it takes no callback URLs"))
		return
	}
	text := r.PathValue("link")
	cl := links.Claims{}
	var err error
	if len(text) <= MaxLink {
		cl, err = s.cfg.Links.Check(text, links.KindCallback, time.Now())
	}
	switch {
	case len(text) > MaxLink || errors.Is(err, links.ErrForged):
		writeProblem(w, newProblem(CodeNotFound, "no such callback URL"))
		return
	case errors.Is(err, links.ErrExpired):
		writeProblem(w, problemOf(codeExpired, cl.Flow, cl.Run, cl.RequestID, fmt.Sprintf("this callback URL expired at %s", cl.ExpiresAt().UTC().Format(time.RFC3339))))
		return
	}
	wait, ok := s.wait(w, r, s.cfg.Wait)
	if !ok {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	res, err := events.ParseResume(body)
	if err != nil {
		writeProblem(w, newProblem(CodeInvalidPayload, bodyError(err)))
		return
	}
	switch {
	case res.ResumeToken != "":
		writeProblem(w, newProblem(CodeInvalidPayload, "resumeToken is not sent to a callback URL: the URL is the credential; leave it out"))
		return
	case res.Approver != "" && res.Approver != cl.Person:
		writeProblem(w, newProblem(CodeInvalidPayload, fmt.Sprintf("approver is who the callback URL was issued to, %s; leave it out", cl.Person)))
		return
	case res.RequestID != "" && res.RequestID != cl.RequestID:
		writeProblem(w, problemOf(CodeInvalidPayload, cl.Flow, cl.Run, cl.RequestID, fmt.Sprintf("requestId %q is not the request this callback URL settles, %s; leave it out", protocol.Truncate(res.RequestID, 64), cl.RequestID)))
		return
	}
	res.RequestID = cl.RequestID
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if res.IdempotencyKey != "" && res.IdempotencyKey != key {
			writeProblem(w, newProblem(CodeInvalidPayload, "the Idempotency-Key header and the body's idempotencyKey differ; send one"))
			return
		}
		res.IdempotencyKey = key
	}
	c, ok := Person(s.cfg.People, s.cfg.Auth, cl.Person)
	if !ok {
		writeProblem(w, problemOf(codeForbidden, cl.Flow, cl.Run, cl.RequestID, fmt.Sprintf("this callback URL speaks for %s, who is no longer among the deployment's people; ask someone who may decide for a new one", cl.Person)))
		return
	}
	claim, err := s.cfg.Uses.Claim(r.Context(), cl, res.IdempotencyKey, time.Now())
	switch {
	case errors.Is(err, links.ErrUsed):
		writeProblem(w, problemOf(codeNotWaiting, cl.Flow, cl.Run, cl.RequestID, "this callback URL was already used"))
		return
	case err != nil:
		s.fail(w, err)
		return
	}
	cli, err := s.port.ClientAs("/http/"+url.PathEscape(c.Name), c.Protocol())
	if err != nil {
		if rerr := s.cfg.Uses.Release(r.Context(), claim); rerr != nil {
			s.log.Error().Err(rerr).Str("flow", cl.Flow).Str("run", cl.Run).Msg("a callback URL's use was not given back; it stays used")
		}
		s.fail(w, err)
		return
	}
	ev, err := cli.WithWait(wait).Resume(r.Context(), cl.Flow, cl.Run, res)
	// A retry (the same Idempotency-Key as the use) is sent again:
	// Interlock applies a key once, and answers a repeat with the run as
	// it stands. Its use is the first's, and stays.
	if GivesBack(ev, err) && !claim.Retry {
		if rerr := s.cfg.Uses.Release(r.Context(), claim); rerr != nil {
			s.log.Error().Err(rerr).Str("flow", cl.Flow).Str("run", cl.Run).Msg("a callback URL's use was not given back; it stays used")
		}
	}
	s.answer(w, cl.Flow, cl.Run, ev, err)
}

// GivesBack reports whether a link's use is given back after the resume
// it sent came back with ev and err: when the decision was not applied
// (a refusal, or the resume never reached Interlock), so that the link
// works again once what was wrong is put right. A decision applied, or
// sent with no answer yet (it may apply), keeps the link used.
func GivesBack(ev client.Event, err error) bool {
	var rerr *client.RefusedError
	switch {
	case errors.Is(err, client.ErrNoAnswer):
		return false
	case errors.As(err, &rerr):
		return true
	case err != nil:
		return true
	}
	return ev.Kind == protocol.EventRefused
}
