package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// callerTraceparent is the agent's span that starts the runs.
const callerTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// Values that must never appear in a span.
const (
	secretState  = "state-secret-7d1f"
	secretAnswer = "answer-secret-IBAN-GB29"
	secretArgs   = "args-secret-acct-991"
	secretPerson = "approver-secret-sam@example.com"
	secretReason = "reason-secret-looks-fine"
)

// newTracer returns a tracer provider recording to memory, shut down at
// cleanup (after the services started later are stopped).
func newTracer(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() {
		if err := tp.Shutdown(context.WithoutCancel(t.Context())); err != nil {
			t.Errorf("shutting the tracer provider down: %v", err)
		}
	})
	return tp, exp
}

// spanContexts records the span context each node ran in.
type spanContexts struct {
	mu   sync.Mutex
	seen map[string]trace.SpanContext
}

func (s *spanContexts) record(ctx context.Context, node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[node] = trace.SpanContextFromContext(ctx)
}

func (s *spanContexts) get(node string) trace.SpanContext {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[node]
}

// wireFlow asks which account to pay, then for approval of the transfer.
func wireFlow(seen *spanContexts) *engine.Flow {
	return engine.NewFlow[map[string]any]("wire").
		Node("ask_account", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			seen.record(ctx, "ask_account")
			_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{Field: "account", Question: "Which account?"}}})
			return err
		}).
		Node("review", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			seen.record(ctx, "review")
			_, err := n.Approve(ctx, engine.Approval{Action: "send_wire", Args: map[string]any{"to": secretArgs, "amount": 900}, ApproverRole: "treasurer"})
			return err
		}).
		Start("ask_account").
		Edge("ask_account", "review").
		MustBuild()
}

// publishTraced publishes a structured CloudEvent carrying traceparent.
func publishTraced(t *testing.T, js jetstream.JetStream, subject, typ, run, traceparent string, data any) {
	t.Helper()
	id := fmt.Sprintf("ev-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	ev, err := events.New(id, "/agents/traced", typ, run, time.Now().UTC(), data)
	if err != nil {
		t.Fatal(err)
	}
	ev.SetExtension(protocol.ExtTraceparent, traceparent)
	body, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	natstest.PublishRaw(t, js, subject, body, nats.Header{"Content-Type": {events.Structured}, jetstream.MsgIDHeader: {id}})
}

// onlySpan returns the one span named name.
func onlySpan(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %s, want 1; spans: %v", len(found), name, spanNames(exp))
	}
	return found[0]
}

func spanNames(exp *tracetest.InMemoryExporter) []string {
	var names []string
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name)
	}
	return names
}

// attr returns a span attribute's value as text ("" when absent).
func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// wantAttrs checks span attributes.
func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := attr(s, k); got != v {
			t.Errorf("%s: attribute %s = %q, want %q", s.Name, k, got, v)
		}
	}
}

// traceparentOf is the W3C traceparent of a span.
func traceparentOf(s tracetest.SpanStub) string {
	return fmt.Sprintf("00-%s-%s-%s", s.SpanContext.TraceID(), s.SpanContext.SpanID(), s.SpanContext.TraceFlags())
}

// linksTo reports whether s links to the span context of traceparent.
func linksTo(s tracetest.SpanStub, traceparent string) bool {
	for _, l := range s.Links {
		if fmt.Sprintf("00-%s-%s-%s", l.SpanContext.TraceID(), l.SpanContext.SpanID(), l.SpanContext.TraceFlags()) == traceparent {
			return true
		}
	}
	return false
}

// wantCarried checks that each event of kinds among evs carries traceparent.
func wantCarried(t *testing.T, evs []natstest.Received, traceparent string, kinds ...string) {
	t.Helper()
	for _, kind := range kinds {
		e := natstest.Last(t, evs, kind)
		if got := events.StringExtension(e.Event, protocol.ExtTraceparent); got != traceparent {
			t.Errorf("%s carries traceparent %q, want the span's %q", e.Subject, got, traceparent)
		}
	}
}

// wantNoSecrets checks that no attribute of any span, link or span event
// holds one of secrets.
func wantNoSecrets(t *testing.T, spans []tracetest.SpanStub, secrets ...string) {
	t.Helper()
	for _, s := range spans {
		kvs := slices.Clone(s.Attributes)
		for _, l := range s.Links {
			kvs = append(kvs, l.Attributes...)
		}
		for _, e := range s.Events {
			kvs = append(kvs, e.Attributes...)
		}
		kvs = append(kvs, attribute.String("status", s.Status.Description), attribute.String("name", s.Name))
		for _, kv := range kvs {
			for _, secret := range secrets {
				if secret != "" && strings.Contains(kv.Value.Emit(), secret) {
					t.Errorf("span %s: %s = %q holds a secret value", s.Name, kv.Key, kv.Value.Emit())
				}
			}
		}
	}
}

