package termination

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The rules added to the contract on 2026-11-28 (§3): idle, stall.any_args,
// stall.ignore_tools, and the policy errors for a per_tool limit above the
// overall one and an errors: with ignore_tools alone.

func idleOf(d time.Duration) Timeout { return Timeout{Limit: d, Elapsed: d, Idle: true} }

func TestRuleIdle(t *testing.T) {
	m := time.Minute
	runCondCases(t, []condCase{
		{name: "gaps under the limit never fire", cond: pol(t, `idle: 1m`),
			events: evs(msg("a", "1").at(0), msg("a", "2").at(59*time.Second), msg("a", "3").at(118*time.Second),
				msg("a", "4").at(177*time.Second)),
			want: natural},
		{name: "fires before the event at exactly previous + D, which is not evaluated", cond: pol(t, `idle: 1m`),
			events: evs(msg("a", "1").at(0), msg("a", "2").at(30*time.Second), msg("a", "3").at(90*time.Second)),
			want:   idleOf(m), at: 2, evidence: []int{}},
		{name: "the clock restarts at every timed event", cond: pol(t, `idle: 1m`),
			events: evs(msg("a", "1").at(0), msg("a", "2").at(50*time.Second), msg("a", "3").at(100*time.Second),
				msg("a", "4").at(161*time.Second)),
			want: idleOf(m), at: 3},
		{name: "the late event's usage does not count", cond: pol(t, `{idle: 1m, token_budget: {total: 10}}`),
			events: evs(msg("a", "1").at(0), msg("a", "2").at(5*m).used(50, 0)),
			want:   idleOf(m), at: 1},
		{name: "events without time neither fire nor restart it", cond: pol(t, `idle: 1m`),
			events: evs(msg("a", "1").at(0), msg("a", "2"), msg("a", "3"), msg("a", "4").at(61*time.Second)),
			want:   idleOf(m), at: 3},
		{name: "a log without time never fires it", cond: pol(t, `idle: 1ns`),
			events: evs(msg("a", "1"), msg("a", "2")), want: natural},
		{name: "the first timed event starts the clock", cond: pol(t, `idle: 1m`),
			events: evs(input("go"), msg("a", "1").at(time.Hour), msg("a", "2").at(time.Hour+59*time.Second)),
			want:   natural},
		{name: "timeout due first fires first", cond: pol(t, `{timeout: 2m, idle: 70s}`),
			// timeout due at 2m, idle at 1m+70s = 2m10s: both before the event at 3m.
			events: evs(msg("a", "1").at(0), msg("a", "2").at(m), msg("a", "3").at(3*m)),
			want:   Timeout{Limit: 2 * m, Elapsed: 2 * m}, at: 2},
		{name: "idle due first fires first", cond: pol(t, `{timeout: 2m, idle: 1m}`),
			// idle due at 30s+1m = 1m30s, timeout at 2m.
			events: evs(msg("a", "1").at(0), msg("a", "2").at(30*time.Second), msg("a", "3").at(3*m)),
			want:   idleOf(m), at: 2},
		{name: "timeout on a tie", cond: pol(t, `{idle: 90s, timeout: 2m}`),
			// both due at 2m: 30s + 90s.
			events: evs(msg("a", "1").at(0), msg("a", "2").at(30*time.Second), msg("a", "3").at(3*m)),
			want:   Timeout{Limit: 2 * m, Elapsed: 2 * m}, at: 2},
		{name: "two idle limits: the shorter fires", cond: pol(t, `any: [{idle: 5m}, {idle: 1m}]`),
			events: evs(msg("a", "1").at(0), msg("a", "2").at(10*m)),
			want:   idleOf(m), at: 1},
		{name: "an idle limit latched in all: before the late event, which then fires the rest",
			cond:   pol(t, `all: [{idle: 1m}, {text_mention: {text: DONE}}]`),
			events: evs(msg("a", "1").at(0), msg("a", "DONE").at(5*m)),
			want:   All{Causes: []Cause{idleOf(m), Completed{Condition: conditionTextMention, Detail: "DONE"}}},
			at:     2, evidence: []int{2}},
		{name: "a final gets no grace: the loop went quiet before it", cond: pol(t, `idle: 1m`),
			events: evs(msg("a", "1").at(0), final("a", "done").at(2*m)),
			want:   idleOf(m), at: 1},
	})
}

