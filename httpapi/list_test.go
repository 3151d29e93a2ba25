package httpapi_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/httpapi"
)

// runPages reads every page of GET /v1/runs with query, and returns the
// runs as <status>:<flow>.<run>, in order.
func runPages(t *testing.T, a *api, query url.Values) []string {
	t.Helper()
	var out []string
	after := ""
	for pages := 0; pages < 100; pages++ {
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		if after != "" {
			q.Set("after", after)
		}
		var page httpapi.RunList
		a.must(http.StatusOK, "GET", "/v1/runs?"+q.Encode(), nil).decode(t, &page)
		for _, it := range page.Items {
			out = append(out, it.Status+":"+it.Flow+"."+it.Run)
		}
		if page.Next == "" {
			return out
		}
		after = page.Next
	}
	t.Fatal("paging does not end")
	return nil
}

func TestListingRunsShowsEveryStatusNewestFirstAPageAtATime(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	a.accepted("POST", "/v1/runs/booking", map[string]any{"run": "l-wait"})
	a.accepted("POST", "/v1/runs/refund", map[string]any{"run": "l-approved", "state": refundState(nil)["state"]})
	a.accepted("POST", "/v1/runs/refund/l-approved/resume", map[string]any{"decision": "approve"})
	a.accepted("POST", "/v1/runs/booking", map[string]any{"run": "l-cancelled"})
	a.accepted("POST", "/v1/runs/booking/l-cancelled/cancel", map[string]any{"reason": "customer called back"})
	a.accepted("POST", "/v1/runs/refund", map[string]any{"run": "l-rejected", "state": refundState(nil)["state"]})
	a.accepted("POST", "/v1/runs/refund/l-rejected/resume", map[string]any{"decision": "reject", "reason": "duplicate order"})

	var page httpapi.RunList
	a.must(http.StatusOK, "GET", "/v1/runs", nil).decode(t, &page)
	want := []string{"completed:refund.l-rejected", "cancelled:booking.l-cancelled", "completed:refund.l-approved", "waiting:booking.l-wait"}
	var got []string
	for _, it := range page.Items {
		got = append(got, it.Status+":"+it.Flow+"."+it.Run)
	}
	if !slices.Equal(got, want) || page.Next != "" || !slices.Equal(page.Statuses, []string{"waiting", "completed", "failed", "cancelled", "expired"}) {
		t.Fatalf("runs = %v (next %q, statuses %v), want %v", got, page.Next, page.Statuses, want)
	}
	rejected, cancelled, waiting := page.Items[0], page.Items[1], page.Items[3]
	if f := rejected.Finished; f == nil || f.Decision == nil || f.Decision.Verdict != "reject" || f.Decision.Reason != "duplicate order" ||
		f.Decision.Approver != httpapi.LocalCaller || f.Interrupt == nil || f.Interrupt.ApproverRole != "supervisor" {
		t.Errorf("the rejected run = %+v", rejected.Finished)
	}
	if f := cancelled.Finished; f == nil || f.Reason != "customer called back" || f.By != httpapi.LocalCaller {
		t.Errorf("the cancelled run = %+v", cancelled.Finished)
	}
	if waiting.Pending == nil || waiting.Pending.Kind != "question" || waiting.Finished != nil {
		t.Errorf("the waiting run = %+v", waiting)
	}

	if got := runPages(t, a, url.Values{"limit": {"1"}}); !slices.Equal(got, want) {
		t.Errorf("by pages of one: %v, want %v", got, want)
	}
	if got := runPages(t, a, url.Values{"status": {"finished"}, "flow": {"refund"}}); !slices.Equal(got, []string{"completed:refund.l-rejected", "completed:refund.l-approved"}) {
		t.Errorf("finished refunds: %v", got)
	}
	if got := runPages(t, a, url.Values{"status": {"waiting", "cancelled"}, "limit": {"1"}}); !slices.Equal(got, []string{"cancelled:booking.l-cancelled", "waiting:booking.l-wait"}) {
		t.Errorf("waiting and cancelled runs: %v", got)
	}
}

func TestListingRunsRefusesABadQuerySayingWhatIsWrong(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	a.accepted("POST", "/v1/runs/booking", map[string]any{"run": "l-1"})
	a.accepted("POST", "/v1/runs/booking", map[string]any{"run": "l-2"})
	var page httpapi.RunList
	a.must(http.StatusOK, "GET", "/v1/runs?limit=1", nil).decode(t, &page)
	if page.Next == "" {
		t.Fatal("a page of one of two runs has no next")
	}
	cases := []struct{ query, detail string }{
		{"status=running", "not listed while running"},
		{"status=done", `status="done": use waiting, completed, failed, cancelled, expired, finished`},
		{"after=bm90LWEtY3Vyc29y", "not a cursor of a list of runs"},
		{"after=" + page.Next + "&status=waiting", "keep the statuses while paging"},
		{"limit=0", "limit=\"0\": use 1 to 1000"},
		{"flow=a.b", "has '.'"},
		{"cursor=x", `unknown query parameter "cursor"`},
	}
	for _, tc := range cases {
		p := a.must(http.StatusBadRequest, "GET", "/v1/runs?"+tc.query, nil).problem(t)
		if p.Code != httpapi.CodeInvalidQuery || !strings.Contains(p.Detail, tc.detail) {
			t.Errorf("?%s: %s %q, want invalid_query saying %q", tc.query, p.Code, p.Detail, tc.detail)
		}
	}
	a.must(http.StatusMethodNotAllowed, "POST", "/v1/runs", nil)
}
