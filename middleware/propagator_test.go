package middleware_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

func TestPropagatorRoundTrip(t *testing.T) {
	prop := middleware.Propagator()
	assert.Equal(t, []string{"agentstop-run", "agentstop-remaining", "agentstop-tree"}, prop.Fields())

	planner := mustStage(t, "planner", policy(t, "{max_iterations: 3, tree: {token_budget: {total: 1000}, max_tool_calls: 5}}"))
	pctx, p := planner.Start(context.Background())
	p.Observe(msg) // 110 tokens
	carrier := propagation.MapCarrier{}
	prop.Inject(pctx, carrier)
	assert.Equal(t, p.ID(), carrier["agentstop-run"])
	assert.Equal(t, "tool_calls=5;total_tokens=890", carrier["agentstop-remaining"], "the tree's limits, not the run's own max_iterations")

	// The callee: its run is the caller's child, and the propagated limits
	// are its tree limits, the smaller of them and its stage's own.
	callee := mustStage(t, "callee", policy(t, "tree: {token_budget: {total: 500}, max_tool_calls: 50}"))
	cctx, c := callee.Start(prop.Extract(context.Background(), carrier))
	assert.Equal(t, p.ID(), c.Parent())
	left := c.Remaining()
	assert.Equal(t, int64(500), left.TotalTokens)
	assert.Equal(t, 5, left.ToolCalls)
	for range 5 {
		_, stop := c.Observe(call)
		require.False(t, stop)
	}
	cause, stop := c.Observe(call)
	require.True(t, stop)
	assert.Equal(t, termination.MaxToolCallsReached{Limit: 5, Count: 6, Scope: termination.ScopeTree}, cause)
	assert.Error(t, cctx.Err())
	res := c.Finish(nil)
	assert.Equal(t, p.ID(), res.Parent)

	// A run in another process does not cascade here: the caller goes on,
	// and charges what the callee spent.
	p.Charge(res.Tokens, res.Cost)
	_, stopped := p.Cause()
	assert.False(t, stopped)
	p.Finish(nil)

	// A context without a run injects nothing.
	empty := propagation.MapCarrier{}
	prop.Inject(context.Background(), empty)
	assert.Empty(t, empty)
}

func TestPropagatorIgnoresMalformedHeaders(t *testing.T) {
	prop := middleware.Propagator()
	stage := mustStage(t, "callee")
	const id = "0123456789abcdef0123456789abcdef"
	cases := []struct {
		name       string
		carrier    propagation.MapCarrier
		parent     string
		treeLimits bool
	}{
		{"none", propagation.MapCarrier{}, "", false},
		{"bad id", propagation.MapCarrier{"agentstop-run": "not-an-id", "agentstop-remaining": "total_tokens=5"}, "", false},
		{"upper-case id", propagation.MapCarrier{"agentstop-run": "0123456789ABCDEF0123456789ABCDEF"}, "", false},
		{"bad limits", propagation.MapCarrier{"agentstop-run": id, "agentstop-remaining": "total_tokens=-5"}, id, false},
		{"unknown limit", propagation.MapCarrier{"agentstop-run": id, "agentstop-remaining": "nap=1"}, id, false},
		{"huge limits", propagation.MapCarrier{"agentstop-run": id, "agentstop-remaining": "cost=" + string(make([]byte, 600))}, id, false},
		{"good", propagation.MapCarrier{"agentstop-run": id, "agentstop-remaining": "total_tokens=5"}, id, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := prop.Extract(context.Background(), c.carrier)
			_, run := stage.Start(ctx)
			assert.Equal(t, c.parent, run.Parent())
			assert.Equal(t, c.treeLimits, run.Remaining().Has != 0)
			assert.Equal(t, c.parent, run.Finish(nil).Parent)
		})
	}
	assert.NotPanics(t, func() {
		prop.Inject(context.Background(), nil)
		prop.Extract(context.Background(), nil)
	})
}

// TestPropagatorComposes: composed with the trace context, as otelhttp
// uses it, both travel.
func TestPropagatorComposes(t *testing.T) {
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, middleware.Propagator())
	stage := mustStage(t, "s")
	ctx, r := stage.Start(context.Background())
	carrier := propagation.MapCarrier{}
	prop.Inject(ctx, carrier)
	assert.Equal(t, r.ID(), carrier["agentstop-run"])
	_, child := stage.Start(prop.Extract(context.Background(), carrier))
	assert.Equal(t, r.ID(), child.Parent())
	child.Finish(nil)
	r.Finish(nil)
}
