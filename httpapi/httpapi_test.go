package httpapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/gate"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// httpClient keeps no idle connection, so that no goroutine outlives a test.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// api is an HTTP API on a service of the example flows, on an embedded
// NATS server.
type api struct {
	t      testing.TB
	svc    *interlock.Service
	server *httpapi.Server
	base   string
	// token is sent as the bearer token when set.
	token string
}

// startAPI starts a service of the example flows (and the example gate
// rules) with an HTTP API on a free loopback port.
func startAPI(t testing.TB, auth *httpapi.AuthFile) *api {
	t.Helper()
	return startAPIWith(t, httpapi.Config{Addr: "127.0.0.1:0", Auth: auth})
}

// startAPIWith is startAPI with the API configured by cfg.
func startAPIWith(t testing.TB, cfg httpapi.Config) *api {
	t.Helper()
	rules, err := examples.GateRules()
	if err != nil {
		t.Fatal(err)
	}
	return startAPIOn(t, cfg, rules)
}

// startAPIOn is startAPIWith on a service with the gate rules given, the
// gate off when nil.
func startAPIOn(t testing.TB, cfg httpapi.Config, rules *gate.RuleSet) *api {
	t.Helper()
	srv := natstest.StartServer(t, "")
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: examples.Flows(), Secret: natstest.Secret, GateRules: rules})
	cfg.Links, cfg.Uses = svc.Links(), svc.LinkUses()
	s, err := httpapi.New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Attach(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	return &api{t: t, svc: svc, server: s, base: "http://" + s.Addr()}
}

// as returns the API called with token.
func (a *api) as(token string) *api {
	cp := *a
	cp.token = token
	return &cp
}

// in returns the API reporting to t, a subtest of the one that started
// it.
func (a *api) in(t testing.TB) *api {
	cp := *a
	cp.t = t
	return &cp
}

// response is an answer of the API.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// problem decodes a problem details answer.
func (r response) problem(t testing.TB) httpapi.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json; body %s", ct, r.body)
	}
	var p httpapi.Problem
	r.decode(t, &p)
	if p.Status != r.status || p.Type != httpapi.ProblemType+p.Code || p.Title == "" || p.Code == "" {
		t.Fatalf("problem %+v does not match status %d", p, r.status)
	}
	return p
}

