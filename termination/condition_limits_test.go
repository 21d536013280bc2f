package termination

import (
	"strings"
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
		TimeLimits{Timeout: time.Minute},
		TimeLimits{Timeout: time.Minute, Idle: time.Second},
		CompletionSignals{StopMessage: true},
		CompletionSignals{TextMention: "DONE", TextSources: []string{"critic"}, FunctionCall: []string{"approve"}, Handoff: []string{"user"}, SourceMatch: []string{"judge"}},
	}
	for _, c := range valid {
		l := c.(limitStruct).condition()
		assert.Equal(t, l.String(), c.String())
		assert.NoError(t, c.Validate(), c.String())
		inAnyOf := AnyOf(l) // one condition, or (several) their own AnyOf's children
		if several, ok := l.(anyOf); ok {
			inAnyOf = AnyOf(several...)
		}
		assert.Equal(t, inAnyOf.String(), AnyOf(c).String())
	}
	// In an AnyOf, a struct's several conditions are its children, as a
	// flat policy lists its keys; in an AllOf they stay one child.
	assert.Equal(t, MustParsePolicy("{max_iterations: 3, timeout: 1m, idle: 1s}").Condition().String(),
		AnyOf(IterationLimits{Limit: 3}, TimeLimits{Timeout: time.Minute, Idle: time.Second}).String())
	assert.Equal(t, "all: [{max_iterations: 3}, {any: [{timeout: 1m0s}, {idle: 1s}]}]",
		AllOf(IterationLimits{Limit: 3}, TimeLimits{Timeout: time.Minute, Idle: time.Second}).String())
	for _, c := range []Condition{IterationLimits{}, ToolCallLimits{}, TokenLimits{}, CostLimit{}, StallLimits{}, ErrorLimits{}, TimeLimits{}, CompletionSignals{}} {
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
	assert.NoError(t, TreeLimits(TimeLimits{Timeout: time.Minute}).Validate())
	assert.EqualError(t, TreeLimits(TimeLimits{Timeout: time.Minute, Idle: time.Second}).Validate(),
		"tree: idle is not a tree limit (tree limits are "+strings.Join(treeKeys, ", ")+")")
}

// TestSeveralSignalsFireAsAFlatPolicy: a CompletionSignals with several
// fields set fires as a flat policy with those keys does, each with its
// own cause; TimeLimits with both set likewise.
func TestSeveralSignalsFireAsAFlatPolicy(t *testing.T) {
	signals := CompletionSignals{TextMention: "DONE", TextSources: []string{"critic"}, FunctionCall: []string{"approve"},
		Handoff: []string{"user"}, SourceMatch: []string{"judge"}, StopMessage: true}
	flat := MustParsePolicy(`{text_mention: {text: DONE, sources: [critic]}, function_call: approve, handoff: user, source_match: judge, stop_message: true}`)
	assert.Equal(t, flat.Condition().String(), signals.String())
	for _, tc := range []struct {
		name   string
		events []Event
		want   Cause
	}{
		{"text_mention", evs(msg("writer", "DONE"), msg("critic", "DONE")), Completed{Condition: "text_mention", Detail: "DONE"}},
		{"function_call", evs(call("approve", `{}`), result("approve", "")), Completed{Condition: "function_call", Detail: "approve"}},
		{"handoff", evs(handoffEv("a", "other"), handoffEv("a", "user")), HandoffRequested{Target: "user", Source: "a"}},
		{"source_match", evs(msg("writer", "x"), msg("judge", "ok")), Completed{Condition: "source_match", Detail: "judge"}},
		{"stop_message", evs(msg("writer", "x"), stopEv("bye")), Completed{Condition: "stop_message", Detail: "bye"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := replayEvents(t, signals, tc.events...)
			assert.Equal(t, tc.want, got.Cause)
			assert.Equal(t, 2, got.StoppedAt)
			assert.Equal(t, replayEvents(t, flat.Condition(), tc.events...), got)
		})
	}
	// Any handoff, which a policy file cannot say.
	got := replayEvents(t, CompletionSignals{AnyHandoff: true}, msg("a", "x"), handoffEv("a", "anyone"))
	assert.Equal(t, HandoffRequested{Target: "anyone", Source: "a"}, got.Cause)

	both := TimeLimits{Timeout: time.Minute, Idle: 10 * time.Second}
	assert.Equal(t, MustParsePolicy("{timeout: 1m, idle: 10s}").Condition().String(), both.String())
	got = replayEvents(t, both, msg("a", "x").at(0), msg("a", "y").at(5*time.Second), msg("a", "z").at(20*time.Second))
	assert.Equal(t, Timeout{Limit: 10 * time.Second, Elapsed: 10 * time.Second, Idle: true}, got.Cause)
	got = replayEvents(t, both, msg("a", "x").at(0), msg("a", "y").at(9*time.Second), msg("a", "z").at(18*time.Second),
		msg("a", "w").at(27*time.Second), msg("a", "v").at(36*time.Second), msg("a", "u").at(45*time.Second),
		msg("a", "t").at(54*time.Second), msg("a", "s").at(63*time.Second))
	assert.Equal(t, Timeout{Limit: time.Minute, Elapsed: time.Minute}, got.Cause)
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
