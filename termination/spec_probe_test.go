package termination

import (
	"testing"
	"time"
)

// The rows of this file are an adversarial read of the contract's §3, one
// rule sentence at a time, on the edge cases the per-rule tables leave out
// (thresholds hit exactly, interleaved events, several conditions of one
// family, exemptions of final events). See runCondCases for what each row
// checks.

func pressed(r Resource, th, used, limit float64) Cause {
	return BudgetPressure{Resource: r, Threshold: th, Used: used, Limit: limit}
}

func TestSpecProbeCountsAndBudgets(t *testing.T) {
	runCondCases(t, []condCase{
		{name: "max_iterations fires on a message after a final with the real count",
			cond:   pol(t, `max_iterations: 1`),
			events: evs(msg("a", "1"), final("a", "2"), msg("a", "3")),
			want:   MaxIterationsReached{Limit: 1, Count: 3}, at: 3},
		{name: "max_tool_calls: 55 of 100 at 0.55 warns on the 55th tool_call",
			cond:   pol(t, `max_tool_calls: {limit: 100, pressure: 0.55}`),
			events: seq(repeat(30, call("a", `1`)), repeat(30, msg("a", "x")), repeat(25, call("b", `2`))),
			want:   natural, warnings: []Cause{pressed(ResourceToolCalls, 0.55, 55, 100)}},
		{name: "token pressure exactly at the threshold warns",
			cond:   pol(t, `token_budget: {total: 100, pressure: 0.55}`),
			events: evs(msg("a", "1").used(54, 0), msg("a", "2").used(1, 0)),
			want:   natural, warnings: []Cause{pressed(ResourceTotalTokens, 0.55, 55, 100)}},
		{name: "ten costs of 0.1 exhaust a budget of 1 despite float rounding",
			cond:   pol(t, `cost_budget: {limit: 1}`),
			events: repeat(11, msg("a", "x").costs(0.1)),
			want:   BudgetExhausted{Resource: ResourceCost, Used: 0.9999999999999999, Limit: 1}, at: 10},
		{name: "usage on an input event counts towards the budget",
			cond:   pol(t, `token_budget: {input: 10}`),
			events: evs(input("task").used(10, 0)),
			want:   BudgetExhausted{Resource: ResourceInputTokens, Used: 10, Limit: 10}, at: 1},
		{name: "grace counts only message events after the warning",
			cond: pol(t, `token_budget: {total: 100, pressure: 0.5, grace: 2}`),
			events: evs(msg("a", "1").used(50, 0), call("t", `1`), result("t", ""), msg("a", "2"),
				call("t", `2`), final("a", "f"), msg("a", "3"), msg("a", "4")),
			want: pressed(ResourceTotalTokens, 0.5, 50, 100), at: 7,
			warnings: []Cause{pressed(ResourceTotalTokens, 0.5, 50, 100)}},
		{name: "grace 0 stops on a tool_result that crosses",
			cond:   pol(t, `token_budget: {total: 100, pressure: 0.5, grace: 0}`),
			events: evs(msg("a", "1").used(10, 0), result("t", "").used(40, 0), msg("a", "2")),
			want:   pressed(ResourceTotalTokens, 0.5, 50, 100), at: 2,
			warnings: []Cause{pressed(ResourceTotalTokens, 0.5, 50, 100)}},
		{name: "a final that crosses with grace 0 does not fire pressure",
			cond:   pol(t, `token_budget: {total: 100, pressure: 0.5, grace: 0}`),
			events: evs(msg("a", "1").used(10, 0), final("a", "2").used(40, 0)),
			want:   natural},
		{name: "a final never exhausts a budget (changed on 2026-11-24)",
			cond:   pol(t, `token_budget: {total: 100}`),
			events: evs(final("a", "f").used(60, 40)),
			want:   natural},
		{name: "a budget a final reached fires on any later event",
			cond:   pol(t, `token_budget: {total: 100}`),
			events: evs(final("a", "f").used(60, 40), final("a", "g"), result("t", "")),
			want:   BudgetExhausted{Resource: ResourceTotalTokens, Used: 100, Limit: 100}, at: 3, evidence: []int{1, 3}},
		{name: "all pressure warnings of one event in resource order",
			cond: pol(t, "cost_budget: {limit: 1, pressure: 0.5}\nmax_iterations: {limit: 2, pressure: 0.5}\n"+
				"token_budget: {total: 200, input: 100, output: 100, pressure: 0.5}"),
			events: evs(msg("a", "1").used(50, 50).costs(0.5)),
			want:   natural,
			warnings: []Cause{pressed(ResourceTotalTokens, 0.5, 100, 200), pressed(ResourceInputTokens, 0.5, 50, 100),
				pressed(ResourceOutputTokens, 0.5, 50, 100), pressed(ResourceCost, 0.5, 0.5, 1),
				pressed(ResourceIterations, 0.5, 1, 2)}},
		{name: "per_tool without limit; other tools do not count",
			cond:   pol(t, `max_tool_calls: {per_tool: {a: 1}}`),
			events: evs(call("b", `1`), call("b", `1`), call("a", `1`), call("a", `2`)),
			want:   toolsCapped(1, 2, "a"), at: 4},
		{name: "overall and per-tool on one event: overall first",
			cond:   pol(t, `max_tool_calls: {limit: 2, per_tool: {a: 2}}`),
			events: repeat(3, call("a", `1`)),
			want:   toolsCapped(2, 3, ""), at: 3, fired: []Cause{toolsCapped(2, 3, ""), toolsCapped(2, 3, "a")}},
	})
}

