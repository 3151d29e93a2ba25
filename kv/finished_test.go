package kv_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/kv"
)

func finishedEntry(flow, run string, status engine.Status) *engine.Finished {
	return &engine.Finished{Flow: flow, Run: run, Status: status, Node: "ask", Checkpoint: 4, CreatedAt: at, FinishedAt: at.Add(time.Minute)}
}

// finishedMsgs returns the messages of the finished-runs index's stream of
// status, in order.
func finishedMsgs(t *testing.T, r rig, status string) []*jetstream.RawStreamMsg {
	t.Helper()
	s, err := r.js.Stream(t.Context(), r.names.FinishedStream(status))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestAFinishedEntryGoesToTheStreamOfItsStatusOnceWithTheCheckpointsRetention(t *testing.T) {
	t.Parallel()
	r := newRigWith(t, kv.Options{KeepFinished: 48 * time.Hour})
	ctx := t.Context()
	f := finishedEntry("booking", "r-1", engine.Failed)
	f.Error = "calendar down"
	for range 2 { // a transition delivered again writes it again, with the same id
		if err := r.store.PutFinished(ctx, "u1-9", f); err != nil {
			t.Fatal(err)
		}
	}
	msgs := finishedMsgs(t, r, "failed")
	if len(msgs) != 1 {
		t.Fatalf("the failed runs' stream holds %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	ttl, _ := time.ParseDuration(m.Header.Get(jetstream.MsgTTLHeader))
	if m.Subject != "interlock.finished.failed.booking" || m.Header.Get(jetstream.MsgIDHeader) != "u1-9" || ttl != 48*time.Hour {
		t.Fatalf("entry on %s with headers %v", m.Subject, m.Header)
	}
	var got engine.Finished
	if err := json.Unmarshal(m.Data, &got); err != nil || got.Run != "r-1" || got.Status != engine.Failed || got.Error != "calendar down" {
		t.Fatalf("entry = %+v, %v", got, err)
	}
	for _, other := range []string{"completed", "cancelled", "expired"} {
		if n := len(finishedMsgs(t, r, other)); n != 0 {
			t.Errorf("the %s runs' stream holds %d messages", other, n)
		}
	}
}

func TestAFinishedEntryGoesWhenItsRunsCheckpointGoes(t *testing.T) {
	t.Parallel()
	r := newRigWith(t, kv.Options{KeepFinished: 2 * time.Second})
	ctx := t.Context()
	if _, err := r.store.Create(ctx, checkpoint("booking", "r-1", engine.Completed, "")); err != nil {
		t.Fatal(err)
	}
	if err := r.store.PutFinished(ctx, "u1-3", finishedEntry("booking", "r-1", engine.Completed)); err != nil {
		t.Fatal(err)
	}
	if n := len(finishedMsgs(t, r, "completed")); n != 1 {
		t.Fatalf("%d entries right after finishing, want 1", n)
	}
	eventually(t, "the run and its entry expiring", func() (bool, string) {
		_, _, err := r.store.Load(ctx, "booking", "r-1")
		n := len(finishedMsgs(t, r, "completed"))
		return errors.Is(err, engine.ErrNotFound) && n == 0, fmt.Sprintf("Load: %v; %d entries", err, n)
	})
}

func TestKeepForeverLeavesFinishedEntriesWithoutATTL(t *testing.T) {
	t.Parallel()
	r := newRigWith(t, kv.Options{KeepFinished: kv.KeepForever})
	if err := r.store.PutFinished(t.Context(), "u1-3", finishedEntry("booking", "r-1", engine.Expired)); err != nil {
		t.Fatal(err)
	}
	msgs := finishedMsgs(t, r, "expired")
	if len(msgs) != 1 || msgs[0].Header.Get(jetstream.MsgTTLHeader) != "" {
		t.Fatalf("entries %d, TTL %q; want one, without a TTL", len(msgs), msgs[0].Header.Get(jetstream.MsgTTLHeader))
	}
}

func TestAFinishedEntryOfARunNotFinishedIsRefused(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	err := r.store.PutFinished(t.Context(), "u1-3", finishedEntry("booking", "r-1", engine.Waiting))
	if err == nil || !strings.Contains(err.Error(), `status "waiting"`) {
		t.Fatalf("PutFinished of a waiting run = %v, want an error naming the status", err)
	}
}
