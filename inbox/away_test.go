package inbox_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// decideAs approves run's approval as caller over the HTTP API, and
// returns the status.
func (s *site) decideAs(t *testing.T, caller, run string) (int, string) {
	t.Helper()
	code, out := s.api(caller, "POST", "/v1/runs/refund/"+run+"/resume?wait=10s", map[string]any{"decision": "approve"})
	return code, string(out)
}

// TestAnAbsenceLetsTheDelegateDecideUntilItEnds: ann, away, names ben:
// meanwhile ben decides the approvals of ann's role and those assigned
// to ann, as himself, and never ann's absence; it is audited; ann ends
// it early, and another ends by itself at its end.
func TestAnAbsenceLetsTheDelegateDecideUntilItEnds(t *testing.T) {
	t.Parallel()
	s := startSiteOf(t, map[string][]string{"ann": {"finance", "legal"}, "ben": nil, "bot": nil}, cardFlow())
	for _, c := range []struct {
		body any
		want string
	}{
		{map[string]any{"delegate": "ann", "to": time.Now().Add(time.Hour)}, "your own delegate"},
		{map[string]any{"delegate": "zed", "to": time.Now().Add(time.Hour)}, "zed is not a person of the directory"},
		{map[string]any{"delegate": "ben", "to": time.Now().Add(-time.Hour)}, "not in the future"},
		{map[string]any{"delegate": "ben", "to": time.Now().Add(time.Hour), "roles": []string{"ops"}}, "you do not hold role ops"},
		{map[string]any{"delegate": "ben", "to": time.Now().Add(200 * 24 * time.Hour)}, "at most 92 days"},
		{map[string]any{"delegate": "ben", "until": "tomorrow"}, "unknown field"},
	} {
		if code, out := s.api("ann", "PUT", "/v1/away", c.body); code != http.StatusBadRequest || !strings.Contains(string(out), c.want) {
			t.Errorf("PUT /v1/away %v = %d %s, want 400 saying %q", c.body, code, out, c.want)
		}
	}
	s.startCard("bot", "r-before", map[string]any{"orderId": "o-0", "amount": 900})
	if code, out := s.decideAs(t, "ben", "r-before"); code != http.StatusForbidden {
		t.Fatalf("ben decides a finance approval before any absence: %d %s", code, out)
	}

	to := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if code, out := s.api("ann", "PUT", "/v1/away", map[string]any{"delegate": "ben", "to": to, "roles": []string{"finance"}}); code != http.StatusCreated {
		t.Fatalf("ann's absence = %d %s", code, out)
	}
	if code, out := s.api("ann", "PUT", "/v1/away", map[string]any{"delegate": "ben", "to": to}); code != http.StatusConflict {
		t.Errorf("a second absence = %d %s, want 409", code, out)
	}
	var v struct {
		Away     *struct{ Delegate string } `json:"away"`
		Deciding []struct{ Person string }  `json:"deciding"`
	}
	_, out := s.api("ben", "GET", "/v1/away", nil)
	if err := json.Unmarshal(out, &v); err != nil || len(v.Deciding) != 1 || v.Deciding[0].Person != "ann" || v.Away != nil {
		t.Fatalf("ben's GET /v1/away: %s", out)
	}

	// Ben decides, as himself, what ann's role waits on and what is
	// assigned to her.
	s.startCard("bot", "r-role", map[string]any{"orderId": "o-1", "amount": 900})
	s.startCard("bot", "r-mine", map[string]any{"orderId": "o-2", "amount": 900, "assignees": []string{"ann"}})
	for _, run := range []string{"r-before", "r-role", "r-mine"} {
		if code, out := s.decideAs(t, "ben", run); code >= 300 || !strings.Contains(out, `"outcome":"completed"`) {
			t.Fatalf("ben deciding %s while ann is away: %d %s", run, code, out)
		}
		cp, err := s.svc.Client("/test").Checkpoint(t.Context(), "refund", run)
		if err != nil || len(cp.Decisions) != 1 || cp.Decisions[0].Approver != "ben" {
			t.Errorf("%s's decision %+v (%v), want ben's own", run, cp.Decisions, err)
		}
	}
	// Never ann's absence: ending it is hers.
	_, run, ok := s.svc.Away().Coming("ann", time.Now())
	if !ok {
		t.Fatal("the service does not know ann's absence")
	}
	in, err := s.svc.Client("/test").LastInterrupt(t.Context(), protocol.AbsenceFlow, run)
	if err != nil {
		t.Fatal(err)
	}
	if code, out := s.api("ben", "POST", "/v1/runs/away/"+run+"/resume?wait=10s", map[string]any{"decision": "approve", "requestId": in.RequestID}); code != http.StatusForbidden {
		t.Errorf("ben ending ann's absence = %d %s, want 403", code, out)
	}
	if code, _ := s.api("ben", "DELETE", "/v1/away", nil); code != http.StatusNotFound {
		t.Errorf("ben's DELETE /v1/away = %d, want 404: he has none", code)
	}
	// Who delegated what to whom, for when: the absence's audit.
	recs, err := s.svc.Client("/test").Audit(t.Context(), protocol.AbsenceFlow, run)
	if err != nil || len(recs) == 0 || recs[0].By != "ann" || recs[0].Outcome == nil || recs[0].Outcome.Approval == nil ||
		!strings.Contains(string(recs[0].Outcome.Approval.Args), `"delegate":"ben"`) || !strings.Contains(string(recs[0].Outcome.Approval.Args), `"roles":"finance"`) {
		t.Errorf("the absence's first audit record: %+v (%v)", recs, err)
	}

	if code, out := s.api("ann", "DELETE", "/v1/away", nil); code != http.StatusOK || !strings.Contains(string(out), `"delegate":"ben"`) {
		t.Fatalf("ann ending her absence = %d %s", code, out)
	}
	s.startCard("bot", "r-after", map[string]any{"orderId": "o-3", "amount": 900})
	if code, out := s.decideAs(t, "ben", "r-after"); code != http.StatusForbidden {
		t.Errorf("ben deciding after ann's return: %d %s, want 403", code, out)
	}

	// One that ends by itself.
	if code, out := s.api("ann", "PUT", "/v1/away", map[string]any{"delegate": "ben", "to": time.Now().Add(2 * time.Second)}); code != http.StatusCreated {
		t.Fatalf("ann's short absence = %d %s", code, out)
	}
	natstest.Eventually(t, "the short absence ended by itself", func() bool {
		_, _, ok := s.svc.Away().Coming("ann", time.Now().Add(-time.Hour))
		return !ok
	})
	if code, out := s.decideAs(t, "ben", "r-after"); code != http.StatusForbidden {
		t.Errorf("ben deciding after the absence's end: %d %s, want 403", code, out)
	}
}

