package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// maxRunEvents bounds the events GET /v1/runs/{flow}/{run} returns.
const maxRunEvents = client.MaxPendingLimit

// Outcomes of an accepted command besides the kinds of the event that
// settled it (interrupted, completed, failed, cancelled, expired).
const (
	// OutcomeQueued: no outcome came within the wait; the command is
	// queued in the inbound stream and is applied when a worker runs.
	OutcomeQueued = "queued"
	// OutcomeRepeat: the command repeats one already applied (the same
	// idempotency key); it had no effect.
	OutcomeRepeat = "repeat"
)

// Accepted is the answer to a command Interlock accepted: the event that
// settled it, when it came within the wait.
type Accepted struct {
	Flow string `json:"flow"`
	Run  string `json:"run"`
	// Outcome is the kind of Event (interrupted, completed, failed,
	// cancelled, expired; assigned for an assign), or OutcomeQueued or
	// OutcomeRepeat.
	Outcome string `json:"outcome"`
	// Event is the CloudEvent that settled the command, resume tokens
	// redacted.
	Event json.RawMessage `json:"event,omitempty"`
	// Checkpoint is the run as it stands, for a repeat.
	Checkpoint *protocol.Checkpoint `json:"checkpoint,omitempty"`
}

// RunEvent is an event of a run, as the events stream holds it.
type RunEvent struct {
	// Seq is the event's sequence in the events stream.
	Seq uint64 `json:"seq"`
	// Kind is the last token of its subject: started, interrupted, ...
	Kind string `json:"kind"`
	// Event is the CloudEvent, resume tokens redacted.
	Event json.RawMessage `json:"event"`
}

// Run is the answer of GET /v1/runs/{flow}/{run}: the checkpoint document
// (which never holds a resume token) and the run's events.
type Run struct {
	protocol.Checkpoint
	// Events are the run's events the events stream still holds, oldest
	// first.
	Events []RunEvent `json:"events"`
	// MoreEvents is set when the run has more events than are listed.
	MoreEvents bool `json:"moreEvents,omitempty"`
	// Outcome is how the run ended (approved, rejected, expired...), once
	// it has.
	Outcome protocol.Outcome `json:"outcome,omitempty"`
}

// StartRequest is the body of POST /v1/runs/{flow}.
type StartRequest struct {
	// Run is the run id; a fresh one when empty.
	Run string `json:"run,omitempty"`
	// State is the initial state.
	State map[string]json.RawMessage `json:"state,omitempty"`
	// Origin is any JSON object, echoed in every event of the run.
	Origin json.RawMessage `json:"origin,omitempty"`
}

// getRun answers GET /v1/runs/{flow}/{run}.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request, c Caller) {
	flow, run, ok := pathNames(w, r)
	if !ok || !checkQuery(w, r) {
		return
	}
	cl := s.client(c, 0)
	cp, err := cl.Checkpoint(r.Context(), flow, run)
	if err != nil {
		s.fail(w, err)
		return
	}
	if !s.mayRead(w, c, authority.RunOf(cp)) {
		return
	}
	evs, more, err := cl.RunEvents(r.Context(), flow, run, maxRunEvents)
	if err != nil {
		s.fail(w, err)
		return
	}
	out := Run{Checkpoint: cp, Events: make([]RunEvent, 0, len(evs)), MoreEvents: more, Outcome: cp.Outcome()}
	for _, ev := range evs {
		body, err := encodeEvent(ev.Event)
		if err != nil {
			s.fail(w, err)
			return
		}
		out.Events = append(out.Events, RunEvent{Seq: ev.Seq, Kind: ev.Kind, Event: body})
	}
	writeJSON(w, http.StatusOK, out)
}

