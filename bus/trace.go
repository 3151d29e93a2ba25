package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/protocol"
)

// tracerName is the instrumentation scope of the worker's spans.
const tracerName = "github.com/interlockhq/interlock/bus"

// Attributes of the worker's spans (docs/operations.md, Tracing). None
// holds a resume token, an answer, state, args or a person's name.
const (
	attrVerb             = attribute.Key("interlock.verb")
	attrFlow             = attribute.Key("interlock.flow")
	attrRun              = attribute.Key("interlock.run")
	attrNode             = attribute.Key("interlock.node")
	attrStatus           = attribute.Key("interlock.status")
	attrCheckpoint       = attribute.Key("interlock.checkpoint")
	attrEvents           = attribute.Key("interlock.events")
	attrInterruptKind    = attribute.Key("interlock.interrupt.kind")
	attrInterruptRequest = attribute.Key("interlock.interrupt.request_id")
	attrAnsweredKind     = attribute.Key("interlock.answered.kind")
	attrAnsweredRequest  = attribute.Key("interlock.answered.request_id")
	attrDecision         = attribute.Key("interlock.decision")
	attrAction           = attribute.Key("interlock.action")
	attrRefusalCode      = attribute.Key("interlock.refusal.code")
	attrDeadLetter       = attribute.Key("interlock.dead_letter.reason")
	attrDuplicate        = attribute.Key("interlock.duplicate")
	attrDisposition      = attribute.Key("interlock.disposition")
	attrDelivery         = attribute.Key("interlock.delivery")
	attrLink             = attribute.Key("interlock.link")
)

// Values of the interlock.disposition and interlock.link attributes.
const (
	dispositionAcked      = "acknowledged"
	dispositionRedeliver  = "redelivered"
	dispositionDeadLetter = "dead_lettered"
	linkRun               = "run"
)

// span traces the handling of one inbound message: one transition of a
// run, or a refusal. It is started once the command's traceparent is known
// (with the time the handling began), as a child of that traceparent when
// the command has one; it is ended once the message is settled, with a
// link to the traceparent the run carried when the message came.
type span struct {
	tracer trace.Tracer
	name   string
	began  time.Time
	attrs  []attribute.KeyValue
	// parent is the command's trace context; sp the span once started,
	// and tp its traceparent when it is a span of its own.
	parent trace.SpanContext
	sp     trace.Span
	tp     string
}

// span returns the span of msg, not yet started.
func (w *Worker) span(msg jetstream.Msg, md *jetstream.MsgMetadata, began time.Time) *span {
	n := w.cfg.Names
	flow, verb, _, _, _ := parseSubject(n, md.Stream, msg.Subject())
	name := "interlock.command"
	if _, ok := w.verbs[verb]; ok {
		name = "interlock." + verb
	}
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String("nats"),
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(msg.Subject()),
		semconv.MessagingConsumerGroupName(n.Consumer()),
		attrDelivery.Int64(int64(md.NumDelivered)),
	}
	if verb != "" {
		attrs = append(attrs, attrVerb.String(verb))
	}
	if flow != "" {
		attrs = append(attrs, attrFlow.String(flow))
	}
	return &span{tracer: w.tracer, name: name, began: began, attrs: attrs}
}

// start starts the span, a child of traceparent when it is valid, and
// returns the context to handle the message in and the traceparent the
// messages it causes carry: the span's, or "" when the span is not one of
// its own (a no-op tracer hands back the parent's context).
func (s *span) start(ctx context.Context, traceparent string) (context.Context, string) {
	if s.sp != nil {
		return trace.ContextWithSpan(ctx, s.sp), s.tp
	}
	if traceparent != "" {
		s.parent = parseTraceparent(traceparent)
		if s.parent.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, s.parent)
		}
	}
	ctx, s.sp = s.tracer.Start(ctx, s.name, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(s.began), trace.WithAttributes(s.attrs...))
	if sc := s.sp.SpanContext(); sc.IsValid() && !sameSpan(sc, s.parent) {
		s.tp = formatTraceparent(sc)
	}
	return ctx, s.tp
}