// do sends a request with body (JSON-encoded unless a string or nil) and
// headers given as name, value pairs.
func (a *api) do(method, path string, body any, header ...string) response {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(a.t.Context(), method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if strings.EqualFold(header[i], "Host") {
			req.Host = header[i+1] // net/http sends req.Host, not a Host header
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	res, err := httpClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		a.t.Fatalf("%s %s: Cache-Control = %q, want no-store", method, path, cc)
	}
	return response{status: res.StatusCode, header: res.Header, body: out}
}

// must sends a request and fails unless it is answered with status.
func (a *api) must(status int, method, path string, body any, header ...string) response {
	a.t.Helper()
	r := a.do(method, path, body, header...)
	if r.status != status {
		a.t.Fatalf("%s %s = %d %s, want %d", method, path, r.status, r.body, status)
	}
	return r
}

// accepted decodes a 202 answer of a command.
func (a *api) accepted(method, path string, body any, header ...string) httpapi.Accepted {
	a.t.Helper()
	var acc httpapi.Accepted
	a.must(http.StatusAccepted, method, path, body, header...).decode(a.t, &acc)
	return acc
}

// run reads a run.
func (a *api) run(flow, run string) httpapi.Run {
	a.t.Helper()
	var out httpapi.Run
	a.must(http.StatusOK, "GET", "/v1/runs/"+flow+"/"+run, nil).decode(a.t, &out)
	return out
}

// refundState is the start of a refund that goes straight to the approval.
func refundState(extra map[string]any) map[string]any {
	s := map[string]any{"orderId": "o-1", "amount": 4800, "currency": "USD", "last4": "4242"}
	for k, v := range extra {
		s[k] = v
	}
	return map[string]any{"state": s}
}

func TestABookingRunOverHTTP(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)

	acc := a.accepted("POST", "/v1/runs/booking", map[string]any{"run": "r-1", "origin": map[string]any{"inbox": "test"}})
	if acc.Outcome != protocol.EventInterrupted || acc.Run != "r-1" || bytes.Contains(acc.Event, []byte(`"resumeToken":"v`)) {
		t.Fatalf("start = %+v %s", acc, acc.Event)
	}
	run := a.run("booking", "r-1")
	if run.Status != "waiting" || run.Interrupt == nil || len(run.Events) < 2 || string(run.Origin) != `{"inbox":"test"}` {
		t.Fatalf("run = %+v", run)
	}
	body := a.must(http.StatusOK, "GET", "/v1/runs/booking/r-1", nil).body
	if bytes.Contains(body, []byte("resumeToken\":\"v")) || !bytes.Contains(body, []byte(`"interrupted"`)) {
		t.Fatalf("the run document shows a token or no interrupted event: %s", body)
	}

	// A start without a run id gets a fresh one and a Location.
	r := a.must(http.StatusAccepted, "POST", "/v1/runs/booking", nil)
	var fresh httpapi.Accepted
	r.decode(t, &fresh)
	if fresh.Run == "" || r.header.Get("Location") != "/v1/runs/booking/"+fresh.Run {
		t.Fatalf("start without a run = %+v, Location %q", fresh, r.header.Get("Location"))
	}

	// Answers walk the run; the request is filled in by the server.
	a.accepted("POST", "/v1/runs/booking/r-1/resume", map[string]any{"answers": map[string]any{"email": "ada@example.com"}})
	a.accepted("POST", "/v1/runs/booking/r-1/resume", map[string]any{"answers": map[string]any{"name": "Ada", "phone": "+44 20 7946 0000"}})

	// 422: an answer that does not fit, with the message to show.
	p := a.must(http.StatusUnprocessableEntity, "POST", "/v1/runs/booking/r-1/resume", map[string]any{"answers": map[string]any{"colour": "red"}}).problem(t)
	if p.Code != "invalid_answer" || p.Detail == "" || p.Run != "r-1" {
		t.Fatalf("invalid answer = %+v", p)
	}

	// 409 stale_checkpoint, then a lost race: a requestId of an earlier
	// request.
	before := a.run("booking", "r-1")
	stale := before.Checkpoint.Checkpoint - 1
	p = a.must(http.StatusConflict, "POST", "/v1/runs/booking/r-1/resume", map[string]any{"answers": map[string]any{"level": "beginner"}, "expectedCheckpoint": stale}).problem(t)
	if p.Code != "stale_checkpoint" {
		t.Fatalf("stale = %+v", p)
	}
	first := run.Interrupt.RequestID
	p = a.must(http.StatusConflict, "POST", "/v1/runs/booking/r-1/resume", map[string]any{"answers": map[string]any{"level": "beginner"}, "requestId": first}).problem(t)
	if p.Code != "token_mismatch" {
		t.Fatalf("lost race = %+v", p)
	}

	// Idempotency-Key: the second send is a repeat, with no effect.
	acc = a.accepted("POST", "/v1/runs/booking/r-1/resume", map[string]any{"answers": map[string]any{"level": "beginner"}}, "Idempotency-Key", "level-1")
	if acc.Outcome != protocol.EventInterrupted {
		t.Fatalf("level = %+v", acc)
	}
	after := a.run("booking", "r-1")
	acc = a.accepted("POST", "/v1/runs/booking/r-1/resume", map[string]any{"answers": map[string]any{"level": "beginner"}}, "Idempotency-Key", "level-1")
	if acc.Outcome != httpapi.OutcomeRepeat || acc.Checkpoint == nil || acc.Checkpoint.Checkpoint != after.Checkpoint.Checkpoint {
		t.Fatalf("repeat = %+v", acc)
	}
	if again := a.run("booking", "r-1"); again.Checkpoint.Checkpoint != after.Checkpoint.Checkpoint {
		t.Fatalf("a repeat moved the run from %d to %d", after.Checkpoint.Checkpoint, again.Checkpoint.Checkpoint)
	}

	// 400s.
	for _, c := range []struct{ method, path, body, header string }{
		{"POST", "/v1/runs/booking/r-1/resume", `{"answers":`, ""},
		{"POST", "/v1/runs/booking/r-1/resume", `{"answers":{},"answers":{}}`, ""},
		{"POST", "/v1/runs/booking/r-1/resume", `{"resumeToken":"v1.x"}`, ""},
		{"POST", "/v1/runs/booking/r-1/resume", `{"approver":"mallory"}`, ""},
		{"POST", "/v1/runs/booking/r-1/resume", `{"answers":{"level":"pro"}}`, "other-key"},
		{"POST", "/v1/runs/booking/r-1/resume?wait=forever", `{}`, ""},
		{"POST", "/v1/runs/booking", `{"state":[]}`, ""},
		{"POST", "/v1/runs/booking", `{"run":"a b"}`, ""},
		{"POST", "/v1/runs/booking", `{"origin":"slack"}`, ""},
		{"POST", "/v1/runs/gate", `{}`, ""},
		{"GET", "/v1/runs/booking/r-1?x=1", ``, ""},
		{"GET", "/v1/interrupts?limit=0", ``, ""},
		{"GET", "/v1/interrupts?order=sideways", ``, ""},
		{"GET", "/v1/interrupts?cursor=nope", ``, ""},
		{"POST", "/v1/gate/requests", `{"tool":""}`, ""},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		var h []string
		if c.header != "" {
			body = `{"answers":{"level":"pro"},"idempotencyKey":"body-key"}`
			h = []string{"Idempotency-Key", c.header}
		}
		if p := a.must(http.StatusBadRequest, c.method, c.path, body, h...).problem(t); p.Detail == "" {
			t.Errorf("%s %s %s: no detail: %+v", c.method, c.path, c.body, p)
		}
	}

	// 404s and 405.
	if p := a.must(http.StatusNotFound, "GET", "/v1/runs/booking/nope", nil).problem(t); p.Code != "unknown_run" {
		t.Fatalf("unknown run = %+v", p)
	}
	if p := a.must(http.StatusNotFound, "POST", "/v1/runs/nope/r-9/resume", map[string]any{}).problem(t); p.Code != "unknown_run" && p.Code != "unknown_flow" {
		t.Fatalf("unknown flow = %+v", p)
	}
	a.must(http.StatusNotFound, "GET", "/v2/anything", nil).problem(t)
	if r := a.must(http.StatusMethodNotAllowed, "DELETE", "/v1/runs/booking/r-1", nil); r.header.Get("Allow") == "" {
		t.Fatalf("405 without Allow: %v", r.header)
	}

	// 409 run_exists, without a Location; cancel; then not_waiting.
	if r := a.must(http.StatusConflict, "POST", "/v1/runs/booking", map[string]any{"run": "r-1"}); r.problem(t).Code != "run_exists" || r.header.Get("Location") != "" {
		t.Fatalf("start again = %+v, Location %q", r.problem(t), r.header.Get("Location"))
	}
	acc = a.accepted("POST", "/v1/runs/booking/r-1/cancel", map[string]any{"reason": "test"})
	if acc.Outcome != protocol.EventCancelled {
		t.Fatalf("cancel = %+v", acc)
	}
	if p := a.must(http.StatusConflict, "POST", "/v1/runs/booking/r-1/resume", map[string]any{"answers": map[string]any{"level": "pro"}}).problem(t); p.Code != "not_waiting" {
		t.Fatalf("resume of a cancelled run = %+v", p)
	}
	audit, err := a.svc.Client("/test").Audit(t.Context(), "booking", "r-1")
	if err != nil {
		t.Fatal(err)
	}
	cancelled := false
	actions := map[string]bool{}
	for _, r := range audit {
		cancelled = cancelled || r.Action == "cancelled" && r.By == httpapi.LocalCaller && r.Reason == "test"
		// One caller, named one way: on the start, the answers, the
		// cancel and the refusals alike.
		if r.Source == "/http/"+httpapi.LocalCaller {
			actions[r.Action] = true
			if r.By != httpapi.LocalCaller {
				t.Errorf("the %s record names the caller %q, want %q as on every record", r.Action, r.By, httpapi.LocalCaller)
			}
		}
	}
	if !cancelled {
		t.Fatalf("no cancelled record by local: %+v", audit)
	}
	for _, a := range []string{"started", "answered", "cancelled", "refused"} {
		if !actions[a] {
			t.Errorf("no %s record sent by the HTTP API to check the caller's name on", a)
		}
	}
}

