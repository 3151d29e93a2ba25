package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/interlockhq/interlock/egress"

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
// The exporter's connections are held to the outbound policy as every
// other call Interlock makes (see otlpHTTPClient): the collector the
// endpoint names is allowed, and nothing else the policy refuses.
func tracerProvider(ctx context.Context, log zerolog.Logger, policy egress.Policy) (*sdktrace.TracerProvider, error) {
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
	hc, err := otlpHTTPClient(cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")), policy)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithHTTPClient(hc))
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

// otlpHTTPClient is the trace exporter's HTTP client: every connection
// made under the outbound policy, with the collector endpoint names (its
// host and port) allowed, since the operator named it; a redirect to any
// other internal address is refused. Given its own client, the exporter
// no longer reads the TLS and timeout settings of OTEL_EXPORTER_OTLP_*,
// so the client takes them: OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE (the
// CA), _CLIENT_CERTIFICATE and _CLIENT_KEY, _TIMEOUT (milliseconds,
// default 10000). A proxy is used only as the policy says
// (--egress-proxy-from-env).
func otlpHTTPClient(endpoint string, policy egress.Policy) (*http.Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() == "" || u.Scheme != "http" && u.Scheme != "https" {
		return nil, usagef("tracing: OTEL_EXPORTER_OTLP_ENDPOINT %q is not an http(s) URL of the collector, such as http://127.0.0.1:4318", endpoint)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	policy.Allow = append(slices.Clone(policy.Allow), net.JoinHostPort(u.Hostname(), port))
	t := policy.Transport()
	tlsCfg, err := otlpTLS()
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		t.TLSClientConfig = tlsCfg
	}
	timeout := 10 * time.Second
	if v := otelEnv("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, usagef("tracing: OTEL_EXPORTER_OTLP_TIMEOUT %q: give milliseconds, such as 10000", v)
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	return &http.Client{Transport: t, Timeout: timeout}, nil
}

// otelEnv is OTEL_EXPORTER_OTLP_TRACES_<name>, else
// OTEL_EXPORTER_OTLP_<name>.
func otelEnv(name string) string {
	return cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_"+name), os.Getenv("OTEL_EXPORTER_OTLP_"+name))
}

// otlpTLS is the TLS configuration OTEL_EXPORTER_OTLP_* give the
// exporter's connections, nil when they give none.
func otlpTLS() (*tls.Config, error) {
	ca, cert, key := otelEnv("CERTIFICATE"), otelEnv("CLIENT_CERTIFICATE"), otelEnv("CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, usagef("tracing: OTEL_EXPORTER_OTLP_CERTIFICATE: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, usagef("tracing: OTEL_EXPORTER_OTLP_CERTIFICATE %s holds no PEM certificate", ca)
		}
	}
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, usagef("tracing: OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