// TestTheInboxSetsAndEndsAnAbsence: a person names a delegate on the
// inbox's away page, sees it, and ends it; the delegate's page says whom
// they decide for; a bad form is said in words beside it.
func TestTheInboxSetsAndEndsAnAbsence(t *testing.T) {
	t.Parallel()
	s := startSiteOf(t, map[string][]string{"ann": {"finance", "legal"}, "ben": nil}, cardFlow())
	ann := s.visitor()
	ann.do("POST", "/login", url.Values{"token": {s.tokens["ann"]}, "next": {"/"}})
	code, page := ann.do("GET", "/away", nil)
	if code != http.StatusOK || !strings.Contains(page, `href="/away" aria-current="page">Away</a>`) || !strings.Contains(page, `name="role" value="legal"`) {
		t.Fatalf("ann's away page = %d\n%s", code, page)
	}
	csrf := hidden(page).Get("csrf")
	to := time.Now().Add(48 * time.Hour).UTC().Format("2006-01-02T15:04")
	if code, page = ann.do("POST", "/away", url.Values{"csrf": {csrf}, "op": {"begin"}, "delegate": {"ann"}, "to": {to}}); code != http.StatusUnprocessableEntity || !strings.Contains(page, "you cannot be your own delegate") {
		t.Errorf("ann as her own delegate = %d", code)
	}
	if code, page = ann.do("POST", "/away", url.Values{"csrf": {csrf}, "op": {"begin"}, "delegate": {"ben"}, "to": {"soon"}}); code != http.StatusUnprocessableEntity || !strings.Contains(page, "Say until when you are away") {
		t.Errorf("an unreadable end = %d", code)
	}
	code, page = ann.do("POST", "/away", url.Values{"csrf": {csrf}, "op": {"begin"}, "delegate": {"ben"}, "role": {"finance"}, "to": {to}})
	if code != http.StatusOK || !strings.Contains(page, "Your absence is set") || !strings.Contains(page, "<strong>ben</strong> decides what is assigned to or claimed by you, and the approvals of finance") {
		t.Fatalf("ann's absence set = %d\n%s", code, page)
	}
	ben := s.visitor()
	ben.do("POST", "/login", url.Values{"token": {s.tokens["ben"]}, "next": {"/"}})
	if _, page := ben.do("GET", "/away", nil); !strings.Contains(page, `<li><strong>ann</strong> (finance), until`) {
		t.Errorf("ben's away page does not say he decides for ann:\n%s", page)
	}
	s.startCard("ann", "r-1", map[string]any{"orderId": "o-1", "amount": 900})
	s.startCard("ann", "r-2", map[string]any{"orderId": "o-2", "amount": 900, "assignees": []string{"ann"}})
	if _, page := ben.do("GET", "/", nil); !strings.Contains(page, `data-run="r-1"`) {
		t.Errorf("ben's queue does not list ann's role's approval while she is away")
	}
	if got := queueRows(t, ben, "/?view=mine"); got != "r-2" {
		t.Errorf("ben's own while ann is away: %q, want what is assigned to her (r-2), never her absence", got)
	}
	if code, page = ann.do("POST", "/away", url.Values{"csrf": {csrf}, "op": {"end"}}); code != http.StatusOK || !strings.Contains(page, "Your absence is over") {
		t.Fatalf("ending = %d\n%s", code, page)
	}
	if _, page := ben.do("GET", "/", nil); strings.Contains(page, `data-run="r-1"`) {
		t.Errorf("ben's queue still lists ann's role's approval after she came back")
	}
	if code, _ := ann.do("POST", "/away", url.Values{"op": {"end"}}); code != http.StatusForbidden {
		t.Errorf("a form without its csrf = %d, want 403", code)
	}
}

