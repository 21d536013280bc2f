package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/agentstop/agentstop/telemetry"
	"github.com/agentstop/agentstop/termination"
)

// plannerBehaviour returns the planner's stage spec and its behaviour of that name.
func plannerBehaviour(t *testing.T, name string) (stageSpec, behaviour) {
	t.Helper()
	spec := stageNamed("planner")
	for _, b := range spec.behaviours {
		if b.name == name {
			return spec, b
		}
	}
	t.Fatalf("the planner has no behaviour %q", name)
	return spec, behaviour{}
}

// analystStops returns the analysts' stops in the feed, by tag, with their
// details.
func analystStops(tl *tally) map[string][]string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	out := map[string][]string{}
	for _, s := range tl.feed {
		if s.stage == delegateStage {
			out[s.tag] = append(out[s.tag], s.detail)
		}
	}
	return out
}

// TestPlannerTreeBudget (spec §8): the planner delegates to three analysts
// under its tree: token budget; together they spend it, so the planner
// ends with BudgetExhausted{scope: tree} and the three live analysts with
// Cancelled{reason: parent}; the dashboard's counters say so.
func TestPlannerTreeBudget(t *testing.T) {
	f, reader := meteredFleet(t)
	spec, b := plannerBehaviour(t, "delegates to analysts who overspend")

	res, _ := f.runOnce(f.hard, f.byName["planner"], spec.wrap, b, newRand(1), "acme")
	c, ok := res.Cause.(termination.BudgetExhausted)
	require.True(t, ok, "the planner's cause: %v", res.Cause)
	assert.Equal(t, termination.ResourceTotalTokens, c.Resource)
	assert.Equal(t, termination.ScopeTree, c.Scope)
	assert.Equal(t, float64(treeBudget), c.Limit)
	assert.GreaterOrEqual(t, c.Used, float64(treeBudget))
	// The planner's own events are two turns at most: the analysts spent it.
	assert.Less(t, res.Tokens.InputTokens+res.Tokens.OutputTokens, int64(treeBudget/4))
	assert.Equal(t, []termination.Cause{termination.BudgetPressure{Resource: termination.ResourceTotalTokens,
		Threshold: 0.75, Used: res.Warnings[0].(termination.BudgetPressure).Used, Limit: treeBudget, Scope: termination.ScopeTree}},
		res.Warnings, "the tree's pressure warning reaches the planner")

	stops := analystStops(f.tally)
	require.Len(t, stops[termination.TagCancelled], 3, "analysts' stops: %v", stops)
	for _, d := range stops[termination.TagCancelled] {
		assert.Contains(t, d, "parent: planner ended: budget_exhausted")
		assert.Contains(t, d, "tree total_tokens at", "the tree's pressure warning reaches every analyst")
	}
	assert.Len(t, stops, 1, "every analyst is cancelled by the planner's end: %v", stops)

	counts := fleetCounts(t, reader)
	assert.Equal(t, int64(1), counts["agent.tree.limits.reached resource=total_tokens"])
	assert.Equal(t, int64(1), counts["agent.tree.limits.reached stage=planner"])
	assert.Equal(t, int64(3), counts["agent.tree.runs.cancelled stage=analyst"])
}

// TestPlannerOutlivesACrashedAnalyst: one analyst's own failure is its
// planner's business: the planner goes on and finishes, the other analysts
// report, and nothing counts as a tree stop.
func TestPlannerOutlivesACrashedAnalyst(t *testing.T) {
	f, reader := meteredFleet(t)
	spec, b := plannerBehaviour(t, "delegates; one analyst crashes")

	res, _ := f.runOnce(f.hard, f.byName["planner"], spec.wrap, b, newRand(2), "acme")
	assert.Equal(t, termination.NaturalCompletion{}, res.Cause)
	assert.Equal(t, 2, res.Iterations, "the planner's loop went on after its analysts")
	assert.Empty(t, res.Warnings, "the analysts stayed under 75% of the tree budget")
	stops := analystStops(f.tally)
	assert.Len(t, stops[termination.TagNaturalCompletion], 2, "analysts' stops: %v", stops)
	assert.Equal(t, []string{"stream_error: model provider: 429 rate limited"}, stops[termination.TagFailed])
	assert.Len(t, stops, 2, "analysts' stops: %v", stops)

	counts := fleetCounts(t, reader)
	assert.Zero(t, counts["agent.tree.limits.reached"])
	assert.Zero(t, counts["agent.tree.runs.cancelled"])
}

// meteredFleet is the quickstart's in-process fleet recording its metrics
// into a manual reader, shut down when the test ends.
func meteredFleet(t *testing.T) (*fleet, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	f, err := newFleet(telemetry.NewRecorder(telemetry.WithMeterProvider(mp)), inProcess(t), 100)
	require.NoError(t, err)
	t.Cleanup(f.cancelHard)
	return f, reader
}
