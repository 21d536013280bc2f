package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry"
	"github.com/agentstop/agentstop/termination"
)

// hotEvents is a mix of the events a loop produces.
var hotEvents = []termination.Event{
	{Kind: termination.KindMessage, Source: "a", Text: "thinking", Usage: termination.Usage{InputTokens: 10, OutputTokens: 2}},
	{Kind: termination.KindToolCall, Tool: "search", Args: []byte(`{"q":"x"}`)},
	{Kind: termination.KindToolResult, Tool: "search"},
}

// TestEventDoesNotAllocateWhenNotSampled pins the hot path: the Recorder's
// per-event call on a run whose span is not sampled allocates nothing.
func TestEventDoesNotAllocateWhenNotSampled(t *testing.T) {
	h := newHarness(t, sdktrace.NeverSample())
	_, rr := h.rec.StartRun(context.Background(), middleware.RunInfo{Stage: "planner"})
	defer rr.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded})
	ev := hotEvents[0]
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range hotEvents {
			ev = hotEvents[i]
			rr.Event(&ev)
		}
	})
	assert.Zero(t, allocs)
}

// BenchmarkRecorderEvent is the Recorder's per-event cost: on an unsampled
// run, on a sampled one whose spans go to a span processor (a
// tracetest.SpanRecorder), and on a sampled one without a processor (what
// middleware's BenchmarkForward/instrumented measures: recording, not
// export).
func BenchmarkRecorderEvent(b *testing.B) {
	for _, bc := range []struct {
		name        string
		sampler     sdktrace.Sampler
		noProcessor bool
	}{
		{"unsampled", sdktrace.NeverSample(), false},
		{"sampled", sdktrace.AlwaysSample(), false},
		{"sampled_no_processor", sdktrace.AlwaysSample(), true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var rec *telemetry.Recorder
			if bc.noProcessor {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(bc.sampler))
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				b.Cleanup(func() {
					_ = tp.Shutdown(context.Background())
					_ = mp.Shutdown(context.Background())
				})
				rec = telemetry.NewRecorder(telemetry.WithTracerProvider(tp), telemetry.WithMeterProvider(mp))
			} else {
				rec = newHarness(b, bc.sampler).rec
			}
			_, rr := rec.StartRun(context.Background(), middleware.RunInfo{Stage: "planner"})
			defer rr.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded})
			var ev termination.Event
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ev = hotEvents[i%len(hotEvents)]
				rr.Event(&ev)
				i++
			}
		})
	}
}

// BenchmarkToolPairFloor is the SDK's own share of BenchmarkRecorderEvent:
// the same three-event cycle (a message, a tool call, its result) with the
// SDK calls a Recorder cannot leave out and nothing of its own: a
// monotonic clock reading at the call and at the result, one
// gen_ai.execute_tool.duration record (with the run's context when it is
// sampled: the exemplar filter's work), and when sampled one execute_tool
// span that starts at the call, takes its two attributes and ends. The
// Recorder's own cost is BenchmarkRecorderEvent's minus this, case by case.
func BenchmarkToolPairFloor(b *testing.B) {
	for _, bc := range []struct {
		name    string
		sampled bool
	}{{"unsampled", false}, {"sampled_no_processor", true}} {
		b.Run(bc.name, func(b *testing.B) {
			sampler := sdktrace.NeverSample()
			if bc.sampled {
				sampler = sdktrace.AlwaysSample()
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() {
				_ = tp.Shutdown(context.Background())
				_ = mp.Shutdown(context.Background())
			})
			hist, err := mp.Meter("floor").Float64Histogram("gen_ai.execute_tool.duration", metric.WithUnit("s"))
			if err != nil {
				b.Fatal(err)
			}
			tool := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(telemetry.KeyGenAIToolName.String("search")))}
			tracer := tp.Tracer("floor")
			runCtx, runSpan := tracer.Start(context.Background(), "invoke_agent planner")
			defer runSpan.End()
			recordCtx := context.Background()
			if bc.sampled {
				recordCtx = runCtx
			}
			base := time.Now()
			kv := make([]attribute.KeyValue, 0, 2)
			var start [1]trace.SpanStartOption
			var at time.Duration
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				switch hotEvents[i%len(hotEvents)].Kind {
				case termination.KindToolCall:
					at = time.Since(base)
				case termination.KindToolResult:
					d := time.Since(base) - at
					hist.Record(recordCtx, d.Seconds(), tool...)
					if bc.sampled {
						start[0] = trace.WithTimestamp(base.Add(at))
						_, span := tracer.Start(runCtx, "execute_tool search", start[:]...)
						kv = append(kv[:0], telemetry.KeyGenAIOperationName.String("execute_tool"), telemetry.KeyGenAIToolName.String("search"))
						span.SetAttributes(kv...)
						span.End()
					}
				}
				i++
			}
		})
	}
}

// BenchmarkObserve is the middleware's per-event cost with no recorder
// (the baseline), and with the OpenTelemetry Recorder on an unsampled and
// a sampled run.
func BenchmarkObserve(b *testing.B) {
	for _, bc := range []struct {
		name     string
		recorder bool
		sampler  sdktrace.Sampler
	}{{"nop", false, nil}, {"otel-unsampled", true, sdktrace.NeverSample()}, {"otel-sampled", true, sdktrace.AlwaysSample()}} {
		b.Run(bc.name, func(b *testing.B) {
			var opts []middleware.Option
			if bc.recorder {
				h := newHarness(b, bc.sampler)
				opts = append(opts, middleware.WithParticipant(h.rec))
			}
			st, err := middleware.New("planner", append(opts, middleware.WithPolicy(termination.MustParsePolicy("max_tool_calls: 1000000000\n")))...)
			if err != nil {
				b.Fatal(err)
			}
			_, run := st.Start(context.Background())
			defer run.Finish(nil)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				run.Observe(hotEvents[i%len(hotEvents)])
				i++
			}
		})
	}
}

// BenchmarkRun is a whole run's cost: start, ten events, end.
func BenchmarkRun(b *testing.B) {
	for _, bc := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"unsampled", sdktrace.NeverSample()}, {"sampled", sdktrace.AlwaysSample()}} {
		b.Run(bc.name, func(b *testing.B) {
			h := newHarness(b, bc.sampler)
			st, err := middleware.New("planner", middleware.WithParticipant(h.rec),
				middleware.WithPolicy(termination.MustParsePolicy("max_iterations: 100\n")))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				_, run := st.Start(context.Background())
				for i := range 10 {
					run.Observe(hotEvents[i%len(hotEvents)])
				}
				run.Finish(nil)
				h.spans.Reset()
			}
		})
	}
}
