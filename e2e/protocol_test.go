package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

func TestBookingRunInterruptsAndResumesOverJetStream(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const run = "r-42"
	r.start("booking", run, nil)

	in := r.interrupt("booking", run, 1)
	if in.Node != "ask_email" || in.ResumeToken == "" || in.RequestID == "" {
		t.Fatalf("interrupted = %+v", in)
	}
	cp, rev := r.checkpoint("booking", run)
	if cp.Status != engine.Waiting || rev != in.Checkpoint {
		t.Fatalf("checkpoint status %s rev %d, event checkpoint %d", cp.Status, rev, in.Checkpoint)
	}
	if !r.pending("booking", run) {
		t.Fatal("waiting run missing from the pending index")
	}
	raw, _ := json.Marshal(cp)
	if strings.Contains(string(raw), in.ResumeToken) {
		t.Fatal("resume token stored in the checkpoint")
	}

	r.resume("booking", run, answer(in, map[string]any{"email": "nope"}))
	in = r.interrupt("booking", run, 2)
	if !strings.HasPrefix(in.Questions[0].Context, "ERROR: That doesn't look like an email.") {
		t.Fatalf("re-ask context = %q", in.Questions[0].Context)
	}
	r.resume("booking", run, answer(in, map[string]any{"email": "Ann@Example.com"}))
	in = r.interrupt("booking", run, 3)
	r.resume("booking", run, answer(in, map[string]any{"name": "Ann", "phone": "1"}))
	in = r.interrupt("booking", run, 4)
	r.resume("booking", run, answer(in, map[string]any{"level": "beginner"}))
	in = r.interrupt("booking", run, 5)
	r.resume("booking", run, answer(in, map[string]any{"driver.name": "Bob", "driver.license": "X1"}))
	in = r.interrupt("booking", run, 6)
	r.resume("booking", run, map[string]any{"resumeToken": in.ResumeToken, "selected": map[string]any{"choices": []any{map[string]any{"id": "design"}}}})

	evs := r.wait("booking", run, "completed", 1)
	var done protocol.Completed
	natstest.Last(t, evs, "completed").Decode(t, &done)
	var st booking.State
	if err := json.Unmarshal(done.State, &st); err != nil {
		t.Fatal(err)
	}
	if st.Email != "ann@example.com" || st.Driver.Name != "Bob" || len(st.Topics) != 1 || st.Topics[0] != "design" {
		t.Fatalf("final state = %+v", st)
	}
	cp, _ = r.checkpoint("booking", run)
	if cp.Status != engine.Completed {
		t.Fatalf("checkpoint status %s", cp.Status)
	}
	if r.pending("booking", run) {
		t.Fatal("completed run still in the pending index")
	}
	for _, e := range evs {
		if got := events.StringExtension(e.Event, protocol.ExtFlow); got != "booking" {
			t.Fatalf("%s: flow extension = %q", e.Subject, got)
		}
		if e.Event.Subject() != run || e.Header.Get(jetstream.MsgIDHeader) != e.Event.ID() {
			t.Fatalf("%s: subject %q, Nats-Msg-Id %q, id %q", e.Subject, e.Event.Subject(), e.Header.Get(jetstream.MsgIDHeader), e.Event.ID())
		}
	}
	audit := natstest.Read(t, r.js, r.names.AuditStream(), r.names.Audit("booking", run))
	if len(audit) != 7 {
		t.Fatalf("audit stream holds %d records for the run, want 7: one per transition, a pause told in its outcome", len(audit))
	}
	prev := ""
	for i, a := range audit {
		var rec struct {
			Action  string `json:"action"`
			Seq     int    `json:"seq"`
			Prev    string `json:"prev"`
			Hash    string `json:"hash"`
			Outcome struct {
				Status    string `json:"status"`
				RequestID string `json:"requestId"`
				Kind      string `json:"kind"`
			} `json:"outcome"`
		}
		a.Decode(t, &rec)
		wantAction, wantStatus := "answered", "waiting"
		switch {
		case i == 0:
			wantAction = "started"
		case i == len(audit)-1:
			wantStatus = "completed"
		}
		if rec.Action != wantAction || rec.Outcome.Status != wantStatus || a.Event.Type() != "io.interlock.audit."+wantAction {
			t.Fatalf("audit record %d: %s -> %s (%s), want %s -> %s", i, rec.Action, rec.Outcome.Status, a.Event.Type(), wantAction, wantStatus)
		}
		if paused := rec.Outcome.RequestID != "" && rec.Outcome.Kind != ""; paused != (wantStatus == "waiting") {
			t.Fatalf("audit record %d (%s -> %s) names the interrupt it paused on %t: %s", i, rec.Action, rec.Outcome.Status, paused, a.Data)
		}
		if sum, err := protocol.CanonicalHash(a.Event.Data()); err != nil || sum != rec.Hash || rec.Prev != prev || rec.Seq != i+1 {
			t.Fatalf("audit record %d breaks the chain: seq %d prev %q hash %q (recomputed %q, %v), want prev %q", i, rec.Seq, rec.Prev, rec.Hash, sum, err, prev)
		}
		prev = rec.Hash
		if strings.Contains(string(a.Data), "ann@example.com") || strings.Contains(string(a.Data), in.ResumeToken) {
			t.Fatalf("audit record %d holds an answer or a token: %s", i, a.Data)
		}
	}
}
