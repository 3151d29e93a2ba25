package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// TestReannounceAnswersARunWhoseInterruptedEventAgedOut keeps a run
// answerable past the events stream's retention: the pending interrupt is
// announced again with a fresh token, and the previous token is refused.
func TestReannounceAnswersARunWhoseInterruptedEventAgedOut(t *testing.T) {
	t.Parallel()
	r := newRigWith(t, interlock.Config{Streams: bus.StreamConfig{EventMaxAge: time.Second, Duplicates: time.Second}})
	const run = "r-old"
	r.start("booking", run, nil)
	first := r.interrupt("booking", run, 1)

	// Wait for the stream's retention to drop the interrupted event.
	stream, err := r.js.Stream(t.Context(), r.names.EventStream())
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the interrupted event aged out of "+r.names.EventStream(), func() bool {
		_, err := stream.GetLastMsgForSubject(t.Context(), r.names.Event("booking", run, "interrupted"))
		return errors.Is(err, jetstream.ErrMsgNotFound)
	})

	r.send("booking", "reannounce", protocol.TypeReannounce, run, map[string]any{"reason": "lost the message"})
	again := r.interrupt("booking", run, 1)
	if again.ResumeToken == "" || again.ResumeToken == first.ResumeToken || again.RequestID == first.RequestID {
		t.Fatalf("reannounced interrupt has token %q request %s; want a fresh token and request (first: %s)", again.ResumeToken, again.RequestID, first.RequestID)
	}
	if again.Node != first.Node || again.Kind != first.Kind || len(again.Questions) != 1 || again.Questions[0].Field != "email" || again.Checkpoint <= first.Checkpoint {
		t.Fatalf("reannounced interrupt %+v does not repeat %+v at a later checkpoint", again, first)
	}
	var p protocol.Pending
	kvp, err := r.js.KeyValue(t.Context(), r.names.PendingBucket())
	if err != nil {
		t.Fatal(err)
	}
	e, err := kvp.Get(t.Context(), "booking."+run)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(e.Value(), &p); err != nil || p.RequestID != again.RequestID || p.Checkpoint != again.Checkpoint {
		t.Fatalf("pending entry %+v (%v) does not name the reannounced request %s at %d", p, err, again.RequestID, again.Checkpoint)
	}

	r.resume("booking", run, answer(first, map[string]any{"email": "ann@example.com"}))
	if ref := r.refusal("booking", run, 1); ref.Code != protocol.CodeTokenMismatch {
		t.Fatalf("the previous token was answered %+v, want token_mismatch", ref)
	}
	r.resume("booking", run, answer(again, map[string]any{"email": "ann@example.com"}))
	next := r.interrupt("booking", run, 2)
	if next.Node != "ask_contact" {
		t.Fatalf("after answering the reannounced interrupt the run waits at %s", next.Node)
	}

	audit := natstest.Read(t, r.js, r.names.AuditStream(), r.names.Audit("booking", run))
	var rec protocol.AuditRecord
	for _, a := range audit {
		var r protocol.AuditRecord
		a.Decode(t, &r)
		if r.Action == protocol.ActionReannounced {
			rec = r
		}
	}
	if rec.Action != protocol.ActionReannounced || rec.Replaces != first.RequestID || rec.RequestID != again.RequestID || rec.Reason != "lost the message" {
		t.Fatalf("audit record of the reannounce = %+v", rec)
	}
}

func TestReannounceOfARunNotWaitingIsRefused(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.send("booking", "reannounce", protocol.TypeReannounce, "r-none", nil)
	if ref := r.refusal("booking", "r-none", 1); ref.Code != protocol.CodeUnknownRun {
		t.Fatalf("reannounce of an unknown run: %+v", ref)
	}
	r.start("booking", "r-c", nil)
	in := r.interrupt("booking", "r-c", 1)
	r.send("booking", "reannounce", protocol.TypeReannounce, "r-c", map[string]any{"requestId": "rq_other"})
	if ref := r.refusal("booking", "r-c", 1); ref.Code != protocol.CodeTokenMismatch {
		t.Fatalf("reannounce of another request: %+v", ref)
	}
	r.send("booking", "cancel", protocol.TypeCancel, "r-c", nil)
	r.wait("booking", "r-c", "cancelled", 1)
	r.send("booking", "reannounce", protocol.TypeReannounce, "r-c", map[string]any{"requestId": in.RequestID})
	if ref := r.refusal("booking", "r-c", 2); ref.Code != protocol.CodeNotWaiting {
		t.Fatalf("reannounce of a cancelled run: %+v", ref)
	}
}

// bigFlow grows the state by extra bytes in one node, then completes: its
// completed event carries the state again, so the checkpoint holds it twice.
func bigFlow(extra int) *engine.Flow {
	return engine.NewFlow[map[string]any]("big").
		Node("grow", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			if extra == 0 {
				return nil
			}
			return n.Set("blob", strings.Repeat("x", extra))
		}).
		Start("grow").Edge("grow", engine.End).MustBuild()
}

