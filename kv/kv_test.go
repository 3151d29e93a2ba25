package kv_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/storetest"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/kv"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// rig is a store on a fresh embedded server, with its raw buckets for
// reading and writing behind the store's back.
type rig struct {
	store         *kv.Store
	js            jetstream.JetStream
	names         wire.Names
	runs, pending jetstream.KeyValue
}

// newRig opens a store with default options on buckets whose markers last
// one second.
func newRig(t *testing.T) rig {
	t.Helper()
	return newRigWith(t, kv.Options{})
}

func newRigWith(t *testing.T, opts kv.Options) rig {
	t.Helper()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	names, err := wire.NewNames("")
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Provision(t.Context(), js, names, kv.BucketConfig{MarkerTTL: time.Second}); err != nil {
		t.Fatalf("provisioning: %v", err)
	}
	store, err := kv.Open(t.Context(), js, names, opts)
	if err != nil {
		t.Fatalf("kv.Open: %v", err)
	}
	runs, err := js.KeyValue(t.Context(), names.RunsBucket())
	if err != nil {
		t.Fatalf("binding %s: %v", names.RunsBucket(), err)
	}
	pending, err := js.KeyValue(t.Context(), names.PendingBucket())
	if err != nil {
		t.Fatalf("binding %s: %v", names.PendingBucket(), err)
	}
	return rig{store: store, js: js, names: names, runs: runs, pending: pending}
}

var at = time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)

func checkpoint(flow, run string, status engine.Status, node string) *engine.Checkpoint {
	return &engine.Checkpoint{
		Flow: flow, Run: run, Status: status, Node: node,
		State:     engine.Doc{"name": json.RawMessage(`"Ann"`)},
		CreatedAt: at, UpdatedAt: at, UID: "u-" + run,
	}
}

func pendingEntry(flow, run string) *protocol.Pending {
	return &protocol.Pending{
		Flow: flow, Run: run, Node: "ask", RequestID: "rq-" + run, Kind: "question",
		Checkpoint: 3, Fields: []string{"email"}, AskedAt: at,
	}
}

func TestStoreKeepsTheStorePromises(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) engine.Store { return newRig(t).store })
}

func TestKeyIsFlowDotRun(t *testing.T) {
	t.Parallel()
	if got := kv.Key("refund", "r-42"); got != "refund.r-42" {
		t.Errorf("Key = %q, want refund.r-42", got)
	}
}

