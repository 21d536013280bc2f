package middleware_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestHeldStageWarningInTree: a run whose stage holds, in the tree of a
// holder of tree: limits, records a warning that is no limit (a budget's
// pressure): its Observe returns, and the run is not held. (It used to
// deadlock: the check for a hold locked the tree's root, which the
// event's evaluation held.)
func TestHeldStageWarningInTree(t *testing.T) {
	holder := mustStage(t, "holder", middleware.WithPolicy(termination.MustParsePolicy("tree: {max_iterations: 100}")))
	child := holdStage(t, "{token_budget: {total: 1000, pressure: 0.5}, hold: {timeout: 1m}}")
	ctx, h := holder.Start(context.Background())
	_, c := child.Start(ctx)
	done := make(chan bool, 1)
	go func() {
		_, stop := c.Observe(termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 600}})
		done <- stop
	}()
	select {
	case stop := <-done:
		require.False(t, stop)
	case <-time.After(5 * time.Second):
		t.Fatal("Observe of a warning event in a tree did not return")
	}
	_, _, held := c.Held()
	require.False(t, held, "a pressure warning holds nothing")
	res := c.Finish(nil)
	require.Equal(t, termination.NaturalCompletion{}, res.Cause)
	require.Contains(t, res.Warnings, termination.Cause(termination.BudgetPressure{Resource: "total_tokens", Threshold: 0.5, Used: 600, Limit: 1000}))
	h.Finish(nil)
}
