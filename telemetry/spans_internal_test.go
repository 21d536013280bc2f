package telemetry

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestLiveSpansAreForgotten: the Recorder keeps a sampled run's span
// context only while the run is live, and none for an unsampled run, so
// that a process with many finished runs holds nothing for them.
func TestLiveSpansAreForgotten(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sampler sdktrace.Sampler
		live    int
	}{
		{"sampled", sdktrace.AlwaysSample(), 100},
		{"not sampled", sdktrace.NeverSample(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tc.sampler))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			r := NewRecorder(WithTracerProvider(tp))
			count := func() int {
				n := 0
				r.spans.Range(func(any, any) bool { n++; return true })
				return n
			}
			var runs []middleware.Part
			for i := range 100 {
				_, rr := r.startRun(context.Background(), middleware.RunInfo{Stage: "s", RunID: string(rune('a'+i%26)) + string(rune('0'+i/26))})
				runs = append(runs, rr)
			}
			if n := count(); n != tc.live {
				t.Fatalf("%d live span contexts, want %d", n, tc.live)
			}
			for _, rr := range runs {
				rr.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded})
			}
			if n := count(); n != 0 {
				t.Fatalf("%d span contexts kept after every run ended", n)
			}
		})
	}
}
