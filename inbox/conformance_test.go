package inbox_test

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/authority/authoritytest"
	"github.com/interlockhq/interlock/examples"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

// TestTheInboxAnswersTheConformanceTable runs the authority's table
// through the inbox's pages, each caller signed in with their own token,
// driving the forms as a browser does: the run's page read, its form's
// tokens taken, the form posted. Where the page shows no form for the
// case's action, the form is posted all the same (as from a page loaded
// before the caller lost the right): the page must say no, and nothing
// may change.
func TestTheInboxAnswersTheConformanceTable(t *testing.T) {
	t.Parallel()
	authoritytest.Conform(t, authoritytest.SurfaceInbox, inboxDoor{startTrustSite(t)})
}

// TestDecisionLinksAnswerTheConformanceTable runs the table's decisions
// and reads through decision links, each issued to the case's caller
// whether or not they may decide (as a link mailed before its holder lost
// a role, or before another claimed the approval, is): the link is the
// credential of its holder, never more.
func TestDecisionLinksAnswerTheConformanceTable(t *testing.T) {
	t.Parallel()
	authoritytest.Conform(t, authoritytest.SurfaceLink, linkDoor{inboxDoor{startTrustSite(t)}})
}

// startTrustSite starts a site whose directory of people is the
// authority's fixture, each person with a token, with the fixture's gate
// rules, cancel and read roles.
func startTrustSite(t *testing.T) *site {
	t.Helper()
	tokens := map[string]string{}
	dir := authoritytest.Directory(func(p authoritytest.Person) people.Person {
		tokens[p.Name] = people.NewToken()
		return people.Person{Name: p.Name, Roles: p.Roles, TokenSHA256: people.HashToken(tokens[p.Name])}
	})
	s := startSiteWith(t, nil, authoritytest.Deploy(interlock.Config{Flows: examples.Flows()}, dir))
	s.dir.Store(dir)
	s.tokens = tokens
	return s
}

// inboxDoor is the inbox, signed in to, as the table's door.
type inboxDoor struct{ s *site }

// Start makes run r through the HTTP API the inbox is mounted on, as the
// person who starts it, and has its claimant claim it there.
func (d inboxDoor) Start(t *testing.T, r authoritytest.Run, id string) (flow, run string) {
	if req := r.ToolRequest(id); req != nil {
		if code, out := d.s.apiIn(t, r.StartedBy, "POST", "/v1/gate/requests?wait=10ms", req); code != http.StatusAccepted {
			t.Fatalf("starting %s: %d %s", r.Key, code, out)
		}
		flow, run = protocol.GateFlow, id
	} else {
		if code, out := d.s.apiIn(t, r.StartedBy, "POST", "/v1/asks", r.AskRequest(id)); code != http.StatusAccepted {
			t.Fatalf("starting %s: %d %s", r.Key, code, out)
		}
		flow, run = protocol.AskFlow, id
	}
	natstest.Eventually(t, run+" waiting", func() bool {
		cp, err := d.s.svc.Client("/conformance").Checkpoint(t.Context(), flow, run)
		return err == nil && cp.Waiting()
	})
	if claimant := r.Pending.ClaimedBy; claimant != "" {
		code, out := d.s.apiIn(t, claimant, "POST", "/v1/runs/"+flow+"/"+run+"/assign", map[string]any{"op": protocol.AssignClaim})
		if code != http.StatusAccepted || !strings.Contains(string(out), protocol.EventAssigned) {
			t.Fatalf("%s claiming %s: %d %s", claimant, r.Key, code, out)
		}
	}
	return flow, run
}

