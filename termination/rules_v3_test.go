package termination

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/internal/canonical"
)

// The rules of the 2026-11-24 contract (§3), one table each.

// withID returns e with a call_id.
func (e Event) withID(id string) Event {
	e.CallID = id
	return e
}

// out is a tool result of tool with text and error.
func out(tool, text, err string) Event {
	e := result(tool, err)
	e.Text = text
	return e
}

func TestRuleFinalNeverFiresALimit(t *testing.T) {
	runCondCases(t, []condCase{
		{name: "max_iterations crossed exactly on a final", cond: pol(t, `max_iterations: 2`),
			events: evs(msg("a", "1"), msg("a", "2"), final("a", "3")), want: natural, evidence: []int{}},
		{name: "max_iterations a final crossed fires on the next message with its count, naming both",
			cond:   pol(t, `max_iterations: 2`),
			events: evs(msg("a", "1"), msg("a", "2"), final("a", "3"), call("t", `{}`), msg("a", "4")),
			want:   MaxIterationsReached{Limit: 2, Count: 4}, at: 5, evidence: []int{3, 5}},
		{name: "max_iterations crossed on a message names the message alone", cond: pol(t, `max_iterations: 2`),
			events: evs(final("a", "1"), msg("a", "2"), msg("a", "3")),
			want:   MaxIterationsReached{Limit: 2, Count: 3}, at: 3, evidence: []int{3}},
		{name: "a budget crossed exactly on a final", cond: pol(t, `token_budget: {total: 100}`),
			events: evs(msg("a", "1").used(60, 0), final("a", "2").used(30, 10)), want: natural},
		{name: "a budget a final crossed fires on any later event", cond: pol(t, `cost_budget: {limit: 1}`),
			events: evs(msg("a", "1").costs(0.5), final("a", "2").costs(0.5), handoffEv("a", "b")),
			want:   BudgetExhausted{Resource: ResourceCost, Used: 1, Limit: 1}, at: 3, evidence: []int{2, 3}},
		{name: "its usage counts: the next event sees the overspend", cond: pol(t, `token_budget: {total: 100}`),
			events: evs(final("a", "1").used(150, 0), msg("a", "2")),
			want:   BudgetExhausted{Resource: ResourceTotalTokens, Used: 150, Limit: 100}, at: 2, evidence: []int{1, 2}},
		{name: "no pressure warning on a final", cond: pol(t, `token_budget: {total: 100, pressure: 0.5}`),
			events: evs(final("a", "1").used(60, 0)), want: natural},
		{name: "a grace stop due on a final (grace 0) fires on the next event",
			cond:   pol(t, `token_budget: {total: 100, pressure: 0.5, grace: 0}`),
			events: evs(msg("a", "1").used(10, 0), final("a", "2").used(50, 0), result("t", "")),
			want:   bp(ResourceTotalTokens, 0.5, 60, 100), at: 3, evidence: []int{2, 3},
			warnings: []Cause{bp(ResourceTotalTokens, 0.5, 60, 100)}},
		{name: "a grace stop after the warning: the warning event and the stop",
			cond:   pol(t, `token_budget: {total: 100, pressure: 0.5, grace: 1}`),
			events: evs(msg("a", "1").used(60, 0), final("a", "2"), msg("a", "3")),
			want:   bp(ResourceTotalTokens, 0.5, 60, 100), at: 3, evidence: []int{1, 3},
			warnings: []Cause{bp(ResourceTotalTokens, 0.5, 60, 100)}},
		{name: "no stall on a final", cond: pol(t, `stall: {repeats: 2, token_tolerance: 0.5}`),
			events: evs(msg("a", "x").used(10, 0), final("a", "x").used(10, 0)), want: natural},
		{name: "errors still fire on a final's event stream", cond: pol(t, `{max_iterations: 1, errors: {total: 1}}`),
			events: evs(msg("a", "1"), final("a", "2"), errEv("boom"), msg("a", "3")),
			want:   Failed{Reason: FailErrorThreshold, Err: "boom"}, at: 3, evidence: []int{3}},
		{name: "a completion fires on a final", cond: pol(t, `{max_iterations: 1, source_match: critic}`),
			events: evs(msg("a", "1"), final("critic", "2")),
			want:   Completed{Condition: conditionSourceMatch, Detail: "critic"}, at: 2, evidence: []int{2}},
	})
}

