package termination

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var natural Cause = NaturalCompletion{}

func TestMaxIterations(t *testing.T) {
	runCondCases(t, []condCase{
		{name: "N iterations allowed", cond: IterationLimits{Limit: 2},
			events: evs(msg("a", "1"), msg("a", "2")), want: natural},
		{name: "fires on the message that makes N+1", cond: IterationLimits{Limit: 2},
			events: evs(msg("a", "1"), msg("a", "2"), msg("a", "3")),
			want:   MaxIterationsReached{Limit: 2, Count: 3}, at: 3},
		{name: "only message and final count", cond: IterationLimits{Limit: 2},
			events: evs(input("go"), msg("a", "1"), call("t", `{}`), result("t", ""), handoffEv("a", "b"),
				stopEv("x"), errEv("e"), msg("a", "2"), msg("a", "3")),
			want: MaxIterationsReached{Limit: 2, Count: 3}, at: 9},
		{name: "a final event never fires it", cond: IterationLimits{Limit: 1},
			events: evs(msg("a", "1"), final("a", "2"), final("a", "3")), want: natural},
		{name: "a final counts, so the next message reports the true count", cond: IterationLimits{Limit: 1},
			events: evs(msg("a", "1"), final("a", "2"), msg("a", "3")),
			want:   MaxIterationsReached{Limit: 1, Count: 3}, at: 3},
		{name: "limit 1", cond: IterationLimits{Limit: 1},
			events: evs(msg("a", "1"), msg("a", "2")), want: MaxIterationsReached{Limit: 1, Count: 2}, at: 2},
	})
}

func TestMaxToolCalls(t *testing.T) {
	runCondCases(t, []condCase{
		{name: "N calls allowed", cond: ToolCallLimits{Limit: 2},
			events: evs(call("a", `1`), result("a", ""), call("b", `2`), result("b", "")), want: natural},
		{name: "fires on the call that makes N+1", cond: ToolCallLimits{Limit: 2},
			events: evs(call("a", `1`), result("a", ""), msg("x", "y"), call("b", `2`), call("c", `3`)),
			want:   MaxToolCallsReached{Limit: 2, Count: 3}, at: 5},
		{name: "results and messages do not count", cond: ToolCallLimits{Limit: 1},
			events: seq(evs(call("a", `1`)), repeat(5, result("a", "")), repeat(5, msg("x", "y"))), want: natural},
		{name: "fires on a call even right before a final", cond: ToolCallLimits{Limit: 1},
			events: evs(call("a", `1`), call("a", `2`), final("x", "done")),
			want:   MaxToolCallsReached{Limit: 1, Count: 2}, at: 2},
	})
}

func TestTimeoutEventClock(t *testing.T) {
	runCondCases(t, []condCase{
		{name: "within the limit", cond: TimeLimits{Timeout: time.Minute},
			events: evs(input("go").at(0), msg("a", "1").at(30*time.Second), msg("a", "2").at(59*time.Second)), want: natural},
		{name: "fires before the event at elapsed == limit", cond: TimeLimits{Timeout: time.Minute},
			events: evs(input("go").at(0), msg("a", "1").at(30*time.Second), msg("a", "2").at(time.Minute)),
			want:   Timeout{Limit: time.Minute, Elapsed: time.Minute}, at: 2, evidence: []int{}},
		{name: "fires before a late event of any kind, a final included", cond: TimeLimits{Timeout: time.Minute},
			events: evs(input("go").at(0), final("a", "done").at(90*time.Second)),
			want:   Timeout{Limit: time.Minute, Elapsed: time.Minute}, at: 1},
		{name: "the late event is not evaluated: its tokens do not count", cond: pol(t, `{timeout: 1m, token_budget: {total: 10}}`),
			events: evs(msg("a", "1").at(0), msg("a", "2").at(10*time.Minute).used(50, 0)),
			want:   Timeout{Limit: time.Minute, Elapsed: time.Minute}, at: 1},
		{name: "measured from the first timed event", cond: TimeLimits{Timeout: time.Minute},
			events: evs(input("go"), msg("a", "1").at(time.Hour), msg("a", "2").at(time.Hour+59*time.Second),
				msg("a", "3").at(time.Hour+61*time.Second)),
			want: Timeout{Limit: time.Minute, Elapsed: time.Minute}, at: 3},
		{name: "two timeouts: the shorter fires first", cond: pol(t, `any: [{timeout: 2m}, {timeout: 1m}]`),
			events: evs(msg("a", "1").at(0), msg("a", "2").at(5*time.Minute)),
			want:   Timeout{Limit: time.Minute, Elapsed: time.Minute}, at: 1},
		{name: "a timeout latched in all: before the late event, which then fires the rest",
			cond:   pol(t, `all: [{timeout: 1m}, {text_mention: {text: DONE}}]`),
			events: evs(msg("a", "1").at(0), msg("a", "DONE").at(5*time.Minute)),
			want: All{Causes: []Cause{Timeout{Limit: time.Minute, Elapsed: time.Minute},
				Completed{Condition: conditionTextMention, Detail: "DONE"}}}, at: 2, evidence: []int{2}},
		{name: "events without time never fire it", cond: TimeLimits{Timeout: time.Minute},
			events: evs(input("go").at(0), msg("a", "1"), msg("a", "2")), want: natural},
		{name: "untimed events do not end the clock", cond: TimeLimits{Timeout: time.Minute},
			events: evs(input("go").at(0), msg("a", "1"), msg("a", "2").at(2*time.Minute)),
			want:   Timeout{Limit: time.Minute, Elapsed: time.Minute}, at: 2},
		{name: "no time at all", cond: TimeLimits{Timeout: time.Nanosecond},
			events: evs(input("go"), msg("a", "1")), want: natural},
	})
}