// TestATraceFollowsARunAcrossTheHumanWaitAndARestart starts a run with the
// agent's traceparent, restarts the service (with a new tracer provider)
// while the run waits, answers its question with no traceparent, approves
// its approval from a bot that continues the trace of the interrupted
// event, and follows the spans and the traceparents of the events.
func TestATraceFollowsARunAcrossTheHumanWaitAndARestart(t *testing.T) {
	t.Parallel()
	seen := &spanContexts{seen: map[string]trace.SpanContext{}}
	srv := natstest.StartServer(t, "")
	tp1, exp1 := newTracer(t)
	svc := natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{wireFlow(seen)}, Secret: natstest.Secret, TracerProvider: tp1})
	_, js := natstest.Connect(t, srv.ClientURL())
	r := &rig{t: t, srv: srv, js: js, names: svc.Names()}
	const run = "r-traced"

	publishTraced(t, js, r.names.In("wire", "start"), protocol.TypeStart, run, callerTraceparent,
		map[string]any{"state": map[string]any{"memo": secretState}})
	evs := r.wait("wire", run, "interrupted", 1)
	var asked protocol.Interrupted
	natstest.Last(t, evs, "interrupted").Decode(t, &asked)
	if err := svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}

	caller := parseTraceparent(t, callerTraceparent)
	start := onlySpan(t, exp1, "interlock.start")
	if start.SpanContext.TraceID() != caller.TraceID() {
		t.Errorf("start span is in trace %s, want the caller's %s", start.SpanContext.TraceID(), caller.TraceID())
	}
	if start.Parent.SpanID() != caller.SpanID() || !start.Parent.IsRemote() {
		t.Errorf("start span's parent = %s (remote %v), want the caller's span %s", start.Parent.SpanID(), start.Parent.IsRemote(), caller.SpanID())
	}
	if start.SpanKind != trace.SpanKindConsumer {
		t.Errorf("start span kind = %s, want consumer", start.SpanKind)
	}
	if start.Status.Code != codes.Unset {
		t.Errorf("start span status = %+v, want unset", start.Status)
	}
	wantAttrs(t, start, map[string]string{
		"interlock.verb": "start", "interlock.flow": "wire", "interlock.run": run, "interlock.node": "ask_account",
		"interlock.status": "waiting", "interlock.interrupt.kind": "question", "interlock.interrupt.request_id": asked.RequestID,
		"interlock.events": `["started","interrupted"]`, "interlock.disposition": "acknowledged",
		"messaging.system": "nats", "messaging.destination.name": r.names.In("wire", "start"),
		"cloudevents.event_type": protocol.TypeStart, "cloudevents.event_subject": run,
	})
	if got := seen.get("ask_account"); got.SpanID() != start.SpanContext.SpanID() {
		t.Errorf("the node ran in span %s, want the start's %s", got.SpanID(), start.SpanContext.SpanID())
	}
	wantCarried(t, evs, traceparentOf(start), "started", "interrupted")
	if cp, _ := r.checkpoint("wire", run); cp.Traceparent != callerTraceparent {
		t.Errorf("checkpoint traceparent = %q, want the caller's %q", cp.Traceparent, callerTraceparent)
	}

	// Days later, another process: a new service, a new tracer provider.
	tp2, exp2 := newTracer(t)
	svc = natstest.StartWith(t, srv, interlock.Config{Flows: []*engine.Flow{wireFlow(seen)}, Secret: natstest.Secret, TracerProvider: tp2})

	// The person answers with no traceparent: a new trace, linked to the run's.
	r.resume("wire", run, answer(asked, map[string]any{"account": secretAnswer}))
	evs = r.wait("wire", run, "interrupted", 2)
	var approval protocol.Interrupted
	natstest.Last(t, evs, "interrupted").Decode(t, &approval)
	natstest.Eventually(t, "the answer's span ended", func() bool { return len(exp2.GetSpans()) == 1 })
	answered := onlySpan(t, exp2, "interlock.resume")
	if answered.Parent.IsValid() {
		t.Errorf("a resume without a traceparent has parent %s, want none", answered.Parent.SpanID())
	}
	if !linksTo(answered, callerTraceparent) {
		t.Errorf("the answer's span links to %+v, want the run's traceparent %s", answered.Links, callerTraceparent)
	}
	if l := answered.Links; len(l) != 1 || len(l[0].Attributes) != 1 || l[0].Attributes[0] != attribute.String("interlock.link", "run") {
		t.Errorf("the answer's span links %+v, want one link marked interlock.link=run", l)
	}
	wantAttrs(t, answered, map[string]string{
		"interlock.verb": "resume", "interlock.flow": "wire", "interlock.run": run, "interlock.node": "review",
		"interlock.status": "waiting", "interlock.answered.kind": "question", "interlock.answered.request_id": asked.RequestID,
		"interlock.interrupt.kind": "approval", "interlock.interrupt.request_id": approval.RequestID,
		"interlock.events": `["resumed","interrupted"]`,
	})
	if got := seen.get("review"); got.SpanID() != answered.SpanContext.SpanID() {
		t.Errorf("the node ran in span %s, want the answer's %s", got.SpanID(), answered.SpanContext.SpanID())
	}
	wantCarried(t, evs, traceparentOf(answered), "resumed", "interrupted")
	if cp, _ := r.checkpoint("wire", run); cp.Traceparent != callerTraceparent {
		t.Errorf("after an untraced resume the checkpoint holds %q, want the caller's %q", cp.Traceparent, callerTraceparent)
	}

	// A bot approves, continuing the trace of the interrupted event it read.
	botTrace := events.StringExtension(natstest.Last(t, evs, "interrupted").Event, protocol.ExtTraceparent)
	publishTraced(t, js, r.names.In("wire", "resume"), protocol.TypeResume, run, botTrace, map[string]any{
		"resumeToken": approval.ResumeToken, "decision": "approve", "approver": secretPerson, "reason": secretReason,
	})
	evs = r.wait("wire", run, "completed", 1)
	if err := svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	var approved tracetest.SpanStub
	for _, s := range exp2.GetSpans() {
		if s.Name == "interlock.resume" && s.SpanContext.SpanID() != answered.SpanContext.SpanID() {
			approved = s
		}
	}
	if approved.Parent.SpanID() != answered.SpanContext.SpanID() || approved.SpanContext.TraceID() != answered.SpanContext.TraceID() {
		t.Errorf("the approval's span has parent %s in trace %s, want the answer's span %s (the bot's traceparent)",
			approved.Parent.SpanID(), approved.SpanContext.TraceID(), answered.SpanContext.SpanID())
	}
	if !linksTo(approved, callerTraceparent) {
		t.Errorf("the approval's span links to %+v, want also the run's traceparent %s", approved.Links, callerTraceparent)
	}
	wantAttrs(t, approved, map[string]string{
		"interlock.verb": "resume", "interlock.status": "completed", "interlock.answered.kind": "approval",
		"interlock.decision": "approve", "interlock.action": "send_wire", "interlock.events": `["resumed","completed"]`,
	})
	wantCarried(t, evs, traceparentOf(approved), "resumed", "completed")
	if cp, _ := r.checkpoint("wire", run); cp.Traceparent != botTrace {
		t.Errorf("after a traced resume the checkpoint holds %q, want the resume's %q", cp.Traceparent, botTrace)
	}

	spans := append(exp1.GetSpans(), exp2.GetSpans()...)
	wantNoSecrets(t, spans, asked.ResumeToken, approval.ResumeToken, secretState, secretAnswer, secretArgs, secretPerson, secretReason)
}