// writeAuth writes an auth file of sam (supervisor) and bob (no role), and
// returns it with their tokens.
func writeAuth(t *testing.T) (auth *httpapi.AuthFile, sam, bob string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "callers.yaml")
	sam, err := httpapi.AddCaller(file, "sam@example.com", []string{"supervisor"})
	if err != nil {
		t.Fatal(err)
	}
	if bob, err = httpapi.AddCaller(file, "bob", []string{"finance_lead"}); err != nil {
		t.Fatal(err)
	}
	if auth, err = httpapi.LoadAuth(file); err != nil {
		t.Fatal(err)
	}
	return auth, sam, bob
}

func TestOnlyTheApproversRoleDecides(t *testing.T) {
	t.Parallel()
	auth, samToken, bobToken := writeAuth(t)
	anon := startAPI(t, auth)
	sam, bob := anon.as(samToken), anon.as(bobToken)

	// 401: no token, a wrong one, another scheme.
	for _, h := range []string{"", "Bearer nope", "Basic " + samToken, "Bearer"} {
		var header []string
		if h != "" {
			header = []string{"Authorization", h}
		}
		r := anon.must(http.StatusUnauthorized, "GET", "/v1/interrupts", nil, header...)
		if p := r.problem(t); p.Code != httpapi.CodeUnauthorized || r.header.Get("WWW-Authenticate") == "" {
			t.Fatalf("401 = %+v %v", p, r.header)
		}
	}
	anon.must(http.StatusOK, "GET", "/v1/openapi.json", nil)

	if acc := sam.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-7", "state": refundState(nil)["state"]}); acc.Outcome != protocol.EventInterrupted {
		t.Fatalf("start = %+v", acc)
	}
	var page httpapi.InterruptPage
	bob.must(http.StatusOK, "GET", "/v1/interrupts?role=supervisor&kind=approval", nil).decode(t, &page)
	if len(page.Items) != 1 || page.Items[0].ApproverRole != "supervisor" {
		t.Fatalf("pending = %+v", page)
	}

	// 403: bob is not a supervisor; the engine refuses and audits it.
	p := bob.must(http.StatusForbidden, "POST", "/v1/runs/refund/r-7/resume", map[string]any{"decision": "approve"}).problem(t)
	if p.Code != "forbidden" {
		t.Fatalf("bob's approval = %+v", p)
	}
	cl := anon.svc.Client("/test")
	recs, err := cl.Audit(t.Context(), "refund", "r-7")
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	if last.Action != "refused" || last.Code != "forbidden" || last.By != "bob" {
		t.Fatalf("refused audit = %+v", last)
	}

	// sam decides, and the audit names sam, not the body.
	acc := sam.accepted("POST", "/v1/runs/refund/r-7/resume", map[string]any{"decision": "edit", "edits": map[string]any{"amount": 400}, "reason": "partial"})
	if acc.Outcome != protocol.EventCompleted {
		t.Fatalf("sam's edit = %+v", acc)
	}
	if recs, err = cl.Audit(t.Context(), "refund", "r-7"); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range recs {
		found = found || r.Action == "edited" && r.By == "sam@example.com"
	}
	if !found {
		t.Fatalf("no edited record by sam: %+v", recs)
	}
}