func TestTimeoutTick(t *testing.T) {
	t.Run("wall clock fires from a tick with no event", func(t *testing.T) {
		ev := NewEvaluator(TimeLimits{Timeout: time.Minute}, time.Now())
		_, stop := ev.Observe(msg("a", "1"))
		require.False(t, stop)
		cause, stop := ev.Tick(time.Now().Add(time.Hour))
		require.True(t, stop)
		to, ok := cause.(Timeout)
		require.True(t, ok, "cause %#v", cause)
		assert.Equal(t, time.Minute, to.Limit)
		assert.Equal(t, time.Minute, to.Elapsed, "elapsed is the limit, as in replay, however late the timer")
		res := ev.Result()
		assert.Equal(t, 1, res.StoppedAt, "a tick stops after the last event evaluated, as replay does")
		assert.Equal(t, 1, res.Events)
		assert.Empty(t, res.Evidence, "a timeout has no evidence")
		assert.Equal(t, []Cause{cause}, res.Fired)
		// Stopped: later events and ticks report the same cause.
		c2, stop := ev.Observe(msg("a", "2"))
		assert.True(t, stop)
		assert.Equal(t, cause, c2)
		assert.Equal(t, 1, ev.Progress().Events, "no event evaluated after the stop")
	})
	t.Run("a late tick fires the first timeout due, as replay does", func(t *testing.T) {
		ev := NewEvaluator(AnyOf(TimeLimits{Timeout: time.Minute}, TimeLimits{Timeout: 2 * time.Minute}), time.Now())
		cause, stop := ev.Tick(time.Now().Add(time.Hour))
		require.True(t, stop)
		assert.Equal(t, Timeout{Limit: time.Minute, Elapsed: time.Minute}, cause)
		assert.Equal(t, []Cause{cause}, ev.Result().Fired)
	})
	t.Run("wall clock tick before the limit", func(t *testing.T) {
		ev := NewEvaluator(TimeLimits{Timeout: time.Hour}, time.Now())
		_, stop := ev.Tick(time.Now())
		assert.False(t, stop)
	})
	t.Run("event clock ignores ticks", func(t *testing.T) {
		ev := NewEvaluator(TimeLimits{Timeout: time.Minute}, time.Time{})
		ev.Observe(msg("a", "1").at(0))
		_, stop := ev.Tick(t0.Add(time.Hour))
		assert.False(t, stop)
	})
	t.Run("wall clock event after the limit", func(t *testing.T) {
		// The timer is late: the event finds the deadline passed and the
		// timeout fires before it, as in replay; the event is not evaluated.
		ev := NewEvaluator(TimeLimits{Timeout: time.Nanosecond}, time.Now())
		time.Sleep(time.Millisecond)
		cause, stop := ev.Observe(msg("a", "1"))
		require.True(t, stop)
		assert.IsType(t, Timeout{}, cause)
		res := ev.Result()
		assert.Equal(t, 0, res.StoppedAt)
		assert.Equal(t, 0, res.Events)
		assert.Equal(t, 0, res.Iterations)
	})
	t.Run("timeout inside AllOf latches from a tick", func(t *testing.T) {
		ev := NewEvaluator(AllOf(TimeLimits{Timeout: time.Minute}, CompletionSignals{TextMention: "DONE"}), time.Now())
		_, stop := ev.Tick(time.Now().Add(2 * time.Minute))
		require.False(t, stop)
		cause, stop := ev.Observe(msg("a", "DONE"))
		require.True(t, stop)
		all := cause.(All)
		require.Len(t, all.Causes, 2)
		assert.IsType(t, Timeout{}, all.Causes[0])
		assert.Equal(t, Completed{Condition: conditionTextMention, Detail: "DONE"}, all.Causes[1])
	})
}

func bp(r Resource, th, used, limit float64) BudgetPressure {
	return BudgetPressure{Resource: r, Threshold: th, Used: used, Limit: limit}
}

