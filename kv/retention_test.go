package kv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/kv"
	"github.com/interlockhq/interlock/wire"
)

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(natstest.Wait)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %v; last seen: %s", what, natstest.Wait, state)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// subjectMsgs counts the messages the stream of bucket holds on key.
func subjectMsgs(t *testing.T, js jetstream.JetStream, bucket, key string) uint64 {
	t.Helper()
	s, err := js.Stream(t.Context(), "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	subj := "$KV." + bucket + "." + key
	info, err := s.Info(t.Context(), jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subj]
}

func streamMsgs(t *testing.T, js jetstream.JetStream, bucket string) uint64 {
	t.Helper()
	s, err := js.Stream(t.Context(), "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestOptionsAreValidated(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	names, _ := wire.NewNames("")
	if err := kv.Provision(t.Context(), js, names, kv.BucketConfig{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		keep    time.Duration
		wantErr string
	}{
		{0, ""},
		{kv.KeepForever, ""},
		{time.Second, ""},
		{500 * time.Millisecond, "KeepFinished"},
		{-2 * time.Second, "KeepFinished"},
	}
	for _, tc := range cases {
		_, err := kv.Open(t.Context(), js, names, kv.Options{KeepFinished: tc.keep})
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("KeepFinished %v: Open = %v, want error containing %q", tc.keep, err, tc.wantErr)
		}
	}
}

func TestFinishedRunIsRemovedAfterItsRetentionWhileAWaitingRunStays(t *testing.T) {
	t.Parallel()
	r := newRigWith(t, kv.Options{KeepFinished: 2 * time.Second})
	ctx := t.Context()

	// A run that interrupts, is updated through every revision the bucket
	// keeps, then completes.
	done := checkpoint("booking", "r-done", engine.Running, "ask")
	rev, err := r.store.Create(ctx, done)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	for i := range 6 {
		done.Status, done.Node = engine.Waiting, fmt.Sprintf("n%d", i)
		if rev, err = r.store.Update(ctx, done, rev); err != nil {
			t.Fatalf("Update %d: %v", i, err)
		}
	}
	done.Status = engine.Completed
	if _, err := r.store.Update(ctx, done, rev); err != nil {
		t.Fatalf("finishing Update: %v", err)
	}
	// The roll-up left only the finishing write: no older revision can
	// outlive it or come back when it goes.
	if n := subjectMsgs(t, r.js, r.names.RunsBucket(), "booking.r-done"); n != 1 {
		t.Errorf("the finished run has %d messages, want 1 (older revisions rolled up)", n)
	}
	// A run that finishes in its first write, and one still waiting.
	if _, err := r.store.Create(ctx, checkpoint("booking", "r-failed", engine.Failed, "")); err != nil {
		t.Fatalf("Create of a finished run: %v", err)
	}
	if _, err := r.store.Create(ctx, checkpoint("booking", "r-waits", engine.Waiting, "ask")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if got, _, err := r.store.Load(ctx, "booking", "r-done"); err != nil || got.Status != engine.Completed {
		t.Fatalf("Load right after finishing = %+v, %v", got, err)
	}

	for _, run := range []string{"r-done", "r-failed"} {
		eventually(t, run+" expiring", func() (bool, string) {
			_, _, err := r.store.Load(ctx, "booking", run)
			return errors.Is(err, engine.ErrNotFound), fmt.Sprint(err)
		})
	}
	// The marker left on expiry goes too, and the run's key is free again.
	eventually(t, "the expiry markers going", func() (bool, string) {
		n := subjectMsgs(t, r.js, r.names.RunsBucket(), "booking.r-done") + subjectMsgs(t, r.js, r.names.RunsBucket(), "booking.r-failed")
		return n == 0, fmt.Sprintf("%d messages", n)
	})
	if _, _, err := r.store.Load(ctx, "booking", "r-done"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Load after the marker went = %v, want ErrNotFound", err)
	}
	if got, _, err := r.store.Load(ctx, "booking", "r-waits"); err != nil || got.Status != engine.Waiting {
		t.Errorf("the waiting run: Load = %+v, %v; want it kept", got, err)
	}
	if _, err := r.store.Create(ctx, checkpoint("booking", "r-done", engine.Waiting, "ask")); err != nil {
		t.Errorf("Create reusing an expired run's id: %v", err)
	}
}

func TestLoadSeesAFinishedRunAsNotFoundWhileItsExpiryMarkerStays(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	names, _ := wire.NewNames("")
	// Markers last long enough for Load to meet one. (JetStream raises a
	// message TTL shorter than the marker TTL to it, so the run lasts 3s.)
	if err := kv.Provision(t.Context(), js, names, kv.BucketConfig{MarkerTTL: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	store, err := kv.Open(t.Context(), js, names, kv.Options{KeepFinished: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := store.Create(ctx, checkpoint("booking", "r-1", engine.Completed, "")); err != nil {
		t.Fatal(err)
	}
	var last *jetstream.RawStreamMsg
	eventually(t, "the expiry marker", func() (bool, string) {
		s, _ := js.Stream(ctx, "KV_"+names.RunsBucket())
		last, err = s.GetLastMsgForSubject(ctx, "$KV."+names.RunsBucket()+".booking.r-1")
		return err == nil && last.Header.Get(jetstream.MarkerReasonHeader) != "", fmt.Sprint(err)
	})
	if _, _, err := store.Load(ctx, "booking", "r-1"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Load of an expired run whose marker remains = %v, want ErrNotFound", err)
	}
	// A new run under the same id is created over the marker, finished
	// or not, and a second Create is still refused.
	if _, err := store.Create(ctx, checkpoint("booking", "r-1", engine.Cancelled, "")); err != nil {
		t.Fatalf("Create of a finished run over the marker: %v", err)
	}
	if _, err := store.Create(ctx, checkpoint("booking", "r-1", engine.Completed, "")); !errors.Is(err, engine.ErrExists) {
		t.Fatalf("second Create = %v, want ErrExists", err)
	}
}

func TestFinishingUpdateFromAStaleRevisionIsAConflict(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := t.Context()
	cp := checkpoint("booking", "r-1", engine.Waiting, "ask")
	rev, err := r.store.Create(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Update(ctx, cp, rev); err != nil {
		t.Fatal(err)
	}
	cp.Status = engine.Completed
	var conflict *engine.ConflictError
	if _, err := r.store.Update(ctx, cp, rev); !errors.As(err, &conflict) || conflict.Expected != rev {
		t.Fatalf("finishing Update from stale revision %d = %v, want *engine.ConflictError", rev, err)
	}
	if _, err := r.store.Update(ctx, cp, 99); !errors.As(err, &conflict) {
		t.Fatalf("finishing Update from a future revision = %v, want *engine.ConflictError", err)
	}
	if _, err := r.store.Update(ctx, checkpoint("booking", "r-missing", engine.Completed, ""), 1); !errors.As(err, &conflict) {
		t.Fatalf("finishing Update of a missing run = %v, want *engine.ConflictError", err)
	}
	if _, err := r.store.Create(ctx, checkpoint("booking", "r-1", engine.Completed, "")); !errors.Is(err, engine.ErrExists) {
		t.Fatalf("finished Create of an existing run = %v, want ErrExists", err)
	}
}

func TestKeepForeverLeavesFinishedRunsWithoutATTL(t *testing.T) {
	t.Parallel()
	r := newRigWith(t, kv.Options{KeepFinished: kv.KeepForever})
	ctx := t.Context()
	if _, err := r.store.Create(ctx, checkpoint("booking", "r-1", engine.Completed, "")); err != nil {
		t.Fatal(err)
	}
	s, err := r.js.Stream(ctx, "KV_"+r.names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, "$KV."+r.names.RunsBucket()+".booking.r-1")
	if err != nil {
		t.Fatal(err)
	}
	if ttl := m.Header.Get(jetstream.MsgTTLHeader); ttl != "" {
		t.Errorf("a finished run kept for ever was written with Nats-TTL %s", ttl)
	}
}

func TestResumedRunsLeaveNoMarkersBeyondTheMarkerTTL(t *testing.T) {
	t.Parallel()
	r := newRig(t) // markers last one second
	ctx := t.Context()
	const n = 50
	for i := range n {
		run := fmt.Sprintf("r-%d", i)
		if err := r.store.PutPending(ctx, pendingEntry("booking", run)); err != nil {
			t.Fatal(err)
		}
		if err := r.store.DeletePending(ctx, "booking", run, 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.store.PutPending(ctx, pendingEntry("booking", "r-waits")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the markers of resumed runs going", func() (bool, string) {
		msgs := streamMsgs(t, r.js, r.names.PendingBucket())
		return msgs == 1, fmt.Sprintf("%d messages in the pending bucket's stream", msgs)
	})
	if _, err := r.pending.Get(ctx, "booking.r-waits"); err != nil {
		t.Errorf("the waiting run's entry: %v", err)
	}
}

func TestOpenRefusesBucketsWithoutTTLsUntilProvisionUpdatesThem(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	ctx := t.Context()
	names, _ := wire.NewNames("")
	// Buckets as an older Interlock created them, holding a run.
	for _, kc := range []jetstream.KeyValueConfig{
		{Bucket: names.RunsBucket(), History: 5},
		{Bucket: names.PendingBucket(), History: 1},
	} {
		if _, err := js.CreateKeyValue(ctx, kc); err != nil {
			t.Fatal(err)
		}
	}
	old := kv.New(mustBucket(t, js, names.RunsBucket()), mustBucket(t, js, names.PendingBucket()))
	if _, err := old.Create(ctx, checkpoint("booking", "r-old", engine.Waiting, "ask")); err != nil {
		t.Fatal(err)
	}
	_, err := kv.Open(ctx, js, names, kv.Options{})
	if err == nil || !strings.Contains(err.Error(), "interlock serve") {
		t.Fatalf("Open on buckets without TTLs = %v, want an error saying how to update them", err)
	}
	if err := kv.Provision(ctx, js, names, kv.BucketConfig{}); err != nil {
		t.Fatalf("Provision over the older buckets: %v", err)
	}
	store, err := kv.Open(ctx, js, names, kv.Options{})
	if err != nil {
		t.Fatalf("Open after Provision: %v", err)
	}
	cp, rev, err := store.Load(ctx, "booking", "r-old")
	if err != nil {
		t.Fatalf("the run written before the update: %v", err)
	}
	cp.Status = engine.Completed
	if _, err := store.Update(ctx, cp, rev); err != nil {
		t.Fatalf("finishing the older run: %v", err)
	}
}

func mustBucket(t *testing.T, js jetstream.JetStream, name string) jetstream.KeyValue {
	t.Helper()
	b, err := js.KeyValue(context.WithoutCancel(t.Context()), name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
