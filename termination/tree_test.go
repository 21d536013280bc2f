package termination

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPolicyTree(t *testing.T) {
	p := MustParsePolicy(`
max_iterations: 5
tree:
  max_iterations: 300
  max_tool_calls: {limit: 500, pressure: 0.8}
  token_budget: {total: 2000000, pressure: 0.8}
  cost_budget: {limit: 5}
  timeout: 30m
`)
	require.NotNil(t, p.Tree())
	assert.Equal(t, "tree: {max_iterations: 300, max_tool_calls: {limit: 500, pressure: 0.8}, token_budget: {total: 2e+06, pressure: 0.8}, cost_budget: {limit: 5}, timeout: 30m0s}", p.Tree().String())
	assert.Equal(t, "max_iterations: 5", p.String(), "tree limits are not the run's own")
	assert.Nil(t, MustParsePolicy("max_iterations: 5").Tree())

	// The tree's limits fire with scope tree, and warn with it.
	e := NewEvaluator(p.Tree(), time.Time{})
	for range 500 {
		_, stop := e.Observe(Event{Kind: KindToolCall, Tool: "t"})
		require.False(t, stop)
	}
	assert.Equal(t, []Cause{BudgetPressure{Resource: ResourceToolCalls, Threshold: 0.8, Used: 400, Limit: 500, Scope: ScopeTree}}, e.Warnings())
	c, stop := e.Observe(Event{Kind: KindToolCall, Tool: "t"})
	require.True(t, stop)
	assert.Equal(t, MaxToolCallsReached{Limit: 500, Count: 501, Scope: ScopeTree}, c)
}

func TestPolicyTreeErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"tree: {}", "policy.tree: needs at least one of max_iterations, max_tool_calls, token_budget, cost_budget, timeout (line 1)"},
		{"tree: 5", "policy.tree: must be a mapping, got an int (5) (line 1)"},
		{"tree: {token_budget: 20000}", "policy.tree.token_budget: must be a mapping such as {total: 20000}, got an int (20000) (line 1)"},
		{"tree: {stall: {repeats: 3}}", `policy.tree.stall: unknown key (the keys here: max_iterations, max_tool_calls, token_budget, cost_budget, timeout) (line 1)`},
		{"tree: {idle: 5m}", `policy.tree.idle: unknown key (the keys here: max_iterations, max_tool_calls, token_budget, cost_budget, timeout) (line 1)`},
		{"tree: {max_iteration: 3}", `policy.tree.max_iteration: unknown key (did you mean "max_iterations"?) (line 1)`},
		{"tree: {max_iterations: 0}", "policy.tree.max_iterations: must be a positive int, got 0 (line 1)"},
		{"tree: {token_budget: {total: 10, pressure: 2}}", "policy.tree.token_budget.pressure: must be in (0,1), got 2 (line 1)"},
		{"tree: {cost_budget: {limit: -1}}", "policy.tree.cost_budget.limit: must be > 0, got -1 (line 1)"},
		{"tree: {timeout: soon}", `policy.tree.timeout: must be a Go duration such as "2m" or "90s", got "soon" (line 1)`},
		{"any: [{tree: {max_iterations: 3}}]", "policy.any[0].tree: allowed only at the top level of a policy (line 1)"},
	}
	for _, c := range cases {
		_, err := ParsePolicy(c.src)
		if assert.Error(t, err, c.src) {
			assert.Equal(t, c.want, err.Error(), c.src)
		}
	}
}

func TestTreeConstructor(t *testing.T) {
	require.NoError(t, TreeLimits(IterationLimits{Limit: 3}, AnyOf(CostLimit{Limit: 1}, TimeLimits{Timeout: time.Minute})).Validate())
	for _, c := range []struct {
		cond Condition
		want string
	}{
		{TreeLimits(), "tree: needs at least one of max_iterations"},
		{TreeLimits(nil), "tree: nil condition"},
		{TreeLimits(StallLimits{Repeats: 3}), "tree: stall is not a tree limit"},
		{TreeLimits(CompletionSignals{TextMention: "x"}), "tree: text_mention is not a tree limit"},
		{TreeLimits(ToolCallLimits{Limit: 0}), "tree.max_tool_calls: needs limit or per_tool"},
		{TreeLimits(TokenLimits{}), "tree.token_budget: needs at least one of total, input, output"},
	} {
		err := c.cond.Validate()
		if assert.Error(t, err) {
			assert.True(t, strings.HasPrefix(err.Error(), c.want), "%v, want %s", err, c.want)
		}
	}
	// Tree copies: the conditions given keep their own scope.
	own := TokenLimits{Total: 10}
	tree := TreeLimits(own)
	e := NewEvaluator(own, time.Time{})
	c, _ := e.Observe(Event{Kind: KindMessage, Usage: Usage{InputTokens: 10}})
	assert.Equal(t, BudgetExhausted{Resource: ResourceTotalTokens, Used: 10, Limit: 10}, c)
	e = NewEvaluator(tree, time.Time{})
	c, _ = e.Observe(Event{Kind: KindMessage, Usage: Usage{InputTokens: 10}})
	assert.Equal(t, BudgetExhausted{Resource: ResourceTotalTokens, Used: 10, Limit: 10, Scope: ScopeTree}, c)
}