func TestRuleReplayedTimeout(t *testing.T) {
	to := Timeout{Limit: 10 * time.Minute, Elapsed: 10 * time.Minute}
	runCondCases(t, []condCase{
		{name: "fires before the late event, which is not evaluated", cond: pol(t, `timeout: 10m`),
			events: evs(input("go").at(0), call("t", `1`).at(time.Minute), result("t", "").at(13*time.Minute+55*time.Second)),
			want:   to, at: 2, evidence: []int{}},
		{name: "an event exactly at the deadline is late", cond: pol(t, `timeout: 10m`),
			events: evs(input("go").at(0), msg("a", "1").at(10*time.Minute)), want: to, at: 1},
		{name: "an event just before the deadline is evaluated", cond: pol(t, `{timeout: 10m, max_iterations: 1}`),
			events: evs(msg("a", "0").at(0), msg("a", "1").at(10*time.Minute-time.Nanosecond)),
			want:   MaxIterationsReached{Limit: 1, Count: 2}, at: 2},
		{name: "the late event's causes do not fire", cond: pol(t, `{timeout: 10m, text_mention: {text: DONE}}`),
			events: evs(msg("a", "0").at(0), msg("a", "DONE").at(11*time.Minute)), want: to, at: 1},
		{name: "before the first timed event the clock has not started", cond: pol(t, `timeout: 1m`),
			events: evs(msg("a", "0"), msg("a", "1").at(time.Hour), msg("a", "2").at(time.Hour+2*time.Minute)),
			want:   Timeout{Limit: time.Minute, Elapsed: time.Minute}, at: 2},
	})
	t.Run("the late event is not evaluated; the run lasted until the deadline", func(t *testing.T) {
		res := replayEvents(t, pol(t, `timeout: 10m`), msg("a", "0").at(0), msg("a", "1").at(4*time.Minute),
			msg("a", "2").at(14*time.Minute))
		assert.Equal(t, 2, res.Events)
		assert.Equal(t, 2, res.Iterations)
		assert.Equal(t, 10*time.Minute, res.Duration, "a replayed timeout lasts until the deadline")
	})
}

