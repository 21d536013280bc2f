package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry"
	"github.com/agentstop/agentstop/termination"
)

// The buckets of gen_ai.invoke_agent.inference_calls and tool_calls (spec
// §5.1), written out.
var specAgentCallBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128}

// spanNamed returns the one ended span with that name.
func (h *harness) spanNamed(t testing.TB, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var got sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == name {
			require.Nil(t, got, "two spans named %q", name)
			got = s
		}
	}
	require.NotNil(t, got, "no span named %q", name)
	return got
}

// TestChildRunSpan (§5.1, §8): a child run's invoke_agent span is a child
// of its parent's span when the parent runs in the same process (it
// follows from the context), and carries agentstop.parent.run.id; a root
// run's span has no parent id.
func TestChildRunSpan(t *testing.T) {
	h := newHarness(t, nil)
	planner := h.stage(t, "planner")
	researcher := h.stage(t, "researcher")

	pctx, prun := planner.Start(context.Background())
	_, crun := researcher.Start(pctx)
	require.Equal(t, prun.ID(), crun.Parent())
	crun.Finish(nil)
	prun.Finish(nil)
	h.requireAllEnded(t)

	ps := h.spanNamed(t, "invoke_agent planner")
	cs := h.spanNamed(t, "invoke_agent researcher")
	assert.Equal(t, ps.SpanContext().TraceID(), cs.SpanContext().TraceID(), "one trace")
	assert.Equal(t, ps.SpanContext().SpanID(), cs.Parent().SpanID(), "the child's span is a child of the parent's")
	pa, ca := attrMap(ps.Attributes()), attrMap(cs.Attributes())
	assert.Equal(t, attribute.StringValue(prun.ID()), ca["agentstop.parent.run.id"])
	assert.Equal(t, attribute.StringValue(crun.ID()), ca["agentstop.run.id"])
	assert.NotContains(t, pa, "agentstop.parent.run.id", "a root run has no parent")
	assert.Equal(t, attribute.StringValue(prun.ID()), pa["agentstop.run.id"])
}

// TestRemoteParentSpan: a run whose parent runs elsewhere (WithParent with
// an id no live run of this process has) names it on its span, without a
// parent span in this process.
func TestRemoteParentSpan(t *testing.T) {
	h := newHarness(t, nil)
	const remote = "0123456789abcdef0123456789abcdef"
	_, run := h.stage(t, "researcher").Start(context.Background(), middleware.WithParent(remote))
	run.Finish(nil)
	s := h.spanNamed(t, "invoke_agent researcher")
	assert.False(t, s.Parent().IsValid(), "no parent span in this process")
	assert.Equal(t, attribute.StringValue(remote), attrMap(s.Attributes())["agentstop.parent.run.id"])
}

// TestAgentCallHistograms pins gen_ai.invoke_agent.inference_calls and
// gen_ai.invoke_agent.tool_calls: name, unit, buckets, {gen_ai.agent.name},
// one measurement per run (iterations are the inference calls).
func TestAgentCallHistograms(t *testing.T) {
	h := newHarness(t, nil)
	st := h.stage(t, "coder", middleware.WithPolicy(termination.MustParsePolicy("max_tool_calls: 200\n")))
	// Run 1: 3 inference calls, 2 tool calls. Run 2: 1 and 0. Run 3: 1 and 130.
	observe(st, msg("c", "a", 1, 1), call("t", `{"i":1}`), msg("c", "b", 1, 1), call("t", `{"i":2}`), msg("c", "c", 1, 1))
	observe(st, msg("c", "a", 1, 1))
	many := []termination.Event{msg("c", "a", 1, 1)}
	for i := range 130 {
		many = append(many, termination.Event{Kind: termination.KindToolCall, Tool: "t", Args: []byte{'0' + byte(i%10)}})
	}
	observe(st, many...)

	m := h.collect(t)
	agent := set(attribute.String("gen_ai.agent.name", "coder"))
	point := func(counts []uint64, sum, lo, hi int64) metricdata.HistogramDataPoint[int64] {
		return metricdata.HistogramDataPoint[int64]{Attributes: agent, Count: 3, Bounds: specAgentCallBuckets,
			BucketCounts: counts, Sum: sum, Min: metricdata.NewExtrema(lo), Max: metricdata.NewExtrema(hi)}
	}
	opts := []metricdatatest.Option{metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()}
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "gen_ai.invoke_agent.inference_calls", Unit: "{inference_call}",
		Description: "The number of inference calls made during a single agent invocation.",
		Data: metricdata.Histogram[int64]{
			Temporality: metricdata.CumulativeTemporality,
			// 1, 1 in (-inf, 1]; 3 in (2, 4].
			DataPoints: []metricdata.HistogramDataPoint[int64]{point([]uint64{2, 0, 1, 0, 0, 0, 0, 0, 0}, 5, 1, 3)},
		},
	}, m["gen_ai.invoke_agent.inference_calls"], opts...)
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "gen_ai.invoke_agent.tool_calls", Unit: "{tool_call}",
		Description: "The number of tool calls made during a single agent invocation.",
		Data: metricdata.Histogram[int64]{
			Temporality: metricdata.CumulativeTemporality,
			// 0 in (-inf, 1]; 2 in (1, 2]; 130 past 128.
			DataPoints: []metricdata.HistogramDataPoint[int64]{point([]uint64{1, 1, 0, 0, 0, 0, 0, 0, 1}, 132, 0, 130)},
		},
	}, m["gen_ai.invoke_agent.tool_calls"], opts...)
	assert.Equal(t, specAgentCallBuckets, telemetry.AgentCallBuckets)
}

