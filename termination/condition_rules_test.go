package termination

import (
	"testing"
	"time"
)

// The tests of this file follow the rules of the contract's §3 added or
// changed on 2026-11-23, one table per rule, named after it. Each row is
// replayed (event clock) and checked for the cause, the 1-based event it
// fired on, the fired list and the warnings list (see runCondCases).

// pol is the condition of a policy, so the rows also exercise the policy
// forms of the rules.
func pol(t *testing.T, src string) Condition {
	t.Helper()
	p, err := ParsePolicy([]byte(src))
	if err != nil {
		t.Fatalf("policy %q: %v", src, err)
	}
	return p.Condition()
}

func toolsCapped(limit, count int, tool string) Cause {
	return MaxToolCallsReached{Limit: limit, Count: count, Tool: tool}
}

func cycled(k, p int) Cause { return StallDetected{Signal: SignalCycle, Repeats: k, Period: p} }

func TestRulePressureOnCounts(t *testing.T) {
	iter := func(th float64, used, limit int) Cause {
		return BudgetPressure{Resource: ResourceIterations, Threshold: th, Used: float64(used), Limit: float64(limit)}
	}
	calls := func(th float64, used, limit int) Cause {
		return BudgetPressure{Resource: ResourceToolCalls, Threshold: th, Used: float64(used), Limit: float64(limit)}
	}
	runCondCases(t, []condCase{
		{name: "55 of 100 at 0.55 has not warned on the 54th", cond: pol(t, `max_iterations: {limit: 100, pressure: 0.55}`),
			events: repeat(54, msg("a", "x")), want: natural},
		{name: "55 of 100 at 0.55 warns on the 55th", cond: pol(t, `max_iterations: {limit: 100, pressure: 0.55}`),
			events: repeat(55, msg("a", "x")), want: natural, warnings: []Cause{iter(0.55, 55, 100)}},
		{name: "warns once; the hard limit is unchanged", cond: pol(t, `max_iterations: {limit: 2, pressure: 0.5}`),
			events: repeat(4, msg("a", "x")), want: MaxIterationsReached{Limit: 2, Count: 3}, at: 3,
			warnings: []Cause{iter(0.5, 1, 2)}},
		{name: "a final does not warn; the next message does, with its count", cond: pol(t, `max_iterations: {limit: 4, pressure: 0.5}`),
			events: evs(msg("a", "1"), final("a", "2"), call("t", `{}`), msg("a", "3")), want: natural,
			warnings: []Cause{iter(0.5, 3, 4)}},
		{name: "warning and limit on one message", cond: pol(t, `max_iterations: {limit: 2, pressure: 0.9}`),
			events: evs(final("a", "1"), final("a", "2"), msg("a", "3")), want: MaxIterationsReached{Limit: 2, Count: 3}, at: 3,
			warnings: []Cause{iter(0.9, 3, 2)}},
		{name: "tool calls warn on the tool_call that crosses", cond: pol(t, `max_tool_calls: {limit: 4, pressure: 0.75}`),
			events: evs(call("a", `1`), msg("x", "y"), call("b", `2`), result("b", ""), call("c", `3`), msg("x", "z"), call("d", `4`)),
			want:   natural, warnings: []Cause{calls(0.75, 3, 4)}},
		{name: "tool-call pressure then limit", cond: pol(t, `max_tool_calls: {limit: 2, pressure: 0.5}`),
			events: evs(call("a", `1`), call("a", `2`), call("a", `3`)), want: MaxToolCallsReached{Limit: 2, Count: 3}, at: 3,
			warnings: []Cause{calls(0.5, 1, 2)}},
		{name: "the Go form", cond: IterationLimits{Limit: 3, Pressure: 0.6},
			events: repeat(3, msg("a", "x")), want: natural, warnings: []Cause{iter(0.6, 2, 3)}},
		{name: "the long form without pressure is the plain limit", cond: pol(t, `max_tool_calls: {limit: 1}`),
			events: evs(call("a", `1`), call("a", `2`)), want: MaxToolCallsReached{Limit: 1, Count: 2}, at: 2},
	})
}