// startRun answers POST /v1/runs/{flow}.
func (s *Server) startRun(w http.ResponseWriter, r *http.Request, c Caller) {
	flow := r.PathValue("flow")
	if err := protocol.CheckName("flow", flow); err != nil {
		writeProblem(w, newProblem(CodeInvalidName, strings.TrimPrefix(err.Error(), "client: ")))
		return
	}
	if flow == client.GateFlow {
		writeProblem(w, newProblem(CodeInvalidName, "gate is the tool-call gate's flow, and takes no start: ask it with POST /v1/gate/requests"))
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
	req, err := parseStart(body)
	if err != nil {
		writeProblem(w, newProblem(CodeInvalidPayload, bodyError(err)))
		return
	}
	if req.Run == "" {
		req.Run = client.NewRunID()
	}
	if err := protocol.CheckName("run", req.Run); err != nil {
		writeProblem(w, newProblem(CodeInvalidName, strings.TrimPrefix(err.Error(), "client: ")))
		return
	}
	cl, ok := s.clientAs(w, c, wait)
	if !ok {
		return
	}
	ev, err := cl.Start(r.Context(), flow, req.Run, req.State, req.Origin)
	if err == nil || errors.Is(err, client.ErrNoAnswer) {
		if ev.Kind != protocol.EventRefused {
			w.Header().Set("Location", "/v1/runs/"+flow+"/"+req.Run)
		}
	}
	s.answer(w, flow, req.Run, ev, err)
}

// parseStart reads a start body: the protocol's start data and the run id.
func parseStart(body []byte) (StartRequest, error) {
	if isEmpty(body) {
		return StartRequest{}, nil
	}
	if err := events.CheckDuplicateKeys(body); err != nil {
		return StartRequest{}, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return StartRequest{}, errors.New("the body must be a JSON object: {\"run\"?, \"state\"?, \"origin\"?}")
	}
	var req StartRequest
	if raw, ok := fields["run"]; ok {
		if err := json.Unmarshal(raw, &req.Run); err != nil {
			return StartRequest{}, errors.New("run must be a string")
		}
		delete(fields, "run")
	}
	rest, _ := json.Marshal(fields)
	d, err := events.ParseStart(rest)
	if err != nil {
		return StartRequest{}, err
	}
	req.State, req.Origin = d.State, d.Origin
	return req, nil
}

// command reads what a command on a run takes: the flow and run of the
// path, ?wait= and the body. It answers the request itself when one is
// wrong.
func (s *Server) command(w http.ResponseWriter, r *http.Request) (flow, run string, wait time.Duration, body []byte, ok bool) {
	if flow, run, ok = pathNames(w, r); !ok {
		return
	}
	if wait, ok = s.wait(w, r, s.cfg.Wait); !ok {
		return
	}
	body, ok = s.readBody(w, r)
	return
}

// resumeRun answers POST /v1/runs/{flow}/{run}/resume: the resume is sent
// vouched for the caller, with the caller's roles, so that the engine
// decides whether they may and audits the attempt either way.
func (s *Server) resumeRun(w http.ResponseWriter, r *http.Request, c Caller) {
	flow, run, wait, body, ok := s.command(w, r)
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
		writeProblem(w, newProblem(CodeInvalidPayload, "resumeToken is not sent over HTTP: the API vouches for you; name the request with requestId instead"))
		return
	case res.Approver != "" && res.Approver != c.Name:
		writeProblem(w, newProblem(CodeInvalidPayload, fmt.Sprintf("approver is the authenticated caller, %s; leave it out", c.Name)))
		return
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if res.IdempotencyKey != "" && res.IdempotencyKey != key {
			writeProblem(w, newProblem(CodeInvalidPayload, "the Idempotency-Key header and the body's idempotencyKey differ; send one"))
			return
		}
		res.IdempotencyKey = key
	}
	cl, ok := s.clientAs(w, c, wait)
	if !ok {
		return
	}
	if res.RequestID == "" {
		// Name the request pending now, so that a resume that loses a
		// race to another decision is refused rather than applied to
		// the interrupt that follows.
		cp, err := cl.Checkpoint(r.Context(), flow, run)
		switch {
		case err == nil && cp.Waiting():
			res.RequestID = cp.Interrupt.RequestID
		case err != nil && !errors.Is(err, client.ErrNotFound):
			s.fail(w, err)
			return
		}
	}
	ev, err := cl.Resume(r.Context(), flow, run, res)
	s.answer(w, flow, run, ev, err)
}

