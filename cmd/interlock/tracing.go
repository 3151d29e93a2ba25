package main

import (
	"cmp"
	"context"
	"errors"
	"os"
	"strings"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// serviceName is the service.name of serve's traces, unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names another.
const serviceName = "interlock"

// tracerProvider returns serve's tracer provider: spans batched to an OTLP
// collector over HTTP, when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (the exporter reads the rest
// of its OTEL_EXPORTER_OTLP_* settings, the SDK OTEL_TRACES_SAMPLER and
// OTEL_BSP_*). Without an endpoint, or with OTEL_SDK_DISABLED=true, it
// returns nil: nothing is traced and nothing dials out. The caller shuts
// the provider down, which flushes the spans not yet sent.
//
// The exporter is not held to the outbound policy (--egress-allow): its
// endpoint is the operator's own, as the SMTP server is, and an HTTP
// client of serve's (otlptracehttp.WithHTTPClient) would drop the TLS
// and proxy settings the exporter reads from OTEL_EXPORTER_OTLP_*.
func tracerProvider(ctx context.Context, log zerolog.Logger) (*sdktrace.TracerProvider, error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	switch p := cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")); p {
	case "", "http/protobuf", "http/json":
	default:
		return nil, usagef("OTEL_EXPORTER_OTLP_PROTOCOL %q: interlock serve sends traces over OTLP/HTTP (http/protobuf or http/json); point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's HTTP port (4318)", p)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, usagef("tracing: %v; check OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", err)
	}
	// The environment's resource comes last, so that OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES override the defaults.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(serviceName)),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithFromEnv(),
	)
	if errors.Is(err, resource.ErrPartialResource) {
		log.Warn().Err(err).Msg("tracing: some resource attributes could not be detected")
	} else if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, usagef("tracing: %v; check OTEL_RESOURCE_ATTRIBUTES", err)
	}
	// Export errors are reported through OpenTelemetry's one process-wide
	// handler: send them to serve's log rather than the standard logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn().Err(err).Msg("tracing: spans not exported")
	}))
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
