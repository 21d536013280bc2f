package middleware_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestSpecProbeLiveMatchesReplay runs edge streams of the contract's §3
// (warnings of several conditions on one run, grace counting only message
// events, exemptions of final events, error streaks) through a live run and
// checks that it stops on the same event with the same cause, fired list and
// warnings as replay, and that the warning hook sees the warnings in order.
func TestSpecProbeLiveMatchesReplay(t *testing.T) {
	call := func(tool string) termination.Event {
		return termination.Event{Kind: termination.KindToolCall, Tool: tool, Args: json.RawMessage(`{"q":1}`)}
	}
	msg := func(text string) termination.Event {
		return termination.Event{Kind: termination.KindMessage, Source: "a", Text: text}
	}
	used := func(e termination.Event, in int64) termination.Event {
		e.Usage = termination.Usage{InputTokens: in}
		return e
	}
	fin := termination.Event{Kind: termination.KindFinal, Source: "a", Text: "f"}
	failed := termination.Event{Kind: termination.KindToolResult, Tool: "t", Err: "boom"}
	cases := []struct {
		name, policy string
		events       []termination.Event
	}{
		{"one stall warning over two stall conditions",
			"any:\n  - stall: {repeats: 4, warn_at: 2}\n  - stall: {repeats: 5, warn_at: 3}",
			[]termination.Event{call("a"), call("a"), call("a"), msg("m"), msg("m"), msg("m")}},
		{"pressure warnings then the stall warning on one event",
			"stall: {repeats: 4, warn_at: 2}\nmax_tool_calls: {limit: 4, pressure: 0.5}\ntoken_budget: {input: 10, pressure: 0.5}",
			[]termination.Event{call("a"), used(call("a"), 5)}},
		{"grace counts message events only",
			"token_budget: {total: 100, pressure: 0.5, grace: 2}",
			[]termination.Event{used(msg("1"), 50), call("t"), fin, msg("2"), call("t"), msg("3"), msg("4")}},
		{"a final does not fire pressure with grace 0",
			"token_budget: {total: 100, pressure: 0.5, grace: 0}",
			[]termination.Event{used(msg("1"), 10), used(fin, 40)}},
		{"failed results across a message",
			"errors: {consecutive: 2}",
			[]termination.Event{failed, msg("hm"), failed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := termination.MustParsePolicy(tc.policy)
			var mu sync.Mutex
			var hooked []termination.Cause
			stage := mustStage(t, "probe", middleware.WithPolicy(p),
				middleware.WithOnWarning(func(_ context.Context, _ *middleware.Run, c termination.Cause) {
					mu.Lock()
					defer mu.Unlock()
					hooked = append(hooked, c)
				}))
			want := replay(p.Condition(), tc.events)
			_, run := stage.Start(context.Background())
			stoppedAt := 0
			for i, ev := range tc.events {
				if _, stop := run.Observe(ev); stop {
					stoppedAt = i + 1
					break
				}
			}
			got := run.Finish(nil)
			assert.Equal(t, want.StoppedAt, stoppedAt, "stopped at")
			assert.Empty(t, sameCounts(got, want))
			mu.Lock()
			defer mu.Unlock()
			if len(want.Warnings) == 0 {
				assert.Empty(t, hooked)
			} else {
				assert.Equal(t, want.Warnings, hooked, "the warning hook sees the warnings in order")
			}
		})
	}
}

// TestSpecProbeLiveTimeoutWithoutEvents: a live stage fires its timeout from
// a timer even when no event arrives.
func TestSpecProbeLiveTimeoutWithoutEvents(t *testing.T) {
	stage := mustStage(t, "probe", middleware.WithPolicy(termination.MustParsePolicy(`timeout: 50ms`)))
	ctx, run := stage.Start(context.Background())
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the timeout did not cancel the run's context")
	}
	res := run.Finish(nil)
	to, ok := res.Cause.(termination.Timeout)
	require.True(t, ok, "cause %#v", res.Cause)
	assert.Equal(t, 50*time.Millisecond, to.Limit)
	assert.Equal(t, 50*time.Millisecond, to.Elapsed, "elapsed is the limit, as in replay")
	assert.GreaterOrEqual(t, res.Duration, 50*time.Millisecond, "the timer fired at the limit, not before")
	assert.Equal(t, 0, res.StoppedAt)
}
