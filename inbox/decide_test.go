package inbox_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

// decisionLink signs a decision link of the refund run's pending request
// for person, expiring at expires (the request's deadline when zero), and
// returns its path.
func (s *site) decisionLink(run, person string, expires time.Time) string {
	s.t.Helper()
	cp, err := s.svc.Client("/test").Checkpoint(s.t.Context(), "refund", run)
	if err != nil || !cp.Waiting() {
		s.t.Fatalf("run %s: %v (%+v)", run, err, cp)
	}
	if expires.IsZero() {
		expires = *cp.Interrupt.ExpiresAt
	}
	text, err := s.svc.Links().Sign(links.Claims{Kind: links.KindDecide, Flow: "refund", Run: run, RequestID: cp.Interrupt.RequestID, Person: person, Expires: expires.Unix()})
	if err != nil {
		s.t.Fatal(err)
	}
	return links.DecidePath + text
}

// page is an answer of a decision link's page.
type linkPage struct {
	status int
	header http.Header
	body   string
}

// open sends method to the link's path with no cookie and no token, and
// headers as name, value pairs.
func (s *site) open(method, path string, form url.Values, headers ...string) linkPage {
	s.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.base+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return linkPage{status: res.StatusCode, header: res.Header, body: string(b)}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the form token of a page.
func (p linkPage) csrf(t *testing.T) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no form token on the page:\n%s", p.body)
	}
	return m[1]
}

// status is the run's status.
func (s *site) status(run string) string {
	s.t.Helper()
	cp, err := s.svc.Client("/test").Checkpoint(s.t.Context(), "refund", run)
	if err != nil {
		s.t.Fatal(err)
	}
	return string(cp.Status)
}

func TestADecisionLinkShowsTheProposalDecidesOnceAndIsNeverLogged(t *testing.T) {
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}}, cardFlow())
	s.startCard("ana", "r-1", map[string]any{"orderId": "o-1", "amount": 4800})
	path := s.decisionLink("r-1", "ana", time.Time{})

	// Opening the link, as a person or a mail scanner would, decides
	// nothing.
	for _, h := range [][]string{nil, {"Sec-Purpose", "prefetch"}, {"Purpose", "prefetch"}, {"X-Moz", "prefetch"}} {
		p := s.open("GET", path, nil, h...)
		if p.status != http.StatusOK {
			t.Fatalf("GET %v = %d\n%s", h, p.status, p.body)
		}
		for name, want := range map[string]string{"Referrer-Policy": "no-referrer", "Cache-Control": "no-store", "X-Robots-Tag": "noindex, nofollow"} {
			if got := p.header.Get(name); got != want {
				t.Errorf("%s: %q, want %q", name, got, want)
			}
		}
		if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("Content-Security-Policy %q", csp)
		}
		for _, want := range []string{"Refund $4,800.00 on order o-1", "charged twice", "$4,800.00", "support-bot", "then it goes to finance_lead", `id="person">ana<`, "Approve", "Reject"} {
			if !strings.Contains(p.body, want) {
				t.Errorf("the page does not say %q", want)
			}
		}
		if strings.Contains(p.body, "Signed in as") || strings.Contains(p.body, `id="claim"`) {
			t.Error("the link's page shows the inbox's session or claim forms")
		}
	}
	if p := s.open("HEAD", path, nil); p.status != http.StatusOK {
		t.Errorf("HEAD = %d", p.status)
	}
	if st := s.status("r-1"); st != "waiting" {
		t.Fatalf("after the link was opened the run is %s, want waiting", st)
	}

	// A form without the page's token decides nothing.
	page := s.open("GET", path, nil)
	// Another first character, whatever the token's is.
	wrong := "x" + page.csrf(t)[1:]
	if page.csrf(t)[0] == 'x' {
		wrong = "y" + page.csrf(t)[1:]
	}
	for name, token := range map[string]string{"missing": "", "wrong": wrong} {
		form := url.Values{"decision": {"approve"}}
		if token != "" {
			form.Set("csrf", token)
		}
		if p := s.open("POST", path, form); p.status != http.StatusForbidden || !strings.Contains(p.body, "did not come from this page") {
			t.Errorf("a %s form token = %d\n%s", name, p.status, p.body)
		}
	}
	if st := s.status("r-1"); st != "waiting" {
		t.Fatalf("after forms without the token the run is %s", st)
	}

	p := s.open("POST", path, url.Values{"csrf": {page.csrf(t)}, "decision": {"approve"}, "reason": {"checked the ticket"}})
	if p.status != http.StatusOK || !strings.Contains(p.body, "You approved “Refund $4,800.00 on order o-1”") {
		t.Fatalf("approve = %d\n%s", p.status, p.body)
	}
	recs, err := s.svc.Client("/test").VouchedAudit(t.Context(), "refund", "r-1")
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(recs, func(r protocol.AuditRecord) bool { return r.Action == protocol.ActionApproved }); i < 0 || recs[i].By != "ana" || recs[i].Reason != "checked the ticket" {
		t.Errorf("audit %+v: want the approval by ana", recs)
	}

	// Used: opening says so, and who decided; posting again decides
	// nothing.
	again := s.open("GET", path, nil)
	if again.status != http.StatusConflict || !strings.Contains(again.body, "This link was used") || !strings.Contains(again.body, "Already approved by ana") {
		t.Errorf("reopened = %d\n%s", again.status, again.body)
	}
	if p := s.open("POST", path, url.Values{"csrf": {page.csrf(t)}, "decision": {"reject"}, "reason": {"no"}}); p.status != http.StatusConflict || !strings.Contains(p.body, "This link was used") {
		t.Errorf("reused = %d\n%s", p.status, p.body)
	}

	text := strings.TrimPrefix(path, links.DecidePath)
	if log := s.log.String(); strings.Contains(log, text) || strings.Contains(log, text[len(text)-20:]) {
		t.Errorf("the log holds the link:\n%s", log)
	}
}