// treeCounters reads agent.tree.runs.cancelled by stage and
// agent.tree.limits.reached by stage/resource.
func treeCounters(t testing.TB, h *harness) (cancelled, limits map[string]int64) {
	t.Helper()
	m := h.collect(t)
	cancelled, limits = map[string]int64{}, map[string]int64{}
	if c, ok := m["agent.tree.runs.cancelled"]; ok {
		for _, dp := range c.Data.(metricdata.Sum[int64]).DataPoints {
			st, _ := dp.Attributes.Value("stage")
			require.Equal(t, 1, dp.Attributes.Len(), "agent.tree.runs.cancelled attributes: %v", dp.Attributes.ToSlice())
			cancelled[st.AsString()] = dp.Value
		}
	}
	if c, ok := m["agent.tree.limits.reached"]; ok {
		for _, dp := range c.Data.(metricdata.Sum[int64]).DataPoints {
			st, _ := dp.Attributes.Value("stage")
			res, _ := dp.Attributes.Value("resource")
			require.Equal(t, 2, dp.Attributes.Len(), "agent.tree.limits.reached attributes: %v", dp.Attributes.ToSlice())
			limits[st.AsString()+"/"+res.AsString()] = dp.Value
		}
	}
	return cancelled, limits
}

// TestTreeCountersFromCause: the tree counters are derived from the typed
// cause a run ends with, and nothing else counts.
func TestTreeCountersFromCause(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cause     termination.Cause
		cancelled int64
		limit     string // stage/resource counted on agent.tree.limits.reached
	}{
		{name: "cancelled by a parent", cause: cascade.ParentEnded("planner", "budget_exhausted"), cancelled: 1},
		{name: "cancelled by an operator", cause: termination.Cancelled{Reason: termination.CancelExternal}},
		{name: "cancelled by the context", cause: termination.Cancelled{Reason: termination.CancelContext}},
		{name: "tree cost budget", cause: termination.BudgetExhausted{Resource: termination.ResourceCost, Used: 2, Limit: 2, Scope: termination.ScopeTree}, limit: "s/cost"},
		{name: "tree token budget", cause: termination.BudgetExhausted{Resource: termination.ResourceTotalTokens, Used: 9, Limit: 9, Scope: termination.ScopeTree}, limit: "s/total_tokens"},
		{name: "tree budget grace stop", cause: termination.BudgetPressure{Resource: termination.ResourceInputTokens, Threshold: 0.8, Scope: termination.ScopeTree}, limit: "s/input_tokens"},
		{name: "fleet budget", cause: termination.BudgetExhausted{Resource: termination.ResourceCost, Scope: termination.ScopeFleet}},
		{name: "own budget", cause: termination.BudgetExhausted{Resource: termination.ResourceCost}},
		{name: "tree iterations", cause: termination.MaxIterationsReached{Limit: 3, Count: 4, Scope: termination.ScopeTree}, limit: "s/iterations"},
		{name: "own iterations", cause: termination.MaxIterationsReached{Limit: 3, Count: 4}},
		{name: "tree tool calls", cause: termination.MaxToolCallsReached{Limit: 3, Count: 4, Scope: termination.ScopeTree}, limit: "s/tool_calls"},
		{name: "own per-tool calls", cause: termination.MaxToolCallsReached{Limit: 3, Count: 4, Tool: "x"}},
		{name: "tree timeout", cause: termination.Timeout{Limit: time.Minute, Elapsed: time.Minute, Scope: termination.ScopeTree}, limit: "s/timeout"},
		{name: "own timeout", cause: termination.Timeout{Limit: time.Minute, Elapsed: time.Minute}},
		{name: "all, last a tree limit", cause: termination.All{Causes: []termination.Cause{
			termination.Completed{Condition: "text_mention"},
			termination.MaxToolCallsReached{Limit: 1, Count: 2, Scope: termination.ScopeTree}}}, limit: "s/tool_calls"},
		{name: "all, last not a tree limit", cause: termination.All{Causes: []termination.Cause{
			termination.MaxToolCallsReached{Limit: 1, Count: 2, Scope: termination.ScopeTree},
			termination.Completed{Condition: "text_mention"}}}},
		{name: "parent ended before the start", cause: termination.Skipped{Reason: termination.SkipParentEnded}},
		{name: "natural completion", cause: termination.NaturalCompletion{}},
		{name: "no cause", cause: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			_, rr := h.rec.StartRun(context.Background(), middleware.RunInfo{Stage: "s", RunID: "r"})
			rr.End(&termination.Result{Cause: tc.cause, Outcome: termination.OutcomeFailed})
			cancelled, limits := treeCounters(t, h)
			want := map[string]int64{}
			if tc.cancelled > 0 {
				want["s"] = tc.cancelled
			}
			assert.Equal(t, want, cancelled, "agent.tree.runs.cancelled")
			wantLimits := map[string]int64{}
			if tc.limit != "" {
				wantLimits[tc.limit] = 1
			}
			assert.Equal(t, wantLimits, limits, "agent.tree.limits.reached")
		})
	}
}

