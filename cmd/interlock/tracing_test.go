package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/interlockhq/interlock/egress"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
)

// collector is an OTLP/HTTP trace receiver that keeps the bodies it gets.
type collector struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
		c.mu.Lock()
		c.bodies = append(c.bodies, b)
		c.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func (c *collector) received() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Join(c.bodies, nil)
}

// clearOTelEnv unsets the OpenTelemetry variables serve reads, for the test.
func clearOTelEnv(t *testing.T) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SDK_DISABLED", "OTEL_TRACES_SAMPLER"} {
		t.Setenv(v, "")
	}
}

// TestServeSendsTracesToTheOTLPEndpointAndFlushesThemAtStop runs serve
// with OTEL_EXPORTER_OTLP_ENDPOINT set, starts a run, stops serve, and
// finds the start's span at the collector, with the service's resource:
// the batch of spans is sent at stop, long before the batcher's delay.
func TestServeSendsTracesToTheOTLPEndpointAndFlushesThemAtStop(t *testing.T) {
	clearOTelEnv(t)
	c := &collector{}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=tracing-test")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000") // nothing is sent before stop

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--listen", "127.0.0.1:-1", "--data-dir", t.TempDir(), "--lazy-fsync",
			"--log-format", "json", "--log-level", "warn", "--metrics", ""}, pw, io.Discard)
		_ = pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed nothing: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	_, rest, _ := strings.Cut(line, " on ")
	url, _, _ := strings.Cut(rest, " ")

	if out, _, err := run(t, url, "start", "booking", "--run", "r-traced"); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	if got := c.received(); len(got) != 0 {
		t.Fatalf("spans were sent before stop (%d bytes) although the batch delay is 10 minutes", len(got))
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after Ctrl-C, want a clean stop", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30 s of Ctrl-C")
	}
	got := c.received()
	for _, want := range []string{"interlock.start", "service.name", serviceName, "deployment.environment.name", "tracing-test", "r-traced", "interlock.interrupt.kind"} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("the collector received no %q at stop (%d bytes)", want, len(got))
		}
	}
}

// TestServeTracesNothingWithoutAnOTLPEndpoint: with no endpoint, or with
// the SDK disabled, serve has no tracer provider, so nothing dials out.
func TestServeTracesNothingWithoutAnOTLPEndpoint(t *testing.T) {
	clearOTelEnv(t)
	tp, err := tracerProvider(t.Context(), zerolog.Nop(), egress.Policy{})
	if tp != nil || err != nil {
		t.Fatalf("without an endpoint: provider %v, error %v; want none", tp, err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:1/v1/traces")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	tp, err = tracerProvider(t.Context(), zerolog.Nop(), egress.Policy{})
	if tp != nil || err != nil {
		t.Fatalf("with OTEL_SDK_DISABLED=true: provider %v, error %v; want none", tp, err)
	}
}

// TestServeRefusesOTLPOverGRPC: serve sends OTLP over HTTP only, and says
// so rather than sending HTTP to a gRPC port.
func TestServeRefusesOTLPOverGRPC(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	var stderr bytes.Buffer
	err := Run(t.Context(), []string{"serve", "--data-dir", t.TempDir(), "--metrics", ""}, io.Discard, &stderr)
	if codeOf(err) != exitUsage || !strings.Contains(err.Error(), "http/protobuf") {
		t.Fatalf("serve with OTEL_EXPORTER_OTLP_PROTOCOL=grpc: %v (exit %d), want a usage error naming http/protobuf", err, codeOf(err))
	}
}

// TestTheTraceExporterReachesItsCollectorAndNoOtherInternalAddress: the
// exporter's calls are held to the outbound policy: the collector the
// endpoint names, on loopback, gets the spans, but when it redirects
// them to another port of the host (Interlock's own API, say), the
// redirect is refused and that port gets nothing.
func TestTheTraceExporterReachesItsCollectorAndNoOtherInternalAddress(t *testing.T) {
	clearOTelEnv(t)
	inner := &collector{}
	innerSrv := httptest.NewServer(inner)
	t.Cleanup(innerSrv.Close)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, innerSrv.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)

	export := func(endpoint string) error {
		t.Helper()
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
		tp, err := tracerProvider(t.Context(), zerolog.Nop(), egress.Policy{})
		if err != nil || tp == nil {
			t.Fatalf("tracer provider: %v %v", tp, err)
		}
		_, span := tp.Tracer("test").Start(t.Context(), "interlock.test", trace.WithSpanKind(trace.SpanKindInternal))
		span.End()
		err = tp.ForceFlush(t.Context())
		_ = tp.Shutdown(t.Context())
		return err
	}
	if err := export(innerSrv.URL); err != nil || !bytes.Contains(inner.received(), []byte("interlock.test")) {
		t.Fatalf("the named collector: %v, %d bytes received", err, len(inner.received()))
	}
	before := len(inner.received())
	if err := export(redirect.URL); err == nil || !strings.Contains(err.Error(), "egress") {
		t.Errorf("exporting to a collector that redirects to another port: %v, want the redirect refused by the outbound policy", err)
	}
	if got := len(inner.received()); got != before {
		t.Errorf("the redirect reached another port of the host (%d bytes)", got-before)
	}
}