func TestSpecProbeTimeout(t *testing.T) {
	to := func(limit, elapsed time.Duration) Cause { return Timeout{Limit: limit, Elapsed: elapsed} }
	runCondCases(t, []condCase{
		{name: "clock starts at the first timed event; untimed events never fire",
			cond: pol(t, `timeout: 1m`),
			events: evs(input("x"), msg("a", "1").at(0), msg("a", "2"), msg("a", "3").at(59*time.Second),
				call("t", `1`), msg("a", "4").at(time.Minute)),
			want: to(time.Minute, time.Minute), at: 5},
		{name: "timeout fires before a late tool_result, with the limit as elapsed (changed on 2026-11-24)",
			cond:   pol(t, `timeout: 1m`),
			events: evs(input("x").at(0), result("t", "").at(2*time.Minute)),
			want:   to(time.Minute, time.Minute), at: 1, evidence: []int{}},
		{name: "timeout before a late final",
			cond:   pol(t, `timeout: 1m`),
			events: evs(msg("a", "1").at(0), final("a", "2").at(90*time.Second)),
			want:   to(time.Minute, time.Minute), at: 1},
	})
}

func TestSpecProbeStall(t *testing.T) {
	rtc := func(n int) Cause { return StallDetected{Signal: SignalRepeatedToolCall, Repeats: n} }
	rmsg := func(n int) Cause { return StallDetected{Signal: SignalRepeatedMessage, Repeats: n} }
	runCondCases(t, []condCase{
		{name: "repeats in a window with interleaved calls and canonical args",
			cond: pol(t, `stall: {repeats: 3, window: 5}`),
			events: evs(call("s", `{"a":1,"b":2}`), call("t", `{}`), call("s", `{"b":2, "a":1}`), msg("x", "y"),
				call("u", `{}`), call("s", ` {"b":2,"a":1}`)),
			want: rtc(3), at: 6},
		{name: "repeats just outside the window do not fire",
			cond: pol(t, `stall: {repeats: 3, window: 4}`),
			events: evs(call("s", `1`), call("t", `1`), call("s", `1`), call("u", `1`), call("v", `1`),
				call("s", `1`)),
			want: natural},
		{name: "repeated messages: empty text skipped, text trimmed, tool calls between",
			cond:   pol(t, `stall: {repeats: 3}`),
			events: evs(msg("a", "same"), msg("a", ""), msg("a", "  same\n"), call("x", `1`), msg("a", "same")),
			want:   rmsg(3), at: 5},
		{name: "whitespace-only messages never repeat",
			cond:   pol(t, `stall: {repeats: 2}`),
			events: evs(msg("a", "  "), msg("a", " ")),
			want:   natural},
		{name: "message window skips empty messages and counts one source",
			cond: pol(t, `stall: {repeats: 3, window: 5}`),
			events: evs(msg("a", "m"), msg("b", "m"), msg("a", "m "), msg("b", ""), msg("c", "z"),
				msg("a", "m")),
			want: rmsg(3), at: 6},
		{name: "a final never fires repeated_message",
			cond:   pol(t, `stall: {repeats: 2}`),
			events: evs(msg("a", "s"), final("a", "s")),
			want:   natural},
		{name: "repeated_message and token_plateau on one event, in signal order",
			cond:   pol(t, `stall: {repeats: 2, token_tolerance: 0.1}`),
			events: evs(msg("a", "m").used(100, 0), msg("a", "m").used(100, 0)),
			want:   rmsg(2), at: 2,
			fired: []Cause{rmsg(2), StallDetected{Signal: SignalTokenPlateau, Repeats: 2}}},
		{name: "cycle with P=2 fires on the 2K-th call",
			cond:   pol(t, `stall: {cycle: 3}`),
			events: evs(call("a", `1`), call("b", `1`), call("a", `1`), call("b", `1`), call("a", `1`), call("b", `1`)),
			want:   cycled(3, 2), at: 6},
		{name: "a block of one is repeated_tool_call, not cycle",
			cond:   pol(t, `stall: {cycle: 2, repeats: 4}`),
			events: repeat(4, call("a", `1`)),
			want:   rtc(4), at: 4},
		{name: "a block of one alone never fires cycle",
			cond:   pol(t, `stall: {cycle: 2}`),
			events: repeat(8, call("a", `1`)),
			want:   natural},
		{name: "A A B twice is a cycle of period 3",
			cond:   pol(t, `stall: {cycle: 2}`),
			events: evs(call("a", `1`), call("a", `1`), call("b", `1`), call("a", `1`), call("a", `1`), call("b", `1`)),
			want:   cycled(2, 3), at: 6},
		{name: "args tell cycle signatures apart",
			cond:   pol(t, `stall: {cycle: 2}`),
			events: evs(call("a", `{"q":1}`), call("a", `{"q":2}`), call("a", `{"q":1}`), call("a", `{ "q" : 2 }`)),
			want:   cycled(2, 2), at: 4},
		{name: "warn_at: one stall warning over two conditions inside any",
			cond: pol(t, "any:\n  - stall: {repeats: 4, warn_at: 2}\n  - stall: {repeats: 5, warn_at: 3}"),
			events: evs(call("a", `1`), call("a", `1`), call("a", `1`), msg("s", "m"), msg("s", "m"),
				msg("s", "m")),
			want: natural, warnings: []Cause{rtc(2)}},
		{name: "warn_at: one stall warning over two conditions inside all, same event",
			cond:   pol(t, "all:\n  - stall: {repeats: 4, warn_at: 2}\n  - stall: {repeats: 3, warn_at: 2}"),
			events: repeat(2, call("a", `1`)),
			want:   natural, warnings: []Cause{rtc(2)}},
		{name: "warn_at: a message warning blocks a later tool-call warning",
			cond:   pol(t, `stall: {repeats: 4, warn_at: 2}`),
			events: evs(msg("s", "m"), msg("s", "m"), call("a", `1`), call("a", `1`)),
			want:   natural, warnings: []Cause{rmsg(2)}},
		{name: "warn_at counts matches in the window",
			cond:   pol(t, `stall: {repeats: 3, window: 4, warn_at: 2}`),
			events: evs(call("a", `1`), call("b", `1`), call("a", `1`)),
			want:   natural, warnings: []Cause{rtc(2)}},
		{name: "warnings of nested conditions keep the resource order",
			cond: pol(t, "any:\n  - max_iterations: {limit: 4, pressure: 0.5}\n  - all:\n"+
				"      - cost_budget: {limit: 1, pressure: 0.5}\n      - token_budget: {output: 10, total: 100, pressure: 0.05}"),
			events: evs(msg("a", "x"), msg("a", "x").used(0, 5).costs(0.5)),
			want:   natural,
			warnings: []Cause{pressed(ResourceTotalTokens, 0.05, 5, 100), pressed(ResourceOutputTokens, 0.05, 5, 10),
				pressed(ResourceCost, 0.5, 0.5, 1), pressed(ResourceIterations, 0.5, 2, 4)}},
		{name: "pressure warnings come before the stall warning on one event",
			cond: pol(t, "stall: {repeats: 4, warn_at: 2}\nmax_tool_calls: {limit: 4, pressure: 0.5}\n"+
				"token_budget: {output: 10, pressure: 0.5}"),
			events: evs(call("a", `1`), call("a", `1`).used(0, 5)),
			want:   natural,
			warnings: []Cause{pressed(ResourceOutputTokens, 0.5, 5, 10), pressed(ResourceToolCalls, 0.5, 2, 4),
				rtc(2)}},
	})
}