func TestRulePerToolLimits(t *testing.T) {
	runCondCases(t, []condCase{
		{name: "fires on the call of the tool that makes its count N+1", cond: pol(t, `max_tool_calls: {per_tool: {search: 2}}`),
			events: evs(call("search", `1`), call("calc", `1`), result("search", ""), call("search", `2`), call("calc", `2`),
				call("search", `3`), call("search", `4`)),
			want: toolsCapped(2, 3, "search"), at: 6},
		{name: "other tools are not limited", cond: pol(t, `max_tool_calls: {per_tool: {search: 1}}`),
			events: seq(evs(call("search", `1`)), repeat(6, call("calc", `{}`))), want: natural},
		{name: "several tools, each its own count", cond: pol(t, `max_tool_calls: {per_tool: {search: 3, fetch: 1}}`),
			events: evs(call("search", `1`), call("fetch", `1`), call("search", `2`), call("fetch", `2`)),
			want:   toolsCapped(1, 2, "fetch"), at: 4},
		{name: "overall and per-tool on one event: overall first", cond: pol(t, `max_tool_calls: {limit: 2, per_tool: {search: 2}}`),
			events: evs(call("search", `1`), call("search", `2`), call("search", `3`)),
			want:   MaxToolCallsReached{Limit: 2, Count: 3}, at: 3,
			fired: []Cause{MaxToolCallsReached{Limit: 2, Count: 3}, toolsCapped(2, 3, "search")}},
		{name: "overall first whatever the policy's order",
			cond:   pol(t, `any: [{max_tool_calls: {per_tool: {search: 1}}}, {max_tool_calls: 1}]`),
			events: evs(call("search", `1`), call("search", `2`)),
			want:   MaxToolCallsReached{Limit: 1, Count: 2}, at: 2,
			fired: []Cause{MaxToolCallsReached{Limit: 1, Count: 2}, toolsCapped(1, 2, "search")}},
		{name: "the overall limit alone when the tool is under its own", cond: pol(t, `max_tool_calls: {limit: 2, per_tool: {search: 2}}`),
			events: evs(call("search", `1`), call("calc", `1`), call("search", `2`)),
			want:   MaxToolCallsReached{Limit: 2, Count: 3}, at: 3},
		{name: "with pressure on the overall limit", cond: pol(t, `max_tool_calls: {limit: 4, pressure: 0.5, per_tool: {search: 1}}`),
			events: evs(call("calc", `1`), call("search", `1`), call("search", `2`)),
			want:   toolsCapped(1, 2, "search"), at: 3,
			warnings: []Cause{BudgetPressure{Resource: ResourceToolCalls, Threshold: 0.5, Used: 2, Limit: 4}}},
		{name: "the Go form", cond: ToolCallLimits{PerTool: map[string]int{"fetch": 1, "search": 1}},
			events: evs(call("search", `1`), call("fetch", `1`), call("fetch", `2`)), want: toolsCapped(1, 2, "fetch"), at: 3},
	})
}

