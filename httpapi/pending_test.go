package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/httpapi"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// startRuns starts n runs of flow with state, concurrently, each a real
// start command on NATS that a worker applies, and waits until the
// pending index holds them all.
func startRuns(t testing.TB, a *api, flow, prefix string, n int, state map[string]any) {
	t.Helper()
	js, names := a.svc.JetStream(), a.svc.Names()
	var acks []jetstream.PubAckFuture
	for i := range n {
		run := fmt.Sprintf("%s-%05d", prefix, i)
		ev, err := events.New("start-"+run, "/test", protocol.TypeStart, run, time.Now().UTC(), map[string]any{"state": state})
		if err != nil {
			t.Fatal(err)
		}
		body, err := events.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg(names.In(flow, "start"))
		msg.Data = body
		msg.Header.Set("Content-Type", events.Structured)
		msg.Header.Set(jetstream.MsgIDHeader, ev.ID())
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, f)
	}
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-time.After(natstest.Wait):
			t.Fatal("no publish acknowledgement")
		}
	}
	cl := a.svc.Client("/test")
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		page, err := cl.ListPending(t.Context(), client.PendingQuery{Flow: flow, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if page.Total >= uint64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 2m, %d of %d %s runs wait", page.Total, n, flow)
		}
		<-tick.C
	}
}

// pendingRuns is how many runs TestPagingThroughThePendingIndex starts:
// 10 000, or INTERLOCK_TEST_PENDING.
func pendingRuns() int {
	if n, err := strconv.Atoi(os.Getenv("INTERLOCK_TEST_PENDING")); err == nil && n > 0 {
		return n
	}
	return 10_000
}

// pages reads every page of query, and returns the runs in order.
func pages(t *testing.T, a *api, query url.Values) (runs []string, n int) {
	t.Helper()
	cursor := ""
	for {
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page httpapi.InterruptPage
		a.must(http.StatusOK, "GET", "/v1/interrupts?"+q.Encode(), nil).decode(t, &page)
		n++
		for _, p := range page.Items {
			runs = append(runs, p.Flow+"."+p.Run)
		}
		if page.Next == "" {
			return runs, n
		}
		cursor = page.Next
	}
}