func TestTokenBudget(t *testing.T) {
	grace := func(n int) *int { return &n }
	runCondCases(t, []condCase{
		{name: "total below the limit", cond: TokenLimits{Total: 100},
			events: evs(msg("a", "1").used(30, 20), msg("a", "2").used(30, 19)), want: natural},
		{name: "total exhausted at used == limit", cond: TokenLimits{Total: 100},
			events: evs(msg("a", "1").used(30, 20), msg("a", "2").used(30, 20), msg("a", "3").used(1, 1)),
			want:   BudgetExhausted{Resource: ResourceTotalTokens, Used: 100, Limit: 100}, at: 2},
		{name: "input only", cond: TokenLimits{Input: 50},
			events: evs(msg("a", "1").used(30, 500), msg("a", "2").used(20, 0)),
			want:   BudgetExhausted{Resource: ResourceInputTokens, Used: 50, Limit: 50}, at: 2},
		{name: "output only", cond: TokenLimits{Output: 10},
			events: evs(msg("a", "1").used(500, 9), call("t", `{}`), msg("a", "2").used(0, 2)),
			want:   BudgetExhausted{Resource: ResourceOutputTokens, Used: 11, Limit: 10}, at: 3},
		{name: "exhaustion never fires on a final", cond: TokenLimits{Total: 10},
			events: evs(msg("a", "1").used(5, 0), final("a", "2").used(5, 0)), want: natural},
		{name: "exhaustion a final reached fires on the next event, naming both", cond: TokenLimits{Total: 10},
			events: evs(msg("a", "1").used(5, 0), final("a", "2").used(5, 0), call("t", `{}`)),
			want:   BudgetExhausted{Resource: ResourceTotalTokens, Used: 10, Limit: 10}, at: 3, evidence: []int{2, 3}},
		{name: "usage on any kind counts", cond: TokenLimits{Total: 10},
			events: evs(input("go").used(4, 0), result("t", "").used(6, 0)),
			want:   BudgetExhausted{Resource: ResourceTotalTokens, Used: 10, Limit: 10}, at: 2},
		{name: "two resources exhausted together, in limit order", cond: TokenLimits{Total: 10, Input: 5, Output: 5},
			events: evs(msg("a", "1").used(5, 5)),
			want:   BudgetExhausted{Resource: ResourceTotalTokens, Used: 10, Limit: 10}, at: 1,
			fired: []Cause{
				BudgetExhausted{Resource: ResourceTotalTokens, Used: 10, Limit: 10},
				BudgetExhausted{Resource: ResourceInputTokens, Used: 5, Limit: 5},
				BudgetExhausted{Resource: ResourceOutputTokens, Used: 5, Limit: 5},
			}},
		{name: "pressure warns once per resource and the run goes on",
			cond: TokenLimits{Total: 100, Input: 80, Pressure: 0.5},
			events: evs(msg("a", "1").used(40, 0), msg("a", "2").used(0, 20), msg("a", "3").used(1, 1),
				msg("a", "4").used(1, 1)),
			want: natural,
			warnings: []Cause{
				bp(ResourceInputTokens, 0.5, 40, 80),
				bp(ResourceTotalTokens, 0.5, 60, 100),
			}},
		{name: "pressure at exactly threshold×limit (0.07×100 is not 7 in floating point)",
			cond:     TokenLimits{Total: 100, Pressure: 0.07},
			events:   evs(msg("a", "1").used(6, 0), msg("a", "2").used(1, 0)),
			want:     natural,
			warnings: []Cause{bp(ResourceTotalTokens, 0.07, 7, 100)}},
		{name: "no pressure, no warning", cond: TokenLimits{Total: 100},
			events: evs(msg("a", "1").used(99, 0)), want: natural},
		{name: "no warning on a final", cond: TokenLimits{Total: 100, Pressure: 0.8},
			events: evs(msg("a", "1").used(10, 0), final("a", "2").used(80, 0)), want: natural},
		{name: "the warning a final reached is recorded on the next event", cond: TokenLimits{Total: 100, Pressure: 0.8},
			events: evs(msg("a", "1").used(10, 0), final("a", "2").used(80, 0), input("more")), want: natural,
			warnings: []Cause{bp(ResourceTotalTokens, 0.8, 90, 100)}},
		{name: "grace 0 stops on the warning event", cond: TokenLimits{Total: 100, Pressure: 0.8, Grace: grace(0)},
			events: evs(msg("a", "1").used(50, 0), msg("a", "2").used(30, 0), msg("a", "3")),
			want:   bp(ResourceTotalTokens, 0.8, 80, 100), at: 2,
			warnings: []Cause{bp(ResourceTotalTokens, 0.8, 80, 100)}},
		{name: "grace 0 on a tool call", cond: TokenLimits{Total: 100, Pressure: 0.8, Grace: grace(0)},
			events: evs(msg("a", "1").used(50, 0), call("t", `{}`).used(30, 0)),
			want:   bp(ResourceTotalTokens, 0.8, 80, 100), at: 2,
			warnings: []Cause{bp(ResourceTotalTokens, 0.8, 80, 100)}},
		{name: "no grace stop on a final", cond: TokenLimits{Total: 100, Pressure: 0.8, Grace: grace(0)},
			events: evs(msg("a", "1").used(50, 0), final("a", "2").used(30, 0)), want: natural},
		{name: "a grace stop due on a final fires on the next event", cond: TokenLimits{Total: 100, Pressure: 0.8, Grace: grace(0)},
			events: evs(msg("a", "1").used(50, 0), final("a", "2").used(30, 0), msg("a", "3")),
			want:   bp(ResourceTotalTokens, 0.8, 80, 100), at: 3, evidence: []int{2, 3},
			warnings: []Cause{bp(ResourceTotalTokens, 0.8, 80, 100)}},
		{name: "grace 1 stops on the first message after the warning",
			cond: TokenLimits{Total: 100, Pressure: 0.8, Grace: grace(1)},
			events: evs(msg("a", "1").used(80, 0), call("t", `{}`), result("t", ""), msg("a", "2").used(5, 0),
				msg("a", "3")),
			want: bp(ResourceTotalTokens, 0.8, 85, 100), at: 4,
			warnings: []Cause{bp(ResourceTotalTokens, 0.8, 80, 100)}},
		{name: "grace 1, the wrap-up is a final", cond: TokenLimits{Total: 100, Pressure: 0.8, Grace: grace(1)},
			events: evs(msg("a", "1").used(80, 0), call("t", `{}`), final("a", "2").used(5, 0)), want: natural,
			warnings: []Cause{bp(ResourceTotalTokens, 0.8, 80, 100)}},
		{name: "grace 2 stops on the second message after the warning",
			cond:   TokenLimits{Total: 100, Pressure: 0.8, Grace: grace(2)},
			events: evs(msg("a", "1").used(80, 0), msg("a", "2").used(1, 0), call("t", `{}`), msg("a", "3").used(1, 0)),
			want:   bp(ResourceTotalTokens, 0.8, 82, 100), at: 4,
			warnings: []Cause{bp(ResourceTotalTokens, 0.8, 80, 100)}},
		{name: "grace counts from the first warning; later warnings do not restart it",
			cond:   TokenLimits{Total: 100, Output: 10, Pressure: 0.5, Grace: grace(1)},
			events: evs(msg("a", "1").used(50, 0), msg("a", "2").used(0, 5)),
			want:   bp(ResourceTotalTokens, 0.5, 55, 100), at: 2,
			warnings: []Cause{
				bp(ResourceTotalTokens, 0.5, 50, 100),
				bp(ResourceOutputTokens, 0.5, 5, 10),
			}},
		{name: "exhaustion and grace stop on one event: exhausted wins",
			cond:   TokenLimits{Total: 100, Pressure: 0.8, Grace: grace(1)},
			events: evs(msg("a", "1").used(80, 0), msg("a", "2").used(20, 0)),
			want:   BudgetExhausted{Resource: ResourceTotalTokens, Used: 100, Limit: 100}, at: 2,
			fired: []Cause{
				BudgetExhausted{Resource: ResourceTotalTokens, Used: 100, Limit: 100},
				bp(ResourceTotalTokens, 0.8, 100, 100),
			},
			warnings: []Cause{bp(ResourceTotalTokens, 0.8, 80, 100)}},
		{name: "jumping straight past the limit warns and exhausts on one event",
			cond:   TokenLimits{Total: 100, Pressure: 0.8},
			events: evs(msg("a", "1").used(150, 0)),
			want:   BudgetExhausted{Resource: ResourceTotalTokens, Used: 150, Limit: 100}, at: 1,
			warnings: []Cause{bp(ResourceTotalTokens, 0.8, 150, 100)}},
	})
}

