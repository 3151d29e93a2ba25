package client_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/protocol"
)

// finish writes the finished-runs index entry of a run, as the engine
// does when a transition finishes it.
func (r rig) finish(t testing.TB, flow, run string, status engine.Status) {
	t.Helper()
	f := &engine.Finished{Flow: flow, Run: run, Status: status, Node: "end", Checkpoint: 7, CreatedAt: at, FinishedAt: at}
	if status == engine.Failed {
		f.Error = "upstream down"
	}
	if err := r.store.PutFinished(t.Context(), "id-"+flow+"-"+run, f); err != nil {
		t.Fatalf("PutFinished %s.%s: %v", flow, run, err)
	}
}

// runKeys names the items of a page as <status>:<flow>.<run>.
func runKeys(items []client.RunItem) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.Status+":"+it.Flow+"."+it.Run)
	}
	return out
}

// allRuns walks every page of q and returns the items in order.
func allRuns(t *testing.T, c *client.Client, q client.RunsQuery) []string {
	t.Helper()
	limit := q.Limit
	if limit == 0 {
		limit = client.DefaultRunsLimit
	}
	var out []string
	for pages := 0; ; pages++ {
		page, err := c.ListRuns(t.Context(), q)
		if err != nil {
			t.Fatalf("ListRuns(%+v): %v", q, err)
		}
		if len(page.Items) > limit {
			t.Fatalf("a page of limit %d holds %d items", q.Limit, len(page.Items))
		}
		out = append(out, runKeys(page.Items)...)
		if page.Next == "" {
			return out
		}
		if pages > 1000 {
			t.Fatal("paging does not end")
		}
		q.After = page.Next
	}
}