func TestSpecProbeErrorsAndCompletion(t *testing.T) {
	threshold := func(text string) Cause { return Failed{Reason: FailErrorThreshold, Err: text} }
	result := func(tool, err string) Event { return Event{Kind: KindToolResult, Tool: tool, Err: err} }
	errE := func(err string) Event { return Event{Kind: KindError, Err: err} }
	runCondCases(t, []condCase{
		{name: "a message between failed tool_results does not reset the streak",
			cond:   pol(t, `errors: {consecutive: 2}`),
			events: evs(result("a", "f1"), msg("a", "hm"), result("a", "f2")),
			want:   threshold("f2"), at: 3},
		{name: "an error event between failed tool_results does not reset the streak",
			cond:   pol(t, `errors: {consecutive: 2}`),
			events: evs(result("a", "f1"), errE("e1"), result("a", "f2")),
			want:   threshold("f2"), at: 3},
		{name: "a failed tool_result does not add to the error-event streak",
			cond:   pol(t, `errors: {consecutive: 2}`),
			events: evs(errE("e1"), result("a", "f1"), msg("a", "m")),
			want:   natural},
		{name: "a successful tool_result resets the error-event streak",
			cond:   pol(t, `errors: {consecutive: 2}`),
			events: evs(errE("e1"), result("a", ""), errE("e2"), msg("a", "m")),
			want:   natural},
		{name: "a final between errors does not reset the error-event streak (changed on 2026-11-24)",
			cond:   pol(t, `errors: {consecutive: 2}`),
			events: evs(errE("e1"), final("a", "f"), errE("e2"), msg("a", "m")),
			want:   threshold("e2"), at: 3, evidence: []int{1, 3}},
		{name: "two model turns in a row reset the error-event streak",
			cond:   pol(t, `errors: {consecutive: 2}`),
			events: evs(errE("e1"), final("a", "f"), msg("a", "m"), errE("e2"), msg("a", "m")),
			want:   natural},
		{name: "errors.total counts error events and failed tool_results",
			cond:   pol(t, `errors: {total: 3}`),
			events: evs(errE("e1"), result("a", ""), result("a", "f1"), msg("a", "m"), errE("e2")),
			want:   threshold("e2"), at: 5},
		{name: "text_mention ignores input, is case-sensitive, matches a tool_result",
			cond:   pol(t, `text_mention: {text: TERMINATE}`),
			events: evs(input("say TERMINATE"), msg("a", "terminate"), result("x", "").withText("TERMINATE")),
			want:   Completed{Condition: conditionTextMention, Detail: "TERMINATE"}, at: 3},
		{name: "function_call needs a successful result of the tool",
			cond:   pol(t, `function_call: approve`),
			events: evs(call("approve", `{}`), result("approve", "no"), result("other", ""), result("approve", "")),
			want:   Completed{Condition: conditionFunctionCall, Detail: "approve"}, at: 4},
		{name: "source_match: only a message or a final",
			cond: pol(t, `source_match: critic`),
			events: evs(Event{Kind: KindToolCall, Tool: "x", Source: "critic"}, Event{Kind: KindStop, Source: "critic"},
				Event{Kind: KindHandoff, Source: "critic", Target: "u"}, final("critic", "f")),
			want: Completed{Condition: conditionSourceMatch, Detail: "critic"}, at: 4},
		{name: "completion, failure and exhaustion on one error event",
			cond:   pol(t, "errors: {total: 1}\ntext_mention: {text: X}\ntoken_budget: {total: 10}"),
			events: evs(Event{Kind: KindError, Text: "X", Err: "X"}.used(10, 0)),
			want:   Completed{Condition: conditionTextMention, Detail: "X"}, at: 1,
			fired: []Cause{Completed{Condition: conditionTextMention, Detail: "X"}, threshold("X"),
				BudgetExhausted{Resource: ResourceTotalTokens, Used: 10, Limit: 10}}},
		{name: "the whole precedence order on one message",
			cond: pol(t, "max_iterations: 1\ntext_mention: {text: X}\nerrors: {total: 1}\n"+
				"token_budget: {total: 10, pressure: 0.5, grace: 0}\ntimeout: 10s\nstall: {repeats: 2}"),
			// A timeout is never among them: it fires on a tick of its own,
			// before the first event past its deadline.
			events: evs(msg("a", "Y").at(0), msg("a", "Y").at(5*time.Second).used(10, 0)),
			want:   BudgetExhausted{Resource: ResourceTotalTokens, Used: 10, Limit: 10}, at: 2, evidence: []int{2},
			fired: []Cause{BudgetExhausted{Resource: ResourceTotalTokens, Used: 10, Limit: 10},
				pressed(ResourceTotalTokens, 0.5, 10, 10), MaxIterationsReached{Limit: 1, Count: 2},
				rmsgCause(2)},
			warnings: []Cause{pressed(ResourceTotalTokens, 0.5, 10, 10)}},
		{name: "all latches its children and reports them in firing order",
			cond:   pol(t, "all:\n  - text_mention: {text: A}\n  - max_iterations: 2"),
			events: evs(msg("a", "A"), msg("a", "b"), msg("a", "c")),
			want: All{Causes: []Cause{Completed{Condition: conditionTextMention, Detail: "A"},
				MaxIterationsReached{Limit: 2, Count: 3}}}, at: 3},
		{name: "a stream ending with an error event is a stream error",
			cond:   pol(t, `max_iterations: 5`),
			events: evs(msg("a", "x"), errE("kaput")),
			want:   Failed{Reason: FailStreamError, Err: "kaput"}},
		{name: "an error event followed by others is not a stream error",
			cond:   pol(t, `max_iterations: 5`),
			events: evs(errE("kaput"), msg("a", "x")),
			want:   natural},
	})
}