func TestCostBudget(t *testing.T) {
	runCondCases(t, []condCase{
		{name: "below the limit", cond: CostLimit{Limit: 2},
			events: evs(msg("a", "1").costs(0.5), msg("a", "2").costs(1.25)), want: natural},
		{name: "exhausted at used == limit", cond: CostLimit{Limit: 2},
			events: evs(msg("a", "1").costs(0.5), call("t", `{}`).costs(1.5), msg("a", "2")),
			want:   BudgetExhausted{Resource: ResourceCost, Used: 2, Limit: 2}, at: 2},
		{name: "decimal costs reach a decimal limit despite binary rounding",
			cond:   CostLimit{Limit: 1},
			events: repeat(11, msg("a", "1").costs(0.1)),
			want:   BudgetExhausted{Resource: ResourceCost, Used: sumOf(10, 0.1), Limit: 1}, at: 10},
		{name: "pressure with grace 0", cond: CostLimit{Limit: 2, Pressure: 0.75, Grace: new(0)},
			events: evs(msg("a", "1").costs(1), msg("a", "2").costs(0.5)),
			want:   bp(ResourceCost, 0.75, 1.5, 2), at: 2,
			warnings: []Cause{bp(ResourceCost, 0.75, 1.5, 2)}},
		{name: "pressure warning only", cond: CostLimit{Limit: 2, Pressure: 0.75},
			events: evs(msg("a", "1").costs(1), msg("a", "2").costs(0.5), msg("a", "3").costs(0.25)), want: natural,
			warnings: []Cause{bp(ResourceCost, 0.75, 1.5, 2)}},
	})
}

func sumOf(n int, x float64) float64 {
	s := 0.0
	for range n {
		s += x
	}
	return s
}

func stalled(sig StallSignal, n int) Cause { return StallDetected{Signal: sig, Repeats: n} }

func TestStall(t *testing.T) {
	s3 := StallLimits{Repeats: 3}
	plateau := StallLimits{Repeats: 3, TokenTolerance: 0.1}
	runCondCases(t, []condCase{
		{name: "repeated tool call with canonically equal args", cond: s3,
			events: evs(call("search", `{"q":"Acme CEO","limit":5}`), result("search", ""),
				call("search", `{ "limit" : 5,
				 "q":"Acme CEO" }`), result("search", ""), msg("a", "again"),
				call("search", `{"q":"\u0041cme CEO","limit":5.0}`)),
			want: stalled(SignalRepeatedToolCall, 3), at: 6},
		{name: "numbers compare by value", cond: StallLimits{Repeats: 2},
			events: evs(call("t", `[1, 1.0, 10, -0, 1e2]`), call("t", `[1.0,1,1e1,0,100]`)),
			want:   stalled(SignalRepeatedToolCall, 2), at: 2},
		{name: "escapes decode before comparing", cond: StallLimits{Repeats: 2},
			events: evs(call("t", `{"s":"A\/\u00e9\ud83d\ude00\n"}`), call("t", `{"s":"A/é😀\u000a"}`)),
			want:   stalled(SignalRepeatedToolCall, 2), at: 2},
		{name: "a duplicated key keeps its last value", cond: StallLimits{Repeats: 2},
			events: evs(call("t", `{"q":"old","q":"new"}`), call("t", `{"q":"new"}`)),
			want:   stalled(SignalRepeatedToolCall, 2), at: 2},
		{name: "missing, empty and null args are equal", cond: s3,
			events: evs(call("t", ``), call("t", `null`), call("t", ` `)),
			want:   stalled(SignalRepeatedToolCall, 3), at: 3},
		{name: "different args do not fire", cond: s3,
			events: evs(call("search", `{"q":"a"}`), call("search", `{"q":"a"}`), call("search", `{"q":"b"}`)),
			want:   natural},
		{name: "nested differences count", cond: s3,
			events: evs(call("t", `{"a":{"b":[1,2]}}`), call("t", `{"a":{"b":[1,2]}}`), call("t", `{"a":{"b":[2,1]}}`)),
			want:   natural},
		{name: "different tools do not fire", cond: s3,
			events: evs(call("a", `{}`), call("b", `{}`), call("a", `{}`)), want: natural},
		{name: "the last N calls must match", cond: s3,
			events: evs(call("a", `1`), call("a", `1`), call("a", `2`), call("a", `1`), call("a", `1`), call("a", `1`)),
			want:   stalled(SignalRepeatedToolCall, 3), at: 6},
		{name: "repeated message: same source, trimmed text", cond: s3,
			events: evs(msg("bot", "Let me check."), call("t", `1`), msg("bot", "  Let me check.\n"), call("t", `2`),
				msg("bot", "Let me check. ")),
			want: stalled(SignalRepeatedMessage, 3), at: 5},
		{name: "repeated message: empty text ignored", cond: s3,
			events: evs(msg("bot", "x"), msg("bot", ""), msg("bot", " \n "), msg("bot", "x"), msg("bot", "x")),
			want:   stalled(SignalRepeatedMessage, 3), at: 5},
		{name: "repeated message: different sources do not fire", cond: s3,
			events: evs(msg("a", "x"), msg("b", "x"), msg("a", "x")), want: natural},
		{name: "repeated message: case matters", cond: s3,
			events: evs(msg("a", "x"), msg("a", "X"), msg("a", "x")), want: natural},
		{name: "a final never fires a stall", cond: s3,
			events: evs(msg("a", "x"), msg("a", "x"), final("a", "x")), want: natural},
		{name: "token plateau", cond: plateau,
			events: evs(msg("a", "1").used(90, 10), msg("a", "2").used(95, 10), msg("a", "3").used(100, 10)),
			want:   stalled(SignalTokenPlateau, 3), at: 3},
		{name: "token plateau boundary |cur-prev|/prev == tolerance", cond: plateau,
			events: evs(msg("a", "1").used(100, 0), msg("a", "2").used(110, 0), msg("a", "3").used(121, 0)),
			want:   stalled(SignalTokenPlateau, 3), at: 3},
		{name: "token plateau: a jump breaks it", cond: plateau,
			events: evs(msg("a", "1").used(100, 0), msg("a", "2").used(150, 0), msg("a", "3").used(160, 0)),
			want:   natural},
		{name: "token plateau: the last N usage-carrying iterations", cond: plateau,
			events: evs(msg("a", "1").used(100, 0), msg("a", "2").used(150, 0), msg("a", "3").used(160, 0),
				msg("a", "4"), call("t", `{}`).used(1000, 0), msg("a", "5").used(165, 0)),
			want: stalled(SignalTokenPlateau, 3), at: 6},
		{name: "token plateau never on a final", cond: plateau,
			events: evs(msg("a", "1").used(100, 0), msg("a", "2").used(100, 0), final("a", "3").used(100, 0)),
			want:   natural},
		{name: "a final's usage counts toward the plateau", cond: plateau,
			events: evs(msg("a", "1").used(100, 0), final("a", "2").used(100, 0), msg("a", "3").used(100, 0)),
			want:   stalled(SignalTokenPlateau, 3), at: 3},
		{name: "no tolerance, no plateau", cond: s3,
			events: evs(msg("a", "1").used(100, 0), msg("a", "2").used(100, 0), msg("a", "3").used(100, 0)),
			want:   natural},
		{name: "repeated message and plateau on one event", cond: plateau,
			events: evs(msg("a", "x").used(100, 0), msg("a", "x").used(100, 0), msg("a", "x").used(100, 0)),
			want:   stalled(SignalRepeatedMessage, 3), at: 3,
			fired: []Cause{stalled(SignalRepeatedMessage, 3), stalled(SignalTokenPlateau, 3)}},
	})
}

