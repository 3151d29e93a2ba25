package inbox_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/authority/authoritytest"
	"github.com/interlockhq/interlock/internal/natstest"
)

// doneRows returns the runs of a done page, in order, as
// <run>:<status>:<outcome>.
func doneRows(page string) []string {
	re := regexp.MustCompile(`(?s)<tr class="item" data-run="([^"]+)" data-status="([^"]+)">.*?<span class="outcome-text">([^<]*)</span>`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1]+":"+m[2]+":"+m[3])
	}
	return out
}

func TestTheDoneViewListsFinishedRunsNewestFirstWithHowEachEnded(t *testing.T) {
	t.Parallel()
	s := startSite(t, map[string][]string{"sam": {"supervisor"}, "bob": nil})
	refund := func(run string, amount int) {
		t.Helper()
		if code, out := s.api("sam", "POST", "/v1/runs/refund", map[string]any{"run": run, "state": map[string]any{"orderId": "o-" + run, "amount": amount, "currency": "USD", "last4": "4242"}}); code != http.StatusAccepted {
			t.Fatalf("start %s = %d %s", run, code, out)
		}
	}
	refund("r-small", 300) // no approval: completed at once
	refund("r-rejected", 900)
	if code, out := s.api("sam", "POST", "/v1/runs/refund/r-rejected/resume", map[string]any{"decision": "reject", "reason": "duplicate order"}); code != http.StatusAccepted {
		t.Fatalf("reject = %d %s", code, out)
	}
	if code, out := s.api("sam", "POST", "/v1/runs/booking", map[string]any{"run": "r-cancelled"}); code != http.StatusAccepted {
		t.Fatalf("start = %d %s", code, out)
	}
	if code, out := s.api("sam", "POST", "/v1/runs/booking/r-cancelled/cancel", map[string]any{"reason": "customer called back"}); code != http.StatusAccepted {
		t.Fatalf("cancel = %d %s", code, out)
	}
	refund("r-waits", 900) // waiting: not done

	sam := s.visitor()
	sam.do("POST", "/login", map[string][]string{"token": {s.tokens["sam"]}, "next": {"/done"}})
	code, page := sam.do("GET", "/done", nil)
	want := []string{
		"r-cancelled:cancelled:cancelled by sam: customer called back",
		"r-rejected:completed:rejected by sam: duplicate order",
		"r-small:completed:",
	}
	if got := doneRows(page); code != http.StatusOK || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("sam's done view = %d:\n%s\nwant:\n%s", code, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The badge is how each ended, a rejection marked as one to look at,
	// though its run completed.
	badges := regexp.MustCompile(`(?s)data-run="([^"]+)".*?<span class="status ([^"]+)" data-outcome="([^"]+)">([^<]+)</span>`).FindAllStringSubmatch(page, -1)
	var gotBadges []string
	for _, b := range badges {
		gotBadges = append(gotBadges, b[1]+" "+b[2]+" "+b[4])
	}
	if want := "r-cancelled status-cancelled cancelled\nr-rejected status-completed status-bad rejected\nr-small status-completed completed"; strings.Join(gotBadges, "\n") != want {
		t.Errorf("the done view's badges:\n%s\nwant:\n%s", strings.Join(gotBadges, "\n"), want)
	}
	if !strings.Contains(page, `href="/runs/refund/r-rejected"`) || !strings.Contains(page, `<a href="/done" aria-current="page">Done</a>`) ||
		strings.Contains(page, `rel="next"`) || !strings.Contains(page, `data-partial="/done?partial=1"`) {
		t.Fatalf("sam's done view:\n%s", page)
	}

	// As the queue does, a run that ended at an approval of a role the
	// caller does not hold is left out, and counted.
	bob := s.visitor()
	bob.do("POST", "/login", map[string][]string{"token": {s.tokens["bob"]}, "next": {"/done"}})
	_, page = bob.do("GET", "/done", nil)
	if got := doneRows(page); len(got) != 2 || strings.Contains(page, "r-rejected") ||
		!strings.Contains(page, "1 run that ended at an approval for a role you do not hold is not shown") {
		t.Fatalf("bob's done view: %v\n%s", got, page)
	}

	// Filtered by outcome and flow.
	if _, page = sam.do("GET", "/done?status=cancelled", nil); strings.Join(doneRows(page), "\n") != want[0] {
		t.Errorf("cancelled runs: %v", doneRows(page))
	}
	if _, page = sam.do("GET", "/done?flow=refund", nil); len(doneRows(page)) != 2 {
		t.Errorf("refund runs: %v", doneRows(page))
	}
	// The list alone, for the page's live updates.
	if code, page = sam.do("GET", "/done?partial=1", nil); code != http.StatusOK || strings.Contains(page, "<html") || len(doneRows(page)) != 3 {
		t.Errorf("the partial list = %d\n%s", code, page)
	}
	// Bad filters are said, not ignored.
	if code, page = sam.do("GET", "/done?status=running", nil); code != http.StatusBadRequest || !strings.Contains(page, "No such status: running") {
		t.Errorf("?status=running = %d\n%s", code, page)
	}
	if code, page = sam.do("GET", "/done?after=nonsense", nil); code != http.StatusBadRequest || !strings.Contains(page, "not one the list made") {
		t.Errorf("?after=nonsense = %d\n%s", code, page)
	}
	// Signed out, the view sends the browser to sign in.
	if v := s.visitor(); func() bool { code, _ := v.do("GET", "/done", nil); return code != http.StatusOK || v.url != "/login" }() {
		t.Errorf("signed out, /done does not send the browser to sign in")
	}
}

func TestTheDoneViewPagesThroughEveryFinishedRun(t *testing.T) {
	t.Parallel()
	s := startSite(t, nil)
	const n = 53 // more than a page
	for i := range n {
		run := fmt.Sprintf("r-%03d", i)
		if code, out := s.api("", "POST", "/v1/runs/refund", map[string]any{"run": run, "state": map[string]any{"orderId": "o", "amount": 100, "currency": "USD", "last4": "4242"}}); code != http.StatusAccepted {
			t.Fatalf("start %s = %d %s", run, code, out)
		}
	}
	local := s.visitor()
	_, page := local.do("GET", "/done", nil)
	first := doneRows(page)
	older := regexp.MustCompile(`<a href="([^"]+)" rel="next">Older</a>`).FindStringSubmatch(page)
	if len(first) != 50 || !strings.HasPrefix(first[0], "r-052:") || older == nil {
		t.Fatalf("the first page: %d runs, first %v, older link %v", len(first), first[:1], older)
	}
	_, page = local.do("GET", strings.ReplaceAll(older[1], "&amp;", "&"), nil)
	rest := doneRows(page)
	if len(rest) != 3 || !strings.HasPrefix(rest[2], "r-000:") || strings.Contains(page, `rel="next"`) ||
		!strings.Contains(page, `<a href="/done">Newest</a>`) || strings.Contains(page, "data-partial") {
		t.Fatalf("the second page: %v\n%s", rest, page)
	}
}

// TestTheDoneViewShowsAnApprovalAssignedToAPersonToThatPerson checks that
// a finished approval named to a person, with no role, is listed for the
// person who decided it and for whoever asked, and for no one else.
func TestTheDoneViewShowsAnApprovalAssignedToAPersonToThatPerson(t *testing.T) {
	t.Parallel()
	s := startTrustSite(t)
	ask := authoritytest.RunNamed(authoritytest.Assigned)
	if code, out := s.api(authoritytest.AgentA, "POST", "/v1/asks", ask.AskRequest("ask-fin")); code != http.StatusAccepted {
		t.Fatalf("asking: %d %s", code, out)
	}
	if code, out := s.api(authoritytest.Fin, "POST", "/v1/runs/ask/ask-fin/resume", map[string]any{"decision": "approve"}); code != http.StatusAccepted {
		t.Fatalf("fin approving: %d %s", code, out)
	}
	lists := func(who string) bool {
		v := s.visitor()
		v.do("POST", "/login", map[string][]string{"token": {s.tokens[who]}, "next": {"/done"}})
		_, page := v.do("GET", "/done", nil)
		return strings.Contains(strings.Join(doneRows(page), "\n"), "ask-fin:")
	}
	// Once it is listed for fin, the finished index holds it.
	natstest.Eventually(t, "fin's done view listing the approval fin decided", func() bool { return lists(authoritytest.Fin) })
	for who, want := range map[string]bool{authoritytest.AgentA: true, authoritytest.Ray: false, authoritytest.Ann: false} {
		if got := lists(who); got != want {
			t.Errorf("%s's done view lists the approval: %v, want %v", who, got, want)
		}
	}
}