func TestRuleSameResult(t *testing.T) {
	rr := func(n int) Cause { return StallDetected{Signal: SignalRepeatedResult, Repeats: n} }
	sr := `stall: {repeats: 3, window: 8, same_result: true}`
	// An edit-and-test loop: the test's output changes each time.
	var progress []Event
	for i := range 6 {
		progress = append(progress, call("edit", `{"file":"a.go","line":`+string(rune('1'+i))+`}`), out("edit", "ok", ""),
			call("bash", `{"cmd":"go test"}`), out("bash", "FAIL: "+string(rune('a'+i)), "exit 1"))
	}
	runCondCases(t, []condCase{
		{name: "re-running a command whose output changes is progress", cond: pol(t, sr),
			events: progress, want: natural},
		{name: "without same_result the same loop is a stall", cond: pol(t, `stall: {repeats: 3, window: 8}`),
			events: progress, want: stalled(SignalRepeatedToolCall, 3), at: 11, evidence: []int{3, 7, 11}},
		{name: "the same output repeats times in the window fires on the result", cond: pol(t, sr),
			events: evs(call("bash", `{"cmd":"make"}`), out("bash", "error: x", "exit 2"), msg("a", "hm"),
				call("bash", `{ "cmd" : "make" }`), out("bash", "error: x", "exit 2"), call("ls", `{}`), out("ls", "a b", ""),
				call("bash", `{"cmd":"make"}`), out("bash", "error: x", "exit 2")),
			want: rr(3), at: 9, evidence: []int{2, 5, 9}},
		{name: "results differing only in surrounding whitespace are the same", cond: pol(t, sr),
			events: evs(call("t", `1`), out("t", "same\n", " oops"), call("t", `1`), out("t", "  same", "oops\n"),
				call("t", `1`), out("t", "same", "oops")),
			want: rr(3), at: 6, evidence: []int{2, 4, 6}},
		{name: "the error is part of the signature", cond: pol(t, sr),
			events: evs(call("t", `1`), out("t", "x", ""), call("t", `1`), out("t", "x", "e"), call("t", `1`), out("t", "x", "")),
			want:   natural},
		{name: "the args are part of the signature", cond: pol(t, sr),
			events: evs(call("t", `1`), out("t", "x", ""), call("t", `2`), out("t", "x", ""), call("t", `1`), out("t", "x", "")),
			want:   natural},
		{name: "the window counts completed calls", cond: pol(t, `stall: {repeats: 2, window: 2, same_result: true}`),
			events: evs(call("t", `1`), out("t", "x", ""), call("u", `1`), out("u", "y", ""), call("t", `1`), out("t", "x", "")),
			want:   natural},
		{name: "parallel calls of one tool with call_id pair by id", cond: pol(t, `stall: {repeats: 2, same_result: true}`),
			// Two calls in flight, answered in reverse order: by id, each
			// result goes to its own call, so the pairs are (1,"a") twice.
			events: evs(call("t", `1`).withID("c1"), call("t", `2`).withID("c2"), out("t", "b", "").withID("c2"), out("t", "a", "").withID("c1"),
				call("t", `1`).withID("c3"), out("t", "a", "").withID("c3")),
			want: stalled(SignalRepeatedResult, 2), at: 6, evidence: []int{4, 6}},
		{name: "parallel calls of one tool without call_id pair oldest first", cond: pol(t, `stall: {repeats: 2, window: 3, same_result: true}`),
			// Without ids the first result answers the oldest call (args 1)
			// and the second the next (args 2).
			events: evs(call("t", `1`), call("t", `2`), out("t", "a", ""), out("t", "b", ""),
				call("t", `1`), out("t", "a", "")),
			want: stalled(SignalRepeatedResult, 2), at: 6, evidence: []int{3, 6}},
		{name: "a result whose call_id matches no call takes the oldest call of its tool without one",
			cond:   pol(t, `stall: {repeats: 2, same_result: true}`),
			events: evs(call("t", `1`), out("t", "a", "").withID("zz"), call("t", `1`), out("t", "a", "")),
			want:   stalled(SignalRepeatedResult, 2), at: 4, evidence: []int{2, 4}},
		{name: "a result with no open call counts for nothing", cond: pol(t, `stall: {repeats: 2, same_result: true}`),
			events: evs(out("t", "a", ""), out("t", "a", ""), call("t", `1`), out("t", "a", ""), out("t", "a", "")),
			want:   natural},
		{name: "a call answered once is closed", cond: pol(t, `stall: {repeats: 2, same_result: true}`),
			events: evs(call("t", `1`).withID("c1"), out("t", "a", "").withID("c1"), out("t", "a", "").withID("c1")),
			want:   natural},
		{name: "same_result turns off repeated_tool_call and repeated_message",
			cond:   pol(t, `stall: {repeats: 2, same_result: true}`),
			events: evs(msg("a", "again"), call("t", `1`), msg("a", "again"), call("t", `1`)), want: natural},
		{name: "same_result keeps cycle", cond: pol(t, `stall: {repeats: 3, cycle: 2, same_result: true}`),
			events: evs(call("a", `1`), call("b", `1`), call("a", `1`), call("b", `1`)),
			want:   StallDetected{Signal: SignalCycle, Repeats: 2, Period: 2}, at: 4, evidence: []int{1, 2, 3, 4}},
		{name: "same_result keeps token_plateau", cond: pol(t, `stall: {repeats: 2, token_tolerance: 0.1, same_result: true}`),
			events: evs(msg("a", "1").used(100, 0), call("t", `1`), msg("a", "2").used(105, 0)),
			want:   stalled(SignalTokenPlateau, 2), at: 3, evidence: []int{1, 3}},
		{name: "warn_at warns on repeated results", cond: pol(t, `stall: {repeats: 3, warn_at: 2, same_result: true}`),
			events: evs(call("t", `1`), out("t", "a", ""), call("t", `1`), out("t", "a", ""), msg("a", "x")),
			want:   natural, warnings: []Cause{stalled(SignalRepeatedResult, 2)}},
		{name: "recorded without content: compared by hashes", cond: pol(t, `stall: {repeats: 2, same_result: true}`),
			events: evs(hashed(call("t", `{"a":1}`)), hashed(out("t", " x ", "")), hashed(call("t", `{ "a" : 1 }`)), hashed(out("t", "x", ""))),
			want:   stalled(SignalRepeatedResult, 2), at: 4, evidence: []int{2, 4}},
		{name: "recorded without content: different results differ", cond: pol(t, `stall: {repeats: 2, same_result: true}`),
			events: evs(hashed(call("t", `1`)), hashed(out("t", "x", "")), hashed(call("t", `1`)), hashed(out("t", "y", ""))),
			want:   natural},
	})
}