func TestIdleReplayResult(t *testing.T) {
	res := replayEvents(t, pol(t, `idle: 1m`), msg("a", "1").at(0), msg("a", "2").at(30*time.Second),
		msg("a", "3").at(10*time.Minute))
	assert.Equal(t, idleOf(time.Minute), res.Cause)
	assert.Equal(t, TagTimeout, res.Tag(), "an idle stop is tagged timeout")
	assert.Equal(t, 2, res.Events)
	assert.Equal(t, 90*time.Second, res.Duration, "the run lasted until the idle deadline, from its first timed event")
	b, err := json.Marshal(res)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"cause":{"$kind":"Timeout","limit":"1m0s","elapsed":"1m0s","idle":true}`)

	plain := replayEvents(t, pol(t, `timeout: 1m`), msg("a", "1").at(0), msg("a", "2").at(2*time.Minute))
	b, err = json.Marshal(plain)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"idle"`, "idle is present only for the idle condition")
}

func TestIdleCauseJSON(t *testing.T) {
	c := idleOf(90 * time.Second)
	b, err := marshalCause(c)
	require.NoError(t, err)
	assert.JSONEq(t, `{"$kind":"Timeout","limit":"1m30s","elapsed":"1m30s","idle":true}`, string(b))
	back, err := unmarshalCause(b)
	require.NoError(t, err)
	assert.Equal(t, c, back)
	assert.Equal(t, "agentstop: idle for 1m30s (limit 1m30s)", c.Error())
	assert.Equal(t, TagTimeout, c.TagValue())
}

func TestIdleWallClock(t *testing.T) {
	t.Run("a tick past the last event + D fires, after the last event evaluated", func(t *testing.T) {
		ev := NewEvaluator(TimeLimits{Idle: time.Minute}, time.Now())
		_, stop := ev.Observe(msg("a", "1"))
		require.False(t, stop)
		at, ok := ev.NextTick()
		require.True(t, ok)
		assert.WithinDuration(t, time.Now().Add(time.Minute), at, 5*time.Second, "armed for the last event + D")
		_, stop = ev.Tick(at.Add(-time.Millisecond))
		require.False(t, stop, "not due yet")
		cause, stop := ev.Tick(at)
		require.True(t, stop)
		assert.Equal(t, idleOf(time.Minute), cause)
		res := ev.Result()
		assert.Equal(t, 1, res.StoppedAt)
		assert.Equal(t, 1, res.Events)
		assert.Empty(t, res.Evidence)
		_, ok = ev.NextTick()
		assert.False(t, ok, "a stopped run arms nothing")
	})
	t.Run("an event moves the deadline on", func(t *testing.T) {
		ev := NewEvaluator(TimeLimits{Idle: time.Minute}, time.Now())
		first, _ := ev.NextTick()
		time.Sleep(2 * time.Millisecond)
		ev.Observe(msg("a", "1"))
		second, _ := ev.NextTick()
		assert.True(t, second.After(first), "restarted at the event")
		_, stop := ev.Tick(first)
		assert.False(t, stop, "the timer armed at the start finds the run active")
	})
	t.Run("the timer starts with the run", func(t *testing.T) {
		ev := NewEvaluator(TimeLimits{Idle: time.Minute}, time.Now())
		cause, stop := ev.Tick(time.Now().Add(2 * time.Minute))
		require.True(t, stop)
		assert.Equal(t, idleOf(time.Minute), cause)
		assert.Equal(t, 0, ev.Result().StoppedAt)
	})
	t.Run("the next tick is the earlier of timeout and idle", func(t *testing.T) {
		ev := NewEvaluator(AnyOf(TimeLimits{Idle: time.Hour}, TimeLimits{Timeout: time.Minute}), time.Now())
		at, ok := ev.NextTick()
		require.True(t, ok)
		assert.WithinDuration(t, time.Now().Add(time.Minute), at, 5*time.Second)
		cause, stop := ev.Tick(at)
		require.True(t, stop)
		assert.Equal(t, time.Minute, cause.(Timeout).Limit)
		assert.False(t, cause.(Timeout).Idle)
	})
	t.Run("an event past the idle deadline is preceded by the tick", func(t *testing.T) {
		ev := NewEvaluator(TimeLimits{Idle: time.Nanosecond}, time.Now())
		time.Sleep(time.Millisecond)
		cause, stop := ev.Observe(msg("a", "1"))
		require.True(t, stop)
		assert.Equal(t, idleOf(time.Nanosecond), cause)
		assert.Equal(t, 0, ev.Result().Events)
	})
	t.Run("the events' clock ignores ticks", func(t *testing.T) {
		ev := NewEvaluator(TimeLimits{Idle: time.Minute}, time.Time{})
		ev.Observe(msg("a", "1").at(0))
		_, stop := ev.Tick(t0.Add(time.Hour))
		assert.False(t, stop)
		_, ok := ev.NextTick()
		assert.False(t, ok)
	})
}

