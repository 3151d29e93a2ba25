package client_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/kv"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// rig is a client and the store that writes the pending index it reads,
// on a fresh embedded server.
type rig struct {
	client *client.Client
	store  *kv.Store
	nc     *nats.Conn
	js     jetstream.JetStream
	names  wire.Names
	// revs is the last checkpoint each run's entry was written at: as a
	// run's transitions do, every write of an entry is at a later one.
	revs map[string]uint64
}

func newRig(t testing.TB) rig {
	t.Helper()
	srv := natstest.StartServer(t, "")
	nc, js := natstest.Connect(t, srv.ClientURL())
	names, err := wire.NewNames("")
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.Provision(t.Context(), js, names, bus.StreamConfig{}); err != nil {
		t.Fatalf("provisioning: %v", err)
	}
	if err := kv.Provision(t.Context(), js, names, kv.BucketConfig{MarkerTTL: time.Hour}); err != nil {
		t.Fatalf("provisioning: %v", err)
	}
	store, err := kv.Open(t.Context(), js, names, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rig{client: client.New(nc, js, names, "/test", 0), store: store, nc: nc, js: js, names: names, revs: map[string]uint64{}}
}

var at = time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)

func entry(flow, run string) *protocol.Pending {
	return &protocol.Pending{
		Flow: flow, Run: run, Node: "ask", RequestID: "rq-" + run, Kind: "question",
		Checkpoint: 3, Fields: []string{"email"}, AskedAt: at,
	}
}

func (r rig) put(t testing.TB, ps ...*protocol.Pending) {
	t.Helper()
	for _, p := range ps {
		key := p.Flow + "." + p.Run
		p.Checkpoint = max(p.Checkpoint, r.revs[key]+1)
		r.revs[key] = p.Checkpoint
		if err := r.store.PutPending(t.Context(), p); err != nil {
			t.Fatalf("PutPending %s.%s: %v", p.Flow, p.Run, err)
		}
	}
}

func (r rig) remove(t testing.TB, flow string, runs ...string) {
	t.Helper()
	for _, run := range runs {
		r.revs[flow+"."+run]++
		if err := r.store.DeletePending(t.Context(), flow, run, r.revs[flow+"."+run]); err != nil {
			t.Fatalf("DeletePending %s.%s: %v", flow, run, err)
		}
	}
}

func keys(items []protocol.Pending) []string {
	var out []string
	for _, p := range items {
		out = append(out, p.Flow+"."+p.Run)
	}
	return out
}

func TestListPendingWithNoEntriesIsEmpty(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for _, flow := range []string{"", "booking"} {
		page, err := r.client.ListPending(t.Context(), client.PendingQuery{Flow: flow})
		if err != nil {
			t.Fatalf("ListPending(%q): %v", flow, err)
		}
		if len(page.Items) != 0 || page.Items == nil || page.Next != "" || page.Total != 0 {
			t.Errorf("ListPending(%q) = %+v, want an empty page", flow, page)
		}
	}
}

func TestListPendingListsOnlyPendingEntriesOfTheFlowOldestFirst(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := t.Context()
	r.put(t,
		entry("refund", "r-2"),
		entry("booking", "r-3"),
		entry("booking", "r-1"),
		entry("booking_v2", "r-9"),
		entry("book", "r-5"),
		entry("booking", "r-gone"),
	)
	r.remove(t, "booking", "r-gone")
	// A finished run is in the runs bucket, never in the pending index.
	if _, err := r.store.Create(ctx, &engine.Checkpoint{Flow: "booking", Run: "r-done", Status: engine.Completed}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	cases := []struct {
		flow string
		want []string
	}{
		{"", []string{"refund.r-2", "booking.r-3", "booking.r-1", "booking_v2.r-9", "book.r-5"}},
		{"booking", []string{"booking.r-3", "booking.r-1"}},
		{"book", []string{"book.r-5"}},
		{"refund", []string{"refund.r-2"}},
		{"nosuch", nil},
	}
	for _, tc := range cases {
		page, err := r.client.ListPending(ctx, client.PendingQuery{Flow: tc.flow})
		if err != nil {
			t.Fatalf("ListPending(%q): %v", tc.flow, err)
		}
		if got := keys(page.Items); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ListPending(%q) = %q, want %q", tc.flow, got, tc.want)
		}
		if page.Total != uint64(len(tc.want)) || page.Next != "" {
			t.Errorf("ListPending(%q): total %d, next %q; want %d and no next page", tc.flow, page.Total, page.Next, len(tc.want))
		}
	}
}

