package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/protocol"
)

// finishedOf returns the finished-runs index entries of run.
func finishedOf(h *enginetest.Harness, run string) []engine.Finished {
	var out []engine.Finished
	for _, f := range h.Store.Finished() {
		if f.Run == run {
			out = append(out, f)
		}
	}
	return out
}

// onlyFinished returns run's one finished entry, failing unless there is
// exactly one.
func onlyFinished(t *testing.T, h *enginetest.Harness, run string) engine.Finished {
	t.Helper()
	fs := finishedOf(h, run)
	if len(fs) != 1 {
		t.Fatalf("run %s has %d finished entries, want 1: %+v", run, len(fs), fs)
	}
	f := fs[0]
	cp := h.Checkpoint(run)
	if f.Flow != cp.Flow || f.Status != cp.Status || f.Node != cp.Node || !f.CreatedAt.Equal(cp.CreatedAt) || !f.FinishedAt.Equal(cp.UpdatedAt) {
		t.Fatalf("finished entry %+v does not match the checkpoint (%s %s at %s, created %v, updated %v)", f, cp.Flow, cp.Status, cp.Node, cp.CreatedAt, cp.UpdatedAt)
	}
	return f
}

func TestAFinishedRunHasOneFinishedEntrySayingHowItEnded(t *testing.T) {
	t.Run("approved", func(t *testing.T) {
		h := enginetest.New(t, refund.Flow())
		run := startRefund(t, h, 4800)
		if len(finishedOf(h, run)) != 0 {
			t.Fatal("a waiting run has a finished entry")
		}
		h.Decide(run, "approve", nil, "sam", "checked")
		f := onlyFinished(t, h, run)
		if f.Status != engine.Completed || f.Interrupt == nil || f.Interrupt.Kind != engine.KindApproval ||
			f.Interrupt.ApproverRole != "supervisor" || f.Interrupt.Action != "issue_refund" ||
			f.Decision == nil || f.Decision.Verdict != engine.VerdictApprove || f.Decision.Approver != "sam" || f.Decision.Reason != "checked" {
			t.Fatalf("entry = %+v, interrupt %+v, decision %+v", f, f.Interrupt, f.Decision)
		}
	})
	t.Run("rejected", func(t *testing.T) {
		h := enginetest.New(t, refund.Flow())
		run := startRefund(t, h, 4800)
		h.Decide(run, "reject", nil, "sam", "duplicate order")
		f := onlyFinished(t, h, run)
		if f.Status != engine.Completed || f.Decision == nil || f.Decision.Verdict != engine.VerdictReject || f.Decision.Reason != "duplicate order" {
			t.Fatalf("entry = %+v, decision %+v", f, f.Decision)
		}
	})
	t.Run("failed", func(t *testing.T) {
		long := strings.Repeat("upstream down ", 200)
		f := engine.NewFlow[map[string]any]("e").
			Node("n", func(context.Context, *engine.Node[map[string]any]) error { return errors.New(long) }).
			Start("n").MustBuild()
		h := enginetest.New(t, f)
		run := h.Start(nil)
		e := onlyFinished(t, h, run)
		if e.Status != engine.Failed || e.Interrupt != nil || !strings.HasPrefix(e.Error, "upstream down") ||
			len(e.Error) > 1024+len("...") || !strings.HasSuffix(e.Error, "...") {
			t.Fatalf("entry = %+v (error of %d bytes)", e, len(e.Error))
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		h := enginetest.New(t, refund.Flow())
		run := startRefund(t, h, 4800)
		out, err := h.Runner.Cancel(t.Context(), engine.Cancel{Flow: "refund", Run: run, Reason: "customer called back", By: "ann",
			Inbound: engine.Inbound{EventID: "cancel-1", Source: "/test"}})
		if err != nil || out.Refused != nil {
			t.Fatalf("cancel: %+v, %v", out.Refused, err)
		}
		f := onlyFinished(t, h, run)
		if f.Status != engine.Cancelled || f.By != "ann" || f.Reason != "customer called back" ||
			f.Interrupt == nil || f.Interrupt.ApproverRole != "supervisor" || f.Decision != nil {
			t.Fatalf("entry = %+v, interrupt %+v", f, f.Interrupt)
		}
	})
	t.Run("expired", func(t *testing.T) {
		h := enginetest.New(t, approvalFlow(engine.Policy{}))
		run := h.Start(nil)
		in := h.Interrupt(run)
		if out := h.Expire(run); out.Status != engine.Expired {
			t.Fatalf("expire: %+v", out)
		}
		f := onlyFinished(t, h, run)
		if f.Status != engine.Expired || f.Interrupt == nil || f.Interrupt.RequestID != in.RequestID || f.Interrupt.ApproverRole != "support" {
			t.Fatalf("entry = %+v, interrupt %+v", f, f.Interrupt)
		}
	})
}

func TestTheFinishedEntryCarriesTheNumberOfTheCheckpointThatFinishedTheRun(t *testing.T) {
	h := enginetest.New(t, refund.Flow())
	run := startRefund(t, h, 4800)
	out := h.Decide(run, "approve", nil, "sam", "")
	if out.Status != engine.Completed || out.Checkpoint == 0 {
		t.Fatalf("decide: %+v", out)
	}
	if f := onlyFinished(t, h, run); f.Checkpoint != out.Checkpoint {
		t.Fatalf("entry's checkpoint = %d, want %d", f.Checkpoint, out.Checkpoint)
	}
	// The entry is not an event: nothing is published for it.
	for _, m := range h.Publisher.Messages(run) {
		if m.Stream == engine.FinishedStream {
			t.Fatalf("the publisher was given the finished entry %s", m.ID)
		}
	}
}

// flakyFinished is a store whose first PutFinished fails after writing
// nothing, as a finished-runs index that cannot be reached does.
type flakyFinished struct {
	*enginetest.Store
	mu    sync.Mutex
	fails int
	ids   []string
}

func (s *flakyFinished) PutFinished(ctx context.Context, id string, f *engine.Finished) error {
	s.mu.Lock()
	s.ids = append(s.ids, id)
	fail := s.fails > 0
	s.fails--
	s.mu.Unlock()
	if fail {
		return errors.New("finished index unreachable")
	}
	return s.Store.PutFinished(ctx, id, f)
}

func TestAFinishedEntryThatFailedIsWrittenWhenTheCommandIsDeliveredAgain(t *testing.T) {
	store := &flakyFinished{Store: enginetest.NewStore(), fails: 1}
	pub := enginetest.NewPublisher()
	f := engine.NewFlow[map[string]any]("done").
		Node("n", func(context.Context, *engine.Node[map[string]any]) error { return nil }).
		Start("n").MustBuild()
	r, err := engine.NewRunner(engine.Config{Flows: []*engine.Flow{f}, Store: store, Publisher: pub,
		Secret: []byte("finished-test-secret-finished-test-secret")})
	if err != nil {
		t.Fatal(err)
	}
	start := engine.Start{Flow: "done", Run: "r-1", Inbound: engine.Inbound{EventID: "start-1", Source: "/test", Seq: 7}}
	if _, err := r.Start(t.Context(), start); err == nil || !strings.Contains(err.Error(), "finished index unreachable") {
		t.Fatalf("first delivery: %v, want the index's error (the message is delivered again)", err)
	}
	if kinds := pub.Messages("r-1"); len(kinds) != 1 || kinds[0].Stream != engine.AuditStream {
		t.Fatalf("published before the index was written: %+v", kinds)
	}
	out, err := r.Start(t.Context(), start)
	if err != nil || out.Status != engine.Completed {
		t.Fatalf("second delivery: %+v, %v", out, err)
	}
	if len(store.ids) != 2 || store.ids[0] != store.ids[1] {
		t.Fatalf("entry ids written = %v, want the same id twice", store.ids)
	}
	if fs := store.Finished(); len(fs) != 1 || fs[0].Run != "r-1" || fs[0].Status != engine.Completed {
		t.Fatalf("finished index = %+v", fs)
	}
	var completed bool
	for _, m := range pub.Messages("r-1") {
		completed = completed || m.Kind == protocol.EventCompleted
	}
	if !completed {
		t.Fatal("the completed event was not published on the second delivery")
	}
}