// TestARefusedResumeHasAnErrorSpanWithItsCode sends a resume with a wrong
// token: its span has an error status naming the refusal code, links to
// the run's trace, and the refused event carries the span.
func TestARefusedResumeHasAnErrorSpanWithItsCode(t *testing.T) {
	t.Parallel()
	tp, exp := newTracer(t)
	seen := &spanContexts{seen: map[string]trace.SpanContext{}}
	r := newRigWith(t, interlock.Config{Flows: []*engine.Flow{wireFlow(seen)}, TracerProvider: tp})
	const run = "r-refused"
	publishTraced(t, r.js, r.names.In("wire", "start"), protocol.TypeStart, run, callerTraceparent, nil)
	asked := r.interrupt("wire", run, 1)
	forged := "AAAA" + asked.ResumeToken[4:]
	r.resume("wire", run, answer(protocol.Interrupted{ResumeToken: forged}, map[string]any{"account": secretAnswer}))
	evs := r.wait("wire", run, "refused", 1)
	var refused tracetest.SpanStub
	natstest.Eventually(t, "the refused resume's span ended", func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == "interlock.resume" {
				refused = s
				return true
			}
		}
		return false
	})
	if refused.Status.Code != codes.Error || !strings.Contains(refused.Status.Description, string(protocol.CodeTokenMismatch)) {
		t.Errorf("refused resume's status = %+v, want an error naming %s", refused.Status, protocol.CodeTokenMismatch)
	}
	wantAttrs(t, refused, map[string]string{
		"interlock.refusal.code": string(protocol.CodeTokenMismatch), "error.type": string(protocol.CodeTokenMismatch),
		"interlock.status": "waiting", "interlock.run": run, "interlock.disposition": "acknowledged",
	})
	if !linksTo(refused, callerTraceparent) {
		t.Errorf("refused resume's span links to %+v, want the run's traceparent", refused.Links)
	}
	wantCarried(t, evs, traceparentOf(refused), "refused")
	wantNoSecrets(t, exp.GetSpans(), asked.ResumeToken, forged, secretAnswer)
}

