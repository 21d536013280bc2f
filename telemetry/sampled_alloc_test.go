//go:build !race

// The race detector allocates on its own account: allocation counts are
// checked without it.

package telemetry_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry"
	"github.com/agentstop/agentstop/termination"
)

// TestSampledToolPairAllocations pins what a sampled tool pair allocates
// to what the OpenTelemetry SDK allocates for a span (the span, the
// context Start returns, the boxed start timestamp, the span's attribute
// slice): nothing of the Recorder's own. No span processor, as
// middleware's BenchmarkForward/instrumented.
func TestSampledToolPairAllocations(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	rec := telemetry.NewRecorder(telemetry.WithTracerProvider(tp), telemetry.WithMeterProvider(newHarness(t, nil).mp))
	_, rr := rec.StartRun(context.Background(), middleware.RunInfo{Stage: "planner"})
	defer rr.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded})
	pair := []termination.Event{call("search", `{}`), result("search", ""), callID("fetch", "c1"), resultID("fetch", "c1", "boom")}
	var ev termination.Event
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range pair {
			ev = pair[i]
			rr.Event(&ev)
		}
	})
	assert.LessOrEqual(t, allocs, 2*4.0, "allocations of two sampled tool pairs")
}