// pollLoop is an agent stuck calling one tool with ever-varying args and
// getting the same empty answer, between calls to a polling tool that
// repeats by design.
func pollLoop(n int) []Event {
	var loop []Event
	for i := range n {
		loop = append(loop,
			call("search", `{"q":"`+string(rune('a'+i))+`"}`), out("search", "no results", ""),
			call("poll_job", `{"id":7}`), out("poll_job", "running", ""))
	}
	return loop
}

func TestRuleStallAnyArgs(t *testing.T) {
	runCondCases(t, []condCase{
		{name: "varying args, same result: caught with any_args",
			cond:   pol(t, `stall: {repeats: 3, same_result: true, any_args: true, ignore_tools: [poll_job]}`),
			events: pollLoop(4), want: StallDetected{Signal: SignalRepeatedResult, Repeats: 3}, at: 10,
			evidence: []int{2, 6, 10}},
		{name: "without any_args the varying args are progress",
			cond:   pol(t, `stall: {repeats: 3, same_result: true, ignore_tools: [poll_job]}`),
			events: pollLoop(4), want: natural},
		{name: "a different result is progress", cond: pol(t, `stall: {repeats: 3, same_result: true, any_args: true}`),
			events: evs(call("search", `{"q":"a"}`), out("search", "none", ""), call("search", `{"q":"b"}`), out("search", "one", ""),
				call("search", `{"q":"c"}`), out("search", "none", "")),
			want: natural},
		{name: "the tool still counts: another tool's same answer is not a repeat",
			cond:   pol(t, `stall: {repeats: 2, same_result: true, any_args: true}`),
			events: evs(call("search", `1`), out("search", "none", ""), call("fetch", `1`), out("fetch", "none", "")),
			want:   natural},
		{name: "in a window", cond: pol(t, `stall: {repeats: 3, window: 5, same_result: true, any_args: true}`),
			events: evs(call("s", `1`), out("s", "", ""), call("t", `1`), out("t", "x", ""), call("s", `2`), out("s", "", ""),
				call("u", `1`), out("u", "y", ""), call("s", `3`), out("s", "", "")),
			want: StallDetected{Signal: SignalRepeatedResult, Repeats: 3}, at: 10, evidence: []int{2, 6, 10}},
		{name: "warn_at warns on the repeated result", cond: pol(t, `stall: {repeats: 3, warn_at: 2, same_result: true, any_args: true}`),
			events: evs(call("s", `1`), out("s", "", ""), call("s", `2`), out("s", "", "")),
			want:   natural, warnings: []Cause{StallDetected{Signal: SignalRepeatedResult, Repeats: 2}}},
		{name: "paired by call_id whatever the args", cond: pol(t, `stall: {repeats: 2, same_result: true, any_args: true}`),
			events: evs(call("s", `1`).withID("a"), call("s", `2`).withID("b"), out("s", "z", "").withID("b"), out("s", "z", "").withID("a")),
			want:   StallDetected{Signal: SignalRepeatedResult, Repeats: 2}, at: 4},
		{name: "cycle keeps the args", cond: pol(t, `stall: {repeats: 9, same_result: true, any_args: true, cycle: 2}`),
			events: evs(call("s", `1`), call("s", `2`), call("s", `1`), call("s", `2`)),
			want:   StallDetected{Signal: SignalCycle, Repeats: 2, Period: 2}, at: 4},
	})
}

func TestRuleStallIgnoreTools(t *testing.T) {
	runCondCases(t, []condCase{
		{name: "an ignored tool's repeated calls fire nothing", cond: pol(t, `stall: {repeats: 3, ignore_tools: [poll_job]}`),
			events: repeat(5, call("poll_job", `{"id":7}`)), want: natural},
		{name: "the same loop without ignore_tools fires", cond: pol(t, `stall: {repeats: 3}`),
			events: repeat(5, call("poll_job", `{"id":7}`)),
			want:   StallDetected{Signal: SignalRepeatedToolCall, Repeats: 3}, at: 3},
		{name: "ignored calls take no place in the window", cond: pol(t, `stall: {repeats: 2, ignore_tools: [poll_job]}`),
			events: evs(call("s", `1`), call("poll_job", `{}`), call("poll_job", `{}`), call("s", `1`)),
			want:   StallDetected{Signal: SignalRepeatedToolCall, Repeats: 2}, at: 4, evidence: []int{1, 4}},
		{name: "ignored results fire no repeated_result", cond: pol(t, `stall: {repeats: 2, same_result: true, ignore_tools: [poll_job]}`),
			events: seq(repeat(2, call("poll_job", `{}`)), repeat(2, out("poll_job", "running", ""))), want: natural},
		{name: "ignored calls and results take no place in the results' window",
			cond:   pol(t, `stall: {repeats: 2, same_result: true, ignore_tools: [poll_job]}`),
			events: pollLoop(2)[:2], want: natural},
		{name: "nor in a cycle", cond: pol(t, `stall: {cycle: 2, ignore_tools: [poll_job]}`),
			events: evs(call("a", `1`), call("poll_job", `{}`), call("b", `1`), call("poll_job", `{}`), call("a", `1`), call("b", `1`)),
			want:   StallDetected{Signal: SignalCycle, Repeats: 2, Period: 2}, at: 6, evidence: []int{1, 3, 5, 6}},
		{name: "an ignored tool breaks no cycle either: without ignore_tools it does",
			cond:   pol(t, `stall: {cycle: 2}`),
			events: evs(call("a", `1`), call("poll_job", `{}`), call("b", `1`), call("poll_job", `{}`), call("a", `1`), call("b", `1`)),
			want:   natural},
		{name: "messages are still watched", cond: pol(t, `stall: {repeats: 2, ignore_tools: [poll_job]}`),
			events: evs(msg("a", "same"), msg("a", "same")),
			want:   StallDetected{Signal: SignalRepeatedMessage, Repeats: 2}, at: 2},
		{name: "the Go form", cond: StallLimits{Repeats: 2, IgnoreTools: []string{"poll_job"}},
			events: repeat(3, call("poll_job", `{}`)), want: natural},
	})
}

