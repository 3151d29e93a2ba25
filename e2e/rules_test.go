package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

func TestForgedAndUsedTokensAreRefused(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const run = "r-token"
	r.start("booking", run, nil)
	in := r.interrupt("booking", run, 1)

	r.resume("booking", run, answer(protocol.Interrupted{ResumeToken: "AAAA" + in.ResumeToken[4:]}, map[string]any{"email": "a@b.c"}))
	if ref := r.refusal("booking", run, 1); ref.Code != protocol.CodeTokenMismatch || ref.RequestID != in.RequestID {
		t.Fatalf("forged token: %+v", ref)
	}
	r.resume("booking", run, map[string]any{"answers": map[string]any{"email": "a@b.c"}})
	if ref := r.refusal("booking", run, 2); ref.Code != protocol.CodeTokenMismatch {
		t.Fatalf("missing token: %+v", ref)
	}
	r.resume("booking", run, answer(in, map[string]any{"email": "a@b.c"}))
	next := r.interrupt("booking", run, 2)
	if next.ResumeToken == in.ResumeToken {
		t.Fatal("the next interrupt reuses the token")
	}
	r.resume("booking", run, answer(in, map[string]any{"name": "Ann"}))
	if ref := r.refusal("booking", run, 3); ref.Code != protocol.CodeTokenMismatch {
		t.Fatalf("used token: %+v", ref)
	}
	pending, err := r.js.KeyValue(t.Context(), r.names.PendingBucket())
	if err != nil {
		t.Fatal(err)
	}
	e, err := pending.Get(t.Context(), "booking."+run)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(e.Value()), next.ResumeToken) {
		t.Fatal("resume token stored in the pending index")
	}
}

func TestTwoRacingResumesExactlyOneWins(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for i := range 5 {
		run := fmt.Sprintf("r-race-%d", i)
		r.start("booking", run, nil)
		in := r.interrupt("booking", run, 1)
		var wg sync.WaitGroup
		for _, email := range []string{"one@example.com", "two@example.com"} {
			wg.Go(func() { r.resume("booking", run, answer(in, map[string]any{"email": email})) })
		}
		wg.Wait()
		evs := r.wait("booking", run, "refused", 1)
		evs = natstest.WaitFor(t, r.js, r.names.EventStream(), r.names.Event("booking", run, ">"), func(rs []natstest.Received) bool {
			return natstest.Count(rs, "interrupted") == 2 && natstest.Count(rs, "refused") == 1
		})
		if n := natstest.Count(evs, "resumed"); n != 1 {
			t.Fatalf("%s: %d resumes applied, want exactly 1", run, n)
		}
		var ref protocol.Refused
		natstest.Last(t, evs, "refused").Decode(t, &ref)
		if ref.Code != protocol.CodeTokenMismatch {
			t.Fatalf("%s: loser refused with %s", run, ref.Code)
		}
	}
}

func TestStaleCheckpointIsRefused(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const run = "r-stale"
	r.start("booking", run, nil)
	in := r.interrupt("booking", run, 1)
	data := answer(in, map[string]any{"email": "a@b.c"})
	data["expectedCheckpoint"] = in.Checkpoint + 1
	r.resume("booking", run, data)
	if ref := r.refusal("booking", run, 1); ref.Code != protocol.CodeStaleCheckpoint {
		t.Fatalf("refusal %+v", ref)
	}
	data["expectedCheckpoint"] = in.Checkpoint
	r.resume("booking", run, data)
	if next := r.interrupt("booking", run, 2); next.Node != "ask_contact" {
		t.Fatalf("matching expectedCheckpoint not applied: %s", next.Node)
	}
}

func TestRepeatedResumeIsAcknowledgedNotRefused(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const run = "r-idem"
	r.start("booking", run, nil)
	in := r.interrupt("booking", run, 1)
	data := answer(in, map[string]any{"email": "a@b.c"})
	data["idempotencyKey"] = "5c2f"
	data["update"] = map[string]any{"notes": "once"}
	r.resume("booking", run, data)
	r.interrupt("booking", run, 2)
	r.resume("booking", run, data) // a new event id, the same key
	natstest.WaitDrained(t, r.js, r.names.InStream())
	evs := natstest.Read(t, r.js, r.names.EventStream(), r.names.Event("booking", run, ">"))
	if n := natstest.Count(evs, "refused"); n != 0 {
		t.Fatalf("the repeat was refused")
	}
	if n := natstest.Count(evs, "resumed"); n != 1 {
		t.Fatalf("%d resumes applied, want 1", n)
	}
	if cp, _ := r.checkpoint("booking", run); string(cp.State["notes"]) != `["once"]` {
		t.Fatalf("notes = %s", cp.State["notes"])
	}
}