func TestRuleHashedContent(t *testing.T) {
	runCondCases(t, []condCase{
		{name: "hashed args repeat", cond: pol(t, `stall: {repeats: 2}`),
			events: evs(hashed(call("t", `{"q":1, "p":2}`)), hashed(call("t", `{"p":2,"q":1.0}`))),
			want:   stalled(SignalRepeatedToolCall, 2), at: 2, evidence: []int{1, 2}},
		{name: "hashed messages repeat", cond: pol(t, `stall: {repeats: 2}`),
			events: evs(hashed(msg("a", "same ")), hashed(msg("a", " same"))),
			want:   stalled(SignalRepeatedMessage, 2), at: 2, evidence: []int{1, 2}},
		{name: "hashed empty messages do not count", cond: pol(t, `stall: {repeats: 2}`),
			events: evs(hashed(msg("a", " ")), hashed(msg("a", ""))), want: natural},
		{name: "text_mention cannot fire on a hashed text", cond: pol(t, `text_mention: {text: DONE}`),
			events: evs(hashed(msg("a", "DONE")), Event{Kind: KindMessage, Text: "DONE", Log: &LogFields{TextHash: canonical.TextHash("DONE")}}), want: natural},
	})
}

func TestRuleErrorStreakV3(t *testing.T) {
	failed := func(s string) Cause { return Failed{Reason: FailErrorThreshold, Err: s} }
	runCondCases(t, []condCase{
		{name: "message, error, message, error, message, error is three in a row", cond: pol(t, `errors: {consecutive: 3}`),
			events: evs(msg("a", "1"), errEv("e1"), msg("a", "2"), errEv("e2"), msg("a", "3"), errEv("e3"), msg("a", "4")),
			want:   failed("e3"), at: 6, evidence: []int{2, 4, 6}},
		{name: "error, message, message, error is one and then one", cond: pol(t, `errors: {consecutive: 2}`),
			events: evs(errEv("e1"), msg("a", "1"), msg("a", "2"), errEv("e2"), msg("a", "3")), want: natural},
		{name: "a final between errors does not reset", cond: pol(t, `errors: {consecutive: 2}`),
			events: evs(errEv("e1"), final("a", "1"), errEv("e2"), msg("a", "3")), want: failed("e2"), at: 3, evidence: []int{1, 3}},
		{name: "tool calls and failed results between do not reset", cond: pol(t, `errors: {consecutive: 2}`),
			events: evs(errEv("e1"), msg("a", "1"), call("t", `1`), errEv("e2"), msg("a", "3")),
			want:   failed("e2"), at: 4, evidence: []int{1, 4}},
		{name: "a successful result resets", cond: pol(t, `errors: {consecutive: 2}`),
			events: evs(errEv("e1"), msg("a", "1"), out("t", "ok", ""), errEv("e2"), msg("a", "3")), want: natural},
		{name: "failed results' streak names its failures", cond: pol(t, `errors: {consecutive: 2}`),
			events: evs(result("t", "f1"), msg("a", "1"), errEv("x"), msg("a", "2"), msg("a", "3"), result("t", "f2")),
			want:   failed("f2"), at: 6, evidence: []int{1, 6}},
		{name: "total names every failure", cond: pol(t, `errors: {total: 3}`),
			events: evs(errEv("e1"), msg("a", "1"), msg("a", "2"), result("t", "f"), result("t", ""), errEv("e2"), msg("a", "3")),
			want:   failed("e2"), at: 6, evidence: []int{1, 4, 6}},
		{name: "streak and total on one event: the streak's", cond: pol(t, `errors: {consecutive: 2, total: 3}`),
			events: evs(errEv("e1"), msg("a", "1"), msg("a", "2"), result("t", "f"), result("t", "g")),
			want:   failed("g"), at: 5, evidence: []int{4, 5}},
	})
}