func TestForgedAndExpiredDecisionLinksSayWhich(t *testing.T) {
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}}, cardFlow())
	s.startCard("ana", "r-1", map[string]any{"orderId": "o-1", "amount": 4800})
	path := s.decisionLink("r-1", "ana", time.Time{})
	text := strings.TrimPrefix(path, links.DecidePath)
	payload, sig, _ := strings.Cut(text, ".")
	body, _ := base64.RawURLEncoding.DecodeString(payload)
	altered := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(body), `"ana"`, `"ben"`, 1))) + "." + sig
	for name, p := range map[string]string{
		"altered":  links.DecidePath + altered,
		"cut":      path[:len(path)-5],
		"too long": path + strings.Repeat("A", 3000),
		"callback": links.CallbackPath[:0] + links.DecidePath + func() string {
			cb, err := s.svc.Links().MintCallback("http://x.example", "refund", "r-1", "rq", "ana", time.Now().Add(time.Hour), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return cb.URL[strings.LastIndex(cb.URL, "/")+1:]
		}(),
	} {
		for _, method := range []string{"GET", "POST"} {
			got := s.open(method, p, url.Values{"decision": {"approve"}})
			if got.status != http.StatusNotFound || !strings.Contains(got.body, "This link is not valid") {
				t.Errorf("%s %s = %d\n%s", method, name, got.status, got.body)
			}
		}
	}
	expired := s.decisionLink("r-1", "ana", time.Now().Add(-time.Minute))
	got := s.open("GET", expired, nil)
	if got.status != http.StatusGone || !strings.Contains(got.body, "This link has expired") || !strings.Contains(got.body, "It worked until") {
		t.Errorf("expired = %d\n%s", got.status, got.body)
	}
	if st := s.status("r-1"); st != "waiting" {
		t.Errorf("the run is %s", st)
	}
}