// Ask signs the case's caller in, opens the run's page and, but to read
// it, sends the page's form for the action.
func (d inboxDoor) Ask(t *testing.T, c authoritytest.Case, flow, run string) protocol.Code {
	path := "/runs/" + flow + "/" + run
	b := d.s.visitorIn(t)
	status, page := b.do("POST", "/login", url.Values{"token": {d.s.tokens[c.Who]}, "next": {path}})
	if b.url != path {
		t.Fatalf("%s signing in: %d at %s, want the run's page\n%s", c.Who, status, b.url, page)
	}
	before := d.standing(t, flow, run)
	if c.Action == authority.Read {
		return readCode(t, status, page, before)
	}
	form := url.Values{"csrf": {field(page, "csrf")}, "requestId": {field(page, "requestId")}, "key": {field(page, "key")}}
	if form.Get("csrf") == "" {
		t.Fatalf("the run's page of %s has no form token:\n%s", c.Who, page)
	}
	if form.Get("requestId") == "" {
		// The page shows no form: send what one shown before did.
		form.Set("requestId", before.RequestID)
	}
	var offered bool
	post := path
	switch c.Action {
	case authority.Decide:
		v := verdict(c)
		offered = strings.Contains(page, `name="decision" value="`+v+`"`)
		form.Set("decision", v)
		form.Set("reason", "conformance")
	case authority.Claim:
		offered = strings.Contains(page, `name="op" value="claim"`)
		post += "/assign"
		form.Set("op", protocol.AssignClaim)
	case authority.Delegate:
		offered = strings.Contains(page, `name="op" value="delegate"`)
		post += "/assign"
		form.Set("op", protocol.AssignDelegate)
		form.Set("toKind", "person")
		form.Set("to", authoritytest.Bob)
	default:
		t.Fatalf("the inbox's door has no %s", c.Action)
	}
	status, page = b.do("POST", post, form)
	if strings.Contains(page, "The form has expired") {
		t.Fatalf("the page's form token was refused:\n%s", page)
	}
	got := formCode(t, status, page, `class="notice"`, "Sent. Interlock has not taken it yet")
	d.checkApplied(t, c, flow, run, before, got)
	checkOffered(t, c, offered, got)
	return got
}

// standing is what a run's pending request stands at: what an action
// applied changes.
type standing struct {
	Status       protocol.Status
	RequestID    string
	ClaimedBy    string
	Votes        int
	ApproverRole string
	Assignees    []string
	// Action is what the request proposes, which a page that refuses to
	// show it does not say.
	Action string
}

// standing reads the run back through a client of the deployment.
func (d inboxDoor) standing(t *testing.T, flow, run string) standing {
	t.Helper()
	cp, err := d.s.svc.Client("/conformance").Checkpoint(t.Context(), flow, run)
	if err != nil {
		t.Fatal(err)
	}
	st := standing{Status: cp.Status}
	if in := cp.Interrupt; in != nil && cp.Waiting() {
		st.RequestID, st.ClaimedBy, st.Votes, st.ApproverRole, st.Assignees, st.Action = in.RequestID, in.ClaimedBy, len(in.Votes), in.ApproverRole, in.Assignees, in.Action
	}
	return st
}

// checkApplied fails unless the run, read back, changed as the action
// does when the surface let it through, and not at all when it refused.
func (d inboxDoor) checkApplied(t *testing.T, c authoritytest.Case, flow, run string, before standing, got protocol.Code) {
	t.Helper()
	after := d.standing(t, flow, run)
	same := after.Status == before.Status && after.RequestID == before.RequestID && after.ClaimedBy == before.ClaimedBy &&
		after.Votes == before.Votes && after.ApproverRole == before.ApproverRole && slices.Equal(after.Assignees, before.Assignees)
	switch {
	case got != "" && !same:
		t.Errorf("the page refused (%s) but the run changed: %+v, was %+v", got, after, before)
	case got == "" && c.Action == authority.Decide && same:
		t.Errorf("the page says the decision was sent but the run is as it was: %+v", after)
	case got == "" && c.Action == authority.Claim && after.ClaimedBy != c.Who:
		t.Errorf("the page says the claim was sent but the run is claimed by %q", after.ClaimedBy)
	}
}

// checkOffered fails where the page offered a form for what the surface
// refuses, or hid one for what it allows: which forms a page shows, the
// authority says.
func checkOffered(t *testing.T, c authoritytest.Case, offered bool, got protocol.Code) {
	t.Helper()
	switch {
	case offered && got != "":
		t.Errorf("the page offers %s a form to %s %s, which the surface refuses (%s)", c.Who, c.Action, verdict(c), got)
	case !offered && got == "":
		t.Errorf("the page shows %s no form to %s %s, which the surface allows", c.Who, c.Action, verdict(c))
	}
}