func TestPagingThroughThePendingIndex(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	n := pendingRuns()
	began := time.Now()
	startRuns(t, a, "booking", "b", n, map[string]any{})
	startRuns(t, a, "refund", "f", 10, map[string]any{"orderId": "o-1", "amount": 900, "last4": "4242"})
	t.Logf("%d runs waiting after %s", n+10, time.Since(began).Round(time.Millisecond))

	// The index's own order: each entry's revision in the bucket.
	kv, err := a.svc.JetStream().KeyValue(t.Context(), a.svc.Names().PendingBucket())
	if err != nil {
		t.Fatal(err)
	}
	revision := func(key string) uint64 {
		e, err := kv.Get(t.Context(), key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return e.Revision()
	}

	var first httpapi.InterruptPage
	a.must(http.StatusOK, "GET", "/v1/interrupts?flow=booking&limit=1", nil).decode(t, &first)
	if first.Total == nil || *first.Total != uint64(n) {
		t.Fatalf("total = %v, want %d", first.Total, n)
	}
	began = time.Now()
	oldest, np := pages(t, a, url.Values{"flow": {"booking"}, "limit": {"150"}})
	if len(oldest) != n || np != (n+149)/150 {
		t.Fatalf("oldest first: %d runs in %d pages, want %d in %d", len(oldest), np, n, (n+149)/150)
	}
	t.Logf("oldest first: %d pages in %s", np, time.Since(began).Round(time.Millisecond))
	seen := map[string]bool{}
	var last uint64
	for _, k := range oldest {
		if seen[k] {
			t.Fatalf("%s twice", k)
		}
		seen[k] = true
		if rev := revision(k); rev <= last {
			t.Fatalf("%s (revision %d) comes after revision %d", k, rev, last)
		} else {
			last = rev
		}
	}
	began = time.Now()
	newest, np := pages(t, a, url.Values{"flow": {"booking"}, "order": {"newest"}, "limit": {"150"}})
	t.Logf("newest first: %d pages in %s", np, time.Since(began).Round(time.Millisecond))
	slices.Reverse(newest)
	if !slices.Equal(newest, oldest) {
		t.Fatalf("newest first is not oldest first reversed: %d and %d runs", len(newest), len(oldest))
	}

	// Filters: kind and role, across flows, in both orders.
	approvals, _ := pages(t, a, url.Values{"kind": {"approval"}, "role": {"supervisor"}, "limit": {"3"}})
	if len(approvals) != 10 || !strings.HasPrefix(approvals[0], "refund.f-") {
		t.Fatalf("approvals = %v", approvals)
	}
	latest, _ := pages(t, a, url.Values{"kind": {"approval"}, "order": {"newest"}, "limit": {"4"}})
	slices.Reverse(latest)
	if !slices.Equal(latest, approvals) {
		t.Fatalf("approvals newest first = %v, want %v reversed", latest, approvals)
	}
	var page httpapi.InterruptPage
	a.must(http.StatusOK, "GET", "/v1/interrupts?role=legal", nil).decode(t, &page)
	if page.Total != nil || len(page.Items) != 0 || page.Next != "" {
		t.Fatalf("legal = %+v", page)
	}
	a.must(http.StatusOK, "GET", "/v1/interrupts?limit=1000", nil).decode(t, &page)
	if page.Total == nil || *page.Total != uint64(n+10) || len(page.Items) != min(1000, n+10) {
		t.Fatalf("every flow: total %v, %d items", page.Total, len(page.Items))
	}
	// A cursor keeps its order.
	a.must(http.StatusBadRequest, "GET", "/v1/interrupts?flow=booking&order=newest&cursor="+url.QueryEscape(first.Next), nil).problem(t)
}

func TestTwoApprovalsRaceAndOneWins(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	for i := range 5 {
		run := fmt.Sprintf("r-race-%d", i)
		a.accepted("POST", "/v1/runs/refund", map[string]any{"run": run, "state": refundState(nil)["state"]})
		statuses := make(chan response, 2)
		for _, d := range []string{"approve", "reject"} {
			go func() {
				statuses <- a.do("POST", "/v1/runs/refund/"+run+"/resume", map[string]any{"decision": d, "reason": d})
			}()
		}
		r1, r2 := <-statuses, <-statuses
		if r1.status > r2.status {
			r1, r2 = r2, r1
		}
		if r1.status != http.StatusAccepted || r2.status != http.StatusConflict {
			t.Fatalf("%s: %d %s and %d %s, want one 202 and one 409", run, r1.status, r1.body, r2.status, r2.body)
		}
		if p := r2.problem(t); p.Code != "not_waiting" && p.Code != "token_mismatch" {
			t.Fatalf("the loser: %+v", p)
		}
		recs, err := a.svc.Client("/test").Audit(t.Context(), "refund", run)
		if err != nil {
			t.Fatal(err)
		}
		decided := 0
		for _, r := range recs {
			if r.Action == "approved" || r.Action == "rejected" {
				decided++
			}
		}
		if decided != 1 {
			t.Fatalf("%s: %d decisions audited, want 1", run, decided)
		}
	}
}

func TestTheSameIdempotencyKeyDecidesOnce(t *testing.T) {
	t.Parallel()
	a := startAPI(t, nil)
	a.accepted("POST", "/v1/runs/refund", map[string]any{"run": "r-idem", "state": refundState(nil)["state"]})
	done := make(chan httpapi.Accepted, 3)
	for range 3 {
		go func() {
			var acc httpapi.Accepted
			r := a.do("POST", "/v1/runs/refund/r-idem/resume", map[string]any{"decision": "approve"}, "Idempotency-Key", "approve-once")
			if r.status == http.StatusAccepted {
				r.decode(t, &acc)
			}
			done <- acc
		}()
	}
	for range 3 {
		if acc := <-done; acc.Outcome != protocol.EventCompleted && acc.Outcome != httpapi.OutcomeRepeat {
			t.Fatalf("a send of the key = %+v", acc)
		}
	}
	if acc := a.accepted("POST", "/v1/runs/refund/r-idem/resume", map[string]any{"decision": "approve"}, "Idempotency-Key", "approve-once"); acc.Outcome != httpapi.OutcomeRepeat {
		t.Fatalf("a later repeat = %+v", acc)
	}
	ctx, cancel := context.WithTimeout(t.Context(), natstest.Wait)
	defer cancel()
	recs, err := a.svc.Client("/test").Audit(ctx, "refund", "r-idem")
	if err != nil {
		t.Fatal(err)
	}
	approved := 0
	for _, r := range recs {
		if r.Action == "approved" {
			approved++
		}
	}
	run := a.run("refund", "r-idem")
	resumed := 0
	for _, ev := range run.Events {
		if ev.Kind == protocol.EventResumed {
			resumed++
		}
	}
	if approved != 1 || resumed != 1 || run.Status != protocol.StatusCompleted {
		t.Fatalf("%d approved records, %d resumed events, status %s; want one each, completed", approved, resumed, run.Status)
	}
}
