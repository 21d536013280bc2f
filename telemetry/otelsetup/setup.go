package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"

	"github.com/agentstop/agentstop/telemetry"
)

// defaultCardinalityLimit is the per-instrument series limit Setup sets on
// the SDK: every (stage, termination_cause, outcome) a default Recorder can
// produce — telemetry.DefaultStageLimit stages plus "_other", the built-in
// tags plus telemetry.MaxCustomTags custom ones, three outcomes — so that it
// is a guard that never cuts a legitimate series.
const defaultCardinalityLimit = (telemetry.DefaultStageLimit + 1) * (13 + telemetry.MaxCustomTags) * 3

// Option configures Setup.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	serviceName      string
	cardinalityLimit int
	global           bool
	spanProcessors   []sdktrace.SpanProcessor
	readers          []sdkmetric.Reader
	sampler          sdktrace.Sampler
}

// WithServiceName sets service.name when OTEL_SERVICE_NAME is not set.
// Default "agentstop".
func WithServiceName(name string) Option {
	return optionFunc(func(c *config) {
		if name != "" {
			c.serviceName = name
		}
	})
}

// WithCardinalityLimit sets the SDK's per-instrument series limit; values
// < 1 are ignored. Default 27135: every (stage, termination_cause, outcome)
// a default Recorder can produce (telemetry.DefaultStageLimit stages plus
// "_other", the 13 built-in tags plus telemetry.MaxCustomTags custom ones,
// three outcomes), so that it is a guard that never cuts a legitimate
// series. Raise it with telemetry.WithStageLimit.
func WithCardinalityLimit(n int) Option {
	return optionFunc(func(c *config) {
		if n >= 1 {
			c.cardinalityLimit = n
		}
	})
}

// WithoutGlobal keeps Setup from installing its providers as the OTel
// globals. Default: they are installed.
func WithoutGlobal() Option {
	return optionFunc(func(c *config) { c.global = false })
}

// WithSpanProcessor adds a span processor (an in-memory recorder in tests,
// say). nil is ignored.
func WithSpanProcessor(sp sdktrace.SpanProcessor) Option {
	return optionFunc(func(c *config) {
		if sp != nil {
			c.spanProcessors = append(c.spanProcessors, sp)
		}
	})
}

// WithMetricReader adds a metric reader. nil is ignored.
func WithMetricReader(r sdkmetric.Reader) Option {
	return optionFunc(func(c *config) {
		if r != nil {
			c.readers = append(c.readers, r)
		}
	})
}

// WithSampler sets the trace sampler. Default: the SDK's, which honours
// OTEL_TRACES_SAMPLER and samples everything otherwise.
func WithSampler(s sdktrace.Sampler) Option {
	return optionFunc(func(c *config) {
		if s != nil {
			c.sampler = s
		}
	})
}

// defaultShutdownTimeout bounds Telemetry.Shutdown when its context has no
// deadline.
const defaultShutdownTimeout = 5 * time.Second

// Telemetry is what Setup built.
type Telemetry struct {
	TracerProvider *sdktrace.TracerProvider
	MeterProvider  *sdkmetric.MeterProvider
	// Registry holds the Prometheus exporter's metrics.
	Registry *prometheus.Registry
	// TracesExported reports whether spans leave the process (OTLP or
	// another exporter chosen by the environment).
	TracesExported bool

	handler  http.Handler
	exporter sdktrace.SpanExporter // nil unless TracesExported
	gate     *spanGate             // nil unless TracesExported
	clients  []*http.Client        // the OTLP/HTTP exporters' clients, whose idle connections Shutdown closes
	once     sync.Once
}

// Handler serves the Prometheus exposition at any path (mount it at
// /metrics), in OpenMetrics format with exemplars when the scraper asks
// for it.
func (t *Telemetry) Handler() http.Handler { return t.handler }

// Recorder returns a telemetry.Recorder on Setup's providers.
func (t *Telemetry) Recorder(opts ...telemetry.Option) *telemetry.Recorder {
	return telemetry.NewRecorder(append([]telemetry.Option{telemetry.WithTracerProvider(t.TracerProvider), telemetry.WithMeterProvider(t.MeterProvider)}, opts...)...)
}

// Shutdown flushes and stops the providers and exporters, waiting at most
// until ctx is done, or 5 s when ctx has no deadline.
// Exports still in flight then (an OTLP endpoint that is down or does not
// answer) are aborted, so that nothing keeps retrying in the background,
// and the OTLP connections are closed. It returns the export errors: spans
// not delivered since the last successful export (with the last export
// error), a metric reader's failure, or ctx's error when the deadline cut
// the flush short. Later calls return nil.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var err error
	t.once.Do(func() { err = t.shutdown(ctx) })
	return err
}