func TestADecisionLinkOfARequestDecidedElsewhereSaysWhoDecided(t *testing.T) {
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}, "ben": {"finance"}}, cardFlow())
	s.startCard("ana", "r-1", map[string]any{"orderId": "o-1", "amount": 4800})
	path := s.decisionLink("r-1", "ben", time.Time{})
	page := s.open("GET", path, nil)
	if code, out := s.api("ana", "POST", "/v1/runs/refund/r-1/resume", map[string]any{"decision": "reject", "reason": "duplicate"}); code != http.StatusAccepted {
		t.Fatalf("ana's reject = %d %s", code, out)
	}
	for _, p := range []linkPage{s.open("GET", path, nil), s.open("POST", path, url.Values{"csrf": {page.csrf(t)}, "decision": {"approve"}})} {
		if p.status != http.StatusConflict || !strings.Contains(p.body, "Already decided") || !strings.Contains(p.body, "Already rejected by ana") || !strings.Contains(p.body, "duplicate") {
			t.Errorf("ben's link after ana's reject = %d\n%s", p.status, p.body)
		}
	}
}

func TestARefusedDecisionGivesTheLinkBack(t *testing.T) {
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}}, cardFlow())
	s.startCard("ana", "r-1", map[string]any{"orderId": "o-1", "amount": 4800})
	path := s.decisionLink("r-1", "ana", time.Time{})
	token := s.open("GET", path, nil).csrf(t)
	edit := url.Values{"csrf": {token}, "decision": {"edit"}, "arg.amount": {"20000"}, "arg.orderId": {"o-1"}, "arg.currency": {`"USD"`},
		"arg.customer": {"dana@example.com"}, "arg.note": {"We are sorry for the **double charge**."}}
	p := s.open("POST", path, edit)
	if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "10000") {
		t.Fatalf("an edit over the schema's maximum = %d\n%s", p.status, p.body)
	}
	p = s.open("POST", path, url.Values{"csrf": {token}, "decision": {"approve"}})
	if p.status != http.StatusOK || !strings.Contains(p.body, "You approved") {
		t.Fatalf("approve after the refused edit = %d\n%s", p.status, p.body)
	}
}

var keyField = regexp.MustCompile(`name="key" value="([^"]+)"`)

func TestTheSameFormOfADecisionLinkSentAgainIsTheSameDecision(t *testing.T) {
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}}, cardFlow())
	s.startCard("ana", "r-1", map[string]any{"orderId": "o-1", "amount": 4800})
	path := s.decisionLink("r-1", "ana", time.Time{})
	page := s.open("GET", path, nil)
	key := keyField.FindStringSubmatch(page.body)
	if key == nil {
		t.Fatalf("no idempotency key on the form:\n%s", page.body)
	}
	form := url.Values{"csrf": {page.csrf(t)}, "key": {key[1]}, "decision": {"approve"}, "reason": {"checked"}}
	if p := s.open("POST", path, form); p.status != http.StatusOK || !strings.Contains(p.body, "You approved") {
		t.Fatalf("the form = %d\n%s", p.status, p.body)
	}
	if p := s.open("POST", path, form); p.status != http.StatusOK || !strings.Contains(p.body, "Your decision was recorded") {
		t.Fatalf("the same form again = %d\n%s", p.status, p.body)
	}
	// A use claimed by a process that stopped before it sent the
	// decision: the same form sent again decides.
	s.startCard("ana", "r-2", map[string]any{"orderId": "o-2", "amount": 4800})
	path2 := s.decisionLink("r-2", "ana", time.Time{})
	page2 := s.open("GET", path2, nil)
	key2 := keyField.FindStringSubmatch(page2.body)[1]
	cl, err := s.svc.Links().Check(strings.TrimPrefix(path2, links.DecidePath), links.KindDecide, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.LinkUses().Claim(t.Context(), cl, key2, time.Now()); err != nil {
		t.Fatal(err)
	}
	if p := s.open("POST", path2, url.Values{"csrf": {page2.csrf(t)}, "key": {key2}, "decision": {"approve"}}); p.status != http.StatusOK || !strings.Contains(p.body, "You approved") {
		t.Fatalf("the form of a use that was never sent = %d\n%s", p.status, p.body)
	}
	if st := s.status("r-2"); st == "waiting" {
		t.Errorf("run r-2 is still waiting after its form was sent again")
	}

	// Another form (another key) is another use.
	other := url.Values{"csrf": {page.csrf(t)}, "key": {"inbox-" + strings.Repeat("ab", 12)}, "decision": {"reject"}, "reason": {"no"}}
	if p := s.open("POST", path, other); p.status != http.StatusConflict || !strings.Contains(p.body, "This link was used") {
		t.Errorf("another form = %d\n%s", p.status, p.body)
	}
	if n := s.decisionsAudited("r-1"); n != 1 {
		t.Errorf("%d decisions audited, want 1", n)
	}
}