func TestAnExpiredInterruptIsGone(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	a.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-x", "state": refundState(map[string]any{"approvalTimeoutSeconds": 1})["state"]})
	natstest.Eventually(t, "the run expires", func() bool { return a.run("refund", "r-x").Status == "expired" })
	if p := a.must(http.StatusGone, "POST", "/v1/runs/refund/r-x/resume", map[string]any{"decision": "approve"}).problem(t); p.Code != "expired" {
		t.Fatalf("resume of an expired run = %+v", p)
	}
}

func TestWithoutAnAuthFileOnlyLoopbackIsServed(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:8080", "[::]:0", "192.0.2.1:80", "example.com:80"} {
		if err := (httpapi.Config{Addr: addr}).Validate(); !errors.Is(err, httpapi.ErrNoAuth) || !strings.Contains(err.Error(), "Config.Auth") {
			t.Errorf("Validate(%s) = %v, want httpapi.ErrNoAuth naming Config.Auth", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:8080", "[::1]:0"} {
		if err := (httpapi.Config{Addr: addr}).Validate(); err != nil {
			t.Errorf("Validate(%s) = %v", addr, err)
		}
	}
	auth, _, _ := writeAuth(t)
	if err := (httpapi.Config{Addr: "0.0.0.0:0", Auth: auth}).Validate(); err != nil {
		t.Errorf("with auth: %v", err)
	}

	a := startAPI(t, nil)
	// A page that resolves its own name to 127.0.0.1 is refused; so is
	// a name below localhost, which a resolver may send anywhere.
	for host, want := range map[string]int{
		"evil.example:8080": http.StatusForbidden,
		"app.localhost":     http.StatusForbidden,
		"127.0.0.1.:8080":   http.StatusForbidden,
		"localhost:8080":    http.StatusOK,
		"LOCALHOST.":        http.StatusOK,
		"[::1]:8080":        http.StatusOK,
		"127.0.0.2":         http.StatusOK,
	} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", a.base+"/v1/interrupts", nil)
		req.Host = host
		res, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("Host %s = %d, want %d", host, res.StatusCode, want)
		}
	}
	// So is a browser's cross-site request.
	a.must(http.StatusForbidden, "POST", "/v1/runs/booking", `{}`, "Sec-Fetch-Site", "cross-site")
}

