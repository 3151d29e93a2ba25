package client_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// benchPending is how many runs wait in BenchmarkListPending.
const benchPending = 100_000

// BenchmarkListPending lists pages of a pending index of 100,000 runs:
// ten flows of about 10,000 runs each, interleaved, and a rare flow of 60
// runs spread among them. The floor is a single KV Get of one entry, the
// least a read of the index costs.
//
//	go test ./client -run '^$' -bench ListPending -benchtime 2s
func BenchmarkListPending(b *testing.B) {
	r := newRig(b)
	ctx := b.Context()
	prefix := "$KV." + r.names.PendingBucket() + "."
	var futures []jetstream.PubAckFuture
	for i := range benchPending {
		flow := fmt.Sprintf("f%d", i%10)
		if i%(benchPending/60) == 0 {
			flow = "rare"
		}
		p := protocol.Pending{
			Flow: flow, Run: fmt.Sprintf("r-%06d", i), Node: "ask", RequestID: fmt.Sprintf("rq-%06d", i),
			Kind: "question", Checkpoint: 3, Fields: []string{"email"}, AskedAt: time.Now().UTC(),
		}
		data, _ := json.Marshal(p)
		f, err := r.js.PublishAsync(prefix+p.Flow+"."+p.Run, data)
		if err != nil {
			b.Fatal(err)
		}
		futures = append(futures, f)
	}
	select {
	case <-r.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("writing the pending index took over a minute")
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			b.Fatal(err)
		}
	}
	first, err := r.client.ListPending(ctx, client.PendingQuery{})
	if err != nil {
		b.Fatal(err)
	}
	if first.Total != benchPending || len(first.Items) != client.DefaultPendingLimit || first.Next == "" {
		b.Fatalf("first page: %d items of %d, next %q", len(first.Items), first.Total, first.Next)
	}
	list := func(q client.PendingQuery, wantTotal uint64) func(b *testing.B) {
		return func(b *testing.B) {
			for b.Loop() {
				page, err := r.client.ListPending(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				if page.Total != wantTotal || len(page.Items) != client.DefaultPendingLimit {
					b.Fatalf("%+v: %d items of %d", q, len(page.Items), page.Total)
				}
			}
		}
	}
	b.Run("first50", list(client.PendingQuery{}, benchPending))
	b.Run("next50", list(client.PendingQuery{After: first.Next}, benchPending))
	rare, err := r.client.ListPending(ctx, client.PendingQuery{Flow: "rare", Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("flow50", list(client.PendingQuery{Flow: "f3"}, countFlow("f3")))
	b.Run("rareflow50", list(client.PendingQuery{Flow: "rare"}, rare.Total))
	b.Run("floor-kvget", func(b *testing.B) {
		bucket, err := r.js.KeyValue(ctx, r.names.PendingBucket())
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := bucket.Get(ctx, "f3.r-000003"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// countFlow counts the runs of flow in BenchmarkListPending's index.
func countFlow(flow string) uint64 {
	var n uint64
	for i := range benchPending {
		f := fmt.Sprintf("f%d", i%10)
		if i%(benchPending/60) == 0 {
			f = "rare"
		}
		if f == flow {
			n++
		}
	}
	return n
}
