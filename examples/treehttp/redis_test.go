package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/termination"
)

// TestTreeSharedThroughRedis: -redis URL, each service with a fleet of its
// own on one Redis (two processes' worth): the researchers' events are
// charged to the planner's tree through leases keyed by the planner's run
// id; the planner's tree budget fires with its own cause, and the
// researcher running when it does ends with Cancelled{parent} naming the
// planner.
func TestTreeSharedThroughRedis(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fleets, err := redisFleets(ctx, srv.URL())
	require.NoError(t, err)
	defer fleets.close()
	rep, err := run(ctx, fleets)
	require.NoError(t, err)
	x, ok := rep.Planner.Cause.(termination.BudgetExhausted)
	require.True(t, ok, "planner's cause: %#v", rep.Planner.Cause)
	assert.Equal(t, termination.ResourceTotalTokens, x.Resource)
	assert.Equal(t, termination.ScopeTree, x.Scope)
	assert.Equal(t, float64(5000), x.Limit)
	assert.GreaterOrEqual(t, x.Used, float64(5000))
	require.GreaterOrEqual(t, len(rep.Researchers), 3)
	for i, res := range rep.Researchers {
		assert.Equal(t, rep.PlannerID, res.Parent, "researcher %d's parent", i)
	}
	last := rep.Researchers[len(rep.Researchers)-1]
	assert.Equal(t, `{"$kind":"Cancelled","reason":"parent","detail":"planner ended: budget_exhausted"}`, last.Cause)
	assert.Less(t, last.Usage.Total(), int64(1800), "the last researcher was stopped before it finished")
}
