package termination

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLimitStructsAreConditions: each limit struct stands for the
// condition it configures wherever a condition goes — as an evaluator's
// own condition, in a combinator, in tree limits — and describes and
// validates itself as that condition does.
func TestLimitStructsAreConditions(t *testing.T) {
	valid := []Condition{
		IterationLimits{Limit: 2, Pressure: 0.5},
		ToolCallLimits{Limit: 3, PerTool: map[string]int{"search": 1}},
		TokenLimits{Total: 100, Pressure: 0.8, Grace: new(1)},
		CostLimit{Limit: 2.5},
		StallLimits{Repeats: 3, IgnoreTools: []string{"poll"}},
		ErrorLimits{Consecutive: 2},
	}
	for _, c := range valid {
		l := c.(limitStruct).condition()
		assert.Equal(t, l.String(), c.String())
		assert.NoError(t, c.Validate(), c.String())
		assert.Equal(t, AnyOf(l).String(), AnyOf(c).String())
	}
	for _, c := range []Condition{IterationLimits{}, ToolCallLimits{}, TokenLimits{}, CostLimit{}, StallLimits{}, ErrorLimits{}} {
		assert.Error(t, c.Validate(), "%#v", c)
	}

	// An evaluator's own condition.
	e := NewEvaluator(IterationLimits{Limit: 1}, time.Now())
	_, stop := e.Observe(Event{Kind: KindMessage})
	require.False(t, stop)
	c, stop := e.Observe(Event{Kind: KindMessage})
	require.True(t, stop)
	assert.Equal(t, MaxIterationsReached{Limit: 1, Count: 2}, c)

	// Tree limits take them as they take the constructors' conditions.
	tree := TreeLimits(IterationLimits{Limit: 3}, TokenLimits{Total: 10})
	require.NoError(t, tree.Validate())
	assert.Equal(t, TreeLimits(IterationLimits{Limit: 3}.condition(), TokenLimits{Total: 10}.condition()).String(), tree.String())

	// A limit alone is written as the policy file's short form, the one
	// policy hashes and records name.
	assert.Equal(t, "max_iterations: 3", IterationLimits{Limit: 3}.String())
	assert.Equal(t, "max_tool_calls: 2", ToolCallLimits{Limit: 2}.String())
	assert.Equal(t, MustParsePolicy("max_tool_calls: 2").Condition().String(), ToolCallLimits{Limit: 2}.String())
	assert.ErrorContains(t, TreeLimits(StallLimits{Repeats: 3}).Validate(), "stall")
}

// TestIterationLimitsStartAllocs: an IterationLimits given as a Go value
// costs a run one allocation at its start (its limit and check together),
// as a limit built once (a policy's) does.
func TestIterationLimitsStartAllocs(t *testing.T) {
	built := MustParsePolicy("max_iterations: 3").Condition()
	given := IterationLimits{Limit: 3}
	for name, c := range map[string]Condition{"built": built, "given": given} {
		if n := testing.AllocsPerRun(100, func() { _ = c.start() }); n != 1 {
			t.Errorf("%s: %v allocations per start, want 1", name, n)
		}
	}
	e := NewEvaluator(given, time.Now())
	for range 3 {
		_, stop := e.Observe(Event{Kind: KindMessage})
		require.False(t, stop)
	}
	c, stop := e.Observe(Event{Kind: KindMessage})
	require.True(t, stop)
	assert.Equal(t, MaxIterationsReached{Limit: 3, Count: 4}, c)
}
