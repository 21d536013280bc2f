// Package otelsetup configures the OpenTelemetry SDK the way an agentstop
// application usually wants it, in two lines:
//
//	tel, err := otelsetup.Setup(ctx) // SDK providers, Prometheus /metrics, OTLP from OTEL_*
//	rec := tel.Recorder()            // a telemetry.Recorder on those providers
//
// [Setup] builds an in-process Prometheus exporter whose [Telemetry.Handler]
// serves /metrics in OpenMetrics format with trace exemplars, samples
// traces and, when the standard OTEL_* environment variables ask for it
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER),
// exports over OTLP through the contrib autoexport package.
// [Telemetry.Shutdown] flushes and stops everything.
//
// It is a separate package so that package telemetry, the Recorder, depends
// on the OpenTelemetry API only (docs/spec.md §5: the library uses the API;
// the SDK and exporters are set up by helpers such as this one or by the
// user): this one pulls in the SDK, the exporters, gRPC and the Prometheus
// client.
package otelsetup