// TestADeadlineSpanIsAChildOfTheTransitionThatSetIt lets a question's
// deadline pass: the schedule carries the span of the transition that
// asked, so the expiry's span is its child, in the agent's trace.
func TestADeadlineSpanIsAChildOfTheTransitionThatSetIt(t *testing.T) {
	t.Parallel()
	tp, exp := newTracer(t)
	r := newRigWith(t, interlock.Config{Flows: []*engine.Flow{deadlineFlow()}, TracerProvider: tp})
	const run = "r-expiring"
	publishTraced(t, r.js, r.names.In("deadline", "start"), protocol.TypeStart, run, callerTraceparent, nil)
	evs := r.wait("deadline", run, "expired", 1)
	var expire tracetest.SpanStub
	natstest.Eventually(t, "the expiry's span ended", func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == "interlock.expire" {
				expire = s
				return true
			}
		}
		return false
	})
	start := onlySpan(t, exp, "interlock.start")
	if expire.Parent.SpanID() != start.SpanContext.SpanID() || expire.SpanContext.TraceID() != parseTraceparent(t, callerTraceparent).TraceID() {
		t.Errorf("expiry span has parent %s in trace %s, want the start's span %s in the caller's trace",
			expire.Parent.SpanID(), expire.SpanContext.TraceID(), start.SpanContext.SpanID())
	}
	wantAttrs(t, expire, map[string]string{
		"interlock.verb": "expire", "interlock.status": "expired", "interlock.answered.kind": "question",
		"interlock.events": `["expired"]`,
	})
	wantCarried(t, evs, traceparentOf(expire), "expired")
}

// TestAToolRequestHasASpanNamingTheDecision asks the tool-call gate about
// a call its rules allow.
func TestAToolRequestHasASpanNamingTheDecision(t *testing.T) {
	t.Parallel()
	tp, exp := newTracer(t)
	r := gateRigWith(t, interlock.Config{TracerProvider: tp})
	publishTraced(t, r.js, r.names.GateRequest(), protocol.TypeToolRequest, "", callerTraceparent,
		map[string]any{"callId": "call-traced", "tool": "issue_refund", "args": map[string]any{"orderId": secretArgs, "amount": 200}})
	evs := r.wait("gate", "call-traced", "decided", 1)
	var req tracetest.SpanStub
	natstest.Eventually(t, "the request's span ended", func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == "interlock.request" {
				req = s
				return true
			}
		}
		return false
	})
	if req.Parent.SpanID() != parseTraceparent(t, callerTraceparent).SpanID() {
		t.Errorf("request span's parent = %s, want the caller's span", req.Parent.SpanID())
	}
	wantAttrs(t, req, map[string]string{
		"interlock.verb": "request", "interlock.flow": "gate", "interlock.run": "call-traced",
		"interlock.decision": "allowed", "interlock.action": "issue_refund", "interlock.events": `["decided"]`,
	})
	wantCarried(t, evs, traceparentOf(req), "decided")
	wantNoSecrets(t, exp.GetSpans(), secretArgs)
}

func parseTraceparent(t *testing.T, tp string) trace.SpanContext {
	t.Helper()
	parts := strings.Split(tp, "-")
	tid, err := trace.TraceIDFromHex(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	sid, err := trace.SpanIDFromHex(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}