func TestRuleStallWindow(t *testing.T) {
	runCondCases(t, []condCase{
		{name: "repeats of the last W tool calls, others in between", cond: pol(t, `stall: {repeats: 3, window: 5}`),
			events: evs(call("search", `{"q":"x"}`), call("calc", `1`), call("search", `{ "q" : "x" }`), result("search", ""),
				msg("a", "hm"), call("fetch", `{}`), call("search", `{"q":"x"}`)),
			want: stalled(SignalRepeatedToolCall, 3), at: 7},
		{name: "matches older than the window do not count", cond: pol(t, `stall: {repeats: 3, window: 4}`),
			events: evs(call("a", `1`), call("b", `1`), call("a", `1`), call("c", `1`), call("d", `1`), call("a", `1`)),
			want:   natural},
		{name: "args must be canonically equal", cond: pol(t, `stall: {repeats: 2, window: 3}`),
			events: evs(call("a", `{"q":1}`), call("b", `1`), call("a", `{"q":2}`)), want: natural},
		{name: "W = repeats is the consecutive rule", cond: pol(t, `stall: {repeats: 2, window: 2}`),
			events: evs(call("a", `1`), call("b", `1`), call("a", `1`), call("a", `1`)),
			want:   stalled(SignalRepeatedToolCall, 2), at: 4},
		{name: "repeated_message over the last W non-empty messages", cond: pol(t, `stall: {repeats: 3, window: 5}`),
			events: evs(msg("bot", "Let me check."), msg("bot", "other"), call("t", `1`), msg("bot", ""),
				msg("bot", " Let me check.\n"), msg("critic", "Let me check."), msg("bot", "Let me check.")),
			want: stalled(SignalRepeatedMessage, 3), at: 7},
		{name: "repeated_message: other sources fill the window", cond: pol(t, `stall: {repeats: 2, window: 2}`),
			events: evs(msg("bot", "x"), msg("critic", "x"), msg("bot", "x")), want: natural},
		{name: "a final is not a message of the window", cond: pol(t, `stall: {repeats: 2, window: 4}`),
			events: evs(msg("bot", "x"), final("bot", "x")), want: natural},
	})
}

func TestRuleStallWarnAt(t *testing.T) {
	runCondCases(t, []condCase{
		{name: "warns when the count reaches warn_at, then fires at repeats",
			cond:   pol(t, `stall: {repeats: 3, window: 4, warn_at: 2}`),
			events: evs(call("a", `1`), call("b", `1`), call("a", `1`), msg("x", "y"), call("a", `1`)),
			want:   stalled(SignalRepeatedToolCall, 3), at: 5,
			warnings: []Cause{stalled(SignalRepeatedToolCall, 2)}},
		{name: "the run goes on after the warning", cond: pol(t, `stall: {repeats: 4, warn_at: 2}`),
			events: evs(call("a", `1`), call("a", `1`), call("b", `1`)), want: natural,
			warnings: []Cause{stalled(SignalRepeatedToolCall, 2)}},
		{name: "repeated_message warns too", cond: pol(t, `stall: {repeats: 3, warn_at: 2}`),
			events: evs(msg("bot", "x"), msg("bot", " x ")), want: natural,
			warnings: []Cause{stalled(SignalRepeatedMessage, 2)}},
		{name: "at most one stall warning per run", cond: pol(t, `stall: {repeats: 5, warn_at: 2}`),
			events: evs(call("a", `1`), call("a", `1`), call("b", `1`), call("b", `1`), msg("bot", "x"), msg("bot", "x")),
			want:   natural, warnings: []Cause{stalled(SignalRepeatedToolCall, 2)}},
		{name: "at most one, whatever the number of stall conditions",
			cond:   pol(t, `any: [{stall: {repeats: 4, warn_at: 3}}, {stall: {repeats: 3, warn_at: 2}}]`),
			events: evs(call("a", `1`), call("a", `1`), call("a", `1`)),
			want:   stalled(SignalRepeatedToolCall, 3), at: 3,
			warnings: []Cause{stalled(SignalRepeatedToolCall, 2)}},
		{name: "the warning counts over the window", cond: pol(t, `stall: {repeats: 4, window: 6, warn_at: 3}`),
			events: evs(call("a", `1`), call("b", `1`), call("a", `1`), call("c", `1`), call("a", `1`)), want: natural,
			warnings: []Cause{stalled(SignalRepeatedToolCall, 3)}},
		{name: "a final never warns", cond: pol(t, `stall: {repeats: 3, warn_at: 2}`),
			events: evs(msg("bot", "x"), final("bot", "x")), want: natural},
		{name: "no warning without warn_at", cond: pol(t, `stall: {repeats: 3}`),
			events: evs(call("a", `1`), call("a", `1`)), want: natural},
	})
}

