package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestToolSpanStartsAtCallEndsAtResult: an execute_tool span's start and
// end are the wall-clock moments of the call and of the result (timed by
// the monotonic clock from the run's start), each between a clock reading
// taken just before and just after that event was observed. Compared as
// wall-clock times (what an exporter sends), with 1 µs for the distance
// between a wall and a monotonic reading.
func TestToolSpanStartsAtCallEndsAtResult(t *testing.T) {
	const slack = time.Microsecond
	wall := func(t time.Time) time.Time { return t.Round(0) } // strips the monotonic reading
	h := newHarness(t, nil)
	_, run := h.stage(t, "p").Start(context.Background())
	time.Sleep(3 * time.Millisecond) // the call is not at the run's start
	beforeCall := time.Now()
	run.Observe(callID("search", "c1"))
	afterCall := time.Now()
	time.Sleep(3 * time.Millisecond)
	beforeResult := time.Now()
	run.Observe(resultID("search", "c1", ""))
	afterResult := time.Now()
	run.Finish(nil)
	h.requireAllEnded(t)

	_, tools := spansByName(t, h, "invoke_agent p")
	require.Len(t, tools, 1)
	s := tools[0]
	start, end := wall(s.StartTime()), wall(s.EndTime())
	assert.False(t, start.Before(wall(beforeCall).Add(-slack)), "start %v before the call (%v)", start, beforeCall)
	assert.False(t, start.After(wall(afterCall).Add(slack)), "start %v after the call (%v)", start, afterCall)
	assert.False(t, end.Before(wall(beforeResult).Add(-slack)), "end %v before the result (%v)", end, beforeResult)
	assert.False(t, end.After(wall(afterResult).Add(slack)), "end %v after the result (%v)", end, afterResult)

	// The histogram measured the same interval, within the observations.
	dps := h.collect(t)["gen_ai.execute_tool.duration"].Data.(metricdata.Histogram[float64]).DataPoints
	require.Len(t, dps, 1)
	d := time.Duration(dps[0].Sum * float64(time.Second))
	assert.GreaterOrEqual(t, d, beforeResult.Sub(afterCall)-slack)
	assert.LessOrEqual(t, d, afterResult.Sub(beforeCall)+slack)
}

// TestToolDurationExemplars: gen_ai.execute_tool.duration of a sampled run
// carries an exemplar of the run's trace (the SDK's default, trace-based
// exemplar filter); an unsampled run's gives none.
func TestToolDurationExemplars(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sampler sdktrace.Sampler
		want    int
	}{
		{"sampled", sdktrace.AlwaysSample(), 1},
		{"not sampled", sdktrace.NeverSample(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.sampler)
			ctx, run := h.stage(t, "p").Start(context.Background())
			run.Observe(call("search", `{}`))
			run.Observe(result("search", ""))
			run.Finish(nil)
			dps := h.collect(t)["gen_ai.execute_tool.duration"].Data.(metricdata.Histogram[float64]).DataPoints
			require.Len(t, dps, 1)
			require.Len(t, dps[0].Exemplars, tc.want)
			if tc.want > 0 {
				assert.Equal(t, trace.SpanContextFromContext(ctx).TraceID(), trace.TraceID(dps[0].Exemplars[0].TraceID))
			}
		})
	}
}