func TestRepublishedEventIsDroppedByJetStream(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const run = "r-dupe"
	r.start("booking", run, nil)
	in := r.interrupt("booking", run, 1)
	ev, _ := events.New("same-id", "/test", protocol.TypeResume, run, nowUTC(), answer(in, map[string]any{"email": "a@b.c"}))
	body, _ := events.Encode(ev)
	for i := range 2 {
		msg := nats.NewMsg(r.names.In("booking", "resume"))
		msg.Data, msg.Header = body, nats.Header{"Content-Type": {events.Structured}, "Nats-Msg-Id": {"same-id"}}
		ack, err := r.js.PublishMsg(t.Context(), msg)
		if err != nil {
			t.Fatal(err)
		}
		if ack.Duplicate != (i == 1) {
			t.Fatalf("publish %d: duplicate = %v", i, ack.Duplicate)
		}
	}
	natstest.WaitDrained(t, r.js, r.names.InStream())
	evs := natstest.Read(t, r.js, r.names.EventStream(), r.names.Event("booking", run, ">"))
	if n := natstest.Count(evs, "resumed"); n != 1 || natstest.Count(evs, "refused") != 0 {
		t.Fatalf("%d resumes applied, %d refused", n, natstest.Count(evs, "refused"))
	}
}

func TestAutoSkipOverTheBus(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const run = "r-skip"
	r.start("booking", run, map[string]any{"email": "ann@example.com", "name": "Ann", "phone": ""})
	in := r.interrupt("booking", run, 1)
	if in.Node != "ask_contact" || strings.Join(in.Fields(), ",") != "phone" {
		t.Fatalf("interrupt %s %v, want only phone at ask_contact", in.Node, in.Fields())
	}
}

func TestChoiceAcceptsEverySelectedShape(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	shapes := map[string]any{
		"string":  "design",
		"list":    []string{"design", "product"},
		"choice":  map[string]any{"choice": map[string]any{"id": "design"}},
		"choices": map[string]any{"choices": []any{map[string]any{"id": "design"}, map[string]any{"id": "engineering"}}},
	}
	full := readyForTopics()
	for name, sel := range shapes {
		run := "r-shape-" + name
		r.start("booking", run, full)
		in := r.interrupt("booking", run, 1)
		if in.Kind != protocol.KindChoice {
			t.Fatalf("%s: interrupt kind %s", name, in.Kind)
		}
		r.resume("booking", run, map[string]any{"resumeToken": in.ResumeToken, "selected": map[string]any{"choices": []any{map[string]any{"id": "nope"}}}})
		if ref := r.refusal("booking", run, 1); ref.Code != protocol.CodeInvalidAnswer {
			t.Fatalf("%s: unknown id refused with %+v", name, ref)
		}
		r.resume("booking", run, map[string]any{"resumeToken": in.ResumeToken, "selected": sel})
		var done protocol.Completed
		natstest.Last(t, r.wait("booking", run, "completed", 1), "completed").Decode(t, &done)
		if !strings.Contains(string(done.State), `"topics":["design"`) {
			t.Fatalf("%s: final state %s", name, done.State)
		}
	}
}

func TestResumeThatMatchesNothingIsRefusedNeverStartsARun(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.resume("booking", "r-ghost", map[string]any{"resumeToken": "t", "answers": map[string]any{"email": "a@b.c"}})
	if ref := r.refusal("booking", "r-ghost", 1); ref.Code != protocol.CodeUnknownRun {
		t.Fatalf("refusal %+v", ref)
	}
	kv, _ := r.js.KeyValue(t.Context(), r.names.RunsBucket())
	if _, err := kv.Get(t.Context(), "booking.r-ghost"); err == nil {
		t.Fatal("a resume created a run")
	}

	const run = "r-done"
	full := readyForTopics()
	r.start("booking", run, full)
	in := r.interrupt("booking", run, 1)
	r.resume("booking", run, map[string]any{"resumeToken": in.ResumeToken, "selected": "design"})
	r.wait("booking", run, "completed", 1)
	r.resume("booking", run, map[string]any{"resumeToken": in.ResumeToken, "selected": "design"})
	if ref := r.refusal("booking", run, 1); ref.Code != protocol.CodeNotWaiting {
		t.Fatalf("resume of a completed run: %+v", ref)
	}
}