func (t *Telemetry) shutdown(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultShutdownTimeout)
		defer cancel()
	}
	var errs []error
	if t.gate != nil {
		stop := context.AfterFunc(ctx, t.gate.abort) // the batch processor exports with its own timeout, not ctx
		defer stop()
		t.gate.close()
	}
	errs = append(errs, t.TracerProvider.Shutdown(ctx))
	if t.gate != nil {
		t.gate.abort()
		errs = append(errs, t.gate.err(), t.exporter.Shutdown(ctx))
	}
	errs = append(errs, t.MeterProvider.Shutdown(ctx))
	for _, c := range t.clients {
		c.CloseIdleConnections()
	}
	return errors.Join(errs...)
}

// Setup configures OpenTelemetry for an application: a Prometheus exporter
// served by Handler (the embedded default), sampled traces, and OTLP (or
// whatever autoexport supports) when the standard environment variables ask
// for it: traces when OTEL_TRACES_EXPORTER is set or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is;
// metrics additionally pushed when OTEL_METRICS_EXPORTER names an exporter
// other than prometheus or none. Without them, spans stay in the process:
// they are sampled, so metrics carry trace exemplars, and then dropped.
//
// A collector that is down costs the traced loop nothing measurable: spans
// are batched and exported in the background, and when an export fails,
// or gets no answer within 2 s (then it is aborted), the failure is
// reported once to otel.Handle and span export pauses — no span is copied
// for export or queued — for 1 s, then 2 s, 4 s … up to a minute between
// tries, until an export succeeds. Spans that end during the pause are not
// exported.
func Setup(ctx context.Context, opts ...Option) (*Telemetry, error) {
	cfg := config{serviceName: "agentstop", cardinalityLimit: defaultCardinalityLimit, global: true}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(serviceName(cfg.serviceName))))
	if err != nil {
		res = resource.Default()
	}

	reg := prometheus.NewRegistry()
	promExporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("otelsetup: prometheus exporter: %w", err)
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(promExporter),
		sdkmetric.WithCardinalityLimit(cfg.cardinalityLimit)}
	for _, r := range cfg.readers {
		mopts = append(mopts, sdkmetric.WithReader(r))
	}
	var clients []*http.Client
	var pushReader sdkmetric.Reader // stopped if Setup fails after starting it
	if m := strings.TrimSpace(os.Getenv("OTEL_METRICS_EXPORTER")); m != "" && m != "none" && m != "prometheus" {
		reader, client, err := newMetricReader(ctx, m)
		if err != nil {
			return nil, fmt.Errorf("otelsetup: OTEL_METRICS_EXPORTER=%s: %w", m, err)
		}
		mopts = append(mopts, sdkmetric.WithReader(reader))
		pushReader = reader
		if client != nil {
			clients = append(clients, client)
		}
	}

	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if cfg.sampler != nil {
		topts = append(topts, sdktrace.WithSampler(cfg.sampler))
	}
	for _, sp := range cfg.spanProcessors {
		topts = append(topts, sdktrace.WithSpanProcessor(sp))
	}
	var exp sdktrace.SpanExporter
	if tracesRequested() {
		var client *http.Client
		exp, client, err = newSpanExporter(ctx)
		if err != nil {
			if pushReader != nil {
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				_ = pushReader.Shutdown(sctx)
				cancel()
			}
			return nil, fmt.Errorf("otelsetup: trace exporter: %w", err)
		}
		if autoexport.IsNoneSpanExporter(exp) {
			exp = nil
		} else if client != nil {
			clients = append(clients, client)
		}
	}

	t := &Telemetry{
		TracerProvider: sdktrace.NewTracerProvider(topts...),
		MeterProvider:  sdkmetric.NewMeterProvider(mopts...),
		Registry:       reg,
		TracesExported: exp != nil,
		exporter:       exp,
		clients:        clients,
		handler:        promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorHandling: promhttp.ContinueOnError}),
	}
	if exp != nil {
		t.gate = newSpanGate(exp, t.TracerProvider)
		t.gate.start()
	}
	if cfg.global {
		otel.SetTracerProvider(t.TracerProvider)
		otel.SetMeterProvider(t.MeterProvider)
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	}
	return t, nil
}

func serviceName(def string) string {
	if s := os.Getenv("OTEL_SERVICE_NAME"); s != "" {
		return s
	}
	return def
}

func tracesRequested() bool {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if strings.TrimSpace(os.Getenv(k)) != "" {
			return true
		}
	}
	return false
}