func TestRuleStallCycle(t *testing.T) {
	a, b, c := call("search", `{"q":"x"}`), call("fetch", `{"url":"u"}`), call("calc", `1`)
	runCondCases(t, []condCase{
		{name: "A B A B A B with cycle 3 fires period 2 on the 6th", cond: pol(t, `stall: {cycle: 3}`),
			events: evs(a, b, a, b, a, b, a), want: cycled(3, 2), at: 6},
		{name: "not before K blocks", cond: pol(t, `stall: {cycle: 3}`),
			events: evs(a, b, a, b, a), want: natural},
		{name: "other events in between do not break it", cond: pol(t, `stall: {cycle: 2}`),
			events: evs(a, result("search", ""), msg("bot", "hm"), b, result("fetch", "e"), a, b), want: cycled(2, 2), at: 7},
		{name: "args compare canonically", cond: pol(t, `stall: {cycle: 2}`),
			events: evs(a, b, call("search", `{ "q" : "x" }`), b), want: cycled(2, 2), at: 4},
		{name: "period 3", cond: pol(t, `stall: {cycle: 2}`),
			events: evs(a, b, c, a, b, c), want: cycled(2, 3), at: 6},
		{name: "period 4 with two signatures", cond: pol(t, `stall: {cycle: 2}`),
			events: evs(a, a, b, b, a, a, b, b), want: cycled(2, 4), at: 8},
		{name: "the smallest period", cond: pol(t, `stall: {cycle: 2}`),
			events: evs(a, b, a, b, a, b, a, b), want: cycled(2, 2), at: 4},
		{name: "a block of one signature is not a cycle", cond: pol(t, `stall: {cycle: 2}`),
			events: repeat(10, a), want: natural},
		{name: "periods beyond 4 are not cycles", cond: pol(t, `stall: {cycle: 2}`),
			events: evs(a, b, c, call("x", `1`), call("y", `1`), a, b, c, call("x", `1`), call("y", `1`)), want: natural},
		{name: "a break restarts it", cond: pol(t, `stall: {cycle: 2}`),
			events: evs(a, b, a, c, a, b, a), want: natural},
		{name: "cycle with repeats: both on one event, repeated_tool_call first",
			cond:   pol(t, `any: [{stall: {cycle: 2}}, {stall: {repeats: 4, window: 6}}]`),
			events: evs(b, a, a, b, a, a),
			want:   stalled(SignalRepeatedToolCall, 4), at: 6,
			fired: []Cause{stalled(SignalRepeatedToolCall, 4), cycled(2, 3)}},
		{name: "the Go form", cond: StallLimits{Cycle: 2}, events: evs(a, b, a, b), want: cycled(2, 2), at: 4},
	})
}