func TestInvalidAnswersAreRefusedAndTheInterruptStays(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const run = "r-invalid"
	r.start("booking", run, nil)
	in := r.interrupt("booking", run, 1)
	r.resume("booking", run, answer(in, map[string]any{"shoe_size": "42"}))
	if ref := r.refusal("booking", run, 1); ref.Code != protocol.CodeInvalidAnswer || !strings.Contains(ref.Message, "email") {
		t.Fatalf("unknown field: %+v", ref)
	}
	r.resume("booking", run, answer(in, map[string]any{"email": 42}))
	if ref := r.refusal("booking", run, 2); ref.Code != protocol.CodeInvalidAnswer || !strings.Contains(ref.Message, "state.email") {
		t.Fatalf("wrong type: %+v", ref)
	}
	r.resume("booking", run, answer(in, map[string]any{"email": "a@b.c"}))
	if next := r.interrupt("booking", run, 2); next.Node != "ask_contact" {
		t.Fatalf("token no longer valid after refusals: %s", next.Node)
	}
}

func TestCancelEndsAWaitingRun(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const run = "r-cancel"
	r.start("booking", run, nil)
	r.interrupt("booking", run, 1)
	natstest.Publish(t, r.js, r.names.In("booking", "cancel"), protocol.TypeCancel, run, map[string]any{"reason": "customer left"})
	evs := r.wait("booking", run, "cancelled", 1)
	var d map[string]any
	natstest.Last(t, evs, "cancelled").Decode(t, &d)
	if d["reason"] != "customer left" {
		t.Fatalf("cancelled data %v", d)
	}
	if cp, _ := r.checkpoint("booking", run); cp.Status != engine.Cancelled {
		t.Fatalf("status %s", cp.Status)
	}
	if r.pending("booking", run) {
		t.Fatal("cancelled run still pending")
	}
	natstest.Publish(t, r.js, r.names.In("booking", "cancel"), protocol.TypeCancel, run, nil)
	if ref := r.refusal("booking", run, 1); ref.Code != protocol.CodeNotWaiting {
		t.Fatalf("second cancel: %+v", ref)
	}
}

func TestOriginAndTraceparentAreCarriedAcrossTheWait(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const run = "r-origin"
	origin := map[string]any{"slack": map[string]any{"channel": "C1", "threadTs": "171.2"}}
	ev, _ := events.New("o-1", "/slack/approvals", protocol.TypeStart, run, nowUTC(), map[string]any{"origin": origin})
	ev.SetExtension("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	body, _ := events.Encode(ev)
	natstest.PublishRaw(t, r.js, r.names.In("booking", "start"), body, nats.Header{"Content-Type": {events.Structured}})
	in := r.interrupt("booking", run, 1)
	r.resume("booking", run, answer(in, map[string]any{"email": "a@b.c"}))
	evs := r.wait("booking", run, "interrupted", 2)
	want, _ := json.Marshal(origin)
	for _, e := range evs {
		var d struct {
			Origin json.RawMessage `json:"origin"`
		}
		e.Decode(t, &d)
		if string(d.Origin) != string(want) {
			t.Fatalf("%s: origin %s, want %s", e.Subject, d.Origin, want)
		}
		if tp := events.StringExtension(e.Event, "traceparent"); tp != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
			t.Fatalf("%s: traceparent %q", e.Subject, tp)
		}
	}
}

func TestBinaryModeResume(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const run = "r-binary"
	r.start("booking", run, nil)
	in := r.interrupt("booking", run, 1)
	body, _ := json.Marshal(answer(in, map[string]any{"email": "a@b.c"}))
	natstest.PublishRaw(t, r.js, r.names.In("booking", "resume"), body, nats.Header{
		"ce-specversion": {"1.0"}, "ce-id": {"bin-1"}, "ce-source": {"/bot"},
		"ce-type": {protocol.TypeResume}, "ce-subject": {run}, "content-type": {"application/json"},
		"Nats-Msg-Id": {"bin-1"},
	})
	if next := r.interrupt("booking", run, 2); next.Node != "ask_contact" {
		t.Fatalf("binary-mode resume not applied: %s", next.Node)
	}
}

