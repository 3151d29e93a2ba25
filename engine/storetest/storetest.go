// Package storetest is the conformance suite of [engine.Store]: the
// promises the engine relies on, run against any implementation. kv.Store
// (on JetStream) and enginetest.Store (in memory) both pass it; so must a
// store of your own.
//
//	func TestMyStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) engine.Store { return newMyStore(t) })
//	}
package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/protocol"
)

// at is the time of every checkpoint the suite writes.
var at = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func checkpoint(flow, run string, status engine.Status, node string) *engine.Checkpoint {
	return &engine.Checkpoint{
		Flow: flow, Run: run, Status: status, Node: node,
		State:     engine.Doc{"name": json.RawMessage(`"Ann"`)},
		CreatedAt: at, UpdatedAt: at, UID: "u-" + run,
	}
}

// Run runs the suite; newStore returns an empty store, each call a new one.
func Run(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Run("LoadOfAMissingRunIsErrNotFound", func(t *testing.T) {
		t.Parallel()
		cp, rev, err := newStore(t).Load(t.Context(), "booking", "r-none")
		if !errors.Is(err, engine.ErrNotFound) || cp != nil || rev != 0 {
			t.Fatalf("Load = %+v, %d, %v; want nil, 0, engine.ErrNotFound", cp, rev, err)
		}
	})

	t.Run("CreateThenLoadReturnsTheDocumentAndItsRevision", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		cp := checkpoint("booking", "r-1", engine.Waiting, "ask")
		cp.Interrupt = &engine.Interrupt{RequestID: "rq_1", Node: "ask", Kind: protocol.KindQuestion, Fields: []string{"email"}, AskedAt: at}
		cp.Outbox = []engine.Message{{Stream: engine.EventStream, Kind: protocol.EventInterrupted, ID: "u-1", Flow: "booking", Run: "r-1", Time: at,
			Data: &protocol.Interrupted{Flow: "booking", Run: "r-1", Node: "ask", RequestID: "rq_1", Kind: protocol.KindQuestion}}}
		rev, err := s.Create(t.Context(), cp)
		if err != nil || rev == 0 {
			t.Fatalf("Create = %d, %v", rev, err)
		}
		got, grev, err := s.Load(t.Context(), "booking", "r-1")
		if err != nil || grev != rev {
			t.Fatalf("Load = rev %d, %v; want rev %d", grev, err, rev)
		}
		want, _ := json.Marshal(cp)
		have, _ := json.Marshal(got)
		if string(want) != string(have) {
			t.Fatalf("Load returned\n%s\nwant\n%s", have, want)
		}
		if in, ok := got.Outbox[0].Data.(*protocol.Interrupted); !ok || in.RequestID != "rq_1" {
			t.Fatalf("outbox data came back as %T", got.Outbox[0].Data)
		}
	})

	t.Run("LoadDocIsTheDocumentLoadDecodes", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		docs, ok := s.(engine.DocLoader)
		if !ok {
			t.Skip("the store does not implement engine.DocLoader")
		}
		if doc, rev, err := docs.LoadDoc(t.Context(), "booking", "r-none"); !errors.Is(err, engine.ErrNotFound) || doc != nil || rev != 0 {
			t.Fatalf("LoadDoc of a missing run = %q, %d, %v; want nil, 0, engine.ErrNotFound", doc, rev, err)
		}
		cp := checkpoint("booking", "r-1", engine.Waiting, "ask")
		cp.Outbox = []engine.Message{{Stream: engine.AuditStream, Kind: protocol.ActionStarted, ID: "u-1", Flow: "booking", Run: "r-1", Time: at,
			Data: &protocol.AuditRecord{Flow: "booking", Run: "r-1", Action: protocol.ActionStarted, At: at, Seq: 1, Hash: "h"}}}
		rev, err := s.Create(t.Context(), cp)
		if err != nil {
			t.Fatal(err)
		}
		doc, drev, err := docs.LoadDoc(t.Context(), "booking", "r-1")
		if err != nil || drev != rev {
			t.Fatalf("LoadDoc = rev %d, %v; want rev %d", drev, err, rev)
		}
		var fromDoc engine.Checkpoint
		if err := json.Unmarshal(doc, &fromDoc); err != nil {
			t.Fatalf("LoadDoc returned %q, not a checkpoint document: %v", doc, err)
		}
		loaded, _, err := s.Load(t.Context(), "booking", "r-1")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(loaded)
		have, _ := json.Marshal(&fromDoc)
		if string(want) != string(have) {
			t.Fatalf("LoadDoc's document decodes to\n%s\nLoad returned\n%s", have, want)
		}
	})

	t.Run("CreateTwiceIsErrExists", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if _, err := s.Create(t.Context(), checkpoint("booking", "r-1", engine.Waiting, "ask")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(t.Context(), checkpoint("booking", "r-1", engine.Running, "other")); !errors.Is(err, engine.ErrExists) {
			t.Fatalf("second Create = %v, want engine.ErrExists", err)
		}
		got, _, err := s.Load(t.Context(), "booking", "r-1")
		if err != nil || got.Node != "ask" {
			t.Fatalf("the second Create overwrote the first: %+v, %v", got, err)
		}
	})

	t.Run("TheSameRunIdInAnotherFlowIsAnotherRun", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for _, flow := range []string{"booking", "refund"} {
			if _, err := s.Create(t.Context(), checkpoint(flow, "r-1", engine.Waiting, "ask")); err != nil {
				t.Fatalf("Create %s.r-1: %v", flow, err)
			}
		}
	})

	t.Run("UpdateFromAStaleRevisionIsAConflictAndChangesNothing", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		cp := checkpoint("booking", "r-1", engine.Waiting, "ask")
		rev1, err := s.Create(t.Context(), cp)
		if err != nil {
			t.Fatal(err)
		}
		cp.Node = "confirm"
		rev2, err := s.Update(t.Context(), cp, rev1)
		if err != nil || rev2 <= rev1 {
			t.Fatalf("Update from %d = %d, %v; want a later revision", rev1, rev2, err)
		}
		_, err = s.Update(t.Context(), checkpoint("booking", "r-1", engine.Completed, "done"), rev1)
		var conflict *engine.ConflictError
		if !errors.As(err, &conflict) || conflict.Flow != "booking" || conflict.Run != "r-1" || conflict.Expected != rev1 {
			t.Fatalf("Update from stale %d = %v, want *engine.ConflictError{booking r-1 %d}", rev1, err, rev1)
		}
		got, rev, err := s.Load(t.Context(), "booking", "r-1")
		if err != nil || rev != rev2 || got.Node != "confirm" {
			t.Fatalf("after the conflict Load = %+v at %d (%v), want confirm at %d", got, rev, err, rev2)
		}
	})

	t.Run("UpdateOfAMissingRunIsAConflict", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		_, err := s.Update(t.Context(), checkpoint("booking", "r-missing", engine.Waiting, "ask"), 1)
		var conflict *engine.ConflictError
		if !errors.As(err, &conflict) {
			t.Fatalf("Update of a missing run = %v, want *engine.ConflictError", err)
		}
		if _, _, err := s.Load(t.Context(), "booking", "r-missing"); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("the failed Update created the run: Load = %v", err)
		}
	})

	t.Run("RacingUpdatesFromOneRevisionHaveOneWinner", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		rev, err := s.Create(t.Context(), checkpoint("booking", "r-1", engine.Waiting, "ask"))
		if err != nil {
			t.Fatal(err)
		}
		const writers = 8
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				_, errs[i] = s.Update(t.Context(), checkpoint("booking", "r-1", engine.Running, "node-"+string(rune('a'+i))), rev)
			})
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			var conflict *engine.ConflictError
			switch {
			case err == nil:
				won++
			case !errors.As(err, &conflict):
				t.Errorf("writer %d: %v, want nil or *engine.ConflictError", i, err)
			}
		}
		if won != 1 {
			t.Fatalf("%d writers won the race from revision %d, want exactly 1", won, rev)
		}
	})

	t.Run("AFinishedRunIsWrittenAndReadLikeAnyOther", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		rev, err := s.Create(t.Context(), checkpoint("booking", "r-1", engine.Waiting, "ask"))
		if err != nil {
			t.Fatal(err)
		}
		done := checkpoint("booking", "r-1", engine.Completed, "pick")
		rev2, err := s.Update(t.Context(), done, rev)
		if err != nil {
			t.Fatal(err)
		}
		got, grev, err := s.Load(t.Context(), "booking", "r-1")
		if err != nil || grev != rev2 || got.Status != engine.Completed {
			t.Fatalf("Load = %+v at %d (%v)", got, grev, err)
		}
		if _, err := s.Create(t.Context(), checkpoint("booking", "r-2", engine.Failed, "ask")); err != nil {
			t.Fatalf("Create of a run finished in its first transition: %v", err)
		}
	})

	t.Run("ACheckpointTooLargeToStoreIsATooLargeError", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		big := checkpoint("booking", "r-big", engine.Running, "grow")
		big.State["blob"] = json.RawMessage(`"` + strings.Repeat("x", 2<<20) + `"`)
		var tl *engine.TooLargeError
		if _, err := s.Create(t.Context(), big); !errors.As(err, &tl) || tl.Size <= tl.Limit || tl.Run != "r-big" {
			t.Fatalf("Create of a 2 MiB checkpoint = %v, want *engine.TooLargeError naming size and limit", err)
		}
		rev, err := s.Create(t.Context(), checkpoint("booking", "r-big", engine.Running, "grow"))
		if err != nil {
			t.Fatalf("the refused Create left something behind: %v", err)
		}
		if _, err := s.Update(t.Context(), big, rev); !errors.As(err, &tl) {
			t.Fatalf("Update to a 2 MiB checkpoint = %v, want *engine.TooLargeError", err)
		}
	})

	t.Run("PendingEntriesArePutAndDeletedAndDeletingAMissingOneIsNoError", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		p := &protocol.Pending{Flow: "booking", Run: "r-1", Node: "ask", RequestID: "rq_1", Kind: protocol.KindQuestion, Checkpoint: 3, AskedAt: at}
		if err := s.PutPending(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		p.Checkpoint = 4
		if err := s.PutPending(t.Context(), p); err != nil {
			t.Fatalf("PutPending over an entry: %v", err)
		}
		for range 2 {
			if err := s.DeletePending(t.Context(), "booking", "r-1", 5); err != nil {
				t.Fatalf("DeletePending: %v", err)
			}
		}
	})
}