func TestListRunsWithNothingStoredIsAnEmptyPageOfEveryStatus(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	page, err := r.client.ListRuns(t.Context(), client.RunsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if page.Items == nil || len(page.Items) != 0 || page.Next != "" ||
		!slices.Equal(page.Statuses, []string{"waiting", "completed", "failed", "cancelled", "expired"}) {
		t.Fatalf("page = %+v", page)
	}
}

func TestListRunsListsEveryStatusNewestFirstByWhenEachLastChanged(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.put(t, entry("booking", "r-a"))
	r.finish(t, "booking", "r-b", engine.Completed)
	r.finish(t, "refund", "r-c", engine.Failed)
	r.put(t, entry("booking", "r-d"))
	r.finish(t, "booking", "r-e", engine.Cancelled)
	r.finish(t, "refund", "r-f", engine.Expired)
	r.put(t, entry("booking", "r-a")) // asked again: it changed last
	r.remove(t, "booking", "r-d")     // stopped waiting: no longer listed as waiting

	page, err := r.client.ListRuns(t.Context(), client.RunsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"waiting:booking.r-a", "expired:refund.r-f", "cancelled:booking.r-e", "failed:refund.r-c", "completed:booking.r-b"}
	if got := runKeys(page.Items); !slices.Equal(got, want) || page.Next != "" {
		t.Fatalf("runs = %v (next %q), want %v", got, page.Next, want)
	}
	for i := 1; i < len(page.Items); i++ {
		if page.Items[i].ChangedAt.After(page.Items[i-1].ChangedAt) {
			t.Errorf("item %d changed at %v, after item %d (%v)", i, page.Items[i].ChangedAt, i-1, page.Items[i-1].ChangedAt)
		}
	}
	waiting, failed := page.Items[0], page.Items[3]
	if waiting.Pending == nil || waiting.Finished != nil || waiting.Pending.RequestID != "rq-r-a" || waiting.Node != "ask" || waiting.Checkpoint != 4 { // asked again at checkpoint 4
		t.Errorf("waiting item = %+v", waiting)
	}
	if failed.Finished == nil || failed.Pending != nil || failed.Finished.Error != "upstream down" || failed.Checkpoint != 7 || failed.Node != "end" {
		t.Errorf("failed item = %+v", failed)
	}
}

func TestListRunsPagesThroughEveryRunOnceInOrder(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	statuses := []engine.Status{engine.Completed, engine.Completed, engine.Failed, engine.Completed, engine.Cancelled, engine.Expired}
	for i := range 41 {
		flow := []string{"booking", "refund", "gate"}[i%3]
		run := fmt.Sprintf("r-%02d", i)
		if i%4 == 1 {
			r.put(t, entry(flow, run))
			continue
		}
		r.finish(t, flow, run, statuses[i%len(statuses)])
	}
	for _, q := range []client.RunsQuery{
		{},
		{Flow: "refund"},
		{Statuses: []string{"finished"}},
		{Statuses: []string{"completed", "waiting"}},
		{Flow: "gate", Statuses: []string{"failed", "expired", "cancelled"}},
	} {
		q.Limit = client.MaxRunsLimit
		whole := allRuns(t, r.client, q)
		if len(whole) == 0 {
			t.Fatalf("%+v lists nothing", q)
		}
		for _, limit := range []int{1, 4, 7} {
			q.Limit = limit
			if got := allRuns(t, r.client, q); !slices.Equal(got, whole) {
				t.Errorf("%+v by pages of %d:\n%v\nwant (one page):\n%v", q, limit, got, whole)
			}
		}
	}
}

func TestListRunsFiltersByFlowAndStatus(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.finish(t, "booking", "r-1", engine.Completed)
	r.finish(t, "booking_v2", "r-2", engine.Completed)
	r.finish(t, "book", "r-3", engine.Failed)
	r.put(t, entry("booking", "r-4"))
	r.finish(t, "booking", "r-5", engine.Expired)
	cases := []struct {
		q    client.RunsQuery
		want []string
	}{
		{client.RunsQuery{Flow: "booking"}, []string{"expired:booking.r-5", "waiting:booking.r-4", "completed:booking.r-1"}},
		{client.RunsQuery{Statuses: []string{"completed"}}, []string{"completed:booking_v2.r-2", "completed:booking.r-1"}},
		{client.RunsQuery{Statuses: []string{"finished"}, Flow: "booking"}, []string{"expired:booking.r-5", "completed:booking.r-1"}},
		{client.RunsQuery{Statuses: []string{"waiting"}}, []string{"waiting:booking.r-4"}},
		{client.RunsQuery{Statuses: []string{"cancelled"}}, []string{}},
	}
	for _, tc := range cases {
		page, err := r.client.ListRuns(t.Context(), tc.q)
		if err != nil {
			t.Fatalf("%+v: %v", tc.q, err)
		}
		if got := runKeys(page.Items); !slices.Equal(got, tc.want) {
			t.Errorf("%+v = %v, want %v", tc.q, got, tc.want)
		}
	}
}

// received counts the messages the client's connection receives while
// do runs.
func (r rig) received(t *testing.T, do func()) uint64 {
	t.Helper()
	before := r.nc.Stats().InMsgs
	do()
	return r.nc.Stats().InMsgs - before
}

func TestAStatusFilterNeverReadsRunsOfAnotherStatus(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for i := range 3 {
		r.finish(t, "refund", fmt.Sprintf("r-failed-%d", i), engine.Failed)
	}
	for i := range 500 {
		r.finish(t, "refund", fmt.Sprintf("r-%d", i), engine.Completed)
		r.put(t, entry("refund", fmt.Sprintf("w-%d", i)))
	}
	var page client.RunsPage
	n := r.received(t, func() {
		var err error
		if page, err = r.client.ListRuns(t.Context(), client.RunsQuery{Statuses: []string{"failed"}}); err != nil {
			t.Fatal(err)
		}
	})
	if len(page.Items) != 3 || page.Next != "" {
		t.Fatalf("failed runs = %v, next %q", runKeys(page.Items), page.Next)
	}
	// The stream's state, the three entries and the end of the batch.
	if n > 6 {
		t.Errorf("listing 3 failed runs among 1000 others received %d messages", n)
	}
}

func TestAPageCostsTheSameHoweverManyRunsAreStored(t *testing.T) {
	t.Parallel()
	const limit = 10
	cost := func(stored int) (first, deep uint64) {
		r := newRig(t)
		for i := range stored {
			status := []engine.Status{engine.Completed, engine.Failed, engine.Completed, engine.Cancelled}[i%4]
			r.finish(t, []string{"refund", "booking"}[i%2], fmt.Sprintf("r-%d", i), status)
			if i%10 == 0 {
				r.put(t, entry("refund", fmt.Sprintf("w-%d", i)))
			}
		}
		q := client.RunsQuery{Limit: limit}
		var page client.RunsPage
		first = r.received(t, func() {
			var err error
			if page, err = r.client.ListRuns(t.Context(), q); err != nil {
				t.Fatal(err)
			}
		})
		// A page from the middle of the list.
		for range stored / limit / 2 {
			q.After = page.Next
			var err error
			if page, err = r.client.ListRuns(t.Context(), q); err != nil {
				t.Fatal(err)
			}
		}
		q.After = page.Next
		deep = r.received(t, func() {
			if _, err := r.client.ListRuns(t.Context(), q); err != nil {
				t.Fatal(err)
			}
		})
		return first, deep
	}
	smallFirst, smallDeep := cost(100)
	bigFirst, bigDeep := cost(2000)
	t.Logf("messages received for a page of %d: first %d and %d, deep %d and %d, at 100 and 2000 runs stored", limit, smallFirst, bigFirst, smallDeep, bigDeep)
	// Every status is read: about one page of each, and a few requests.
	bound := uint64(5 * (limit + 1 + 4))
	for _, n := range []uint64{smallFirst, bigFirst, smallDeep, bigDeep} {
		if n > bound {
			t.Errorf("a page of %d received %d messages, more than %d", limit, n, bound)
		}
	}
	if bigFirst > smallFirst+5 || bigDeep > smallDeep+10 {
		t.Errorf("a page costs more with more runs stored: first %d -> %d, deep %d -> %d messages", smallFirst, bigFirst, smallDeep, bigDeep)
	}
}

func TestAFlowFilterFindsARareFlowsRunsAndReadsOnlyThem(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var want []string
	for i := range 600 {
		if i%97 == 5 {
			run := fmt.Sprintf("r-rare-%d", i)
			r.finish(t, "rare", run, engine.Completed)
			want = append([]string{"completed:rare." + run}, want...)
			continue
		}
		r.finish(t, "common", fmt.Sprintf("r-%d", i), engine.Completed)
	}
	q := client.RunsQuery{Flow: "rare", Statuses: []string{"completed"}, Limit: 2}
	var got []string
	n := r.received(t, func() { got = allRuns(t, r.client, q) })
	if !slices.Equal(got, want) {
		t.Fatalf("rare flow's runs = %v, want %v", got, want)
	}
	// Each page: the stream's state, the flow's newest entry or a count
	// below the cursor, and windows twice as wide each time until they
	// hold the page: a few messages a page besides the entries, far
	// fewer than the other flow's 593 entries.
	if n > 100 {
		t.Errorf("listing %d runs of a rare flow received %d messages", len(want), n)
	}
}

func TestAFinishedEntryWrittenTwiceIsListedOnceInAPage(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	f := &engine.Finished{Flow: "refund", Run: "r-1", Status: engine.Completed, Checkpoint: 9, CreatedAt: at, FinishedAt: at}
	// The same transition's entry, written again past the deduplication
	// window: another message, the same run and checkpoint.
	for _, id := range []string{"u-9", "u-9-again"} {
		if err := r.store.PutFinished(t.Context(), id, f); err != nil {
			t.Fatal(err)
		}
	}
	r.finish(t, "refund", "r-2", engine.Completed)
	if got := allRuns(t, r.client, client.RunsQuery{}); !slices.Equal(got, []string{"completed:refund.r-2", "completed:refund.r-1"}) {
		t.Fatalf("runs = %v", got)
	}
}

func TestListRunsRefusesWhatItCannotList(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	finished, err := r.client.ListRuns(t.Context(), client.RunsQuery{Statuses: []string{"finished"}, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.finish(t, "refund", "r-1", engine.Completed)
	r.finish(t, "refund", "r-2", engine.Completed)
	finished, err = r.client.ListRuns(t.Context(), client.RunsQuery{Statuses: []string{"finished"}, Limit: 1})
	if err != nil || finished.Next == "" {
		t.Fatalf("a page of one of two runs: %+v, %v", finished, err)
	}
	cases := []struct {
		q       client.RunsQuery
		wantErr string
		is      error
	}{
		{client.RunsQuery{Statuses: []string{"running"}}, "not listed while running", client.ErrStatus},
		{client.RunsQuery{Statuses: []string{"done"}}, `"done" is not a status`, client.ErrStatus},
		{client.RunsQuery{After: "bm90IGEgY3Vyc29y"}, "not a cursor", client.ErrCursor},
		{client.RunsQuery{After: "%%%"}, "not a cursor", client.ErrCursor},
		{client.RunsQuery{After: finished.Next}, "keep the statuses while paging", client.ErrCursor},
		{client.RunsQuery{After: finished.Next, Statuses: []string{"completed"}}, "keep the statuses while paging", client.ErrCursor},
		{client.RunsQuery{Limit: client.MaxRunsLimit + 1}, "out of range", nil},
		{client.RunsQuery{Flow: "a.b"}, "has '.'", nil},
	}
	for _, tc := range cases {
		_, err := r.client.ListRuns(t.Context(), tc.q)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) || tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%+v: %v, want an error saying %q", tc.q, err, tc.wantErr)
		}
	}
	// The same cursor with the same statuses, spelled out, is fine.
	if _, err := r.client.ListRuns(t.Context(), client.RunsQuery{After: finished.Next, Statuses: []string{"expired", "completed", "failed", "cancelled"}}); err != nil {
		t.Errorf("the cursor with the finished statuses spelled out: %v", err)
	}
}

func TestOutcomeSaysWhatARunWaitsForOrHowItEnded(t *testing.T) {
	t.Parallel()
	fin := func(f protocol.Finished) client.RunItem {
		return client.RunItem{Status: string(f.Status), Finished: &f}
	}
	cases := []struct {
		item client.RunItem
		want string
	}{
		{client.RunItem{Status: "waiting", Pending: &protocol.Pending{Kind: "question", Fields: []string{"email", "name"}}}, "waiting for email, name"},
		{client.RunItem{Status: "waiting", Pending: &protocol.Pending{Kind: "choice", Question: "Which topics?"}}, "waiting for a choice: Which topics?"},
		{client.RunItem{Status: "waiting", Pending: &protocol.Pending{Kind: "approval", Action: "issue_refund", ApproverRole: "supervisor"}}, "waiting for approval of issue_refund by supervisor"},
		{fin(protocol.Finished{Status: "completed"}), "completed"},
		{fin(protocol.Finished{Status: "completed", Decision: &protocol.FinishedDecision{Verdict: "approve", Approver: "sam"}}), "completed, approved by sam"},
		{fin(protocol.Finished{Status: "completed", Decision: &protocol.FinishedDecision{Verdict: "edit", Approver: "sam"}}), "completed, edited by sam"},
		{fin(protocol.Finished{Status: "completed", Decision: &protocol.FinishedDecision{Verdict: "reject", Approver: "sam", Reason: "duplicate order\nsee ticket"}}), "rejected by sam: duplicate order"},
		{fin(protocol.Finished{Status: "failed", Error: "upstream down"}), "failed: upstream down"},
		{fin(protocol.Finished{Status: "cancelled", By: "ann", Reason: "customer called back"}), "cancelled by ann: customer called back"},
		{fin(protocol.Finished{Status: "cancelled"}), "cancelled"},
		{fin(protocol.Finished{Status: "expired", Interrupt: &protocol.FinishedInterrupt{Kind: "approval", Action: "issue_refund", ApproverRole: "finance_lead"}}), "expired waiting for approval of issue_refund by finance_lead"},
		{fin(protocol.Finished{Status: "expired", Interrupt: &protocol.FinishedInterrupt{Kind: "question"}}), "expired waiting for an answer"},
	}
	for _, tc := range cases {
		if got := tc.item.Outcome(); got != tc.want {
			t.Errorf("Outcome of %+v = %q, want %q", tc.item, got, tc.want)
		}
	}
}

func TestMarkersOfRunsThatStoppedWaitingDoNotMakeAPageReadThemAll(t *testing.T) {
	t.Parallel()
	r := newRig(t) // markers last an hour: all of them are in the index
	var want []string
	for i := range 5 {
		run := fmt.Sprintf("w-old-%d", i)
		r.put(t, entry("refund", run))
		want = append([]string{"waiting:refund." + run}, want...)
	}
	// A busy stretch: runs wait, finish, and leave a marker each in the
	// pending index, all at its newest end.
	const busy = 300
	for i := range busy {
		run := fmt.Sprintf("r-%03d", i)
		r.put(t, entry("refund", run))
		r.finish(t, "refund", run, engine.Completed)
		r.remove(t, "refund", run)
		want = append([]string{"completed:refund." + run}, want...)
	}
	var first client.RunsPage
	n := r.received(t, func() {
		var err error
		if first, err = r.client.ListRuns(t.Context(), client.RunsQuery{Limit: 10}); err != nil {
			t.Fatal(err)
		}
	})
	// The markers were stored as fast as the finished entries: a few
	// pages' worth of them reach as far back as a page of finished runs.
	if got := runKeys(first.Items); !slices.Equal(got, want[:10]) {
		t.Fatalf("the first page = %v, want %v", got, want[:10])
	}
	t.Logf("the first page received %d messages", n)
	// Four pages' worth of the pending index at most, and a page of each
	// other status: far fewer than the 300 markers.
	if n > 4*11+5*16 {
		t.Errorf("the first page received %d messages, with %d markers in the pending index", n, busy)
	}
	// Every run, once, in order, page after page, however the pages fall.
	if got := allRuns(t, r.client, client.RunsQuery{Limit: 10}); !slices.Equal(got, want) {
		t.Errorf("every page: %d runs\n%v\nwant %d:\n%v", len(got), got, len(want), want)
	}
	// Waiting runs alone are read past every marker, to fill the page.
	page, err := r.client.ListRuns(t.Context(), client.RunsQuery{Statuses: []string{"waiting"}, Limit: 3})
	if err != nil || !slices.Equal(runKeys(page.Items), want[busy:busy+3]) {
		t.Errorf("waiting runs = %v, %v; want %v", runKeys(page.Items), err, want[busy:busy+3])
	}
}
