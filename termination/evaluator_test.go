package termination

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// specPrecedence is spec §3's order, written out: the cause reported when
// several fire on one event is the first of these.
var specPrecedence = []string{"Completed", "HandoffRequested", "Failed", "BudgetExhausted", "BudgetPressure",
	"MaxToolCallsReached", "MaxIterationsReached", "StallDetected", "Timeout"}

func kindsOf(t *testing.T, cs []Cause) []string {
	t.Helper()
	out := make([]string, len(cs))
	for i, c := range cs {
		k, err := causeTable.Kind(c)
		require.NoError(t, err)
		out[i] = k
	}
	return out
}

func TestPrecedenceOnAMessage(t *testing.T) {
	// The conditions are listed in reverse precedence so that the order of
	// Fired comes from the precedence, not from the policy.
	c := AnyOf(
		TimeLimits{Timeout: time.Minute},
		StallLimits{Repeats: 2, TokenTolerance: 0.1},
		IterationLimits{Limit: 1},
		TokenLimits{Total: 100, Pressure: 0.9, Grace: new(0)},
		CostLimit{Limit: 1},
		predicate("explodes", func(e Event) bool {
			if strings.Contains(e.Text, "TERMINATE") {
				panic("no")
			}
			return false
		}),
		CompletionSignals{TextMention: "TERMINATE"},
	)
	res := replayEvents(t, c,
		msg("a", "thinking").at(0).used(50, 0),
		msg("a", "TERMINATE").at(59*time.Second).used(50, 0).costs(1))
	// A timeout never fires on an event: it fires before the first event
	// past its deadline (a clock tick of its own), so it is not among them.
	want := []Cause{
		Completed{Condition: conditionTextMention, Detail: "TERMINATE"},
		Failed{Reason: FailPanic, Err: `predicate "explodes" panicked: no`},
		BudgetExhausted{Resource: ResourceTotalTokens, Used: 100, Limit: 100},
		BudgetExhausted{Resource: ResourceCost, Used: 1, Limit: 1},
		bp(ResourceTotalTokens, 0.9, 100, 100),
		MaxIterationsReached{Limit: 1, Count: 2},
		stalled(SignalTokenPlateau, 2),
	}
	assert.Equal(t, want[0], res.Cause)
	assert.Equal(t, want, res.Fired)
	assert.Equal(t, 2, res.StoppedAt)
	assert.Equal(t, TagCompleted, res.Tag())
	assert.Equal(t, OutcomeSucceeded, res.Outcome)
}

func TestPrecedenceOnAToolCall(t *testing.T) {
	c := AnyOf(
		TimeLimits{Timeout: time.Minute},
		StallLimits{Repeats: 2},
		ToolCallLimits{Limit: 1},
		CauseFunc("route", func(e Event, _ Totals) Cause {
			if e.Kind == KindToolCall {
				return HandoffRequested{Target: "human", Source: "router"}
			}
			return nil
		}),
		ErrorLimits{Total: 1},
	)
	res := replayEvents(t, c, input("go").at(0), call("t", `{}`).at(time.Second), call("t", `{}`).at(time.Hour))
	// The func fires on the first call too, so the run stops there.
	assert.Equal(t, 2, res.StoppedAt)
	assert.Equal(t, []Cause{HandoffRequested{Target: "human", Source: "router"}}, res.Fired)

	c = AnyOf(
		TimeLimits{Timeout: time.Minute},
		StallLimits{Repeats: 2},
		ToolCallLimits{Limit: 1},
		CauseFunc("route", func(_ Event, p Totals) Cause {
			if p.ToolCalls == 2 {
				return HandoffRequested{Target: "human", Source: "router"}
			}
			return nil
		}),
	)
	res = replayEvents(t, c, input("go").at(0), call("t", `{}`).at(time.Second), call("t", `{}`).at(50*time.Second))
	assert.Equal(t, 3, res.StoppedAt)
	assert.Equal(t, []string{"HandoffRequested", "MaxToolCallsReached", "StallDetected"}, kindsOf(t, res.Fired))
	assert.Equal(t, TagHandoff, res.Tag())
}

func TestPrecedenceRankMatchesSpec(t *testing.T) {
	samples := map[string]Cause{
		"Completed": Completed{}, "HandoffRequested": HandoffRequested{}, "Failed": Failed{},
		"BudgetExhausted": BudgetExhausted{}, "BudgetPressure": BudgetPressure{},
		"MaxToolCallsReached": MaxToolCallsReached{}, "MaxIterationsReached": MaxIterationsReached{},
		"StallDetected": StallDetected{}, "Timeout": Timeout{},
	}
	require.Len(t, samples, len(specPrecedence))
	for i := 1; i < len(specPrecedence); i++ {
		a, b := samples[specPrecedence[i-1]], samples[specPrecedence[i]]
		assert.Less(t, rank(a), rank(b), "%s must outrank %s", specPrecedence[i-1], specPrecedence[i])
	}
	// Causes outside the list rank after Timeout; All ranks as its last cause.
	for _, c := range []Cause{Custom{}, Cancelled{}, Skipped{}, NaturalCompletion{}, escalated{}, All{}} {
		assert.Greater(t, rank(c), rank(Timeout{}), "%T", c)
	}
	assert.Equal(t, rank(HandoffRequested{}), rank(All{Causes: []Cause{Timeout{}, HandoffRequested{}}}))
}