func TestRuleErrors(t *testing.T) {
	failed := func(s string) Cause { return Failed{Reason: FailErrorThreshold, Err: s} }
	runCondCases(t, []condCase{
		{name: "a ReAct loop whose every tool call fails", cond: pol(t, `errors: {consecutive: 3}`),
			events: evs(msg("a", "try"), call("t", `1`), result("t", "e1"), msg("a", "retry"), call("t", `2`), result("t", "e2"),
				msg("a", "again"), call("t", `3`), result("t", "e3"), msg("a", "x")),
			want: failed("e3"), at: 9},
		{name: "failed tool results are reset only by a successful one", cond: pol(t, `errors: {consecutive: 3}`),
			events: evs(result("t", "e1"), msg("a", "x"), result("t", "e2"), result("t", ""), result("t", "e3"),
				final("a", "y"), result("t", "e4")),
			want: natural},
		{name: "an error event does not reset the failed results", cond: pol(t, `errors: {consecutive: 2}`),
			events: evs(result("t", "e1"), errEv("boom"), msg("a", "x"), result("t", "e2")), want: failed("e2"), at: 4},
		{name: "error events in a row", cond: pol(t, `errors: {consecutive: 2}`),
			events: evs(errEv("e1"), errEv("e2")), want: failed("e2"), at: 2},
		{name: "error events are reset by two model turns in a row", cond: pol(t, `errors: {consecutive: 2}`),
			events: evs(errEv("e1"), msg("a", "x"), msg("a", "x2"), errEv("e2"), msg("a", "y")), want: natural},
		{name: "error events are reset by a message and a final", cond: pol(t, `errors: {consecutive: 2}`),
			events: evs(errEv("e1"), msg("a", "w"), final("a", "x"), errEv("e2"), msg("a", "y")), want: natural},
		{name: "one model turn between error events does not reset them", cond: pol(t, `errors: {consecutive: 2}`),
			events: evs(errEv("e1"), final("a", "x"), errEv("e2"), msg("a", "y")), want: failed("e2"), at: 3},
		{name: "error events are not reset by other kinds", cond: pol(t, `errors: {consecutive: 2}`),
			events: evs(errEv("e1"), call("t", `{}`), input("x"), handoffEv("a", "b"), stopEv("s"), errEv("e2")),
			want:   failed("e2"), at: 6},
		{name: "error events are reset by a successful tool result", cond: pol(t, `errors: {consecutive: 2}`),
			events: evs(errEv("e1"), call("t", `{}`), result("t", ""), errEv("e2"), msg("a", "y")), want: natural},
		{name: "the two streaks are apart", cond: pol(t, `errors: {consecutive: 2}`),
			events: evs(errEv("e1"), result("t", "e2"), msg("a", "x")), want: natural},
		{name: "Err wins over Text on an error event", cond: pol(t, `errors: {consecutive: 1}`),
			events: evs(Event{Kind: KindError, Text: "text", Err: "err"}), want: failed("err"), at: 1},
		{name: "total counts both across resets", cond: pol(t, `errors: {total: 3}`),
			events: evs(errEv("e1"), msg("a", "x"), result("t", "e2"), result("t", ""), msg("a", "y"), errEv("e3"), msg("a", "z")),
			want:   failed("e3"), at: 6},
		{name: "total not reached", cond: pol(t, `errors: {consecutive: 5, total: 3}`),
			events: evs(errEv("e1"), msg("a", "x"), errEv("e2"), msg("a", "y")), want: natural},
		{name: "fires on the error even when it ends the stream", cond: pol(t, `errors: {total: 1}`),
			events: evs(msg("a", "x"), errEv("boom")), want: failed("boom"), at: 2},
	})
}

func TestRuleFinalExemptions(t *testing.T) {
	runCondCases(t, []condCase{
		{name: "never max_iterations", cond: pol(t, `max_iterations: 1`),
			events: evs(msg("a", "1"), final("a", "2"), final("a", "3")), want: natural},
		{name: "never iteration pressure", cond: pol(t, `max_iterations: {limit: 4, pressure: 0.25}`),
			events: evs(final("a", "1")), want: natural},
		{name: "never a budget's warning or grace stop", cond: pol(t, `token_budget: {total: 10, pressure: 0.5, grace: 0}`),
			events: evs(final("a", "x").used(6, 0)), want: natural},
		{name: "never repeated_message", cond: pol(t, `stall: {repeats: 2}`),
			events: evs(msg("a", "x"), final("a", "x")), want: natural},
		{name: "never token_plateau", cond: pol(t, `stall: {repeats: 2, token_tolerance: 0.5}`),
			events: evs(msg("a", "x").used(10, 0), final("a", "y").used(10, 0)), want: natural},
		{name: "completion still fires", cond: pol(t, `{max_iterations: 1, text_mention: {text: DONE}}`),
			events: evs(msg("a", "1"), final("a", "DONE")), want: Completed{Condition: conditionTextMention, Detail: "DONE"}, at: 2},
		{name: "never budget exhaustion", cond: pol(t, `{max_iterations: 1, token_budget: {total: 10}}`),
			events: evs(msg("a", "1"), final("a", "2").used(10, 0)), want: natural},
		{name: "timeout still fires, before the late final", cond: pol(t, `timeout: 1m`),
			events: evs(msg("a", "1").at(0), final("a", "2").at(time.Minute)),
			want:   Timeout{Limit: time.Minute, Elapsed: time.Minute}, at: 1},
	})
}

