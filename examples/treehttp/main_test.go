package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/termination"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTreeAcrossServices: every researcher run is a child of the planner's
// run, in the planner's trace; the propagated tree budget shrinks with
// what was charged, and the planner's tree: budget stops the task.
func TestTreeAcrossServices(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := run(ctx, services{})
	require.NoError(t, err)
	require.Len(t, rep.Traces, 1, "one trace across both services: %v", rep.Traces)
	var trace string
	for id, n := range rep.Traces {
		trace = id
		// Per researcher: the client's span, the server's, the run's
		// invoke_agent; and the planner's invoke_agent.
		assert.Equal(t, 3*len(rep.Researchers)+1, n)
	}
	require.GreaterOrEqual(t, len(rep.Researchers), 2)
	for i, res := range rep.Researchers {
		assert.Equal(t, rep.PlannerID, res.Parent, "researcher %d's parent", i)
		assert.NotEqual(t, rep.PlannerID, res.Run)
		assert.Equal(t, trace, res.Trace, "researcher %d's trace", i)
	}
	var first, last termination.Limits
	require.NoError(t, first.Set(rep.Researchers[0].Given))
	require.NoError(t, last.Set(rep.Researchers[len(rep.Researchers)-1].Given))
	assert.Equal(t, int64(5000-100), first.TotalTokens, "the tree's budget less the planner's first turn")
	assert.Less(t, last.TotalTokens, first.TotalTokens, "what earlier researchers spent was charged")
	assert.Contains(t, rep.Researchers[len(rep.Researchers)-1].Cause, `"scope":"tree"`, "the last researcher ran out of the propagated budget")
	assert.Equal(t, termination.BudgetExhausted{Resource: termination.ResourceTotalTokens, Used: 5100, Limit: 5000, Scope: termination.ScopeTree}, rep.Planner.Cause)

	var out bytes.Buffer
	rep.print(&out)
	assert.True(t, strings.HasPrefix(out.String(), "planner run "+rep.PlannerID+" ended: "), out.String())
}

// TestTreeSharedThroughFleet: with a fleet on both sides the researchers'
// events are charged to the planner's tree as they happen; the planner's
// limit fires at the event that spends it, and the researcher whose event
// that was ends with Cancelled{parent} naming the planner.
func TestTreeSharedThroughFleet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	local := fleet.NewLocal()
	rep, err := run(ctx, services{planner: local, researcher: local})
	require.NoError(t, err)
	// Turns of 100 (planner) and researchers of 3 × 600: 100, 1800, 100,
	// 1800, 100, then the third researcher's second event reaches 5100.
	assert.Equal(t, termination.BudgetExhausted{Resource: termination.ResourceTotalTokens, Used: 5100, Limit: 5000, Scope: termination.ScopeTree}, rep.Planner.Cause)
	require.Len(t, rep.Researchers, 3)
	for i, res := range rep.Researchers[:2] {
		assert.Equal(t, rep.PlannerID, res.Parent, "researcher %d's parent", i)
		assert.Equal(t, int64(1800), res.Usage.Total())
	}
	last := rep.Researchers[2]
	assert.Equal(t, int64(1200), last.Usage.Total())
	assert.Equal(t, `{"$kind":"Cancelled","reason":"parent","detail":"planner ended: budget_exhausted"}`, last.Cause)
}