func TestGateRequestsOverHTTP(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	var ans httpapi.GateAnswer
	a.must(http.StatusOK, "POST", "/v1/gate/requests", map[string]any{"tool": "issue_refund", "callId": "call-small", "args": map[string]any{"amount": 20}}).decode(t, &ans)
	if ans.Decided == nil || ans.Decided.Decision != "allowed" {
		t.Fatalf("small refund = %+v", ans)
	}
	ans = httpapi.GateAnswer{}
	a.must(http.StatusAccepted, "POST", "/v1/gate/requests?wait=2s", map[string]any{"tool": "issue_refund", "callId": "call-big", "args": map[string]any{"amount": 900}}).decode(t, &ans)
	if ans.Pending == nil || ans.Pending.ApproverRole != "supervisor" || ans.Pending.ResumeToken != events.Redacted {
		t.Fatalf("big refund = %+v", ans)
	}
	a.accepted("POST", "/v1/runs/gate/call-big/resume", map[string]any{"decision": "approve"})
	ans = httpapi.GateAnswer{}
	a.must(http.StatusOK, "POST", "/v1/gate/requests", map[string]any{"tool": "issue_refund", "callId": "call-big", "args": map[string]any{"amount": 900}}).decode(t, &ans)
	if ans.Decided == nil || ans.Decided.Decision != "approved" {
		t.Fatalf("big refund after approval = %+v", ans)
	}
}