// cancelRun answers POST /v1/runs/{flow}/{run}/cancel.
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request, c Caller) {
	flow, run, wait, body, ok := s.command(w, r)
	if !ok {
		return
	}
	d, err := events.ParseCancel(body)
	if err != nil {
		writeProblem(w, newProblem(CodeInvalidPayload, bodyError(err)))
		return
	}
	if d.By != "" {
		writeProblem(w, newProblem(CodeInvalidPayload, fmt.Sprintf("by is the authenticated caller, %s; leave it out", c.Name)))
		return
	}
	cl, ok := s.clientAs(w, c, wait)
	if !ok {
		return
	}
	ev, err := cl.Cancel(r.Context(), flow, run, d.Reason)
	s.answer(w, flow, run, ev, err)
}

// client returns a client that sends as the caller and waits up to wait.
func (s *Server) client(c Caller, wait time.Duration) *client.Client {
	return s.port.Client("/http/" + url.PathEscape(c.Name)).As(c.Name).WithWait(wait)
}

// clientAs returns a client that sends every command vouched for the
// caller and waits up to wait; it answers the request itself when the
// port cannot vouch.
func (s *Server) clientAs(w http.ResponseWriter, c Caller, wait time.Duration) (*client.Client, bool) {
	cl, err := s.port.ClientAs("/http/"+url.PathEscape(c.Name), c.Protocol())
	if err != nil {
		s.log.Error().Err(err).Msg("vouching for a caller")
		writeProblem(w, newProblem(CodeInternal, "this API cannot vouch for its callers (the log says why); it needs the deployment's secret"))
		return nil, false
	}
	return cl.WithWait(wait), true
}

// answer answers a command with the event that settled it.
func (s *Server) answer(w http.ResponseWriter, flow, run string, ev client.Event, err error) {
	switch {
	case errors.Is(err, client.ErrNoAnswer):
		writeJSON(w, http.StatusAccepted, Accepted{Flow: flow, Run: run, Outcome: OutcomeQueued})
		return
	case err != nil:
		s.fail(w, err)
		return
	case ev.Repeat:
		writeJSON(w, http.StatusAccepted, Accepted{Flow: flow, Run: run, Outcome: OutcomeRepeat, Checkpoint: ev.Current})
		return
	case ev.Kind == protocol.EventRefused:
		var ref protocol.Refused
		if err := ev.Decode(&ref); err != nil {
			s.fail(w, fmt.Errorf("decoding the refusal: %w", err))
			return
		}
		writeProblem(w, refusal(ref))
		return
	}
	body, err := encodeEvent(ev.Event)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, Accepted{Flow: flow, Run: run, Outcome: ev.Kind, Event: body})
}

// refusal is the problem of a refused command.
func refusal(ref protocol.Refused) Problem {
	p := newProblem(string(ref.Code), ref.Message)
	p.Flow, p.Run, p.RequestID = ref.Flow, ref.Run, ref.RequestID
	return p
}

// fail answers an error of the client.
func (s *Server) fail(w http.ResponseWriter, err error) {
	var ref *client.RefusedError
	switch {
	case errors.As(err, &ref):
		writeProblem(w, refusal(ref.Refused))
	case errors.Is(err, client.ErrNotFound):
		writeProblem(w, newProblem(codeUnknownRun, strings.TrimPrefix(err.Error(), "client: ")))
	case errors.Is(err, client.ErrTooLarge):
		writeProblem(w, tooLarge(strings.TrimPrefix(err.Error(), "client: ")))
	case errors.Is(err, context.Canceled):
		// The caller went away; nobody reads the answer.
		writeProblem(w, newProblem(CodeUnavailable, "the request was cancelled"))
	default:
		s.log.Error().Err(err).Msg("http request failed")
		writeProblem(w, newProblem(CodeUnavailable, strings.TrimPrefix(err.Error(), "client: ")))
	}
}