func TestCompletionConditions(t *testing.T) {
	completed := func(cond, detail string) Cause { return Completed{Condition: cond, Detail: detail} }
	isRM := func(e Event) bool { return e.Kind == KindToolCall && e.Tool == "rm" }
	runCondCases(t, []condCase{
		{name: "text_mention never on input", cond: CompletionSignals{TextMention: "TERMINATE"},
			events: evs(input("reply TERMINATE when done"), msg("a", "ok")), want: natural},
		{name: "text_mention on a message", cond: CompletionSignals{TextMention: "TERMINATE"},
			events: evs(input("go"), msg("a", "All done. TERMINATE")), want: completed(conditionTextMention, "TERMINATE"), at: 2},
		{name: "text_mention on a tool result, a final, a stop", cond: CompletionSignals{TextMention: "TERMINATE"},
			events: evs(Event{Kind: KindToolResult, Tool: "t", Text: "xTERMINATEx"}), want: completed(conditionTextMention, "TERMINATE"), at: 1},
		{name: "text_mention on a final", cond: CompletionSignals{TextMention: "TERMINATE"},
			events: evs(final("a", "TERMINATE")), want: completed(conditionTextMention, "TERMINATE"), at: 1},
		{name: "text_mention is case-sensitive", cond: CompletionSignals{TextMention: "TERMINATE"},
			events: evs(msg("a", "terminate"), msg("a", "Terminate")), want: natural},
		{name: "text_mention sources filter", cond: CompletionSignals{TextMention: "DONE", TextSources: []string{"critic", "judge"}},
			events: evs(msg("writer", "DONE"), msg("critic", "not yet"), msg("judge", "DONE")),
			want:   completed(conditionTextMention, "DONE"), at: 3},
		{name: "text_mention sources exclude input too", cond: CompletionSignals{TextMention: "DONE", TextSources: []string{"user"}},
			events: evs(input("DONE")), want: natural},
		{name: "function_call on a successful result", cond: CompletionSignals{FunctionCall: []string{"approve", "publish"}},
			events: evs(call("approve", `{}`), result("approve", "denied"), result("other", ""), result("publish", "")),
			want:   completed(conditionFunctionCall, "publish"), at: 4},
		{name: "function_call never on the call itself", cond: CompletionSignals{FunctionCall: []string{"approve"}},
			events: evs(call("approve", `{}`)), want: natural},
		{name: "handoff to a named target", cond: CompletionSignals{Handoff: []string{"user"}},
			events: evs(handoffEv("planner", "coder"), handoffEv("planner", "user")),
			want:   HandoffRequested{Target: "user", Source: "planner"}, at: 2},
		{name: "handoff with no targets matches any", cond: CompletionSignals{AnyHandoff: true},
			events: evs(msg("a", "user"), handoffEv("planner", "coder")),
			want:   HandoffRequested{Target: "coder", Source: "planner"}, at: 2},
		{name: "source_match on message and final only", cond: CompletionSignals{SourceMatch: []string{"critic"}},
			events: evs(input("critic"), Event{Kind: KindToolResult, Source: "critic"}, msg("writer", "x"), final("critic", "ok")),
			want:   completed(conditionSourceMatch, "critic"), at: 4},
		{name: "source_match on a message", cond: CompletionSignals{SourceMatch: []string{"critic", "judge"}},
			events: evs(msg("judge", "x")), want: completed(conditionSourceMatch, "judge"), at: 1},
		{name: "stop_message", cond: CompletionSignals{StopMessage: true},
			events: evs(msg("a", "stop"), stopEv("escalate")), want: completed(conditionStopMessage, "escalate"), at: 2},
		{name: "predicate", cond: predicate("no_rm", isRM),
			events: evs(call("ls", `{}`), call("rm", `{}`)), want: completed(conditionPredicate, "no_rm"), at: 2},
		{name: "a panicking predicate fails the run, never crashes", cond: predicate("boom", func(e Event) bool {
			if e.Kind == KindToolCall {
				panic("kaboom")
			}
			return false
		}),
			events: evs(msg("a", "x"), call("t", `{}`)),
			want:   Failed{Reason: FailPanic, Err: `predicate "boom" panicked: kaboom`}, at: 2},
		{name: "func returns any cause", cond: CauseFunc("review", func(_ Event, p Totals) Cause {
			if p.ToolCalls >= 2 {
				return Custom{Reason: "human_review", Properties: map[string]any{"calls": p.ToolCalls}}
			}
			return nil
		}),
			events: evs(call("a", `1`), msg("a", "x"), call("b", `2`)),
			want:   Custom{Reason: "human_review", Properties: map[string]any{"calls": 2}}, at: 3},
		{name: "a panicking func fails the run", cond: CauseFunc("f", func(Event, Totals) Cause { panic(fmt.Errorf("bad")) }),
			events: evs(msg("a", "x")), want: Failed{Reason: FailPanic, Err: `predicate "f" panicked: bad`}, at: 1},
	})
}