func TestSeveralWorkersShareTheWorkAndFinishEveryRun(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	natstest.Start(t, srv, testFlows()...)
	natstest.Start(t, srv, testFlows()...)
	natstest.Start(t, srv, testFlows()...)
	_, js := natstest.Connect(t, srv.ClientURL())
	r := &rig{t: t, srv: srv, js: js, names: mustNames(t)}
	full := readyForTopics()
	const n = 30
	for i := range n {
		r.start("booking", fmt.Sprintf("r-share-%d", i), full)
	}
	for i := range n {
		run := fmt.Sprintf("r-share-%d", i)
		in := r.interrupt("booking", run, 1)
		r.resume("booking", run, map[string]any{"resumeToken": in.ResumeToken, "selected": "product"})
	}
	for i := range n {
		evs := r.wait("booking", fmt.Sprintf("r-share-%d", i), "completed", 1)
		if natstest.Count(evs, "interrupted") != 1 || natstest.Count(evs, "resumed") != 1 {
			t.Fatalf("run %d: events %d", i, len(evs))
		}
	}
}

func nowUTC() time.Time { return time.Now().UTC() }

func TestInterruptedIsPublishedOnlyAfterCheckpointIndexAndAudit(t *testing.T) {
	t.Parallel()
	srv := natstest.StartServer(t, "")
	svc := natstest.Start(t, srv, testFlows()...)
	nc, js := natstest.Connect(t, srv.ClientURL())
	names := svc.Names()
	runs, err := js.KeyValue(t.Context(), names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	pending, err := js.KeyValue(t.Context(), names.PendingBucket())
	if err != nil {
		t.Fatal(err)
	}
	audit, err := js.Stream(t.Context(), names.AuditStream())
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		run string
		err error
	}
	results := make(chan seen, 16)
	// Check, the moment each interrupted event arrives, what is already durable.
	sub, err := nc.Subscribe("interlock.ev.booking.*.interrupted", func(m *nats.Msg) {
		var in protocol.Interrupted
		ev, err := events.Decode(m.Header, m.Data)
		if err == nil {
			err = json.Unmarshal(ev.Data(), &in)
		}
		if err == nil {
			var e jetstream.KeyValueEntry
			if e, err = runs.Get(t.Context(), "booking."+in.Run); err == nil && e.Revision() < in.Checkpoint {
				err = fmt.Errorf("checkpoint at %d, event says %d", e.Revision(), in.Checkpoint)
			}
		}
		if err == nil {
			var e jetstream.KeyValueEntry
			if e, err = pending.Get(t.Context(), "booking."+in.Run); err == nil && !strings.Contains(string(e.Value()), in.RequestID) {
				err = fmt.Errorf("pending entry %s is not for request %s", e.Value(), in.RequestID)
			}
		}
		if err == nil {
			var last *jetstream.RawStreamMsg
			if last, err = audit.GetLastMsgForSubject(t.Context(), names.Audit("booking", in.Run)); err == nil && !strings.Contains(string(last.Data), in.RequestID) {
				err = fmt.Errorf("last audit record %s is not the interrupt's", last.Data)
			}
		}
		results <- seen{in.Run, err}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	r := &rig{t: t, srv: srv, js: js, names: names}
	for i := range 8 {
		r.start("booking", fmt.Sprintf("r-order-%d", i), nil)
	}
	for range 8 {
		select {
		case s := <-results:
			if s.err != nil {
				t.Fatalf("%s: interrupted published before its effects were durable: %v", s.run, s.err)
			}
		case <-time.After(natstest.Wait):
			t.Fatal("no interrupted event")
		}
	}
}

func TestStartWithoutSubjectGetsARunIDThatEveryEventCarries(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	natstest.Publish(t, r.js, r.names.In("booking", "start"), protocol.TypeStart, "", map[string]any{"state": map[string]any{"email": "a@b.c"}})
	evs := natstest.WaitFor(t, r.js, r.names.EventStream(), "interlock.ev.booking.*.>", natstest.Nth("interrupted", 1))
	run := evs[0].Event.Subject()
	if !strings.HasPrefix(run, "r-") {
		t.Fatalf("assigned run id %q", run)
	}
	for _, e := range evs {
		if e.Event.Subject() != run || !strings.HasPrefix(e.Subject, "interlock.ev.booking."+run+".") {
			t.Fatalf("%s carries run %q, want %q", e.Subject, e.Event.Subject(), run)
		}
	}
	if cp, _ := r.checkpoint("booking", run); cp.Run != run {
		t.Fatalf("checkpoint run %q", cp.Run)
	}
}
