package inbox_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
)

// TestTheTeamPageSaysHowFastTheTeamDecides: for a holder of a read role,
// the team page gives the time from ask to decision by role, person and
// action, what waits now and where it piles up, the reminders sent, and
// the Prometheus query of each figure; nobody else reads it.
func TestTheTeamPageSaysHowFastTheTeamDecides(t *testing.T) {
	t.Parallel()
	s := startSiteWith(t, map[string][]string{"ana": {"finance"}, "ben": {"finance"}, "aud": {"audit"}, "bot": nil},
		interlock.Config{Flows: []*engine.Flow{cardFlow()}, ReadRoles: []string{"audit"}})
	for _, run := range []string{"r-1", "r-2", "r-3"} {
		s.startCard("bot", run, map[string]any{"orderId": "o-" + run, "amount": 900})
	}
	s.startCard("bot", "r-wait", map[string]any{"orderId": "o-wait", "amount": 900, "remindSoon": true})
	for run, d := range map[string][2]string{"r-1": {"ana", "approve"}, "r-2": {"ben", "reject"}, "r-3": {"ana", "approve"}} {
		if code, out := s.api(d[0], "POST", "/v1/runs/refund/"+run+"/resume", map[string]any{"decision": d[1]}); code >= 300 {
			t.Fatalf("%s's decision of %s = %d %s", d[0], run, code, out)
		}
	}
	aud := s.visitor()
	aud.do("POST", "/login", url.Values{"token": {s.tokens["aud"]}, "next": {"/"}})
	var page string
	natstest.Eventually(t, "the reminder counted", func() bool {
		_, page = aud.do("GET", "/team", nil)
		return strings.Contains(page, `<dd id="reminders">1</dd>`)
	})
	row := func(table, name string) string {
		m := regexp.MustCompile(`(?s)<table class="team" id="` + table + `">.*?</table>`).FindString(page)
		r := regexp.MustCompile(`<tr><th scope="row">` + regexp.QuoteMeta(name) + `</th><td data-label="[^"]+">(\d+)</td>`).FindStringSubmatch(m)
		if r == nil {
			return ""
		}
		return r[1]
	}
	for _, c := range []struct{ table, name, want string }{
		{"by-role", "finance", "3"}, {"by-approver", "ana", "2"}, {"by-approver", "ben", "1"}, {"by-action", "issue_refund", "3"},
		{"waiting", "role finance", "1"},
	} {
		if got := row(c.table, c.name); got != c.want {
			t.Errorf("%s row %s: %q, want %s", c.table, c.name, got, c.want)
		}
	}
	for _, want := range []string{`<dd id="waiting-now">1</dd>`, `Most waits on role finance: 1`, `3 decided or answered`,
		`sum by (approver_role) (interlock_pending_interrupts)`, `rate(interlock_time_to_decision_seconds_bucket{verb=&#34;resume&#34;}[7d])`,
		`href="/team" aria-current="page">Team</a>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the team page lacks %s", want)
		}
	}
	if t.Failed() {
		t.Fatalf("page:\n%s", page)
	}
	if _, page = aud.do("GET", "/team?window=24h", nil); !strings.Contains(page, `[24h]`) {
		t.Errorf("the 24h window's queries:\n%s", page)
	}
	if code, _ := aud.do("GET", "/team?window=1y", nil); code != http.StatusBadRequest {
		t.Errorf("a window of 1y = %d, want 400", code)
	}
	ana := s.visitor()
	ana.do("POST", "/login", url.Values{"token": {s.tokens["ana"]}, "next": {"/"}})
	code, page := ana.do("GET", "/team", nil)
	if code != http.StatusForbidden || !strings.Contains(page, "read role") {
		t.Errorf("an approver without a read role reads the team page: %d", code)
	}
	if _, page = ana.do("GET", "/", nil); strings.Contains(page, `href="/team"`) {
		t.Error("the queue links the team page for an approver who may not read it")
	}
}
