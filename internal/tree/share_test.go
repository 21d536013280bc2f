package tree_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/termination"
)

func TestUsageOf(t *testing.T) {
	u := termination.Usage{InputTokens: 10, OutputTokens: 5}
	for _, tc := range []struct {
		name string
		ev   termination.Event
		want tree.Usage
	}{
		{"a message is an iteration", termination.Event{Kind: termination.KindMessage, Usage: u, Cost: 0.5},
			tree.Usage{Totals: termination.Totals{Iterations: 1, Tokens: u, Cost: 0.5}}},
		{"a final is an iteration, and a final", termination.Event{Kind: termination.KindFinal, Usage: u, Cost: 0.5},
			tree.Usage{Totals: termination.Totals{Iterations: 1, Tokens: u, Cost: 0.5}, Final: termination.Totals{Iterations: 1, Tokens: u, Cost: 0.5}}},
		{"a tool call", termination.Event{Kind: termination.KindToolCall}, tree.Usage{Totals: termination.Totals{ToolCalls: 1}}},
		{"a result spends its usage only", termination.Event{Kind: termination.KindToolResult, Usage: u},
			tree.Usage{Totals: termination.Totals{Tokens: u}}},
		{"negative and non-finite amounts count as 0", termination.Event{Kind: termination.KindToolResult,
			Usage: termination.Usage{InputTokens: -3}, Cost: math.Inf(1)}, tree.Usage{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.ev
			assert.Equal(t, tc.want, tree.UsageOf(&ev))
		})
	}
}

func TestUsageAdd(t *testing.T) {
	msg := termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 3}, Cost: 0.25}
	fin := termination.Event{Kind: termination.KindFinal, Usage: termination.Usage{OutputTokens: 4}, Cost: 0.5}
	var sum tree.Usage
	assert.True(t, sum.IsZero())
	sum = sum.Add(tree.UsageOf(&msg)).Add(tree.UsageOf(&fin))
	assert.False(t, sum.IsZero())
	assert.Equal(t, tree.Usage{
		Totals: termination.Totals{Iterations: 2, Tokens: termination.Usage{InputTokens: 3, OutputTokens: 4}, Cost: 0.75},
		Final:  termination.Totals{Iterations: 1, Tokens: termination.Usage{OutputTokens: 4}, Cost: 0.5},
	}, sum)
}

func TestCauses(t *testing.T) {
	assert.Equal(t, termination.MaxIterationsReached{Limit: 10, Count: 11, Scope: termination.ScopeTree},
		tree.LimitCause(termination.ResourceIterations, 11, 10))
	assert.Equal(t, termination.MaxToolCallsReached{Limit: 4, Count: 5, Scope: termination.ScopeTree},
		tree.LimitCause(termination.ResourceToolCalls, 5, 4))
	assert.Equal(t, termination.BudgetExhausted{Resource: termination.ResourceCost, Used: 2.5, Limit: 2, Scope: termination.ScopeTree},
		tree.LimitCause(termination.ResourceCost, 2.5, 2))
	assert.Equal(t, cascade.ParentEnded("planner", "budget_exhausted"),
		tree.StopCause("planner", termination.BudgetExhausted{Resource: termination.ResourceCost, Scope: termination.ScopeTree}))
}