func TestFuncSeesProgress(t *testing.T) {
	var seen []Totals
	c := CauseFunc("spy", func(_ Event, p Totals) Cause { seen = append(seen, p); return nil })
	replayEvents(t, c, msg("a", "x").used(1, 2).costs(0.5), call("t", `{}`), final("a", "y"))
	require.Len(t, seen, 3)
	assert.Equal(t, Totals{Events: 1, Iterations: 1, Tokens: Usage{1, 2}, Cost: 0.5}, seen[0])
	assert.Equal(t, Totals{Events: 3, Iterations: 2, ToolCalls: 1, Tokens: Usage{1, 2}, Cost: 0.5}, seen[2])
}

func TestAnyOfEveryChildSeesEveryEvent(t *testing.T) {
	var a, b atomic.Int32
	counting := func(n *atomic.Int32, fireOn int32) Condition {
		return predicate("count", func(Event) bool { return n.Add(1) == fireOn })
	}
	// The first child fires on event 3; the second would fire on event 3 too.
	// Without a short circuit both see all three events and both are reported.
	c := AnyOf(counting(&a, 3), counting(&b, 3))
	res := replayEvents(t, c, msg("x", "1"), msg("x", "2"), msg("x", "3"), msg("x", "4"))
	assert.Equal(t, int32(3), a.Load())
	assert.Equal(t, int32(3), b.Load())
	assert.Equal(t, 3, res.StoppedAt)
	assert.Len(t, res.Fired, 2)

	// A counting condition after a firing one still counts that event.
	res = replayEvents(t, AnyOf(CompletionSignals{TextMention: "never"}, StallLimits{Repeats: 2}, ToolCallLimits{Limit: 3}),
		call("t", `1`), msg("a", "x"), call("t", `1`))
	assert.Equal(t, stalled(SignalRepeatedToolCall, 2), res.Cause)

	// Nested AnyOf flattens nothing away.
	res = replayEvents(t, AnyOf(AnyOf(IterationLimits{Limit: 1}), AnyOf(CompletionSignals{TextMention: "x"})), msg("a", "x"), msg("a", "x"))
	assert.Equal(t, Completed{Condition: conditionTextMention, Detail: "x"}, res.Cause)
	assert.Equal(t, 1, res.StoppedAt)

	// A nil child (an unvalidated condition) never fires and never crashes.
	res = replayEvents(t, AnyOf(nil, AllOf(nil, CompletionSignals{TextMention: "x"}), TimeLimits{Timeout: time.Minute}), msg("a", "x").at(0))
	assert.Equal(t, natural, res.Cause)
	assert.Equal(t, "any: [{<nil>}, {all: [{<nil>}, {text_mention: {text: \"x\"}}]}, {timeout: 1m0s}]", AnyOf(nil, AllOf(nil, CompletionSignals{TextMention: "x"}), TimeLimits{Timeout: time.Minute}).String())

	// The empty AnyOf never fires.
	res = replayEvents(t, AnyOf(), msg("a", "x"), stopEv("y"))
	assert.Equal(t, natural, res.Cause)
}

func TestAllOf(t *testing.T) {
	done := func(s string) Cause { return Completed{Condition: conditionTextMention, Detail: s} }
	runCondCases(t, []condCase{
		{name: "fires when every child has fired, in firing order", cond: AllOf(CompletionSignals{TextMention: "A"}, CompletionSignals{TextMention: "B"}),
			events: evs(msg("x", "B"), msg("x", "nothing"), msg("x", "A"), msg("x", "A B")),
			want:   All{Causes: []Cause{done("B"), done("A")}}, at: 3},
		{name: "children firing on one event keep child order", cond: AllOf(CompletionSignals{TextMention: "A"}, CompletionSignals{TextMention: "B"}),
			events: evs(msg("x", "B and A")), want: All{Causes: []Cause{done("A"), done("B")}}, at: 1},
		{name: "a child latches: it need not still hold", cond: AllOf(StallLimits{Repeats: 2}, CompletionSignals{TextMention: "go"}),
			events: evs(call("t", `1`), call("t", `1`), call("t", `2`), msg("x", "go")),
			want:   All{Causes: []Cause{stalled(SignalRepeatedToolCall, 2), done("go")}}, at: 4},
		{name: "a latched child keeps its first cause", cond: AllOf(ToolCallLimits{Limit: 1}, CompletionSignals{TextMention: "go"}),
			events: evs(call("a", `1`), call("b", `2`), call("c", `3`), msg("x", "go")),
			want:   All{Causes: []Cause{MaxToolCallsReached{Limit: 1, Count: 2}, done("go")}}, at: 4},
		{name: "children keep counting before they fire", cond: AllOf(CompletionSignals{TextMention: "go"}, StallLimits{Repeats: 3}),
			events: evs(call("t", `1`), call("t", `1`), msg("x", "go"), call("t", `1`)),
			want:   All{Causes: []Cause{done("go"), stalled(SignalRepeatedToolCall, 3)}}, at: 4},
		{name: "not all fired", cond: AllOf(CompletionSignals{TextMention: "A"}, CompletionSignals{TextMention: "B"}),
			events: evs(msg("x", "A"), msg("x", "A")), want: natural},
		{name: "a child's cause is its best by precedence", cond: AllOf(AnyOf(IterationLimits{Limit: 1}, CompletionSignals{TextMention: "x"})),
			events: evs(msg("a", "y"), msg("a", "x")),
			want:   All{Causes: []Cause{done("x")}}, at: 2},
		{name: "nested in AnyOf", cond: AnyOf(IterationLimits{Limit: 3}, AllOf(CompletionSignals{TextMention: "A"}, CompletionSignals{SourceMatch: []string{"judge"}})),
			events: evs(msg("critic", "no"), msg("w", "A"), msg("w", "x"), msg("w", "y")),
			want:   MaxIterationsReached{Limit: 3, Count: 4}, at: 4},
		{name: "nested AllOf", cond: AllOf(AllOf(CompletionSignals{TextMention: "A"}, CompletionSignals{TextMention: "B"}), CompletionSignals{TextMention: "C"}),
			events: evs(msg("w", "A"), msg("w", "C"), msg("w", "B")),
			want:   All{Causes: []Cause{done("C"), All{Causes: []Cause{done("A"), done("B")}}}}, at: 3},
		{name: "warnings from children pass through", cond: AllOf(TokenLimits{Total: 10, Pressure: 0.5}, CompletionSignals{TextMention: "x"}),
			events: evs(msg("a", "y").used(5, 0), msg("a", "x")),
			want:   natural, warnings: []Cause{bp(ResourceTotalTokens, 0.5, 5, 10)}},
	})
	t.Run("tag and outcome are the last cause's", func(t *testing.T) {
		res := replayEvents(t, AllOf(ToolCallLimits{Limit: 1}, CompletionSignals{TextMention: "go"}), call("a", `1`), call("b", `2`), msg("x", "go"))
		assert.Equal(t, TagCompleted, res.Tag())
		assert.Equal(t, OutcomeSucceeded, res.Outcome)
		res = replayEvents(t, AllOf(CompletionSignals{TextMention: "go"}, ToolCallLimits{Limit: 1}), msg("x", "go"), call("a", `1`), call("b", `2`))
		assert.Equal(t, TagMaxToolCalls, res.Tag())
		assert.Equal(t, OutcomeFailed, res.Outcome)
	})
}