func TestSamePrecedenceKeepsFiringOrder(t *testing.T) {
	c := AnyOf(CompletionSignals{TextMention: "B"}, CompletionSignals{TextMention: "A"}, Custom2("second"), Custom2("first"))
	res := replayEvents(t, c, msg("x", "A B"))
	assert.Equal(t, []Cause{
		Completed{Condition: conditionTextMention, Detail: "B"},
		Completed{Condition: conditionTextMention, Detail: "A"},
		Custom{Reason: "second"},
		Custom{Reason: "first"},
	}, res.Fired)
}

// Custom2 is a condition that fires Custom{reason} on every event.
func Custom2(reason string) Condition {
	return CauseFunc(reason, func(Event, Totals) Cause { return Custom{Reason: reason} })
}

func TestStreamEnd(t *testing.T) {
	cases := []struct {
		name   string
		events []Event
		want   Cause
	}{
		{"empty stream", nil, NaturalCompletion{}},
		{"ends with a final", evs(input("go"), final("a", "done")), NaturalCompletion{}},
		{"ends with a message", evs(input("go"), msg("a", "x")), NaturalCompletion{}},
		{"ends with an error event", evs(input("go"), msg("a", "x"), errEv("rate limited")),
			Failed{Reason: FailStreamError, Err: "rate limited"}},
		{"error text from Err", evs(Event{Kind: KindError, Err: "e", Text: "t"}), Failed{Reason: FailStreamError, Err: "e"}},
		{"an earlier error does not count", evs(errEv("x"), msg("a", "recovered")), NaturalCompletion{}},
		{"a failed tool result last is not a stream error", evs(call("t", `{}`), result("t", "boom")), NaturalCompletion{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := replayEvents(t, AnyOf(IterationLimits{Limit: 10}), tc.events...)
			assert.Equal(t, tc.want, res.Cause)
			assert.Empty(t, res.Fired, "a stream that ends by itself fires nothing")
			assert.Equal(t, 0, res.StoppedAt)
			assert.Equal(t, len(tc.events), res.Events)
			assert.Equal(t, defaultOutcome(tc.want), res.Outcome)
		})
	}
}

func TestStop(t *testing.T) {
	ev := NewEvaluator(IterationLimits{Limit: 5}, time.Now())
	ev.Observe(msg("a", "1"))
	_, stopped := ev.Stopped()
	assert.False(t, stopped)
	assert.False(t, ev.Stop(nil), "a nil cause is ignored")

	cancel := Cancelled{Reason: CancelContext, Detail: context.Canceled.Error()}
	assert.True(t, ev.Stop(cancel))
	assert.False(t, ev.Stop(Cancelled{Reason: CancelExternal}), "the first stop wins")
	c, stopped := ev.Stopped()
	assert.True(t, stopped)
	assert.Equal(t, cancel, c)

	// Later events are not evaluated.
	c, stop := ev.Observe(msg("a", "2"))
	assert.True(t, stop)
	assert.Equal(t, cancel, c)
	c, stop = ev.Tick(time.Now())
	assert.True(t, stop)
	assert.Equal(t, cancel, c)

	res := ev.Result()
	assert.Equal(t, cancel, res.Cause)
	assert.Equal(t, []Cause{cancel}, res.Fired)
	assert.Equal(t, 0, res.StoppedAt)
	assert.Equal(t, 1, res.Events)
	assert.Equal(t, OutcomeFailed, res.Outcome)
	assert.Equal(t, TagCancelled, res.Tag())
	assert.GreaterOrEqual(t, res.Duration, time.Duration(0))

	// Stop after a condition fired does nothing.
	ev = NewEvaluator(IterationLimits{Limit: 1}, time.Time{})
	ev.Observe(msg("a", "1"))
	_, stop = ev.Observe(msg("a", "2"))
	require.True(t, stop)
	assert.False(t, ev.Stop(Cancelled{Reason: CancelExternal}))
	assert.Equal(t, MaxIterationsReached{Limit: 1, Count: 2}, ev.Result().Cause)

	// Result is stable: calling it twice gives the same answer.
	ev = NewEvaluator(nil, time.Time{})
	ev.Observe(errEv("x"))
	assert.Equal(t, ev.Result(), ev.Result())
	_, stop = ev.Observe(msg("a", "late"))
	assert.True(t, stop, "Result ended the run")
}