func TestRuleSeveralCausesOnOneEvent(t *testing.T) {
	runCondCases(t, []condCase{
		{name: "budgets by resource whatever the policy's order",
			cond:   pol(t, `any: [{cost_budget: {limit: 1}}, {token_budget: {output: 5, total: 10}}]`),
			events: evs(msg("a", "x").used(5, 5).costs(1)),
			want:   BudgetExhausted{Resource: ResourceTotalTokens, Used: 10, Limit: 10}, at: 1,
			fired: []Cause{
				BudgetExhausted{Resource: ResourceTotalTokens, Used: 10, Limit: 10},
				BudgetExhausted{Resource: ResourceOutputTokens, Used: 5, Limit: 5},
				BudgetExhausted{Resource: ResourceCost, Used: 1, Limit: 1},
			}},
		{name: "max_tool_calls before stall", cond: pol(t, `{stall: {cycle: 2}, max_tool_calls: 3}`),
			events: evs(call("a", `1`), call("b", `1`), call("a", `1`), call("b", `1`)),
			want:   MaxToolCallsReached{Limit: 3, Count: 4}, at: 4,
			fired: []Cause{MaxToolCallsReached{Limit: 3, Count: 4}, cycled(2, 2)}},
		{name: "stall signals in order: repeated_message before token_plateau",
			cond:   pol(t, `any: [{stall: {repeats: 2, token_tolerance: 0.1}}, {stall: {repeats: 2}}]`),
			events: evs(msg("a", "x").used(10, 0), msg("a", "x").used(10, 0)),
			want:   stalled(SignalRepeatedMessage, 2), at: 2,
			fired: []Cause{stalled(SignalRepeatedMessage, 2), stalled(SignalRepeatedMessage, 2), stalled(SignalTokenPlateau, 2)}},
		{name: "the grace stop before max_iterations", cond: pol(t, `{max_iterations: 1, token_budget: {total: 10, pressure: 0.5, grace: 0}}`),
			events: evs(msg("a", "1"), msg("a", "2").used(5, 0)),
			want:   bp(ResourceTotalTokens, 0.5, 5, 10), at: 2,
			fired:    []Cause{bp(ResourceTotalTokens, 0.5, 5, 10), MaxIterationsReached{Limit: 1, Count: 2}},
			warnings: []Cause{bp(ResourceTotalTokens, 0.5, 5, 10)}},
		{name: "errors before budgets", cond: pol(t, `{cost_budget: {limit: 1}, errors: {total: 1}}`),
			events: evs(errEv("boom").costs(2)),
			want:   Failed{Reason: FailErrorThreshold, Err: "boom"}, at: 1,
			fired: []Cause{Failed{Reason: FailErrorThreshold, Err: "boom"}, BudgetExhausted{Resource: ResourceCost, Used: 2, Limit: 1}}},
	})
}