func TestValidate(t *testing.T) {
	ok := func(Event) bool { return false }
	cases := []struct {
		cond Condition
		want string // "" = valid
	}{
		{IterationLimits{Limit: 1}, ""},
		{IterationLimits{Limit: 0}, "max_iterations.limit: is required"},
		{ToolCallLimits{Limit: -1}, "max_tool_calls: must be a positive int, got -1"},
		{TimeLimits{Timeout: time.Second}, ""},
		{TimeLimits{Timeout: -time.Second}, "timeout: must be > 0, got -1s"},
		{TimeLimits{}, "time limits: needs Timeout or Idle"},
		{TimeLimits{Timeout: time.Second, Idle: -time.Second}, "idle: must be > 0, got -1s"},
		{TokenLimits{}, "token_budget: needs at least one of total, input, output"},
		{TokenLimits{Input: -1}, "token_budget.input: must be a positive int, got -1"},
		{TokenLimits{Total: 1, Pressure: 1}, "token_budget.pressure: must be in (0,1), got 1"},
		{TokenLimits{Total: 1, Pressure: -0.5}, "token_budget.pressure: must be in (0,1), got -0.5"},
		{TokenLimits{Total: 1, Grace: new(1)}, "token_budget.grace: needs pressure"},
		{TokenLimits{Total: 1, Pressure: 0.5, Grace: new(-1)}, "token_budget.grace: must be an int >= 0, got -1"},
		{TokenLimits{Output: 1, Pressure: 0.5, Grace: new(0)}, ""},
		{CostLimit{}, "cost_budget.limit: must be > 0, got 0"},
		{CostLimit{Limit: 1, Grace: new(0)}, "cost_budget.grace: needs pressure"},
		{StallLimits{Repeats: 1}, "stall.repeats: must be an int >= 2, got 1"},
		{StallLimits{Repeats: 2, TokenTolerance: 1}, "stall.token_tolerance: must be in [0,1), got 1"},
		{IterationLimits{Limit: 5}, ""},
		{IterationLimits{Limit: 5, Pressure: 0.5}, ""},
		{IterationLimits{Pressure: 0.5}, "max_iterations.limit: is required"},
		{IterationLimits{Limit: -1, Pressure: 0.5}, "max_iterations.limit: must be a positive int, got -1"},
		{IterationLimits{Limit: 5, Pressure: 1.5}, "max_iterations.pressure: must be in (0,1), got 1.5"},
		{IterationLimits{Limit: 5, Pressure: -0.5}, "max_iterations.pressure: must be in (0,1), got -0.5"},
		{ToolCallLimits{Limit: 5, Pressure: 0.8, PerTool: map[string]int{"search": 2}}, ""},
		{ToolCallLimits{PerTool: map[string]int{"search": 2}}, ""},
		{ToolCallLimits{}, "max_tool_calls: needs limit or per_tool"},
		{ToolCallLimits{Pressure: 0.5, PerTool: map[string]int{"a": 1}}, "max_tool_calls.pressure: needs limit"},
		{ToolCallLimits{PerTool: map[string]int{"a": 1, "b": 0}}, "max_tool_calls.per_tool.b: must be a positive int, got 0"},
		{ToolCallLimits{PerTool: map[string]int{}}, "max_tool_calls.per_tool: must not be empty"},
		{ToolCallLimits{PerTool: map[string]int{"": 1}}, "max_tool_calls.per_tool: tool names must not be empty"},
		{StallLimits{}, "stall: needs repeats or cycle"},
		{StallLimits{Cycle: 2}, ""},
		{StallLimits{Repeats: 3, Window: 8, WarnAt: 2, Cycle: 3, TokenTolerance: 0.1}, ""},
		{StallLimits{Cycle: 1}, "stall.cycle: must be an int >= 2, got 1"},
		{StallLimits{Repeats: 3, Window: 2}, "stall.window: must be an int >= repeats (3), got 2"},
		{StallLimits{Repeats: 3, WarnAt: 3}, "stall.warn_at: must be an int >= 2 and < repeats (3), got 3"},
		{StallLimits{Repeats: 3, WarnAt: 1}, "stall.warn_at: must be an int >= 2 and < repeats (3), got 1"},
		{StallLimits{Cycle: 2, Window: 4}, "stall.window: needs repeats"},
		{StallLimits{Cycle: 2, WarnAt: 2}, "stall.warn_at: needs repeats"},
		{StallLimits{Cycle: 2, TokenTolerance: 0.1}, "stall.token_tolerance: needs repeats"},
		{StallLimits{Repeats: 2, TokenTolerance: -0.5}, "stall.token_tolerance: must be in [0,1), got -0.5"},
		{AnyOf(AllOf(StallLimits{Repeats: 3, Window: 1})), "any[0].all[0].stall.window: must be an int >= repeats (3), got 1"},
		{ErrorLimits{}, "errors: needs consecutive or total"},
		{ErrorLimits{Consecutive: -1}, "errors.consecutive: must be a positive int, got -1"},
		{ErrorLimits{Total: -1}, "errors.total: must be a positive int, got -1"},
		{CompletionSignals{TextSources: []string{"critic"}}, "text_mention.text: is required"},
		{CompletionSignals{}, "completion signals: needs at least one of TextMention, FunctionCall, Handoff, AnyHandoff, SourceMatch, StopMessage"},
		{CompletionSignals{StopMessage: true, FunctionCall: []string{}}, "function_call: needs at least one name"},
		{CompletionSignals{Handoff: []string{}}, "handoff: needs at least one name"},
		{CompletionSignals{AnyHandoff: true}, ""},
		{CompletionSignals{AnyHandoff: true, Handoff: []string{"user"}}, "handoff: AnyHandoff watches every target: leave Handoff out"},
		{CompletionSignals{AnyHandoff: true, Handoff: []string{}}, "handoff: AnyHandoff watches every target: leave Handoff out"},
		{CompletionSignals{TextMention: "X", TextSources: []string{}}, "text_mention.sources: needs at least one name"},
		// An unset struct is an error wherever it stands, never a condition
		// silently dropped.
		{AnyOf(TimeLimits{}), "any[0].time limits: needs Timeout or Idle"},
		{AllOf(CompletionSignals{}, IterationLimits{Limit: 1}), "all[0].completion signals: needs at least one of TextMention, FunctionCall, Handoff, AnyHandoff, SourceMatch, StopMessage"},
		{TreeLimits(IterationLimits{Limit: 3}, TimeLimits{}), "tree.time limits: needs Timeout or Idle"},
		{CompletionSignals{SourceMatch: []string{"a", ""}}, "source_match[1]: must not be empty"},
		{CompletionSignals{TextMention: "x", TextSources: []string{"a", ""}}, "text_mention.sources[1]: must not be empty"},
		{CompletionSignals{FunctionCall: []string{}}, "function_call: needs at least one name"},
		{CompletionSignals{SourceMatch: []string{}}, "source_match: needs at least one name"},
		{CompletionSignals{Handoff: []string{""}}, "handoff[0]: must not be empty"},
		{CompletionSignals{StopMessage: true}, ""},
		{predicate("", ok), "predicate: empty name"},
		{predicate("p", nil), `predicate "p": nil func`},
		{CauseFunc("f", nil), `predicate "f": nil func`},
		{AnyOf(), ""},
		{AllOf(), "all: needs at least one condition"},
		{AnyOf(nil), "any[0]: nil condition"},
		{AnyOf(IterationLimits{Limit: 1}, AllOf(CompletionSignals{TextMention: "x"}, ToolCallLimits{Limit: 0})), "any[1].all[1].max_tool_calls: needs limit or per_tool"},
	}
	for _, tc := range cases {
		t.Run(tc.cond.String(), func(t *testing.T) {
			err := tc.cond.Validate()
			if tc.want == "" {
				assert.NoError(t, err)
			} else {
				assert.EqualError(t, err, tc.want)
			}
		})
	}
}

