package e2e_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// rig is a service on an embedded server, and a client connection.
type rig struct {
	t     *testing.T
	srv   *bus.Server
	js    jetstream.JetStream
	names wire.Names
}

func newRig(t *testing.T, flows ...*engine.Flow) *rig {
	t.Helper()
	if len(flows) == 0 {
		flows = []*engine.Flow{booking.Flow()}
	}
	srv := natstest.StartServer(t, "")
	natstest.Start(t, srv, flows...)
	_, js := natstest.Connect(t, srv.ClientURL())
	names, _ := wire.NewNames("")
	return &rig{t: t, srv: srv, js: js, names: names}
}

func (r *rig) start(flow, run string, state map[string]any) string {
	r.t.Helper()
	return natstest.Publish(r.t, r.js, r.names.In(flow, "start"), protocol.TypeStart, run, map[string]any{"state": state})
}

func (r *rig) resume(flow, run string, data map[string]any) string {
	r.t.Helper()
	return natstest.Publish(r.t, r.js, r.names.In(flow, "resume"), protocol.TypeResume, run, data)
}

// wait reads the run's events until the n-th of kind.
func (r *rig) wait(flow, run, kind string, n int) []natstest.Received {
	r.t.Helper()
	return natstest.WaitFor(r.t, r.js, r.names.EventStream(), r.names.Event(flow, run, ">"), natstest.Nth(kind, n))
}

// interrupt waits for the n-th interrupted event of a run and decodes it.
func (r *rig) interrupt(flow, run string, n int) protocol.Interrupted {
	r.t.Helper()
	var in protocol.Interrupted
	natstest.Last(r.t, r.wait(flow, run, "interrupted", n), "interrupted").Decode(r.t, &in)
	return in
}

func (r *rig) refusal(flow, run string, n int) protocol.Refused {
	r.t.Helper()
	var ref protocol.Refused
	natstest.Last(r.t, r.wait(flow, run, "refused", n), "refused").Decode(r.t, &ref)
	return ref
}

func (r *rig) checkpoint(flow, run string) (*engine.Checkpoint, uint64) {
	r.t.Helper()
	kv, err := r.js.KeyValue(r.t.Context(), r.names.RunsBucket())
	if err != nil {
		r.t.Fatal(err)
	}
	e, err := kv.Get(r.t.Context(), flow+"."+run)
	if err != nil {
		r.t.Fatalf("checkpoint %s.%s: %v", flow, run, err)
	}
	var cp engine.Checkpoint
	if err := json.Unmarshal(e.Value(), &cp); err != nil {
		r.t.Fatal(err)
	}
	return &cp, e.Revision()
}

func (r *rig) pending(flow, run string) bool {
	r.t.Helper()
	kv, err := r.js.KeyValue(r.t.Context(), r.names.PendingBucket())
	if err != nil {
		r.t.Fatal(err)
	}
	_, err = kv.Get(r.t.Context(), flow+"."+run)
	switch {
	case err == nil:
		return true
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return false
	}
	r.t.Fatal(err)
	return false
}

func answer(in protocol.Interrupted, answers map[string]any) map[string]any {
	return map[string]any{"resumeToken": in.ResumeToken, "answers": answers}
}

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
	if len(audit) != 13 {
		t.Fatalf("audit stream holds %d records for the run, want 13: one per transition and one per interrupt", len(audit))
	}
	prev := ""
	for i, a := range audit {
		var rec struct {
			Action  string `json:"action"`
			Seq     int    `json:"seq"`
			Prev    string `json:"prev"`
			Hash    string `json:"hash"`
			Outcome struct {
				Status string `json:"status"`
			} `json:"outcome"`
		}
		a.Decode(t, &rec)
		wantAction, wantStatus := "answered", "waiting"
		switch {
		case i == 0:
			wantAction = "started"
		case i%2 == 1:
			wantAction, wantStatus = "interrupted", ""
		case i == len(audit)-1:
			wantStatus = "completed"
		}
		if rec.Action != wantAction || rec.Outcome.Status != wantStatus || a.Event.Type() != "io.interlock.audit."+wantAction {
			t.Fatalf("audit record %d: %s -> %s (%s), want %s -> %s", i, rec.Action, rec.Outcome.Status, a.Event.Type(), wantAction, wantStatus)
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
