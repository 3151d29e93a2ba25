package inbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/inbox"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/people"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// site is an inbox mounted on an HTTP API, on a service of the example
// flows.
type site struct {
	t    testing.TB
	svc  *interlock.Service
	base string
	// tokens are the callers' tokens by name, with an auth file.
	tokens map[string]string
	// dir is the directory of people decision links are checked
	// against; without one, the auth file's callers.
	dir atomic.Pointer[people.Directory]
	// log is what the API and the inbox logged.
	log *natstest.Buffer
	// auth is the callers' auth file, nil without callers.
	auth *httpapi.AuthFile
}

// startSite starts a service with the API and the inbox; callers maps
// names to roles for an auth file (nil: none, the local user).
func startSite(t testing.TB, callers map[string][]string) *site {
	t.Helper()
	return startSiteOf(t, callers, examples.Flows()...)
}

// startSiteOf is startSite serving flows.
func startSiteOf(t testing.TB, callers map[string][]string, flows ...*engine.Flow) *site {
	t.Helper()
	return startSiteWith(t, callers, interlock.Config{Flows: flows})
}

// startSiteWith is startSite with a service of cfg.
func startSiteWith(t testing.TB, callers map[string][]string, cfg interlock.Config) *site {
	t.Helper()
	st := &site{t: t, tokens: map[string]string{}, log: &natstest.Buffer{}}
	log := zerolog.New(st.log).Level(zerolog.DebugLevel)
	var auth *httpapi.AuthFile
	if callers != nil {
		file := filepath.Join(t.TempDir(), "callers.yaml")
		for name, roles := range callers {
			tok, err := httpapi.AddCaller(file, name, roles)
			if err != nil {
				t.Fatal(err)
			}
			st.tokens[name] = tok
		}
		var err error
		if auth, err = httpapi.LoadAuth(file); err != nil {
			t.Fatal(err)
		}
		// The service knows the callers as interlock serve --auth-file
		// makes it: as its directory of people.
		if cfg.People == nil {
			entries, err := httpapi.ReadAuthFile(file)
			if err != nil {
				t.Fatal(err)
			}
			dir, err := httpapi.AuthDirectory(entries, file)
			if err != nil {
				t.Fatal(err)
			}
			cfg.People = people.NewLive(dir)
		}
	}
	srv := natstest.StartServer(t, "")
	cfg.Secret = natstest.Secret
	svc := natstest.StartWith(t, srv, cfg)
	st.svc = svc
	api, err := httpapi.New(svc, httpapi.Config{Addr: "127.0.0.1:0", Auth: auth, Links: svc.Links(), Uses: svc.LinkUses(), People: st.dir.Load, Logger: &log})
	if err != nil {
		t.Fatal(err)
	}
	in, err := inbox.New(svc, inbox.Config{Auth: auth, Links: svc.Links(), Uses: svc.LinkUses(), People: st.dir.Load, Logger: &log})
	if err != nil {
		t.Fatal(err)
	}
	in.Register(api)
	if err := svc.Attach(t.Context(), api); err != nil {
		t.Fatal(err)
	}
	st.base = "http://" + api.Addr()
	st.auth = auth
	return st
}

// another starts a second HTTP API and inbox on the site's service, as
// another process of the deployment behind the same address would be,
// and returns its base URL.
func (s *site) another() string {
	s.t.Helper()
	log := zerolog.New(s.log).Level(zerolog.DebugLevel)
	api, err := httpapi.New(s.svc, httpapi.Config{Addr: "127.0.0.1:0", Auth: s.auth, Links: s.svc.Links(), Uses: s.svc.LinkUses(), People: s.dir.Load, Logger: &log})
	if err != nil {
		s.t.Fatal(err)
	}
	in, err := inbox.New(s.svc, inbox.Config{Auth: s.auth, Links: s.svc.Links(), Uses: s.svc.LinkUses(), People: s.dir.Load, Logger: &log})
	if err != nil {
		s.t.Fatal(err)
	}
	in.Register(api)
	if err := s.svc.Attach(s.t.Context(), api); err != nil {
		s.t.Fatal(err)
	}
	return "http://" + api.Addr()
}

// api sends a request to the HTTP API as caller (no token when "").
func (s *site) api(caller, method, path string, body any) (int, []byte) {
	s.t.Helper()
	return s.apiIn(s.t, caller, method, path, body)
}