// event records the decoded command's CloudEvent attributes.
func (s *span) event(ev events.Event) {
	if !s.sp.IsRecording() {
		return
	}
	s.sp.SetAttributes(
		semconv.MessagingMessageID(ev.ID()),
		semconv.CloudEventsEventID(ev.ID()),
		semconv.CloudEventsEventSource(ev.Source()),
		semconv.CloudEventsEventType(ev.Type()),
		semconv.CloudEventsEventSpecVersion(ev.SpecVersion()),
	)
	if ev.Subject() != "" {
		s.sp.SetAttributes(semconv.CloudEventsEventSubject(ev.Subject()))
	}
}

// end ends the span with what became of the message: out and err as the
// worker had them, and the disposition of the message.
func (s *span) end(ctx context.Context, out engine.Outcome, err error, disposition string) {
	s.start(ctx, "")
	defer s.sp.End()
	if !s.sp.IsRecording() {
		return
	}
	if sc := parseTraceparent(out.RunTraceparent); sc.IsValid() && !sameSpan(sc, s.parent) {
		s.sp.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attrLink.String(linkRun)}})
	}
	s.sp.SetAttributes(outcomeAttributes(out)...)
	s.sp.SetAttributes(attrDisposition.String(disposition))
	switch {
	case err != nil:
		s.sp.SetStatus(codes.Error, err.Error())
	case out.Refused != nil:
		s.sp.SetStatus(codes.Error, "refused: "+string(out.Refused.Code))
	case out.DeadLetter != "":
		s.sp.SetStatus(codes.Error, "dead-lettered: "+out.DeadLetter)
	case out.Status == engine.Failed && publishes(out, protocol.EventFailed):
		s.sp.SetStatus(codes.Error, "run failed")
	}
}

// outcomeAttributes describes an outcome: where the run stands, what it
// published, what was asked and answered. Never tokens, answers, state,
// args, reasons or approvers.
func outcomeAttributes(out engine.Outcome) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	add := func(k attribute.Key, v string) {
		if v != "" {
			attrs = append(attrs, k.String(v))
		}
	}
	add(attrFlow, out.Flow)
	add(attrRun, out.Run)
	add(attrNode, out.Node)
	add(attrStatus, string(out.Status))
	if out.Checkpoint > 0 {
		attrs = append(attrs, attrCheckpoint.Int64(int64(out.Checkpoint)))
	}
	add(attrAction, out.Action)
	if out.Refused != nil {
		add(attrRefusalCode, string(out.Refused.Code))
		add(semconv.ErrorTypeKey, string(out.Refused.Code))
	}
	add(attrDeadLetter, out.DeadLetter)
	if out.Duplicate {
		attrs = append(attrs, attrDuplicate.Bool(true))
	}
	var kinds []string
	for _, m := range out.Events {
		kinds = append(kinds, m.Kind)
		switch d := m.Data.(type) {
		case *protocol.Interrupted:
			add(attrInterruptKind, d.Kind)
			add(attrInterruptRequest, d.RequestID)
		case *protocol.Resumed:
			add(attrAnsweredKind, d.Kind)
			add(attrAnsweredRequest, d.RequestID)
			add(attrDecision, d.Decision)
		case *protocol.Expired:
			add(attrAnsweredKind, d.Kind)
			add(attrAnsweredRequest, d.RequestID)
		case *protocol.Decided:
			add(attrDecision, d.Decision)
			add(attrAction, d.Tool)
		}
	}
	if len(kinds) > 0 {
		attrs = append(attrs, attrEvents.StringSlice(kinds))
	}
	return attrs
}

func publishes(out engine.Outcome, kind string) bool {
	for _, m := range out.Events {
		if m.Kind == kind {
			return true
		}
	}
	return false
}

// traceContext reads and writes W3C traceparents as OpenTelemetry does.
var traceContext = propagation.TraceContext{}

// parseTraceparent returns the span context of a W3C traceparent, or an
// invalid one.
func parseTraceparent(tp string) trace.SpanContext {
	if tp == "" {
		return trace.SpanContext{}
	}
	ctx := traceContext.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	return trace.SpanContextFromContext(ctx)
}

// formatTraceparent writes a span context as a W3C traceparent.
func formatTraceparent(sc trace.SpanContext) string {
	c := propagation.MapCarrier{}
	traceContext.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c["traceparent"]
}

func sameSpan(a, b trace.SpanContext) bool {
	return a.TraceID() == b.TraceID() && a.SpanID() == b.SpanID()
}