// readCode is the refusal of a run's page as a read: the request shown,
// or a 403 page that says nothing of it.
func readCode(t *testing.T, status int, page string, st standing) protocol.Code {
	t.Helper()
	shown := strings.Contains(page, `data-request="`+st.RequestID+`"`)
	switch {
	case status == http.StatusOK && shown:
		return ""
	case status == http.StatusForbidden && !shown && !strings.Contains(page, st.Action):
		return protocol.CodeForbidden
	}
	t.Fatalf("reading the run: %d, want the request shown or a 403 that says nothing of it\n%s", status, page)
	return ""
}

// formCode is the refusal a page answering a form shows, by its status:
// "" for a page that says, by done, that the form was applied, and never
// one that says, by queued, that it was only sent.
func formCode(t *testing.T, status int, page, done, queued string) protocol.Code {
	t.Helper()
	switch status {
	case http.StatusOK, http.StatusAccepted:
		if strings.Contains(page, queued) {
			t.Fatalf("the form was queued, not answered:\n%s", page)
		}
		if !strings.Contains(page, done) {
			t.Fatalf("the page neither refuses nor says the form was applied:\n%s", page)
		}
		return ""
	case http.StatusForbidden:
		return protocol.CodeForbidden
	case http.StatusConflict:
		return protocol.CodeNotWaiting
	case http.StatusUnprocessableEntity:
		return protocol.CodeInvalidAnswer
	case http.StatusBadRequest:
		return protocol.CodeInvalidPayload
	case http.StatusNotFound:
		return protocol.CodeUnknownRun
	}
	t.Fatalf("the form's page: %d\n%s", status, page)
	return ""
}

// fieldRE matches a hidden field of a form.
var fieldRE = regexp.MustCompile(`name="(csrf|requestId|key)" value="([^"]*)"`)

// field is the value of the hidden field name of the page's first form
// that has one, or "".
func field(page, name string) string {
	for _, m := range fieldRE.FindAllStringSubmatch(page, -1) {
		if m[1] == name {
			return m[2]
		}
	}
	return ""
}

// verdict is the case's decision, approve when empty.
func verdict(c authoritytest.Case) string {
	if c.Verdict == "" {
		return string(protocol.VerdictApprove)
	}
	return string(c.Verdict)
}

// linkDoor is decision links as the table's door: the page of a link
// issued to the case's caller, and its form.
type linkDoor struct{ inboxDoor }

// Ask issues the case's caller a decision link of the pending request,
// with the deployment's link signer, as a mail does, and opens it without
// a cookie; but to read, it sends the page's form for the decision.
func (d linkDoor) Ask(t *testing.T, c authoritytest.Case, flow, run string) protocol.Code {
	before := d.standing(t, flow, run)
	id := links.NewID()
	text, err := d.s.svc.Links().Sign(links.Claims{Kind: links.KindDecide, ID: id, Flow: flow, Run: run,
		RequestID: before.RequestID, Person: c.Who, Expires: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	path := links.DecidePath + text
	status, page := d.open(t, "GET", path, nil)
	if c.Action == authority.Read {
		if status == http.StatusForbidden && !strings.Contains(page, `data-state="refused"`) {
			t.Fatalf("the link's page: %d, but it does not say it refuses\n%s", status, page)
		}
		return readCode(t, status, page, before)
	}
	if c.Action != authority.Decide {
		t.Fatalf("the decision link's door has no %s", c.Action)
	}
	v := verdict(c)
	offered := strings.Contains(page, `name="decision" value="`+v+`"`)
	form := url.Values{"csrf": {field(page, "csrf")}, "key": {field(page, "key")}, "decision": {v}, "reason": {"conformance"}}
	if form.Get("csrf") == "" {
		// The page shows no form: send the token one shown before, when
		// the link's person could still decide, carried.
		form.Set("csrf", d.s.svc.Links().FormToken(id))
	}
	status, page = d.open(t, "POST", path, form)
	if strings.Contains(page, `data-state="bad_form"`) {
		t.Fatalf("the link's form was refused:\n%s", page)
	}
	got := formCode(t, status, page, `data-state="done"`, `data-state="queued"`)
	if got == protocol.CodeForbidden && !strings.Contains(page, `data-state="refused"`) {
		t.Fatalf("the link's page: %d, but it does not say it refuses\n%s", status, page)
	}
	d.checkApplied(t, c, flow, run, before, got)
	checkOffered(t, c, offered, got)
	return got
}

// open sends method to a link's path with no cookie and no token.
func (d linkDoor) open(t *testing.T, method, path string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(t.Context(), method, d.s.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