func TestRuleIgnoreTools(t *testing.T) {
	failed := func(s string) Cause { return Failed{Reason: FailErrorThreshold, Err: s} }
	runCondCases(t, []condCase{
		{name: "failed results of an ignored tool do not make a streak", cond: pol(t, `errors: {consecutive: 2, ignore_tools: [grep]}`),
			events: evs(result("grep", "exit 1"), result("grep", "exit 1"), result("grep", "exit 1")), want: natural},
		{name: "nor reset one", cond: pol(t, `errors: {consecutive: 2, ignore_tools: [grep]}`),
			events: evs(result("bash", "f1"), result("grep", "exit 1"), result("bash", "f2")),
			want:   failed("f2"), at: 3, evidence: []int{1, 3}},
		{name: "nor reset the error-event streak", cond: pol(t, `errors: {consecutive: 2, ignore_tools: [grep]}`),
			events: evs(errEv("e1"), result("grep", "exit 1"), errEv("e2")), want: failed("e2"), at: 3, evidence: []int{1, 3}},
		{name: "their successful results reset as any other", cond: pol(t, `errors: {consecutive: 2, ignore_tools: [grep]}`),
			events: evs(result("bash", "f1"), out("grep", "match", ""), result("bash", "f2")), want: natural},
		{name: "they count nothing towards total", cond: pol(t, `errors: {total: 2, ignore_tools: [grep, find]}`),
			events: evs(result("grep", "exit 1"), result("find", "none"), errEv("e1"), result("grep", "exit 1"), msg("a", "x")),
			want:   natural},
		{name: "other tools still count towards total", cond: pol(t, `errors: {total: 2, ignore_tools: [grep]}`),
			events: evs(result("grep", "exit 1"), result("bash", "f1"), result("grep", "exit 1"), errEv("e1")),
			want:   failed("e1"), at: 4, evidence: []int{2, 4}},
		{name: "an error event is never ignored", cond: pol(t, `errors: {consecutive: 1, ignore_tools: [grep]}`),
			events: evs(Event{Kind: KindError, Tool: "grep", Text: "e"}), want: failed("e"), at: 1},
	})
	t.Run("Go field", func(t *testing.T) {
		c := ErrorLimits{Consecutive: 2, IgnoreTools: []string{"grep"}}
		require.NoError(t, c.Validate())
		assert.Equal(t, "errors: {consecutive: 2, ignore_tools: [grep]}", c.String())
		res := replayEvents(t, c, result("grep", "1"), result("grep", "1"), msg("a", "x"))
		assert.Equal(t, natural, res.Cause)
		assert.ErrorContains(t, ErrorLimits{Total: 1, IgnoreTools: []string{}}.Validate(), "errors.ignore_tools: needs at least one name")
		assert.ErrorContains(t, ErrorLimits{Total: 1, IgnoreTools: []string{"a", ""}}.Validate(), "errors.ignore_tools[1]: must not be empty")
	})
}

