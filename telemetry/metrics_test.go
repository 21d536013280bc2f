package telemetry_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry"
	"github.com/agentstop/agentstop/termination"
)

// Bucket layouts of spec §5, written out rather than taken from the
// package, so that a change to the package's variables fails here.
var (
	specDurationBuckets    = []float64{0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6}
	specCountBuckets       = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
	specUtilizationBuckets = []float64{0.25, 0.5, 0.75, 0.8, 0.9, 1, 1.25, 1.5, 2}
)

func TestBucketVariablesMatchSpec(t *testing.T) {
	assert.Equal(t, specDurationBuckets, telemetry.DurationBuckets)
	assert.Equal(t, specCountBuckets, telemetry.CountBuckets)
	assert.Equal(t, specUtilizationBuckets, telemetry.UtilizationBuckets)
}

func set(kv ...attribute.KeyValue) attribute.Set { return attribute.NewSet(kv...) }

var (
	stagePlanner = attribute.String("stage", "planner")
	causeBP      = attribute.String("termination_cause", "budget_pressure")
	causeMTC     = attribute.String("termination_cause", "max_tool_calls")
)

// TestInstruments pins every instrument of spec §5: name, kind, unit,
// temporality, bucket layout, attribute keys and values, for two
// deterministic runs of one stage.
func TestInstruments(t *testing.T) {
	h := newHarness(t, nil)
	st := h.stage(t, "planner", middleware.WithPolicy(termination.MustParsePolicy(
		"token_budget: {total: 1000, pressure: 0.5, grace: 1}\nmax_tool_calls: 1\n")))

	// Run 1: warned at 600 tokens, stops with BudgetPressure one turn later
	// at 750 (utilization 0.75).
	res := observe(st, msg("p", "a", 600, 0), msg("p", "b", 100, 50))
	require.Equal(t, "budget_pressure", res.Tag())
	// Run 2: no tokens, two tool calls: MaxToolCallsReached (utilization 0).
	res = observe(st, call("t", `{}`), result("t", ""), call("t", `{}`))
	require.Equal(t, "max_tool_calls", res.Tag())

	m := h.collect(t)
	// Every instrument but agent.stage.stall.warnings (no stall here; see
	// genai_test.go for it and the gen_ai.* ones in detail).
	assert.ElementsMatch(t, []string{"agent.stage.terminations", "agent.stage.duration", "agent.stage.iterations",
		"agent.stage.tool_calls", "agent.stage.tokens", "agent.stage.budget.utilization", "agent.stage.budget.pressure",
		"agent.stage.active", "gen_ai.invoke_agent.duration", "gen_ai.execute_tool.duration",
		"gen_ai.invoke_agent.inference_calls", "gen_ai.invoke_agent.tool_calls", "agent.stage.idle.stops"}, keys(m))
	opts := []metricdatatest.Option{metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()}

	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "agent.stage.idle.stops", Unit: "{run}",
		Description: "Runs stopped because no event arrived for their idle limit (Timeout with idle; termination_cause timeout).",
		Data: metricdata.Sum[int64]{
			Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
			// Exported at 0 from the stage's first run; no idle stop here.
			DataPoints: []metricdata.DataPoint[int64]{{Attributes: set(stagePlanner), Value: 0}},
		},
	}, m["agent.stage.idle.stops"], opts...)
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "agent.stage.terminations",
		Description: "Stage runs that ended, by why they ended.",
		Data: metricdata.Sum[int64]{
			Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{
				{Attributes: set(stagePlanner, causeBP, attribute.String("outcome", "succeeded")), Value: 1},
				{Attributes: set(stagePlanner, causeMTC, attribute.String("outcome", "failed")), Value: 1},
			},
		},
	}, m["agent.stage.terminations"], opts...)

	// Durations are not deterministic: pin the layout, the attributes and
	// the counts.
	dur := m["agent.stage.duration"]
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "agent.stage.duration", Description: "Duration of stage runs.", Unit: "s",
		Data: metricdata.Histogram[float64]{
			Temporality: metricdata.CumulativeTemporality,
			DataPoints: []metricdata.HistogramDataPoint[float64]{
				{Attributes: set(stagePlanner, causeBP, attribute.String("outcome", "succeeded"))},
				{Attributes: set(stagePlanner, causeMTC, attribute.String("outcome", "failed"))},
			},
		},
	}, dur, append(opts, metricdatatest.IgnoreValue())...)
	for _, dp := range dur.Data.(metricdata.Histogram[float64]).DataPoints {
		assert.Equal(t, specDurationBuckets, dp.Bounds)
		assert.Equal(t, uint64(1), dp.Count)
		assert.Equal(t, uint64(1), dp.BucketCounts[0], "a run of microseconds is in the first bucket")
	}

	countPoint := func(attrs attribute.Set, v int64, bucket int) metricdata.HistogramDataPoint[int64] {
		counts := make([]uint64, len(specCountBuckets)+1)
		counts[bucket] = 1
		return metricdata.HistogramDataPoint[int64]{Attributes: attrs, Count: 1, Bounds: specCountBuckets,
			BucketCounts: counts, Min: metricdata.NewExtrema(v), Max: metricdata.NewExtrema(v), Sum: v}
	}
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "agent.stage.iterations", Description: "Model turns per stage run.", Unit: "{iteration}",
		Data: metricdata.Histogram[int64]{
			Temporality: metricdata.CumulativeTemporality,
			DataPoints: []metricdata.HistogramDataPoint[int64]{
				countPoint(set(stagePlanner, causeBP), 2, 1),
				countPoint(set(stagePlanner, causeMTC), 0, 0),
			},
		},
	}, m["agent.stage.iterations"], opts...)
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "agent.stage.tool_calls", Description: "Tool calls per stage run.", Unit: "{tool_call}",
		Data: metricdata.Histogram[int64]{
			Temporality: metricdata.CumulativeTemporality,
			DataPoints: []metricdata.HistogramDataPoint[int64]{
				countPoint(set(stagePlanner, causeBP), 0, 0),
				countPoint(set(stagePlanner, causeMTC), 2, 1),
			},
		},
	}, m["agent.stage.tool_calls"], opts...)

	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "agent.stage.tokens", Description: "Tokens spent by stage runs.", Unit: "{token}",
		Data: metricdata.Sum[int64]{
			Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{
				{Attributes: set(stagePlanner, attribute.String("token_type", "input")), Value: 700},
				{Attributes: set(stagePlanner, attribute.String("token_type", "output")), Value: 50},
			},
		},
	}, m["agent.stage.tokens"], opts...)

	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "agent.stage.budget.utilization", Description: "Share of each budget used by a stage run.", Unit: "1",
		Data: metricdata.Histogram[float64]{
			Temporality: metricdata.CumulativeTemporality,
			DataPoints: []metricdata.HistogramDataPoint[float64]{{
				Attributes: set(stagePlanner, attribute.String("resource", "total_tokens")),
				Count:      2, Bounds: specUtilizationBuckets,
				// 0 in (-inf, 0.25], 0.75 in (0.5, 0.75].
				BucketCounts: []uint64{1, 0, 1, 0, 0, 0, 0, 0, 0, 0},
				Min:          metricdata.NewExtrema(0.0), Max: metricdata.NewExtrema(0.75), Sum: 0.75,
			}},
		},
	}, m["agent.stage.budget.utilization"], opts...)

	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "agent.stage.budget.pressure", Description: "Budget-pressure warnings.",
		Data: metricdata.Sum[int64]{
			Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{
				{Attributes: set(stagePlanner, attribute.String("resource", "total_tokens")), Value: 1},
			},
		},
	}, m["agent.stage.budget.pressure"], opts...)

	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "agent.stage.active", Description: "Stage runs in progress.",
		Data: metricdata.Sum[int64]{
			Temporality: metricdata.CumulativeTemporality, IsMonotonic: false,
			DataPoints: []metricdata.DataPoint[int64]{{Attributes: set(stagePlanner), Value: 0}},
		},
	}, m["agent.stage.active"], opts...)
}

