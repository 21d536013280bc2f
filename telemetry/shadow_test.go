package telemetry_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry"
	"github.com/agentstop/agentstop/termination"
)

// shadowStops reads agent.stage.shadow.stops as "stage/policy/cause" → count.
func shadowStops(t testing.TB, h *harness) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	c, ok := h.collect(t)["agent.stage.shadow.stops"]
	if !ok {
		return out
	}
	assert.Equal(t, "{run}", c.Unit)
	sum := c.Data.(metricdata.Sum[int64])
	assert.True(t, sum.IsMonotonic)
	for _, dp := range sum.DataPoints {
		require.Equal(t, 3, dp.Attributes.Len(), "attributes: %v", dp.Attributes.ToSlice())
		st, _ := dp.Attributes.Value(telemetry.KeyStage)
		p, _ := dp.Attributes.Value(telemetry.KeyPolicy)
		c, _ := dp.Attributes.Value(telemetry.KeyTerminationCause)
		out[st.AsString()+"/"+p.AsString()+"/"+c.AsString()] = dp.Value
	}
	return out
}

// TestShadowTelemetry: a live run's shadow verdicts reach its span and
// agent.stage.shadow.stops once per run and policy, at the end; a policy
// that would not have stopped the run leaves no trace.
func TestShadowTelemetry(t *testing.T) {
	for _, sampler := range []sdktrace.Sampler{sdktrace.AlwaysSample(), sdktrace.NeverSample()} {
		t.Run(sampler.Description(), func(t *testing.T) {
			h := newHarness(t, sampler)
			stage := h.stage(t, "researcher", middleware.WithPolicy(termination.MustParsePolicy(`max_iterations: 10`)),
				middleware.WithShadowPolicy("strict", termination.MustParsePolicy(`max_iterations: 1`)),
				middleware.WithShadowPolicy("never", termination.MustParsePolicy(`max_iterations: 100`)))
			for range 2 {
				_, run := stage.Start(context.Background())
				for range 3 {
					run.Observe(termination.Event{Kind: termination.KindMessage, Text: "thinking"})
				}
				res := run.Finish(nil)
				require.Equal(t, termination.NaturalCompletion{}, res.Cause)
			}
			assert.Equal(t, map[string]int64{"researcher/strict/max_iterations": 2}, shadowStops(t, h))
			if sampler.ShouldSample(sdktrace.SamplingParameters{}).Decision != sdktrace.RecordAndSample {
				assert.Empty(t, h.spans.Ended())
				return
			}
			require.Len(t, h.spans.Ended(), 2)
			for _, s := range h.spans.Ended() {
				attrs := attrMap(s.Attributes())
				assert.Equal(t, "max_iterations", attrs["agentstop.shadow.strict.termination_cause"].AsString())
				assert.Equal(t, int64(2), attrs["agentstop.shadow.strict.stopped_at"].AsInt64())
				assert.NotContains(t, attrs, "agentstop.shadow.never.termination_cause")
				assert.Equal(t, "natural_completion", attrs["termination_cause"].AsString(), "the enforced cause")
			}
		})
	}
}

// TestShadowPolicyBound: past MaxShadowPolicies names per stage, the
// counter records "_other"; spans keep the names.
func TestShadowPolicyBound(t *testing.T) {
	h := newHarness(t, nil)
	shadow := map[string]*termination.ShadowVerdict{}
	for i := range telemetry.MaxShadowPolicies + 2 {
		shadow[fmt.Sprintf("p%02d", i)] = &termination.ShadowVerdict{Cause: termination.MaxIterationsReached{Limit: 1, Count: 2}, StoppedAt: 2}
	}
	_, rr := h.rec.StartRun(context.Background(), middleware.RunInfo{Stage: "s", RunID: "r"})
	rr.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded, Shadow: shadow})
	got := shadowStops(t, h)
	assert.Len(t, got, telemetry.MaxShadowPolicies+1)
	assert.Equal(t, int64(2), got["s/_other/max_iterations"])
	require.Len(t, h.spans.Ended(), 1)
	attrs := attrMap(h.spans.Ended()[0].Attributes())
	for name := range shadow {
		assert.Contains(t, attrs, "agentstop.shadow."+name+".termination_cause")
	}
}

// TestShadowTags: a shadow's custom cause is tagged with the stage's
// allow-list, like the run's own.
func TestShadowTags(t *testing.T) {
	h := newHarness(t, nil)
	_, rr := h.rec.StartRun(context.Background(), middleware.RunInfo{Stage: "s", RunID: "r", CustomReasons: []string{"human_review"}})
	rr.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded, Shadow: map[string]*termination.ShadowVerdict{
		"a": {Cause: termination.Custom{Reason: "human_review"}, StoppedAt: 1},
		"b": {Cause: termination.Custom{Reason: "free text"}, StoppedAt: 1},
		"c": nil,
	}})
	assert.Equal(t, map[string]int64{"s/a/human_review": 1, "s/b/custom": 1}, shadowStops(t, h))
}
