package notify_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/kv"
	"github.com/interlockhq/interlock/notify"
	"github.com/interlockhq/interlock/protocol"
)

// A request still waits, whatever a replica of the runs bucket that fell
// behind says: StillWaits reads the bucket's leader, so a channel never
// skips announcing a request a lagging replica does not know yet.
func TestARequestStillWaitsWhenAReplicaThatFellBehindLacksItsRun(t *testing.T) {
	t.Parallel()
	js := deployment(t)
	if err := kv.Provision(t.Context(), js, names, kv.BucketConfig{}); err != nil {
		t.Fatal(err)
	}
	runs, err := js.KeyValue(t.Context(), names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(protocol.Checkpoint{Flow: "refund", Run: "r-lag", Status: protocol.StatusWaiting, Node: "review",
		Interrupt: &protocol.CheckpointInterrupt{Kind: protocol.KindApproval, RequestID: "rq-lag", Node: "review"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runs.Put(t.Context(), "refund.r-lag", doc); err != nil {
		t.Fatal(err)
	}
	natstest.LaggingReplica(t, js, "KV_"+names.RunsBucket())
	missed := 0
	for range 40 {
		if _, err := runs.Get(t.Context(), "refund.r-lag"); errors.Is(err, jetstream.ErrKeyNotFound) {
			missed++
		}
	}
	if missed == 0 {
		t.Fatal("no direct get of the run missed it: the replica does not lag")
	}
	for i := range 40 {
		waits, err := notify.StillWaits(t.Context(), js, names, "refund", "r-lag", "rq-lag")
		if err != nil || !waits {
			t.Fatalf("read %d: still waits %v, %v; want true (%d of 40 direct gets missed the run)", i+1, waits, err, missed)
		}
		// What the asks' callbacks read the ask's run with.
		if cp, err := notify.Run(t.Context(), js, names, "refund", "r-lag"); err != nil || cp.Run != "r-lag" {
			t.Fatalf("read %d: run %+v, %v; want it (%d of 40 direct gets missed it)", i+1, cp, err, missed)
		}
	}
	if _, err := notify.Run(t.Context(), js, names, "refund", "r-none"); !errors.Is(err, notify.ErrRunGone) {
		t.Fatalf("a run never started: %v, want ErrRunGone", err)
	}
}