func TestTimeouts(t *testing.T) {
	c := AnyOf(TimeLimits{Timeout: time.Minute}, AllOf(TimeLimits{Timeout: time.Second}, IterationLimits{Limit: 2}), TimeLimits{Timeout: time.Minute})
	assert.Equal(t, []time.Duration{time.Second, time.Minute}, timeoutsOf(c))
	assert.Empty(t, timeoutsOf(IterationLimits{Limit: 1}))
	assert.Nil(t, timeoutsOf(nil))
}

func TestConditionStrings(t *testing.T) {
	c := AnyOf(IterationLimits{Limit: 2}, TimeLimits{Timeout: 90 * time.Second}, TokenLimits{Total: 10, Pressure: 0.8, Grace: new(1)},
		StallLimits{Repeats: 3, TokenTolerance: 0.1}, AllOf(CompletionSignals{TextMention: "T", TextSources: []string{"critic"}}, CompletionSignals{FunctionCall: []string{"approve"}}))
	s := c.String()
	s += AnyOf(IterationLimits{Limit: 5, Pressure: 0.8}, ToolCallLimits{Limit: 9, PerTool: map[string]int{"b": 2, "a": 1}},
		StallLimits{Repeats: 3, Window: 8, WarnAt: 2, Cycle: 3}, ErrorLimits{Total: 4}).String()
	for _, want := range []string{"max_iterations: {limit: 5, pressure: 0.8}", "max_tool_calls: {limit: 9, per_tool: {a: 1, b: 2}}",
		"stall: {repeats: 3, window: 8, warn_at: 2, cycle: 3}", "errors: {total: 4}",
		"max_iterations: 2", "timeout: 1m30s", "token_budget: {total: 10, pressure: 0.8, grace: 1}",
		"stall: {repeats: 3, token_tolerance: 0.1}", `text_mention: {text: "T", sources: ["critic"]}`, `function_call: ["approve"]`} {
		assert.True(t, strings.Contains(s, want), "%q lacks %q", s, want)
	}
}