// encodeEvent returns ev as structured JSON without resume tokens: the
// API vouches for its callers, and a token is a credential.
func encodeEvent(ev events.Event) (json.RawMessage, error) {
	b, err := events.Encode(ev)
	if err != nil {
		return nil, err
	}
	return events.RedactTokens(b), nil
}

// pathNames reads and checks the flow and run of the path.
func pathNames(w http.ResponseWriter, r *http.Request) (flow, run string, ok bool) {
	flow, run = r.PathValue("flow"), r.PathValue("run")
	for _, n := range [][2]string{{"flow", flow}, {"run", run}} {
		if err := protocol.CheckName(n[0], n[1]); err != nil {
			writeProblem(w, newProblem(CodeInvalidName, strings.TrimPrefix(err.Error(), "client: ")))
			return "", "", false
		}
	}
	return flow, run, true
}

// checkQuery refuses query parameters other than allowed.
func checkQuery(w http.ResponseWriter, r *http.Request, allowed ...string) bool {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeProblem(w, newProblem(CodeInvalidQuery, "the query string does not parse: "+err.Error()))
		return false
	}
	for k := range q {
		known := false
		for _, a := range allowed {
			known = known || k == a
		}
		if !known {
			msg := fmt.Sprintf("unknown query parameter %q", k)
			if len(allowed) > 0 {
				msg += "; this route takes " + strings.Join(allowed, ", ")
			} else {
				msg += "; this route takes none"
			}
			writeProblem(w, newProblem(CodeInvalidQuery, msg))
			return false
		}
	}
	return true
}

// wait reads ?wait=, the only query parameter of the commands.
func (s *Server) wait(w http.ResponseWriter, r *http.Request, def time.Duration) (time.Duration, bool) {
	if !checkQuery(w, r, "wait") {
		return 0, false
	}
	v := r.URL.Query().Get("wait")
	if v == "" {
		return def, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > MaxWait {
		writeProblem(w, newProblem(CodeInvalidQuery, fmt.Sprintf("wait=%q: use a duration such as 30s, up to %s", v, MaxWait)))
		return 0, false
	}
	return d, true
}

// readBody reads a request body of JSON, up to MaxBody, within the body
// timeout.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" && !strings.HasSuffix(mt, "+json") {
			writeProblem(w, newProblem(CodeInvalidPayload, fmt.Sprintf("Content-Type is %q; send JSON with Content-Type: application/json", ct)))
			return nil, false
		}
	}
	// The server's common handler bounds the time the body takes.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var (
			tooBig  *http.MaxBytesError
			timeout net.Error
		)
		switch {
		case errors.As(err, &tooBig):
			writeProblem(w, tooLarge(fmt.Sprintf("the body is larger than %d bytes, the most a command may be (one NATS message); send less data: keep large data out of the state, origin, answers and arguments (store it elsewhere and send a reference)", MaxBody)))
		case errors.As(err, &timeout) && timeout.Timeout():
			w.Header().Set("Connection", "close")
			writeProblem(w, newProblem(CodeInvalidPayload, fmt.Sprintf("the body did not arrive within %s; send it whole, at once", s.cfg.BodyTimeout)))
		default:
			writeProblem(w, newProblem(CodeInvalidPayload, "reading the body: "+err.Error()))
		}
		return nil, false
	}
	return body, true
}

func isEmpty(body []byte) bool {
	t := strings.TrimSpace(string(body))
	return t == "" || t == "null"
}

// bodyError says what is wrong with a body, naming the field as the body
// names it (the protocol's errors name the event's data).
func bodyError(err error) string {
	var e *events.Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	field := strings.TrimPrefix(strings.TrimPrefix(e.Field, "data"), ".")
	if field == "" {
		return e.Msg
	}
	return field + ": " + e.Msg
}

// mayRead answers the request itself, forbidden, unless the authority
// lets c read run.
func (s *Server) mayRead(w http.ResponseWriter, c Caller, run authority.Run) bool {
	var ref *authority.Refusal
	if err := s.port.Authority().MayRead(c, run); errors.As(err, &ref) {
		writeProblem(w, problemOf(string(ref.Code), run.Flow, run.ID, "", ref.Reason))
		return false
	}
	return true
}