func TestListPendingReturnsTheEntriesAsWritten(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	exp := at.Add(time.Hour)
	want := entry("refund", "r-42")
	want.Kind = "approval"
	want.ApproverRole = "finance"
	want.Question = "Refund 400 EUR?"
	want.ExpiresAt = &exp
	r.put(t, entry("refund", "r-42"), want)
	page, err := r.client.ListPending(t.Context(), client.PendingQuery{Flow: "refund"})
	if err != nil {
		t.Fatalf("ListPending: %v", err)
	}
	wantRead := protocol.Pending{
		Flow: want.Flow, Run: want.Run, Node: want.Node, RequestID: want.RequestID, Kind: want.Kind,
		Checkpoint: want.Checkpoint, Fields: want.Fields, Question: want.Question,
		ApproverRole: want.ApproverRole, AskedAt: want.AskedAt, ExpiresAt: want.ExpiresAt,
	}
	if len(page.Items) != 1 || !reflect.DeepEqual(page.Items[0], wantRead) {
		t.Errorf("ListPending = %+v, want only %+v", page.Items, wantRead)
	}
}

func TestListPendingPagesWithACursorPastRemovedEntries(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := t.Context()
	for i := range 10 {
		r.put(t, entry("booking", fmt.Sprintf("r-%02d", i)), entry("refund", fmt.Sprintf("r-%02d", i)))
	}
	// Resumed runs leave markers (kept an hour here) between the entries.
	r.remove(t, "booking", "r-01", "r-02", "r-03", "r-07")
	want := []string{"booking.r-00", "booking.r-04", "booking.r-05", "booking.r-06", "booking.r-08", "booking.r-09"}

	var got []string
	q := client.PendingQuery{Flow: "booking", Limit: 4}
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatalf("more pages than entries: %q so far", got)
		}
		page, err := r.client.ListPending(ctx, q)
		if err != nil {
			t.Fatalf("ListPending after %q: %v", q.After, err)
		}
		if len(page.Items) > q.Limit {
			t.Fatalf("page of %d items with limit %d", len(page.Items), q.Limit)
		}
		if page.Total < uint64(len(want)) {
			t.Errorf("page %d: total %d, want at least the %d waiting", pages, page.Total, len(want))
		}
		got = append(got, keys(page.Items)...)
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pages = %q, want %q", got, want)
	}

	// A re-ask is a new ask: the entry moves to the end.
	r.put(t, entry("booking", "r-00"))
	page, err := r.client.ListPending(ctx, client.PendingQuery{Flow: "booking"})
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(page.Items); len(got) != len(want) || got[len(got)-1] != "booking.r-00" {
		t.Errorf("after a re-ask: %q, want booking.r-00 last", got)
	}
	if page.Total != uint64(len(want)) {
		t.Errorf("a page holding every entry: total %d, want exactly %d", page.Total, len(want))
	}
}

func TestListPendingTotalCountsEveryFlowsEntriesFromTheStream(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for i := range 7 {
		r.put(t, entry("booking", fmt.Sprintf("r-%d", i)))
	}
	r.put(t, entry("refund", "r-1"))
	first, err := r.client.ListPending(t.Context(), client.PendingQuery{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	second, err := r.client.ListPending(t.Context(), client.PendingQuery{Limit: 3, After: first.Next})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []client.PendingPage{first, second} {
		if p.Total != 8 || len(p.Items) != 3 || p.Next == "" {
			t.Errorf("page %d: %d items, total %d, next %q; want 3 of 8 and a next page", i+1, len(p.Items), p.Total, p.Next)
		}
	}
}

func TestListPendingRefusesBadQueries(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cases := []struct {
		name    string
		q       client.PendingQuery
		wantErr string
	}{
		{"negative limit", client.PendingQuery{Limit: -1}, "Limit -1"},
		{"limit too large", client.PendingQuery{Limit: client.MaxPendingLimit + 1}, "out of range"},
		{"wildcard flow", client.PendingQuery{Flow: "*"}, "flow name"},
		{"dotted flow", client.PendingQuery{Flow: "a.b"}, "flow name"},
		{"cursor not from a page", client.PendingQuery{After: "42"}, "not a pending-list cursor"},
		{"largest limit", client.PendingQuery{Limit: client.MaxPendingLimit}, ""},
	}
	for _, tc := range cases {
		_, err := r.client.ListPending(t.Context(), tc.q)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: ListPending(%+v) = %v, want error containing %q", tc.name, tc.q, err, tc.wantErr)
		}
	}
}