func TestRuleNewPolicyKeys(t *testing.T) {
	for _, tc := range []struct{ src, err string }{
		{`stall: {repeats: 3, same_result: true}`, ""},
		{`stall: {repeats: 3, same_result: false}`, ""},
		{`stall: {cycle: 3, same_result: true}`, "stall.same_result: needs repeats"},
		{`stall: {repeats: 3, same_result: yes please}`, "stall.same_result: must be true or false"},
		{`stall: {repeats: 3, same_results: true}`, "same_results"},
		{`errors: {consecutive: 3, ignore_tools: [grep, find]}`, ""},
		{`errors: {consecutive: 3, ignore_tools: grep}`, ""},
		{`errors: {ignore_tools: [grep]}`, "errors: needs consecutive or total"},
		{`errors: {total: 3, ignore_tools: []}`, "errors.ignore_tools: must not be empty"},
		{`errors: {total: 3, ignore_tools: [""]}`, "errors.ignore_tools[0]: must not be empty"},
		{`errors: {total: 3, ignore_tools: {grep: 1}}`, "errors.ignore_tools: must be a name or a list of names"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			p, err := ParsePolicy([]byte(tc.src))
			if tc.err == "" {
				require.NoError(t, err)
				require.NoError(t, p.Condition().Validate())
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
	c := StallLimits{Repeats: 3, Window: 8, SameResult: true}
	assert.Equal(t, "stall: {repeats: 3, window: 8, same_result: true}", c.String())
	assert.ErrorContains(t, StallLimits{Cycle: 2, SameResult: true}.Validate(), "stall.same_result: needs repeats")
}

// TestRuleEvidence: every cause kind says which events made it (§3
// "Evidence").
func TestRuleEvidence(t *testing.T) {
	runCondCases(t, []condCase{
		{name: "max_tool_calls: the call past the limit", cond: pol(t, `max_tool_calls: 1`),
			events: evs(call("t", `1`), out("t", "", ""), call("t", `2`)),
			want:   MaxToolCallsReached{Limit: 1, Count: 2}, at: 3, evidence: []int{3}},
		{name: "per-tool limit", cond: pol(t, `max_tool_calls: {per_tool: {t: 1}}`),
			events: evs(call("t", `1`), call("u", `2`), call("t", `3`)),
			want:   MaxToolCallsReached{Limit: 1, Count: 2, Tool: "t"}, at: 3, evidence: []int{3}},
		{name: "max_iterations", cond: pol(t, `max_iterations: {limit: 1, pressure: 0.5}`),
			events: evs(msg("a", "1"), msg("a", "2")),
			want:   MaxIterationsReached{Limit: 1, Count: 2}, at: 2, evidence: []int{2},
			warnings: []Cause{bp(ResourceIterations, 0.5, 1, 1)}},
		{name: "budget exhausted", cond: pol(t, `token_budget: {total: 10}`),
			events: evs(msg("a", "1").used(5, 0), msg("a", "2").used(5, 0)),
			want:   BudgetExhausted{Resource: ResourceTotalTokens, Used: 10, Limit: 10}, at: 2, evidence: []int{2}},
		{name: "repeated_tool_call: the matching calls in the window", cond: pol(t, `stall: {repeats: 2, window: 3}`),
			events: evs(call("t", `1`), call("u", `1`), call("t", `1`)),
			want:   stalled(SignalRepeatedToolCall, 2), at: 3, evidence: []int{1, 3}},
		{name: "repeated_message", cond: pol(t, `stall: {repeats: 2, window: 4}`),
			events: evs(msg("a", "x"), msg("b", "x"), call("t", `1`), msg("a", " x ")),
			want:   stalled(SignalRepeatedMessage, 2), at: 4, evidence: []int{1, 4}},
		{name: "cycle: the P×K calls", cond: pol(t, `stall: {cycle: 2}`),
			events: evs(call("a", `1`), msg("m", "x"), call("b", `1`), call("a", `1`), out("a", "", ""), call("b", `1`)),
			want:   StallDetected{Signal: SignalCycle, Repeats: 2, Period: 2}, at: 6, evidence: []int{1, 3, 4, 6}},
		{name: "token_plateau: the iterations", cond: pol(t, `stall: {repeats: 3, token_tolerance: 0.1}`),
			events: evs(msg("a", "1").used(100, 0), call("t", `1`), msg("a", "2").used(101, 0), msg("a", "3"), msg("a", "4").used(102, 0)),
			want:   stalled(SignalTokenPlateau, 3), at: 5, evidence: []int{1, 3, 5}},
		{name: "completion", cond: pol(t, `text_mention: {text: DONE}`),
			events: evs(msg("a", "x"), msg("a", "DONE")),
			want:   Completed{Condition: conditionTextMention, Detail: "DONE"}, at: 2, evidence: []int{2}},
		{name: "function_call", cond: pol(t, `function_call: approve`),
			events: evs(call("approve", `1`), out("approve", "", "")),
			want:   Completed{Condition: conditionFunctionCall, Detail: "approve"}, at: 2, evidence: []int{2}},
		{name: "handoff", cond: pol(t, `handoff: user`),
			events: evs(msg("a", "x"), handoffEv("a", "user")),
			want:   HandoffRequested{Target: "user", Source: "a"}, at: 2, evidence: []int{2}},
		{name: "stop message", cond: pol(t, `stop_message: true`),
			events: evs(msg("a", "x"), stopEv("bye")),
			want:   Completed{Condition: conditionStopMessage, Detail: "bye"}, at: 2, evidence: []int{2}},
		{name: "stream error: the final error event", cond: pol(t, `max_iterations: 9`),
			events: evs(msg("a", "x"), errEv("first"), msg("a", "y"), errEv("kaput")),
			want:   Failed{Reason: FailStreamError, Err: "kaput"}, evidence: []int{4}},
		{name: "natural completion: none", cond: pol(t, `max_iterations: 9`),
			events: evs(msg("a", "x")), want: natural, evidence: []int{}},
		{name: "timeout: none", cond: pol(t, `timeout: 1s`),
			events: evs(msg("a", "x").at(0), msg("a", "y").at(time.Minute)),
			want:   Timeout{Limit: time.Second, Elapsed: time.Second}, at: 1, evidence: []int{}},
		{name: "all: the union of the children's", cond: pol(t, `all: [{stall: {repeats: 2}}, {text_mention: {text: DONE}}]`),
			events: evs(call("t", `1`), call("t", `1`), msg("a", "x"), msg("a", "DONE")),
			want: All{Causes: []Cause{stalled(SignalRepeatedToolCall, 2),
				Completed{Condition: conditionTextMention, Detail: "DONE"}}}, at: 4, evidence: []int{1, 2, 4}},
		{name: "several on one event: the reported cause's", cond: pol(t, `{max_iterations: 1, stall: {repeats: 2}}`),
			events: evs(msg("a", "x"), msg("a", "x")),
			want:   MaxIterationsReached{Limit: 1, Count: 2}, at: 2, evidence: []int{2},
			fired: []Cause{MaxIterationsReached{Limit: 1, Count: 2}, stalled(SignalRepeatedMessage, 2)}},
	})
	t.Run("invalid input: the event", func(t *testing.T) {
		res := replayEvents(t, pol(t, `max_iterations: 9`), msg("a", "x"), msg("a", "y").used(-1, 0))
		require.IsType(t, Failed{}, res.Cause)
		assert.Equal(t, FailInvalidInput, res.Cause.(Failed).Reason)
		assert.Equal(t, []int{2}, res.Evidence)
	})
	t.Run("cancellation: none", func(t *testing.T) {
		ev := NewEvaluator(pol(t, `max_iterations: 9`), time.Now())
		ev.Observe(msg("a", "x"))
		require.True(t, ev.Stop(Cancelled{Reason: CancelContext}))
		assert.Empty(t, ev.Result().Evidence)
	})
	t.Run("custom cause from Func: the firing event", func(t *testing.T) {
		c := CauseFunc("mine", func(e Event, p Totals) Cause {
			if p.Events == 2 {
				return Custom{Reason: "mine"}
			}
			return nil
		})
		res := replayEvents(t, c, msg("a", "x"), msg("a", "y"))
		assert.Equal(t, []int{2}, res.Evidence)
	})
}

func TestSignalRankMatchesSpec(t *testing.T) {
	want := []StallSignal{SignalRepeatedToolCall, SignalRepeatedResult, SignalRepeatedMessage, SignalCycle, SignalTokenPlateau}
	var causes []Cause
	for i := len(want) - 1; i >= 0; i-- {
		causes = append(causes, StallDetected{Signal: want[i]})
	}
	slices.SortStableFunc(causes, precedes)
	for i, c := range causes {
		assert.Equal(t, want[i], c.(StallDetected).Signal, "precedence %d", i)
	}
	slices.SortStableFunc(causes, func(a, b Cause) int { return -precedes(a, b) })
	slices.SortStableFunc(causes, warningOrder)
	for i, c := range causes {
		assert.Equal(t, want[i], c.(StallDetected).Signal, "warning order %d", i)
	}
}

// TestEvidenceCostsNothingPerEvent: the windows that keep the evidence's
// event indices, the open calls of same_result and the failures of the
// error streaks are allocated when the run starts or grow to their bound;
// once warm, an event allocates nothing, and a loop that never reports its
// results does not grow the run.
func TestEvidenceCostsNothingPerEvent(t *testing.T) {
	cond := pol(t, `{max_iterations: {limit: 1000000, pressure: 0.9}, token_budget: {total: 1000000000, pressure: 0.9, grace: 1},
		stall: {repeats: 3, window: 8, warn_at: 2, cycle: 3, token_tolerance: 0.0001, same_result: true},
		errors: {consecutive: 1000000, total: 1000000000, ignore_tools: [grep]}, text_mention: {text: DONE}}`)
	var evs []Event
	for i := range 30 {
		tool := []string{"edit", "bash", "grep"}[i%3]
		evs = append(evs, msg("a", "step "+string(rune('a'+i))).used(int64(100+50*(i%5)), 10),
			call(tool, `{"n":`+string(rune('0'+i%10))+`}`),
			out(tool, "output "+string(rune('a'+i)), []string{"", "exit 1"}[i%2]))
	}
	ev := NewEvaluator(cond, time.Time{})
	for i := range 3000 { // warm: every window full
		if _, stop := ev.Observe(evs[i%len(evs)]); stop {
			t.Fatalf("stopped at %d: %v", i, ev.Result().Cause)
		}
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		ev.Observe(evs[i%len(evs)])
		i++
	})
	// The failures of errors.total (a bound of 1e9) are the one window that
	// grows with the run: amortized, appends of a growing slice.
	assert.Less(t, allocs, 0.05, "allocations per event")

	// Calls never answered: the open calls stay bounded.
	open := NewEvaluator(pol(t, `stall: {repeats: 3, same_result: true}`), time.Time{})
	for i := range 10_000 {
		open.Observe(call("t", `{"n":`+string(rune('0'+i%10))+`}`))
	}
	sc := open.root.(*stallCheck)
	assert.LessOrEqual(t, len(sc.open), maxOpenCalls)
	assert.LessOrEqual(t, cap(sc.open), maxOpenCalls)
}