func TestRuleSeveralWarningsOnOneEvent(t *testing.T) {
	iter := BudgetPressure{Resource: ResourceIterations, Threshold: 0.5, Used: 1, Limit: 2}
	calls := BudgetPressure{Resource: ResourceToolCalls, Threshold: 0.5, Used: 2, Limit: 4}
	runCondCases(t, []condCase{
		{name: "budget pressure by resource, iterations last on a message",
			cond: pol(t, `any: [{max_iterations: {limit: 2, pressure: 0.5}}, {cost_budget: {limit: 1, pressure: 0.5}},
				{token_budget: {output: 10, input: 10, total: 20, pressure: 0.5}}]`),
			events: evs(msg("a", "x").used(5, 5).costs(0.5)), want: natural,
			warnings: []Cause{
				bp(ResourceTotalTokens, 0.5, 10, 20), bp(ResourceInputTokens, 0.5, 5, 10), bp(ResourceOutputTokens, 0.5, 5, 10),
				bp(ResourceCost, 0.5, 0.5, 1), iter,
			}},
		{name: "tool_calls after cost on a tool call",
			cond:   pol(t, `{max_tool_calls: {limit: 4, pressure: 0.5}, cost_budget: {limit: 1, pressure: 0.5}}`),
			events: evs(call("a", `1`), call("b", `1`).costs(0.5)), want: natural,
			warnings: []Cause{bp(ResourceCost, 0.5, 0.5, 1), calls}},
		{name: "budget pressure before a stall warning",
			cond:   pol(t, `{stall: {repeats: 3, warn_at: 2}, max_tool_calls: {limit: 4, pressure: 0.5}}`),
			events: evs(call("a", `1`), call("a", `1`)), want: natural,
			warnings: []Cause{calls, stalled(SignalRepeatedToolCall, 2)}},
	})
}

func TestNewCauseFieldsInMessagesAndJSON(t *testing.T) {
	for _, tc := range []struct {
		cause     Cause
		msg, json string
	}{
		{toolsCapped(2, 3, "search"), `agentstop: max tool calls to "search" reached (3 > limit 2)`,
			`{"$kind":"MaxToolCallsReached","limit":2,"count":3,"tool":"search"}`},
		{MaxToolCallsReached{Limit: 2, Count: 3}, `agentstop: max tool calls reached (3 > limit 2)`,
			`{"$kind":"MaxToolCallsReached","limit":2,"count":3}`},
		{cycled(3, 2), `agentstop: stall detected (cycle of 2 calls, 3 repeats)`,
			`{"$kind":"StallDetected","signal":"cycle","repeats":3,"period":2}`},
		{stalled(SignalRepeatedToolCall, 2), `agentstop: stall detected (repeated_tool_call, 2 repeats)`,
			`{"$kind":"StallDetected","signal":"repeated_tool_call","repeats":2}`},
		{BudgetPressure{Resource: ResourceIterations, Threshold: 0.8, Used: 8, Limit: 10},
			`agentstop: budget pressure on iterations (8 of 10 used, threshold 0.8)`,
			`{"$kind":"BudgetPressure","resource":"iterations","threshold":0.8,"used":8,"limit":10}`},
	} {
		if got := tc.cause.Error(); got != tc.msg {
			t.Errorf("Error() = %q, want %q", got, tc.msg)
		}
		b, err := marshalCause(tc.cause)
		if err != nil || string(b) != tc.json {
			t.Errorf("MarshalCause = %s, %v, want %s", b, err, tc.json)
		}
	}
}

// NewEvaluator promises that an invalid condition still evaluates, never
// crashing the run: the new settings out of range included.
func TestInvalidNewSettingsNeverPanic(t *testing.T) {
	conds := []Condition{
		StallLimits{Repeats: -3, Window: -1, WarnAt: -2, Cycle: -1, TokenTolerance: -1},
		StallLimits{Repeats: 1, Window: 1, WarnAt: 1, Cycle: 1},
		StallLimits{Cycle: -5}, StallLimits{Repeats: 2, Window: -7},
		IterationLimits{Limit: -1, Pressure: 2}, IterationLimits{Pressure: 0.5},
		ToolCallLimits{Limit: -2, Pressure: -1, PerTool: map[string]int{"a": -1, "": 0}},
		ToolCallLimits{Pressure: 0.5},
	}
	events := evs(msg("a", "x").used(5, 5), call("a", `1`), call("b", `1`), call("a", `1`), call("b", `1`),
		msg("a", "x"), final("a", "x"), result("a", "e"), errEv("e"))
	for _, c := range conds {
		if c.Validate() == nil {
			t.Errorf("%s: expected invalid", c)
		}
		replayEvents(t, c, events...)
		replayEvents(t, AllOf(c, CompletionSignals{TextMention: "never"}), events...)
	}
}