func TestLimitsText(t *testing.T) {
	l := Limits{Iterations: 12, ToolCalls: 0, TotalTokens: 5000, Cost: 0.25, Time: 90 * time.Second,
		Has: LimitIterations | LimitToolCalls | LimitTotalTokens | LimitCost | LimitTime}
	s := l.String()
	assert.Equal(t, "iterations=12;tool_calls=0;total_tokens=5000;cost=0.25;time=1m30s", s)
	back, err := parseLimits(s)
	require.NoError(t, err)
	assert.Equal(t, l, back)
	assert.Equal(t, "", Limits{}.String())
	for _, bad := range []string{"iterations", "iterations=-1", "nap=1", "cost=NaN", "cost=+Inf", "time=soon", "time=-1s", "iterations=1;iterations=2", "total_tokens=1.5"} {
		_, err := parseLimits(bad)
		assert.Error(t, err, bad)
	}
}

func TestLimitsMinAndCondition(t *testing.T) {
	a := Limits{Iterations: 5, Cost: 1, Has: LimitIterations | LimitCost}
	b := Limits{Iterations: 3, TotalTokens: 10, Cost: 2, Has: LimitIterations | LimitTotalTokens | LimitCost}
	assert.Equal(t, Limits{Iterations: 3, TotalTokens: 10, Cost: 1, Has: LimitIterations | LimitTotalTokens | LimitCost}, a.Min(b))
	assert.Equal(t, a.Min(b), b.Min(a))
	assert.Nil(t, Limits{}.Condition())

	// Nothing left fires at once on an event that spends it.
	e := NewEvaluator(Limits{Iterations: 0, Has: LimitIterations}.Condition(), time.Time{})
	c, stop := e.Observe(Event{Kind: KindMessage})
	assert.True(t, stop)
	assert.Equal(t, MaxIterationsReached{Limit: 0, Count: 1, Scope: ScopeTree}, c)
	e = NewEvaluator(Limits{TotalTokens: 100, Has: LimitTotalTokens}.Condition(), time.Time{})
	_, stop = e.Observe(Event{Kind: KindMessage, Usage: Usage{InputTokens: 99}})
	assert.False(t, stop)
	c, _ = e.Observe(Event{Kind: KindMessage, Usage: Usage{InputTokens: 1}})
	assert.Equal(t, BudgetExhausted{Resource: ResourceTotalTokens, Used: 100, Limit: 100, Scope: ScopeTree}, c)
}

func TestEvaluatorRemaining(t *testing.T) {
	p := MustParsePolicy(`{max_iterations: 10, max_tool_calls: {per_tool: {x: 1}}, token_budget: {total: 1000, output: 50}, cost_budget: {limit: 2}, timeout: 1m,
	  any: [{max_iterations: 4}], all: [{max_iterations: 1}, {stop_message: true}]}`)
	e := NewEvaluator(p.Condition(), time.Time{})
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	e.Observe(Event{Kind: KindMessage, Usage: Usage{InputTokens: 100, OutputTokens: 20}, Cost: 0.5, Time: t0})
	e.Observe(Event{Kind: KindToolCall, Tool: "x", Time: t0.Add(20 * time.Second)})
	assert.Equal(t, Limits{Iterations: 3, TotalTokens: 880, OutputTokens: 30, Cost: 1.5, Time: 40 * time.Second,
		Has: LimitIterations | LimitTotalTokens | LimitOutputTokens | LimitCost | LimitTime}, e.Remaining(),
		"the smallest of max_iterations 10 and 4; the all: child does not stop on its own; per-tool limits are not reported")
	assert.Equal(t, Limits{}, NewEvaluator(nil, time.Time{}).Remaining())
}

// FuzzParseLimits: whatever a propagated header holds, Limits.Set never
// panics, and what it accepts writes back to the same limits.
func FuzzParseLimits(f *testing.F) {
	for _, s := range []string{"", "iterations=12;tool_calls=0;total_tokens=5000;cost=0.25;time=1m30s", "cost=1e300", "time=9999999h", "input_tokens=9223372036854775807", "x=1;", ";"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := parseLimits(s)
		if err != nil {
			return
		}
		back, err := parseLimits(l.String())
		if err != nil {
			t.Fatalf("%q: %v reads back as an error: %v", s, l, err)
		}
		if back != l {
			t.Fatalf("%q: %+v reads back as %+v", s, l, back)
		}
	})
}