func TestResultCounts(t *testing.T) {
	res := replayEvents(t, ToolCallLimits{Limit: 2},
		input("go").at(0),
		msg("a", "1").used(100, 10).costs(0.25).at(time.Second),
		call("t", `1`).at(2*time.Second),
		result("t", "").at(3*time.Second),
		msg("a", "2").used(200, 20).costs(0.5), // no time
		call("t", `2`).at(5*time.Second),
		call("t", `3`).at(7*time.Second).used(1, 1),
		msg("a", "not evaluated").used(1000, 1000).at(time.Hour),
	)
	assert.Equal(t, MaxToolCallsReached{Limit: 2, Count: 3}, res.Cause)
	assert.Equal(t, 7, res.StoppedAt)
	assert.Equal(t, 7, res.Events)
	assert.Equal(t, 2, res.Iterations)
	assert.Equal(t, 3, res.ToolCalls)
	assert.Equal(t, Usage{InputTokens: 301, OutputTokens: 31}, res.Tokens)
	assert.Equal(t, 0.75, res.Cost)
	assert.Equal(t, 7*time.Second, res.Duration, "replay duration is first to last event time")
	assert.Equal(t, "", res.Stage)
}

func TestWarningsAccessor(t *testing.T) {
	ev := NewEvaluator(TokenLimits{Total: 10, Pressure: 0.5}, time.Time{})
	ev.Observe(msg("a", "x").used(6, 0))
	w := ev.Warnings()
	require.Equal(t, []Cause{bp(ResourceTotalTokens, 0.5, 6, 10)}, w)
	w[0] = nil
	assert.NotNil(t, ev.Warnings()[0], "Warnings returns a copy")
	assert.Equal(t, Totals{Events: 1, Iterations: 1, Tokens: Usage{6, 0}}, ev.Progress())
}

// One Condition serves many concurrent runs: each Evaluator has its own
// state (run with -race).
func TestConcurrentRunsShareOnePolicy(t *testing.T) {
	p := MustParsePolicy(`
max_iterations: 5
max_tool_calls: 3
token_budget: {total: 1000, pressure: 0.5, grace: 1}
stall: {repeats: 3, token_tolerance: 0.05}
errors: {consecutive: 2}
all: [{text_mention: {text: A}}, {source_match: critic}]
`)
	runs := [][]Event{
		evs(call("s", `1`), call("s", `1`), call("s", `1`)),
		evs(msg("a", "1"), msg("a", "2"), msg("a", "3"), msg("a", "4"), msg("a", "5"), msg("a", "6")),
		evs(errEv("x"), errEv("y")),
		evs(msg("w", "A"), msg("critic", "ok")),
		evs(msg("a", "1").used(600, 0), msg("a", "2").used(1, 0)),
	}
	want := make([]Result, len(runs))
	for i, r := range runs {
		want[i] = replayEvents(t, p.Condition(), r...)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for n := range 50 {
				i := (g + n) % len(runs)
				got := replayEvents(t, p.Condition(), runs[i]...)
				if !assert.Equal(t, want[i], got) {
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCauseIsAnError(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(Timeout{Limit: time.Minute, Elapsed: 61 * time.Second})
	var to Timeout
	require.True(t, errors.As(context.Cause(ctx), &to))
	assert.Equal(t, time.Minute, to.Limit)
	assert.EqualError(t, to, "agentstop: timeout after 1m1s (limit 1m0s)")
	assert.EqualError(t, All{Causes: []Cause{Completed{Condition: "text_mention", Detail: "X"}, Failed{Reason: FailPanic}}},
		`agentstop: all of [completed (text_mention "X"); failed (panic)]`)
}

// Absurd but valid amounts saturate instead of wrapping around a budget.
func TestSaturatingSums(t *testing.T) {
	e := NewEvaluator(nil, time.Time{})
	e.Observe(Event{Kind: KindMessage, Usage: Usage{InputTokens: math.MaxInt64 - 1}, Cost: math.MaxFloat64})
	e.Observe(Event{Kind: KindMessage, Usage: Usage{InputTokens: 10}, Cost: math.MaxFloat64})
	e.Observe(Event{Kind: KindMessage, Cost: math.NaN()})
	res := e.Result()
	assert.Equal(t, int64(math.MaxInt64), res.Tokens.InputTokens)
	assert.Equal(t, math.MaxFloat64, res.Cost)
	_, err := json.Marshal(res)
	assert.NoError(t, err, "a saturated result still marshals")
	assert.Equal(t, int64(math.MinInt64), addTokens(math.MinInt64+1, -10))
}
