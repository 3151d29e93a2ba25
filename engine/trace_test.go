package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/protocol"
)

const (
	callerTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	startSpan   = "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01"
	resumeSpan  = "00-0af7651916cd43dd8448eb211c80319c-2222222222222222-01"
	refuseSpan  = "00-0af7651916cd43dd8448eb211c80319c-3333333333333333-01"
)

// TestCommandSpanIsCarriedByItsEventsAndTheRunKeepsTheCallersTraceparent
// checks Inbound.Span: what a traced command publishes carries its span,
// the checkpoint keeps the traceparent the caller sent, and a later
// command is told which traceparent the run carried when it came.
func TestCommandSpanIsCarriedByItsEventsAndTheRunKeepsTheCallersTraceparent(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, booking.Flow())
	out, err := h.Runner.Start(t.Context(), engine.Start{Flow: "booking", Run: "r-1",
		Inbound: engine.Inbound{EventID: "ev-start", Source: "/agent", Traceparent: callerTrace, Span: startSpan}})
	if err != nil || out.Refused != nil {
		t.Fatalf("start: %+v, %v", out, err)
	}
	if out.RunTraceparent != "" {
		t.Errorf("a new run's RunTraceparent = %q, want none", out.RunTraceparent)
	}
	for _, m := range h.Publisher.Messages("r-1") {
		if m.Traceparent != startSpan {
			t.Errorf("start's %s %s carries %q, want the start's span %q", m.Stream, m.Kind, m.Traceparent, startSpan)
		}
	}
	if got := h.Checkpoint("r-1").Traceparent; got != callerTrace {
		t.Fatalf("checkpoint traceparent = %q, want the caller's %q", got, callerTrace)
	}
	published := len(h.Publisher.Messages("r-1"))

	// A resume with no traceparent of its own, traced by a span.
	email, _ := json.Marshal("ann@example.com")
	out = h.Resume("r-1", engine.Resume{Answers: map[string]json.RawMessage{"email": email},
		Inbound: engine.Inbound{EventID: "ev-resume", Source: "/human", Span: resumeSpan}})
	if out.Refused != nil {
		t.Fatalf("resume refused: %+v", out.Refused)
	}
	if out.RunTraceparent != callerTrace {
		t.Errorf("resume's RunTraceparent = %q, want the run's %q", out.RunTraceparent, callerTrace)
	}
	for _, m := range h.Publisher.Messages("r-1")[published:] {
		if m.Traceparent != resumeSpan {
			t.Errorf("resume's %s %s carries %q, want the resume's span %q", m.Stream, m.Kind, m.Traceparent, resumeSpan)
		}
	}
	if got := h.Checkpoint("r-1").Traceparent; got != callerTrace {
		t.Errorf("after a resume without a traceparent the checkpoint holds %q, want the caller's %q", got, callerTrace)
	}
	published = len(h.Publisher.Messages("r-1"))

	// A refused resume: the refusal carries the refused command's span.
	out = h.Resume("r-1", engine.Resume{Token: "not-the-token",
		Inbound: engine.Inbound{EventID: "ev-bad", Source: "/human", Span: refuseSpan}})
	if out.Refused == nil || out.Refused.Code != protocol.CodeTokenMismatch {
		t.Fatalf("resume with a wrong token: %+v", out)
	}
	msgs := h.Publisher.Messages("r-1")[published:]
	if len(msgs) == 0 {
		t.Fatal("the refusal published nothing")
	}
	for _, m := range msgs {
		if m.Traceparent != refuseSpan {
			t.Errorf("refusal's %s %s carries %q, want the refused command's span %q", m.Stream, m.Kind, m.Traceparent, refuseSpan)
		}
	}
}

// TestWithoutASpanEventsCarryTheRunsTraceparent checks the untraced
// default: every event carries the traceparent the run carries.
func TestWithoutASpanEventsCarryTheRunsTraceparent(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, booking.Flow())
	if _, err := h.Runner.Start(t.Context(), engine.Start{Flow: "booking", Run: "r-1",
		Inbound: engine.Inbound{EventID: "ev-start", Source: "/agent", Traceparent: callerTrace}}); err != nil {
		t.Fatal(err)
	}
	h.Answer("r-1", map[string]any{"email": "ann@example.com"})
	for _, m := range h.Publisher.Messages("r-1") {
		if m.Traceparent != callerTrace {
			t.Errorf("%s %s carries %q, want the run's %q", m.Stream, m.Kind, m.Traceparent, callerTrace)
		}
	}
}
