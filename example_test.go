package interlock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/protocol"
)

// A service traced with the caller's own tracer provider (here one that
// records in memory; in production one with an OTLP exporter): each
// transition is a span, and the events it publishes carry the span's
// context as their traceparent.
func ExampleConfig_tracing() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "interlock-tracing-example")
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer func() { _ = tp.Shutdown(ctx) }() // after the service stops

	svc, err := interlock.Start(ctx, interlock.Config{
		Flows:          []*engine.Flow{refund.Flow()},
		Embedded:       &bus.ServerConfig{DataDir: dir, Port: -1, LazyFsync: true},
		TracerProvider: tp,
	})
	if err != nil {
		log.Fatal(err)
	}
	state := map[string]json.RawMessage{"orderId": json.RawMessage(`"o-1"`), "amount": json.RawMessage(`4800`), "last4": json.RawMessage(`"4821"`)}
	ev, err := svc.Client("/examples/tracing").Start(ctx, refund.Name, "r-traced", state, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := svc.Stop(ctx); err != nil { // every span has ended
		log.Fatal(err)
	}

	s := spans.GetSpans()[0]
	fmt.Println(s.Name)
	for _, kv := range s.Attributes {
		switch kv.Key {
		case "interlock.flow", "interlock.node", "interlock.status", "interlock.interrupt.kind":
			fmt.Printf("  %s=%s\n", kv.Key, kv.Value.Emit())
		}
	}
	carried := events.StringExtension(ev.Event, protocol.ExtTraceparent)
	fmt.Println(ev.Kind, "carries the span:", carried == fmt.Sprintf("00-%s-%s-01", s.SpanContext.TraceID(), s.SpanContext.SpanID()))
	// Output:
	// interlock.start
	//   interlock.flow=refund
	//   interlock.node=review
	//   interlock.status=waiting
	//   interlock.interrupt.kind=approval
	// interrupted carries the span: true
}