func TestTwoFormsOfOneDecisionLinkRacingDecideOnce(t *testing.T) {
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}}, cardFlow())
	s.startCard("ana", "r-1", map[string]any{"orderId": "o-1", "amount": 4800})
	path := s.decisionLink("r-1", "ana", time.Time{})
	token := s.open("GET", path, nil).csrf(t)
	statuses := make([]int, 2)
	var wg sync.WaitGroup
	for i, d := range []string{"approve", "reject"} {
		wg.Go(func() {
			statuses[i] = s.open("POST", path, url.Values{"csrf": {token}, "decision": {d}, "reason": {"race"}}).status
		})
	}
	wg.Wait()
	slices.Sort(statuses)
	if !slices.Equal(statuses, []int{http.StatusOK, http.StatusConflict}) {
		t.Fatalf("statuses %v, want one 200 and one 409", statuses)
	}
	if n := s.decisionsAudited("r-1"); n != 1 {
		t.Errorf("%d decisions audited, want 1", n)
	}
}

func TestADecisionLinkDecidesWithTheRolesThePersonHoldsNow(t *testing.T) {
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}}, cardFlow())
	s.startCard("ana", "r-1", map[string]any{"orderId": "o-1", "amount": 4800})
	path := s.decisionLink("r-1", "cleo", time.Time{})
	dir := func(yaml string) {
		d, err := people.Parse([]byte(yaml), "test")
		if err != nil {
			t.Fatal(err)
		}
		s.dir.Store(d)
	}
	// Cleo is not among the people: her link does not work.
	dir("people:\n  - name: ana\n    roles: [finance]\n")
	if p := s.open("GET", path, nil); p.status != http.StatusForbidden || !strings.Contains(p.body, "no longer among the people who decide") {
		t.Fatalf("a link of somebody not in the directory = %d\n%s", p.status, p.body)
	}
	// In it without the role, she sees the proposal but no form, and a
	// decision sent anyway is refused, leaving her link usable.
	dir("people:\n  - name: cleo\n    roles: [support]\n")
	p := s.open("GET", path, nil)
	if p.status != http.StatusOK || strings.Contains(p.body, `class="approve"`) || !strings.Contains(p.body, "which you do not hold") {
		t.Fatalf("cleo without the role = %d\n%s", p.status, p.body)
	}
	// The page has no form; a form made by hand carries the link's token.
	c, err := s.svc.Links().Check(strings.TrimPrefix(path, links.DecidePath), links.KindDecide, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	token := s.svc.Links().FormToken(c.ID)
	p = s.open("POST", path, url.Values{"csrf": {token}, "decision": {"approve"}})
	if p.status != http.StatusForbidden || !strings.Contains(p.body, "Interlock refused your decision") {
		t.Fatalf("cleo's approve without the role = %d\n%s", p.status, p.body)
	}
	// Given the role, the same link decides, audited as her.
	dir("people:\n  - name: cleo\n    roles: [finance]\n")
	p = s.open("POST", path, url.Values{"csrf": {token}, "decision": {"approve"}})
	if p.status != http.StatusOK {
		t.Fatalf("cleo's approve with the role = %d\n%s", p.status, p.body)
	}
	recs, _ := s.svc.Client("/test").VouchedAudit(t.Context(), "refund", "r-1")
	if i := slices.IndexFunc(recs, func(r protocol.AuditRecord) bool { return r.Action == protocol.ActionApproved }); i < 0 || recs[i].By != "cleo" {
		t.Errorf("audit %+v: want the approval by cleo", recs)
	}
}

// decisionsAudited counts the approvals and rejections audited on the
// refund run.
func (s *site) decisionsAudited(run string) int {
	s.t.Helper()
	recs, err := s.svc.Client("/test").Audit(s.t.Context(), "refund", run)
	if err != nil {
		s.t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.Action == protocol.ActionApproved || r.Action == protocol.ActionRejected {
			n++
		}
	}
	return n
}