func TestLoadOfADeletedRunIsErrNotFound(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := t.Context()
	if _, err := r.store.Create(ctx, checkpoint("booking", "r-1", engine.Completed, "")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := r.runs.Delete(ctx, kv.Key("booking", "r-1")); err != nil {
		t.Fatalf("deleting the key: %v", err)
	}
	if _, _, err := r.store.Load(ctx, "booking", "r-1"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Load = %v, want engine.ErrNotFound", err)
	}
}

func TestLoadReturnsTheRevisionOfTheLastWrite(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := t.Context()
	cp := checkpoint("booking", "r-1", engine.Waiting, "ask")
	cp.Origin = json.RawMessage(`{"slack":{"channel":"C1"}}`)
	cp.Traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	rev, err := r.store.Create(ctx, cp)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	for step := range 3 {
		got, loaded, err := r.store.Load(ctx, "booking", "r-1")
		if err != nil {
			t.Fatalf("step %d: Load: %v", step, err)
		}
		if loaded != rev {
			t.Fatalf("step %d: Load returned revision %d, the last write returned %d", step, loaded, rev)
		}
		if !reflect.DeepEqual(got, cp) {
			t.Fatalf("step %d: Load = %+v, want %+v", step, got, cp)
		}
		cp.Seq++
		cp.Node = "node-" + string(rune('a'+step))
		if rev, err = r.store.Update(ctx, cp, rev); err != nil {
			t.Fatalf("step %d: Update: %v", step, err)
		}
	}
}

func TestLoadOfAnUnreadableDocumentIsAnError(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := t.Context()
	if _, err := r.runs.Put(ctx, kv.Key("booking", "r-1"), []byte("not json")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	_, _, err := r.store.Load(ctx, "booking", "r-1")
	if err == nil || errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Load of a corrupt document = %v, want an error other than ErrNotFound", err)
	}
}

func TestCheckpointIsPlainJSONUnderFlowDotRun(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := t.Context()
	rev, err := r.store.Create(ctx, checkpoint("booking", "r-1", engine.Waiting, "ask"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	e, err := r.runs.Get(ctx, "booking.r-1")
	if err != nil {
		t.Fatalf("reading booking.r-1 from the bucket: %v", err)
	}
	if e.Revision() != rev {
		t.Errorf("bucket revision %d, Create returned %d", e.Revision(), rev)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(e.Value(), &doc); err != nil {
		t.Fatalf("checkpoint %s is not a JSON object: %v", e.Value(), err)
	}
	for k, want := range map[string]string{"flow": `"booking"`, "run": `"r-1"`, "status": `"waiting"`, "node": `"ask"`} {
		if got := string(doc[k]); got != want {
			t.Errorf("%s = %s, want %s", k, got, want)
		}
	}
	for _, k := range []string{"state", "createdAt", "updatedAt"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("checkpoint %s has no %q", e.Value(), k)
		}
	}
}

// TestAPendingWriteThatLandsLateDoesNotUndoALaterOne: a transition's index
// write that timed out (held up in a partition, on a route to the bucket's
// leader) is sent again and lands; the run moves on; then the first copy
// lands too. It must change nothing: neither bring back an entry the run's
// end removed, nor put back an older node over the newer one, nor remove
// the entry of a run that waits again.
func TestAPendingWriteThatLandsLateDoesNotUndoALaterOne(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := t.Context()
	at := func(run string, rev uint64, node string) *protocol.Pending {
		p := pendingEntry("booking", run)
		p.Checkpoint, p.Node = rev, node
		return p
	}
	read := func(run string) (*protocol.Pending, error) {
		e, err := r.pending.Get(ctx, "booking."+run)
		if err != nil {
			return nil, err
		}
		var p protocol.Pending
		if err := json.Unmarshal(e.Value(), &p); err != nil {
			t.Fatal(err)
		}
		return &p, nil
	}
	// A put of checkpoint 2, repeated after the run ended at 3.
	must(t, r.store.PutPending(ctx, at("r-ended", 2, "ask_email")))
	must(t, r.store.DeletePending(ctx, "booking", "r-ended", 3))
	must(t, r.store.PutPending(ctx, at("r-ended", 2, "ask_email")))
	if p, err := read("r-ended"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("an ended run's late index write brought its entry back: %+v, %v", p, err)
	}
	// A put of checkpoint 2, repeated after the run waited again at 4.
	must(t, r.store.PutPending(ctx, at("r-moved", 2, "ask_email")))
	must(t, r.store.PutPending(ctx, at("r-moved", 4, "ask_level")))
	must(t, r.store.PutPending(ctx, at("r-moved", 2, "ask_email")))
	if p, err := read("r-moved"); err != nil || p.Checkpoint != 4 || p.Node != "ask_level" {
		t.Errorf("after a late write of checkpoint 2, the entry is %+v (%v); want checkpoint 4 at ask_level", p, err)
	}
	// A removal at checkpoint 3 (a step recorded mid-node), repeated after
	// the run waited again at 4.
	must(t, r.store.PutPending(ctx, at("r-again", 2, "ask_email")))
	must(t, r.store.DeletePending(ctx, "booking", "r-again", 3))
	must(t, r.store.PutPending(ctx, at("r-again", 4, "ask_level")))
	must(t, r.store.DeletePending(ctx, "booking", "r-again", 3))
	if p, err := read("r-again"); err != nil || p.Checkpoint != 4 {
		t.Errorf("after a late removal at checkpoint 3, the entry is %+v (%v); want checkpoint 4", p, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestDeletePendingOfAMissingKeyIsNotAnError(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := t.Context()
	if err := r.store.DeletePending(ctx, "booking", "r-never", 1); err != nil {
		t.Fatalf("DeletePending of a key never written: %v", err)
	}
	if err := r.store.PutPending(ctx, pendingEntry("booking", "r-1")); err != nil {
		t.Fatalf("PutPending: %v", err)
	}
	for i := range 2 {
		if err := r.store.DeletePending(ctx, "booking", "r-1", 2); err != nil {
			t.Fatalf("DeletePending #%d: %v", i+1, err)
		}
	}
	if _, err := r.pending.Get(ctx, "booking.r-1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("pending entry after DeletePending: Get = %v, want ErrKeyNotFound", err)
	}
}

// A worker decides on a checkpoint read from the runs bucket's leader,
// never on a replica that fell behind: such a replica says a run it has
// not caught up with does not exist, and a deadline or a command would be
// acknowledged as one of a run gone.
func TestLoadReadsTheLeaderNotAReplicaThatFellBehind(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := t.Context()
	if _, err := r.store.Create(ctx, checkpoint("booking", "r-lag", engine.Waiting, "ask")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	natstest.LaggingReplica(t, r.js, "KV_"+r.names.RunsBucket())
	missed := 0
	for range 40 {
		if _, err := r.runs.Get(ctx, kv.Key("booking", "r-lag")); errors.Is(err, jetstream.ErrKeyNotFound) {
			missed++
		}
	}
	if missed == 0 {
		t.Fatal("no direct get of the run missed it: the replica does not lag")
	}
	for i := range 40 {
		if cp, _, err := r.store.Load(ctx, "booking", "r-lag"); err != nil || cp.Status != engine.Waiting {
			t.Fatalf("load %d: %+v, %v; want the waiting run (%d of 40 direct gets missed it)", i+1, cp, err, missed)
		}
	}
}

// An entry of the pending index whose run no longer waits (a purge that
// nats-server undid, its issue #8505) is swept away: the run finished, or
// its checkpoint is gone. A run that waits keeps its entry, and what is
// not the engine's entry is left alone.
func TestSweepPendingRemovesTheEntriesOfRunsThatNoLongerWait(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := t.Context()
	_, err := r.store.Create(ctx, checkpoint("booking", "r-done", engine.Completed, ""))
	must(t, err)
	_, err = r.store.Create(ctx, checkpoint("booking", "r-waits", engine.Waiting, "ask"))
	must(t, err)
	for _, run := range []string{"r-done", "r-gone", "r-waits"} {
		must(t, r.store.PutPending(ctx, pendingEntry("booking", run)))
	}
	if _, err := r.pending.Put(ctx, "booking.r-foreign", []byte(`"not an entry"`)); err != nil {
		t.Fatal(err)
	}
	n, err := r.store.SweepPending(ctx)
	if err != nil || n != 2 {
		t.Fatalf("SweepPending = %d, %v; want the 2 entries of runs that no longer wait", n, err)
	}
	for run, want := range map[string]bool{"r-done": false, "r-gone": false, "r-waits": true, "r-foreign": true} {
		_, err := r.pending.Get(ctx, "booking."+run)
		if got := err == nil; got != want {
			t.Errorf("after the sweep, the entry of %s is there: %v (%v); want %v", run, got, err, want)
		}
	}
	if n, err := r.store.SweepPending(ctx); err != nil || n != 0 {
		t.Errorf("a second sweep = %d, %v; want nothing left to remove", n, err)
	}
}

// A sweep of an empty index removes nothing, and says no error.
func TestSweepPendingOfAnEmptyIndexRemovesNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	if n, err := r.store.SweepPending(t.Context()); err != nil || n != 0 {
		t.Fatalf("SweepPending = %d, %v; want 0, nil", n, err)
	}
}

// An entry the engine rewrites between the sweep's read of it and its
// purge (the run waits again) is the engine's, and current: the sweep
// purges only at the revision it read, and keeps it.
func TestSweepPendingKeepsAnEntryRewrittenMeanwhile(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := t.Context()
	must(t, r.store.PutPending(ctx, pendingEntry("booking", "r-again")))
	rewritten := pendingEntry("booking", "r-again")
	rewritten.Checkpoint, rewritten.Node = 9, "ask_level"
	kv.BeforeSweepPurge(r.store, func(string) { must(t, r.store.PutPending(ctx, rewritten)) })
	n, err := r.store.SweepPending(ctx)
	if err != nil || n != 0 {
		t.Fatalf("SweepPending = %d, %v; want nothing removed", n, err)
	}
	e, err := r.pending.Get(ctx, "booking.r-again")
	if err != nil {
		t.Fatalf("the entry rewritten during the sweep: %v", err)
	}
	var p protocol.Pending
	if err := json.Unmarshal(e.Value(), &p); err != nil || p.Checkpoint != 9 {
		t.Errorf("the entry is %s (%v), want the rewrite at checkpoint 9", e.Value(), err)
	}
}