// TestAnAbsenceStartedAroundItsChecksGivesNothing: a run of the absence
// flow started through the runs API counts only as its starter's own,
// and only if it is an absence: ben naming ann's absence gets nothing
// from it, nor ann one that lasts a year.
func TestAnAbsenceStartedAroundItsChecksGivesNothing(t *testing.T) {
	t.Parallel()
	s := startSiteOf(t, map[string][]string{"ann": {"finance"}, "ben": nil, "bot": nil}, cardFlow())
	now := time.Now().UTC()
	for _, c := range []struct{ caller, run, person, delegate string }{
		{"ben", "away-forged", "ann", "ben"},
		{"ann", "away-long", "ann", "ben"},
	} {
		to := now.Add(time.Hour)
		if c.caller == "ann" {
			to = now.Add(365 * 24 * time.Hour)
		}
		state := map[string]any{"person": c.person, "delegate": c.delegate, "from": now, "to": to}
		if code, out := s.api(c.caller, "POST", "/v1/runs/away", map[string]any{"run": c.run, "state": state}); code != http.StatusAccepted {
			t.Fatalf("%s starting %s = %d %s", c.caller, c.run, code, out)
		}
	}
	natstest.Eventually(t, "the year-long absence failed", func() bool {
		cp, err := s.svc.Client("/test").Checkpoint(t.Context(), protocol.AbsenceFlow, "away-long")
		return err == nil && cp.Status == protocol.StatusFailed && strings.Contains(cp.Error, "at most 92 days")
	})
	natstest.Eventually(t, "the forged absence waits", func() bool {
		cp, err := s.svc.Client("/test").Checkpoint(t.Context(), protocol.AbsenceFlow, "away-forged")
		return err == nil && cp.Status == protocol.StatusWaiting
	})
	if _, _, ok := s.svc.Away().Coming("ann", now); ok {
		t.Error("an absence of ann's counts that she did not start, or that is no absence")
	}
	s.startCard("bot", "r-1", map[string]any{"orderId": "o-1", "amount": 900})
	if code, out := s.decideAs(t, "ben", "r-1"); code != http.StatusForbidden {
		t.Errorf("ben deciding ann's role's approval on a forged absence: %d %s, want 403", code, out)
	}
}