// TestTreeCancelledStartsAtZero: a stage's first child run exports
// agent.tree.runs.cancelled at 0, so that Prometheus' increase() sees the
// first cascade (a counter born at 1 loses its first increment); a run
// without a parent does not.
func TestTreeCancelledStartsAtZero(t *testing.T) {
	h := newHarness(t, nil)
	_, root := h.rec.StartRun(context.Background(), middleware.RunInfo{Stage: "planner", RunID: "p"})
	cancelled, _ := treeCounters(t, h)
	assert.Empty(t, cancelled, "no child run yet")
	_, child := h.rec.StartRun(context.Background(), middleware.RunInfo{Stage: "researcher", RunID: "c", ParentRunID: "p"})
	cancelled, _ = treeCounters(t, h)
	assert.Equal(t, map[string]int64{"researcher": 0}, cancelled)
	child.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded})
	root.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded})
	cancelled, _ = treeCounters(t, h)
	assert.Equal(t, map[string]int64{"researcher": 0}, cancelled)
}

// TestTreeLimitOnMetrics drives a real tree through the middleware: a
// planner holding tree: {max_tool_calls: 3} and two researchers whose calls
// add up. The holder's end counts one tree limit (planner, tool_calls), the
// cascade one cancellation per live researcher; a researcher's own failure
// before that counts for nothing on the tree counters.
func TestTreeLimitOnMetrics(t *testing.T) {
	h := newHarness(t, nil)
	planner := h.stage(t, "planner", middleware.WithPolicy(termination.MustParsePolicy("tree: {max_tool_calls: 3}\n")))
	researcher := h.stage(t, "researcher", middleware.WithPolicy(termination.MustParsePolicy("errors: {consecutive: 1}\n")))

	pctx, prun := planner.Start(context.Background())
	// A researcher that fails on its own: the planner goes on.
	_, failing := researcher.Start(pctx)
	failing.Observe(call("search", `{"q":1}`))
	_, stop := failing.Observe(result("search", "boom"))
	require.True(t, stop)
	require.Equal(t, termination.TagFailed, failing.Finish(nil).Tag())
	select {
	case <-prun.Done():
		t.Fatal("a child's own failure ended its parent")
	default:
	}

	_, r1 := researcher.Start(pctx)
	_, r2 := researcher.Start(pctx)
	r1.Observe(call("search", `{"q":2}`))
	r1.Observe(call("search", `{"q":3}`))
	_, stop = r2.Observe(call("search", `{"q":4}`)) // the fourth call of the tree
	require.True(t, stop, "the tree's fourth tool call stops the run that made it")
	res := prun.Finish(nil)
	require.Equal(t, termination.MaxToolCallsReached{Limit: 3, Count: 4, Scope: termination.ScopeTree}, res.Cause)
	for _, r := range []*middleware.Run{r1, r2} {
		cr := r.Finish(nil)
		c, ok := cr.Cause.(termination.Cancelled)
		require.True(t, ok, "cause %v", cr.Cause)
		assert.Equal(t, termination.CancelParent, c.Reason)
	}
	h.requireAllEnded(t)

	cancelled, limits := treeCounters(t, h)
	assert.Equal(t, map[string]int64{"researcher": 2}, cancelled)
	assert.Equal(t, map[string]int64{"planner/tool_calls": 1}, limits)
	// The closed set of termination_cause values is unchanged: the
	// cancellations are "cancelled", the limit "max_tool_calls".
	for _, dp := range h.collect(t)["agent.stage.terminations"].Data.(metricdata.Sum[int64]).DataPoints {
		c, _ := dp.Attributes.Value("termination_cause")
		assert.Contains(t, termination.TagValues(), c.AsString())
	}
}