// apiIn is api for test t (a subtest of the site's).
func (s *site) apiIn(t testing.TB, caller, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, s.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if caller != "" {
		req.Header.Set("Authorization", "Bearer "+s.tokens[caller])
	}
	res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

// browserless is an HTTP client with a cookie jar, as a browser without
// JavaScript.
type browserless struct {
	t   testing.TB
	s   *site
	c   *http.Client
	tr  *http.Transport
	url string
}

// visitor is a browser without JavaScript, signed in as nobody yet.
func (s *site) visitor() *browserless { return s.visitorIn(s.t) }

// visitorIn is a visitor for test t (a subtest of the site's).
func (s *site) visitorIn(t testing.TB) *browserless {
	jar, _ := cookiejar.New(nil)
	tr := &http.Transport{DisableKeepAlives: true}
	return &browserless{t: t, s: s, tr: tr, c: &http.Client{Jar: jar, Transport: tr}}
}

func (b *browserless) do(method, path string, form url.Values) (int, string) {
	b.t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(b.t.Context(), method, b.s.base+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	b.url = res.Request.URL.Path
	return res.StatusCode, string(out)
}

var hiddenRE = regexp.MustCompile(`name="(csrf|requestId|key)" value="([^"]*)"`)

// hidden returns the hidden fields of the first form of a page.
func hidden(page string) url.Values {
	v := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(page, -1) {
		if v.Get(m[1]) == "" {
			v.Set(m[1], m[2])
		}
	}
	return v
}

func TestSignInAndRoles(t *testing.T) {
	t.Parallel()
	s := startSite(t, map[string][]string{"sam": {"supervisor"}, "bob": nil})
	if code, out := s.api("sam", "POST", "/v1/runs/refund", map[string]any{"run": "r-big", "state": map[string]any{"orderId": "o-1", "amount": 900, "currency": "USD", "last4": "4242"}}); code != http.StatusAccepted {
		t.Fatalf("start = %d %s", code, out)
	}
	if code, out := s.api("sam", "POST", "/v1/runs/booking", map[string]any{"run": "r-book"}); code != http.StatusAccepted {
		t.Fatalf("start = %d %s", code, out)
	}

	bob := s.visitor()
	code, page := bob.do("GET", "/", nil)
	if code != http.StatusOK || bob.url != "/login" || !strings.Contains(page, `<label for="token">`) {
		t.Fatalf("GET / signed out = %d at %s", code, bob.url)
	}
	if code, page = bob.do("POST", "/login", url.Values{"token": {"wrong"}, "next": {"/"}}); code != http.StatusUnauthorized || !strings.Contains(page, `id="token-error"`) {
		t.Fatalf("a wrong token = %d %s", code, page)
	}
	// A login form never sends anyone to another site.
	if code, _ = bob.do("POST", "/login", url.Values{"token": {s.tokens["bob"]}, "next": {"//evil.example/"}}); code != http.StatusOK || bob.url != "/" {
		t.Fatalf("after sign-in: %d at %s", code, bob.url)
	}
	u, _ := url.Parse(s.base)
	cks := bob.c.Jar.Cookies(u)
	if len(cks) != 1 || cks[0].Name != inbox.CookieName {
		t.Fatalf("cookies = %v", cks)
	}
	code, page = bob.do("GET", "/", nil)
	if code != http.StatusOK || !strings.Contains(page, "r-book") || strings.Contains(page, "r-big") || !strings.Contains(page, "1 approval for roles you do not hold is not shown") {
		t.Fatalf("bob's queue = %d\n%s", code, page)
	}
	// Bob sees the approval's page but gets no form to decide it.
	if _, page = bob.do("GET", "/runs/refund/r-big", nil); !strings.Contains(page, "which you do not hold") || strings.Contains(page, `value="approve"`) {
		t.Fatalf("bob's approval page:\n%s", page)
	}
	// A form without the CSRF token is refused.
	if code, _ = bob.do("POST", "/runs/booking/r-book", url.Values{"answer.email": {"bob@example.com"}}); code != http.StatusForbidden {
		t.Fatalf("a form without its CSRF token = %d", code)
	}

	sam := s.visitor()
	sam.do("POST", "/login", url.Values{"token": {s.tokens["sam"]}, "next": {"/?role=supervisor"}})
	code, page = sam.do("GET", "/?role=supervisor", nil)
	if code != http.StatusOK || !strings.Contains(page, "r-big") || strings.Contains(page, "r-book") {
		t.Fatalf("sam's supervisor queue = %d\n%s", code, page)
	}
}

func TestDecidedElsewhere(t *testing.T) {
	t.Parallel()
	s := startSite(t, map[string][]string{"sam": {"supervisor"}, "ann": {"supervisor"}})
	if code, out := s.api("sam", "POST", "/v1/runs/refund", map[string]any{"run": "r-1", "state": map[string]any{"orderId": "o-1", "amount": 900, "currency": "USD", "last4": "4242"}}); code != http.StatusAccepted {
		t.Fatalf("start = %d %s", code, out)
	}
	ann := s.visitor()
	ann.do("POST", "/login", url.Values{"token": {s.tokens["ann"]}, "next": {"/runs/refund/r-1"}})
	_, page := ann.do("GET", "/runs/refund/r-1", nil)
	form := hidden(page)
	if form.Get("requestId") == "" || form.Get("csrf") == "" {
		t.Fatalf("no form on the approval page:\n%s", page)
	}
	// Sam approves over the API while Ann's page is open.
	if code, out := s.api("sam", "POST", "/v1/runs/refund/r-1/resume", map[string]any{"decision": "reject", "reason": "duplicate order"}); code != http.StatusAccepted {
		t.Fatalf("sam's decision = %d %s", code, out)
	}
	form.Set("decision", "approve")
	code, page := ann.do("POST", "/runs/refund/r-1", form)
	if code != http.StatusConflict || !strings.Contains(page, "Already rejected by sam") || !strings.Contains(page, "duplicate order") {
		t.Fatalf("ann's late decision = %d\n%s", code, page)
	}
}

func TestLocalUserAndAChoice(t *testing.T) {
	t.Parallel()
	s := startSite(t, nil)
	state := map[string]any{"email": "ann@example.com", "name": "Ann", "phone": "555", "level": "beginner", "driver": map[string]any{"name": "Ann", "license": "L-1"}}
	if code, out := s.api("", "POST", "/v1/runs/booking", map[string]any{"run": "r-1", "state": state}); code != http.StatusAccepted {
		t.Fatalf("start = %d %s", code, out)
	}
	local := s.visitor()
	// No sign-in without an auth file: the local user holds every role.
	code, page := local.do("GET", "/", nil)
	if code != http.StatusOK || local.url != "/" || !strings.Contains(page, "Signed in as <strong>local</strong>") || !strings.Contains(page, "r-1") {
		t.Fatalf("the local queue = %d at %s\n%s", code, local.url, page)
	}
	// Only by a loopback name, as the API.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", s.base+"/", nil)
	req.Host = "evil.example"
	if res, err := local.c.Do(req); err != nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("GET / with Host evil.example = %v %v", res, err)
	} else {
		res.Body.Close()
	}

	_, page = local.do("GET", "/runs/booking/r-1", nil)
	if !strings.Contains(page, `type="checkbox" name="selected" value="design"`) {
		t.Fatalf("the choice's page:\n%s", page)
	}
	form := hidden(page)
	if code, page = local.do("POST", "/runs/booking/r-1", form); code != http.StatusUnprocessableEntity || !strings.Contains(page, `id="selected-error"`) {
		t.Fatalf("a choice without an option = %d\n%s", code, page)
	}
	form.Set("selected", "design")
	form.Add("selected", "nonsense")
	if code, page = local.do("POST", "/runs/booking/r-1", form); code != http.StatusUnprocessableEntity || !strings.Contains(page, `id="selected-error"`) {
		t.Fatalf("a choice of an unknown option = %d\n%s", code, page)
	}
	form["selected"] = []string{"design", "product"}
	if code, page = local.do("POST", "/runs/booking/r-1", form); code != http.StatusOK || !strings.Contains(page, `data-status="completed"`) || !strings.Contains(page, "Your answer was sent") {
		t.Fatalf("a choice = %d\n%s", code, page)
	}
}

// TestTheRunPageShowsOnlyAuditRecordsTheVerifierVouchesFor: a record on a
// run's audit subject that the deployment did not sign (written by anyone
// who got into the stream) is neither listed in the run's history nor
// quoted as who decided.
func TestTheRunPageShowsOnlyAuditRecordsTheVerifierVouchesFor(t *testing.T) {
	t.Parallel()
	s := startSite(t, map[string][]string{"ann": {"supervisor"}})
	if code, out := s.api("ann", "POST", "/v1/runs/refund", map[string]any{"run": "r-2", "state": map[string]any{"orderId": "o-2", "amount": 900, "currency": "USD", "last4": "4242"}}); code != http.StatusAccepted {
		t.Fatalf("start = %d %s", code, out)
	}
	n := s.svc.Names()
	forged, err := events.New("forged-1", "interlock/forger", "io.interlock.audit.approved", "r-2", time.Now().UTC(),
		map[string]any{"flow": "refund", "run": "r-2", "action": "approved", "at": time.Now().UTC(), "by": "ceo@example.com", "side": true})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := events.Encode(forged)
	natstest.PublishRaw(t, s.svc.JetStream(), n.Audit("refund", "r-2"), body, nats.Header{"Content-Type": {events.Structured}})
	ann := s.visitor()
	ann.do("POST", "/login", url.Values{"token": {s.tokens["ann"]}, "next": {"/runs/refund/r-2"}})
	_, page := ann.do("GET", "/runs/refund/r-2", nil)
	if !strings.Contains(page, "started") {
		t.Fatalf("the run page shows no audit record:\n%s", page)
	}
	if strings.Contains(page, "ceo@example.com") {
		t.Fatalf("the run page shows the forged record:\n%s", page)
	}
}

// TestTheRunPageSaysWhatAPauseWaitsFor: the record of the transition that
// paused the run says, in its outcome, what the run waits for, and the
// run's history shows it on that record's line.
func TestTheRunPageSaysWhatAPauseWaitsFor(t *testing.T) {
	t.Parallel()
	s := startSite(t, map[string][]string{"ann": {"supervisor"}})
	if code, out := s.api("ann", "POST", "/v1/runs/refund", map[string]any{"run": "r-3", "state": map[string]any{"orderId": "o-3", "amount": 900, "currency": "USD", "last4": "4242"}}); code != http.StatusAccepted {
		t.Fatalf("start = %d %s", code, out)
	}
	ann := s.visitor()
	ann.do("POST", "/login", url.Values{"token": {s.tokens["ann"]}, "next": {"/runs/refund/r-3"}})
	_, page := ann.do("GET", "/runs/refund/r-3", nil)
	want := "→ waiting on an approval of issue_refund for role supervisor: Refund exceeds $500 threshold. Supervisor review required."
	if !strings.Contains(html.UnescapeString(page), want) {
		t.Fatalf("the run page does not say %q:\n%s", want, page)
	}
	version := refund.Flow().Version()
	if !strings.Contains(page, `<p class="muted" id="flow-version">Flow version <code>`+version+`</code></p>`) {
		t.Errorf("the run page does not show its flow version %s", version)
	}
}

// TestARejectTakesAReasonWhereTheApprovalRequiresOne: the refund's
// approval requires a reason to reject, so a reject without one is shown
// its error and decides nothing; an approval that does not require one is
// rejected without, as on every other surface.
func TestARejectTakesAReasonWhereTheApprovalRequiresOne(t *testing.T) {
	t.Parallel()
	post := engine.NewFlow[map[string]any]("post").
		Node("review", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			_, err := n.Approve(ctx, engine.Approval{Action: "publish", Args: map[string]any{"text": "hello"}})
			return err
		}).Start("review").MustBuild()
	s := startSiteOf(t, nil, append(examples.Flows(), post)...)
	if code, out := s.api("", "POST", "/v1/runs/refund", map[string]any{"run": "r-big", "state": map[string]any{"orderId": "o-1", "amount": 900, "currency": "USD", "last4": "4242"}}); code != http.StatusAccepted {
		t.Fatalf("start = %d %s", code, out)
	}
	if code, out := s.api("", "POST", "/v1/runs/post", map[string]any{"run": "r-post"}); code != http.StatusAccepted {
		t.Fatalf("start = %d %s", code, out)
	}
	local := s.visitor()
	_, page := local.do("GET", "/runs/refund/r-big", nil)
	if !strings.Contains(page, `id="reason-reject" name="reason" type="text" required`) {
		t.Fatalf("the refund's reject form does not require a reason:\n%s", page)
	}
	form := hidden(page)
	form.Set("decision", "reject")
	if code, page := local.do("POST", "/runs/refund/r-big", form); code != http.StatusUnprocessableEntity || !strings.Contains(page, `id="reason-reject-error"`) {
		t.Fatalf("a reject without a reason = %d\n%s", code, page)
	}
	if code, out := s.api("", "GET", "/v1/runs/refund/r-big", nil); code != http.StatusOK || !strings.Contains(string(out), `"status":"waiting"`) {
		t.Fatalf("after a reject without a reason the refund is %d %s, want still waiting", code, out)
	}

	_, page = local.do("GET", "/runs/post/r-post", nil)
	if strings.Contains(page, `id="reason-reject" name="reason" type="text" required`) || !strings.Contains(page, "(optional)") {
		t.Fatalf("the post's reject form requires a reason its approval does not:\n%s", page)
	}
	form = hidden(page)
	form.Set("decision", "reject")
	if code, page := local.do("POST", "/runs/post/r-post", form); code != http.StatusOK || !strings.Contains(page, `data-status="completed"`) {
		t.Fatalf("a reject without a reason where none is required = %d\n%s", code, page)
	}
}
