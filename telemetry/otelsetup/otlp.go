package otelsetup

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// defaultOTLPTimeout is the OTLP exporters' default timeout.
const defaultOTLPTimeout = 10 * time.Second

// The exporters are autoexport's, except OTLP over HTTP (the default
// protocol): Setup builds those with an HTTP client of its own, so that
// Shutdown can close its idle connections (the exporters' own client is
// shared by the process and keeps them open for 90 s). It does so only
// when no TLS setting is given in the environment, which the exporter
// would then ignore; otherwise autoexport builds the exporter.

// newSpanExporter returns the span exporter the environment asks for, and
// the HTTP client it uses when Setup owns it.
func newSpanExporter(ctx context.Context) (sdktrace.SpanExporter, *http.Client, error) {
	if !ownHTTP(os.Getenv("OTEL_TRACES_EXPORTER"), "TRACES") {
		exp, err := autoexport.NewSpanExporter(ctx)
		return exp, nil, err
	}
	client := newOTLPClient("TRACES")
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithHTTPClient(client))
	return exp, client, err
}

// newMetricReader returns the push metric reader the environment asks
// for (name is OTEL_METRICS_EXPORTER), and the HTTP client it uses when
// Setup owns it.
func newMetricReader(ctx context.Context, name string) (sdkmetric.Reader, *http.Client, error) {
	if !ownHTTP(name, "METRICS") || os.Getenv("OTEL_METRICS_PRODUCERS") != "" {
		r, err := autoexport.NewMetricReader(ctx)
		return r, nil, err
	}
	client := newOTLPClient("METRICS")
	exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithHTTPClient(client))
	if err != nil {
		return nil, nil, err
	}
	return sdkmetric.NewPeriodicReader(exp), client, nil
}

// ownHTTP reports whether the exporter named (OTEL_*_EXPORTER, "" for the
// default) is OTLP over HTTP with no TLS setting in the environment.
func ownHTTP(name, signal string) bool {
	if n := strings.TrimSpace(name); n != "" && n != "otlp" {
		return false
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return false
	}
	for _, k := range []string{"CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"} {
		if os.Getenv("OTEL_EXPORTER_OTLP_"+k) != "" || os.Getenv("OTEL_EXPORTER_OTLP_"+signal+"_"+k) != "" {
			return false
		}
	}
	return true
}

// newOTLPClient is an HTTP client like the OTLP exporter's own, with the
// timeout of OTEL_EXPORTER_OTLP_{signal}_TIMEOUT or OTEL_EXPORTER_OTLP_TIMEOUT
// (milliseconds; default 10 s), on a transport of its own.
func newOTLPClient(signal string) *http.Client {
	timeout := defaultOTLPTimeout
	for _, k := range []string{"OTEL_EXPORTER_OTLP_" + signal + "_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"} {
		if ms, err := strconv.Atoi(strings.TrimSpace(os.Getenv(k))); err == nil && ms > 0 {
			timeout = time.Duration(ms) * time.Millisecond
			break
		}
	}
	transport := &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true,
		MaxIdleConns: 100, IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second}
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		transport = dt.Clone()
	}
	return &http.Client{Transport: transport, Timeout: timeout}
}