func TestPolicyErrorsV4(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`stall: {repeats: 3, any_args: true}`, "policy.stall.any_args: needs same_result: true"},
		{`stall: {repeats: 3, same_result: false, any_args: true}`, "policy.stall.any_args: needs same_result: true"},
		{`stall: {repeats: 3, same_result: true, any_args: yes please}`, "policy.stall.any_args: must be true or false"},
		{`stall: {repeats: 3, ignore_tools: []}`, "policy.stall.ignore_tools: must not be empty"},
		{`stall: {repeats: 3, ignore_tools: [""]}`, "policy.stall.ignore_tools[0]: must not be empty"},
		{`stall: {repeats: 3, ignore_tool: [x]}`, `policy.stall.ignore_tool: unknown key (did you mean "ignore_tools"?)`},
		{`max_tool_calls: {limit: 5, per_tool: {search: 6}}`, "policy.max_tool_calls.per_tool.search: must be <= limit (5), got 6"},
		{`any: [{max_tool_calls: {limit: 1, per_tool: {"web.fetch": 2}}}]`, `policy.any[0].max_tool_calls.per_tool."web.fetch": must be <= limit (1), got 2`},
		{`errors: {ignore_tools: [grep]}`, "policy.errors: needs consecutive or total"},
		{`idle: 0s`, "policy.idle: must be > 0, got 0s"},
		{`idle: -1m`, "policy.idle: must be > 0"},
		{`idle: 90`, `policy.idle: must be a Go duration string such as "2m"`},
		{`idle: soon`, `policy.idle: must be a Go duration such as "2m" or "90s", got "soon"`},
		{`tree: {idle: 1m}`, "policy.tree.idle: unknown key"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			_, err := ParsePolicy(tc.src)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	for _, src := range []string{
		`max_tool_calls: {limit: 5, per_tool: {search: 5}}`,
		`max_tool_calls: {per_tool: {search: 500}}`,
		`idle: 90s`,
		`{timeout: 10m, idle: 90s}`,
		`stall: {repeats: 3, same_result: true, any_args: true, ignore_tools: [poll_job]}`,
		`stall: {repeats: 3, any_args: false}`,
		`stall: {cycle: 3, ignore_tools: poll_job}`,
	} {
		_, err := ParsePolicy(src)
		assert.NoError(t, err, src)
	}
	assert.EqualError(t, ToolCallLimits{Limit: 2, PerTool: map[string]int{"a": 3}}.Validate(),
		"max_tool_calls.per_tool.a: must be <= limit (2), got 3: a per-tool limit above the overall one can never fire")
	assert.EqualError(t, StallLimits{Repeats: 2, AnyArgs: true}.Validate(), "stall.any_args: needs same_result: true")
	assert.EqualError(t, TimeLimits{Idle: -time.Minute}.Validate(), "idle: must be > 0, got -1m0s")
}

func TestPolicyStringV4(t *testing.T) {
	p := MustParsePolicy(`{idle: 90s, stall: {repeats: 3, same_result: true, any_args: true, ignore_tools: [poll_job, wait]}}`)
	assert.Equal(t, "any: [{idle: 1m30s}, {stall: {repeats: 3, same_result: true, any_args: true, ignore_tools: [poll_job, wait]}}]", p.String())
	assert.Equal(t, []time.Duration{90 * time.Second}, idlesOf(p.Condition()))
	assert.Empty(t, timeoutsOf(p.Condition()), "an idle limit is no deadline of the run")
}