func TestAStartWhoseCheckpointWouldPassMaxPayloadIsRefusedNotRetried(t *testing.T) {
	t.Parallel()
	r := newRigWith(t, interlock.Config{Flows: []*engine.Flow{bigFlow(0)}})
	// 600 KB passes the 1 MiB inbound limit; the run completes at once and
	// its checkpoint holds the state twice (state and completed event).
	r.start("big", "r-big", map[string]any{"blob": strings.Repeat("y", 600_000)})
	ref := r.refusal("big", "r-big", 1)
	if ref.Code != protocol.CodeInvalidPayload || !strings.Contains(ref.Message, "max_payload") {
		t.Fatalf("refusal %+v; want invalid_payload naming max_payload", ref)
	}
	natstest.WaitDrained(t, r.js, r.names.InStream())
}

func TestANodeThatGrowsTheStatePastMaxPayloadFailsTheRun(t *testing.T) {
	t.Parallel()
	r := newRigWith(t, interlock.Config{Flows: []*engine.Flow{bigFlow(700_000)}})
	r.start("big", "r-grow", map[string]any{"small": 1})
	evs := r.wait("big", "r-grow", "failed", 1)
	var f protocol.Failed
	natstest.Last(t, evs, "failed").Decode(t, &f)
	if f.Node != "grow" || !strings.Contains(f.Error, "max_payload") || !strings.Contains(f.Error, `node "grow"`) {
		t.Fatalf("failed event %+v; want the node and max_payload named", f)
	}
	cp, _ := r.checkpoint("big", "r-grow")
	if cp.Status != engine.Failed || string(cp.State["small"]) != "1" {
		t.Fatalf("checkpoint %s with state %v; want failed with the state it had before", cp.Status, cp.State)
	}
	natstest.WaitDrained(t, r.js, r.names.InStream())
}

// TestAMessageThatFailsOnEveryDeliveryIsDeadLetteredAtTheLimit breaks the
// checkpoint bucket under a running service: a start can then never be
// stored, and at the consumer's last delivery it is dead-lettered, not
// retried for ever.
func TestAMessageThatFailsOnEveryDeliveryIsDeadLetteredAtTheLimit(t *testing.T) {
	t.Parallel()
	r := newRigWith(t, interlock.Config{MaxDeliver: 3})
	if err := r.js.DeleteStream(t.Context(), "KV_"+r.names.RunsBucket()); err != nil {
		t.Fatal(err)
	}
	id := r.start("booking", "r-doomed", nil)
	natstest.WaitDrained(t, r.js, r.names.InStream())
	dead := natstest.Read(t, r.js, r.names.DeadLetterStream(), r.names.DeadLetter(bus.ReasonDeliveryLimit))
	if len(dead) != 1 || dead[0].Event.ID() != id {
		t.Fatalf("%d dead letters under %s; want the start %s", len(dead), bus.ReasonDeliveryLimit, id)
	}
	if msg := dead[0].Header.Get(bus.HeaderError); !strings.Contains(msg, "3 deliveries") {
		t.Fatalf("dead letter error %q does not say it failed on every delivery", msg)
	}
}

// TestResumeTokensAppearOnlyInInterruptedEvents drives a run through
// re-asks, a refused resume, a dead letter and completion, then looks for
// every token it was given everywhere else Interlock writes: checkpoints
// (every kept revision), the pending index, the audit stream, the dead
// letters and every other event.
func TestResumeTokensAppearOnlyInInterruptedEvents(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const run = "r-tok"
	r.start("booking", run, map[string]any{"name": "Ann", "phone": "1", "level": "beginner"})
	var tokens []string
	in := r.interrupt("booking", run, 1)
	tokens = append(tokens, in.ResumeToken)
	// A resume refused for its schema: the token is live and dead-lettered.
	r.resume("booking", run, map[string]any{"resumeToken": in.ResumeToken, "answers": 5})
	r.refusal("booking", run, 1)
	r.resume("booking", run, answer(in, map[string]any{"email": "bad"}))
	in = r.interrupt("booking", run, 2)
	tokens = append(tokens, in.ResumeToken)
	r.resume("booking", run, answer(in, map[string]any{"email": "ann@example.com"}))
	in = r.interrupt("booking", run, 3)
	tokens = append(tokens, in.ResumeToken)
	r.send("booking", "reannounce", protocol.TypeReannounce, run, nil)
	in = r.interrupt("booking", run, 4)
	tokens = append(tokens, in.ResumeToken)
	r.send("booking", "cancel", protocol.TypeCancel, run, nil)
	r.wait("booking", run, "cancelled", 1)
	natstest.WaitDrained(t, r.js, r.names.InStream())

	var places []natstest.Received
	for _, kind := range []string{"started", "resumed", "refused", "cancelled"} {
		places = append(places, natstest.Read(t, r.js, r.names.EventStream(), r.names.Event("booking", run, kind))...)
	}
	places = append(places, natstest.Read(t, r.js, r.names.AuditStream(), ">")...)
	dead := natstest.Read(t, r.js, r.names.DeadLetterStream(), ">")
	if len(dead) == 0 {
		t.Fatal("the schema-refused resume was not dead-lettered")
	}
	places = append(places, dead...)
	for _, bucket := range []string{r.names.RunsBucket(), r.names.PendingBucket()} {
		places = append(places, natstest.Read(t, r.js, "KV_"+bucket, ">")...)
	}
	for _, p := range places {
		for _, tok := range tokens {
			if strings.Contains(string(p.Data), tok) {
				t.Fatalf("token found in %s: %s", p.Subject, p.Data)
			}
			for k, vs := range p.Header {
				if strings.Contains(strings.Join(vs, " "), tok) {
					t.Fatalf("token found in header %s of %s", k, p.Subject)
				}
			}
		}
	}
}