// TestTreeEndDoesNotAllocate: with a tree's attribute sets built, a run's
// end records the tree counters without building any.
func TestTreeEndDoesNotAllocate(t *testing.T) {
	rec := telemetry.NewRecorder(telemetry.WithMeterProvider(newHarness(t, nil).mp))
	info := middleware.RunInfo{Stage: "researcher", RunID: "c", ParentRunID: "p"}
	end := func(c termination.Cause) {
		_, rr := rec.StartRun(context.Background(), info)
		rr.End(&termination.Result{Cause: c, Outcome: termination.OutcomeFailed})
	}
	cancel := cascade.ParentEnded("planner", "timeout")
	limit := termination.Timeout{Limit: time.Second, Elapsed: time.Second, Scope: termination.ScopeTree}
	end(cancel)
	end(limit)
	base := testing.AllocsPerRun(200, func() { end(termination.NaturalCompletion{}) })
	for _, c := range []termination.Cause{cancel, limit} {
		n := testing.AllocsPerRun(200, func() { end(c) })
		assert.LessOrEqual(t, n, base, "allocations of a run ending with %v beyond a plain run's", c)
	}
}

// TestWithParentSpanUnderLocalParent: a child started with WithParent from
// a context without a span (an orchestrator that passes ids, not contexts)
// still gets its live parent's span as its span's parent; from a context
// with a span of another trace, the caller's trace wins and the span links
// to the parent's.
func TestWithParentSpanUnderLocalParent(t *testing.T) {
	h := newHarness(t, nil)
	planner := h.stage(t, "planner")
	researcher := h.stage(t, "researcher")
	_, prun := planner.Start(context.Background())

	_, byID := researcher.Start(context.Background(), middleware.WithParent(prun.ID()))
	require.Equal(t, prun.ID(), byID.Parent())
	byID.Finish(nil)

	otherCtx, other := h.tp.Tracer("test").Start(context.Background(), "request")
	_, linked := h.stage(t, "critic").Start(otherCtx, middleware.WithParent(prun.ID()))
	linked.Finish(nil)
	other.End()
	prun.Finish(nil)
	h.requireAllEnded(t)

	ps := h.spanNamed(t, "invoke_agent planner")
	cs := h.spanNamed(t, "invoke_agent researcher")
	assert.Equal(t, ps.SpanContext().TraceID(), cs.SpanContext().TraceID(), "one trace")
	assert.Equal(t, ps.SpanContext().SpanID(), cs.Parent().SpanID())
	assert.Equal(t, attribute.StringValue(prun.ID()), attrMap(cs.Attributes())["agentstop.parent.run.id"])

	ls := h.spanNamed(t, "invoke_agent critic")
	assert.Equal(t, other.SpanContext().SpanID(), ls.Parent().SpanID(), "the caller's trace wins")
	require.Len(t, ls.Links(), 1)
	assert.Equal(t, ps.SpanContext(), ls.Links()[0].SpanContext, "linked to the parent's span")
}