// TestActiveWhileRunning: the up-down counter counts runs in progress.
func TestActiveWhileRunning(t *testing.T) {
	h := newHarness(t, nil)
	st := h.stage(t, "coder")
	_, r1 := st.Start(context.Background())
	_, r2 := st.Start(context.Background())
	active := func() int64 {
		pts := h.collect(t)["agent.stage.active"].Data.(metricdata.Sum[int64]).DataPoints
		require.Len(t, pts, 1)
		return pts[0].Value
	}
	assert.Equal(t, int64(2), active())
	r1.Finish(nil)
	assert.Equal(t, int64(1), active())
	r2.Finish(nil)
	r2.Finish(nil) // idempotent: not counted twice
	assert.Equal(t, int64(0), active())
}

// TestNoBudgetNoUtilization: runs without a budget record no utilization.
func TestNoBudgetNoUtilization(t *testing.T) {
	h := newHarness(t, nil)
	observe(h.stage(t, "coder"), msg("c", "x", 10, 10))
	m := h.collect(t)
	if u, ok := m["agent.stage.budget.utilization"]; ok {
		assert.Empty(t, u.Data.(metricdata.Histogram[float64]).DataPoints)
	}
}

// TestEveryBudgetResource: each budgeted resource gets its own utilization
// series, and the token counter splits input and output.
func TestEveryBudgetResource(t *testing.T) {
	h := newHarness(t, nil)
	st := h.stage(t, "summarizer", middleware.WithPolicy(termination.MustParsePolicy(
		"token_budget: {total: 1000, input: 800, output: 400}\ncost_budget: {limit: 2}\n")))
	observe(st, termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 400, OutputTokens: 100}, Cost: 1})
	pts := h.collect(t)["agent.stage.budget.utilization"].Data.(metricdata.Histogram[float64]).DataPoints
	got := map[string]float64{}
	for _, dp := range pts {
		r, _ := dp.Attributes.Value("resource")
		got[r.AsString()] = dp.Sum
	}
	assert.Equal(t, map[string]float64{"total_tokens": 0.5, "input_tokens": 0.5, "output_tokens": 0.25, "cost": 0.5}, got)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
