package otelsetup_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry/otelsetup"
	"github.com/agentstop/agentstop/termination"
)

// otelEnv are the variables these tests set; each test starts with all of
// them cleared, so the machine's environment does not leak in.
var otelEnv = []string{
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_TRACES_SAMPLER",
	"OTEL_BSP_SCHEDULE_DELAY", "OTEL_METRIC_EXPORT_INTERVAL",
	"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_BSP_EXPORT_TIMEOUT", "OTEL_METRIC_EXPORT_TIMEOUT",
}

func clearOTelEnv(t *testing.T) {
	for _, k := range otelEnv {
		t.Setenv(k, "")
	}
}

// closedPort returns an address on which nothing listens.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// blackhole accepts TCP connections and never answers. stop closes it and
// every connection it accepted; it is also called when the test ends.
func blackhole(t *testing.T) (addr string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
		once  sync.Once
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	stop = func() {
		once.Do(func() {
			ln.Close()
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			for _, c := range conns {
				c.Close()
			}
		})
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// workload runs many sampled runs of many events (tool calls become
// spans) through a channel-wrapped loop and returns how long it took.
func workload(t *testing.T, rec middleware.Recorder) time.Duration {
	t.Helper()
	st, err := middleware.New("worker", middleware.WithRecorder(rec),
		middleware.WithPolicy(termination.MustParsePolicy("max_tool_calls: 1000\ntoken_budget: {total: 10000000}\n")))
	require.NoError(t, err)
	start := time.Now()
	for r := range 100 {
		ctx, run := st.Start(context.Background())
		in := make(chan termination.Event)
		go func() {
			defer close(in)
			for i := range 200 {
				var ev termination.Event
				switch i % 3 {
				case 0:
					ev = msg("w", fmt.Sprintf("turn %d", i), 10, 5)
				case 1:
					ev = call("search", `{}`)
				default:
					ev = result("search", "")
				}
				select {
				case in <- ev:
				case <-ctx.Done():
					return
				}
			}
		}()
		n := 0
		for range middleware.Forward(run, in, func(ev termination.Event) termination.Event { return ev }) {
			n++
		}
		res := run.Wait()
		require.Equal(t, 200, n, "run %d: every event forwarded", r)
		require.Equal(t, "natural_completion", res.Tag())
	}
	return time.Since(start)
}

// TestUnreachableExporterDoesNotSlowTheLoop: with OTLP traces and metrics
// pointed at an endpoint that refuses connections, or one that accepts them
// and never answers, the wrapped loop runs as fast as with no exporter,
// every event still flows, the Prometheus handler still serves, and
// Shutdown with a short deadline returns.
func TestUnreachableExporterDoesNotSlowTheLoop(t *testing.T) {
	clearOTelEnv(t)
	base, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal())
	require.NoError(t, err)
	require.False(t, base.TracesExported)
	baseline := workload(t, base.Recorder())
	require.NoError(t, base.Shutdown(context.Background()))

	refused := func(t *testing.T) (string, func()) { return closedPort(t), func() {} }
	for _, tc := range []struct {
		name, protocol string
		endpoint       func(*testing.T) (addr string, stop func())
	}{
		{"refused/http", "http/protobuf", refused},
		{"refused/grpc", "grpc", refused},
		{"blackhole/http", "http/protobuf", blackhole},
		{"blackhole/grpc", "grpc", blackhole},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			addr, stopEndpoint := tc.endpoint(t)
			clearOTelEnv(t)
			errs := captureErrors(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tc.protocol)
			t.Setenv("OTEL_METRICS_EXPORTER", "otlp")
			// Export often, so that exports are attempted during the run.
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
			t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "50")

			tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal())
			require.NoError(t, err)
			require.True(t, tel.TracesExported)
			took := workload(t, tel.Recorder())
			t.Logf("%s: %s (baseline %s)", tc.name, took, baseline)
			assert.Less(t, took, 2*baseline+500*time.Millisecond, "the loop was slowed by the exporter")

			text := scrape(t, tel.Handler())
			assert.Contains(t, text, `agent_stage_terminations_total{`)

			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_ = tel.Shutdown(ctx) // an error is expected: nothing was delivered
			assert.Less(t, time.Since(start), 2*time.Second, "Shutdown ignored its deadline")
			// Nothing keeps retrying once Shutdown has returned. (An idle
			// HTTP connection to the blackhole, dialled for an export
			// that was aborted, lives until the peer closes it: close the
			// endpoint first.)
			stopEndpoint()
			goleak.VerifyNone(t, before)
			_ = errs
		})
	}
}

// failingExporter is a metric exporter whose every export fails (slowly).
type failingExporter struct {
	mu    sync.Mutex
	calls int
}

func (e *failingExporter) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}

func (e *failingExporter) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}

func (e *failingExporter) Export(ctx context.Context, _ *metricdata.ResourceMetrics) error {
	e.mu.Lock()
	e.calls++
	e.mu.Unlock()
	select {
	case <-time.After(20 * time.Millisecond):
	case <-ctx.Done():
	}
	return errors.New("export failed: backend down")
}

func (e *failingExporter) ForceFlush(context.Context) error { return errors.New("flush failed") }
func (e *failingExporter) Shutdown(context.Context) error   { return errors.New("shutdown failed") }

// TestFailingMetricReaderBreaksNothing: a metric reader whose exports fail
// does not break the loop, the other readers, or Shutdown; the failures
// reach otel.Handle.
func TestFailingMetricReaderBreaksNothing(t *testing.T) {
	clearOTelEnv(t)
	errs := captureErrors(t)
	exp := &failingExporter{}
	reader := sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(10*time.Millisecond))
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithMetricReader(reader))
	require.NoError(t, err)
	workload(t, tel.Recorder())
	require.Eventually(t, func() bool {
		exp.mu.Lock()
		defer exp.mu.Unlock()
		return exp.calls > 0
	}, 5*time.Second, 10*time.Millisecond)
	text := scrape(t, tel.Handler())
	assert.Contains(t, text, `agent_stage_terminations_total{`, "the Prometheus reader is unaffected")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = tel.Shutdown(ctx)
	assert.ErrorContains(t, err, "failed", "Shutdown reports the reader's failure")
	assert.ErrorContains(t, errs.all(), "backend down", "export failures reach otel.Handle")
}

// TestSetupErrorLeavesNothingRunning: when Setup fails after it started a
// metric exporter (an unknown trace exporter), it stops it again.
func TestSetupErrorLeavesNothingRunning(t *testing.T) {
	before := goleak.IgnoreCurrent()
	clearOTelEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+closedPort(t))
	t.Setenv("OTEL_METRICS_EXPORTER", "otlp")
	t.Setenv("OTEL_TRACES_EXPORTER", "no_such_exporter")
	_, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal())
	require.ErrorContains(t, err, "otelsetup: trace exporter")
	goleak.VerifyNone(t, before)
}
