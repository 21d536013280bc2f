package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentstop/agentstop/internal/testutil"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry"
	"github.com/agentstop/agentstop/termination"
)

// harness is a Recorder on in-memory providers.
type harness struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
	rec    *telemetry.Recorder
}

func newHarness(t testing.TB, sampler sdktrace.Sampler, opts ...telemetry.Option) *harness {
	t.Helper()
	h := &harness{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	if sampler == nil {
		sampler = sdktrace.AlwaysSample()
	}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans), sdktrace.WithSampler(sampler))
	h.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	t.Cleanup(func() {
		ctx := context.Background()
		_ = h.tp.Shutdown(ctx)
		_ = h.mp.Shutdown(ctx)
	})
	h.rec = telemetry.NewRecorder(append([]telemetry.Option{
		telemetry.WithTracerProvider(h.tp), telemetry.WithMeterProvider(h.mp)}, opts...)...)
	return h
}

// stage returns a middleware stage recording through h.
func (h *harness) stage(t testing.TB, name string, opts ...middleware.Option) *middleware.Stage {
	t.Helper()
	st, err := middleware.New(name, append([]middleware.Option{middleware.WithParticipant(h.rec)}, opts...)...)
	require.NoError(t, err)
	return st
}

// collect reads every metric of the agentstop scope, by name.
func (h *harness) collect(t testing.TB) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != telemetry.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// requireAllEnded checks that every started span has ended.
func (h *harness) requireAllEnded(t testing.TB) {
	t.Helper()
	require.Equal(t, len(h.spans.Started()), len(h.spans.Ended()), "started spans vs ended spans")
	for _, s := range h.spans.Started() {
		require.True(t, s.EndTime().After(s.StartTime()) || s.EndTime().Equal(s.StartTime()), "span %q has no end", s.Name())
		require.False(t, s.EndTime().IsZero(), "span %q left open", s.Name())
	}
}

// The shared helpers, under the short names these tests use.
var (
	observe       = testutil.Observe
	msg           = testutil.Msg
	call          = testutil.Call
	result        = testutil.Result
	captureErrors = testutil.CaptureErrors
)

// attrMap turns attributes into a map for comparisons.
func attrMap(kvs []attribute.KeyValue) map[string]attribute.Value {
	m := make(map[string]attribute.Value, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// waitDone waits for a run to stop by itself (a timer), at most d.
func waitDone(t testing.TB, run *middleware.Run, d time.Duration) {
	t.Helper()
	select {
	case <-run.Done():
	case <-time.After(d):
		t.Fatalf("run did not stop within %s", d)
	}
}

// runID is the run's id, which every run has (§8): the value of its
// span's agentstop.run.id.
func runID(t testing.TB, res termination.Result) string {
	t.Helper()
	require.Len(t, res.Run, 32, "the run's id: 32 hex digits")
	return res.Run
}