func rmsgCause(n int) Cause { return StallDetected{Signal: SignalRepeatedMessage, Repeats: n} }

// TestSpecProbeZeroTokenTolerance: the policy's token_tolerance is in [0,1),
// so `token_tolerance: 0` asks for a plateau of exactly equal totals; it
// must not silently turn the plateau off. (The Go form keeps 0 as "off".)
func TestSpecProbeZeroTokenTolerance(t *testing.T) {
	plateau := StallDetected{Signal: SignalTokenPlateau, Repeats: 3}
	runCondCases(t, []condCase{
		{name: "equal totals are a plateau at tolerance 0",
			cond:   pol(t, `stall: {repeats: 3, token_tolerance: 0}`),
			events: evs(msg("a", "1").used(100, 0), msg("a", "2").used(100, 0), msg("a", "3").used(100, 0)),
			want:   plateau, at: 3},
		{name: "one token more breaks a plateau at tolerance 0",
			cond:   pol(t, `stall: {repeats: 3, token_tolerance: 0}`),
			events: evs(msg("a", "1").used(100, 0), msg("a", "2").used(100, 0), msg("a", "3").used(101, 0)),
			want:   natural},
		{name: "the Go form's zero tolerance stays off",
			cond:   StallLimits{Repeats: 3},
			events: evs(msg("a", "1").used(100, 0), msg("a", "2").used(100, 0), msg("a", "3").used(100, 0)),
			want:   natural},
	})
}

// TestSpecProbeHugeUsage: "used >= limit" must hold for usage near the top
// of int64 too; wrapping around to a negative total would turn the budget
// off exactly when it matters most.
func TestSpecProbeHugeUsage(t *testing.T) {
	const top = int64(1<<63 - 1)
	runCondCases(t, []condCase{
		{name: "input + output past int64 still exhausts the total",
			cond:   pol(t, `token_budget: {total: 100}`),
			events: evs(msg("a", "x").used(top, 1)),
			want:   BudgetExhausted{Resource: ResourceTotalTokens, Used: float64(top), Limit: 100}, at: 1},
		{name: "a cumulative sum past int64 still exhausts the input budget",
			cond:   pol(t, `token_budget: {input: 9223372036854775807}`),
			events: evs(msg("a", "x").used(top/2+1, 0), msg("a", "x").used(top/2+1, 0)),
			want:   BudgetExhausted{Resource: ResourceInputTokens, Used: float64(top), Limit: float64(top)}, at: 2},
	})
}
