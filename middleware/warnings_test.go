package middleware_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Count pressure and stall warnings reach the warning hook, the recorder
// and the result, as they happen and in the contract's order, on both the
// Forward and the Observe paths.
func TestCountAndStallWarningsReachEveryone(t *testing.T) {
	const src = `{max_iterations: {limit: 4, pressure: 0.5}, max_tool_calls: {limit: 4, pressure: 0.5},
		stall: {repeats: 3, window: 4, warn_at: 2}}`
	call := func(args string) termination.Event {
		return termination.Event{Kind: termination.KindToolCall, Tool: "search", Args: []byte(args)}
	}
	msg := func(text string) termination.Event {
		return termination.Event{Kind: termination.KindMessage, Source: "a", Text: text}
	}
	evs := []termination.Event{
		msg("1"),           // iterations 1
		call(`{"q":1}`),    // tool calls 1
		msg("2"),           // iterations 2: pressure on iterations
		call(`{ "q": 1 }`), // tool calls 2: pressure on tool calls, then the stall warning (2 of the last 4)
		call(`{"q":2}`),
		call(`{"q":1}`), // 3 of the last 4: stall
		msg("3"),
	}
	iter := termination.BudgetPressure{Resource: termination.ResourceIterations, Threshold: 0.5, Used: 2, Limit: 4}
	calls := termination.BudgetPressure{Resource: termination.ResourceToolCalls, Threshold: 0.5, Used: 2, Limit: 4}
	warn := termination.StallDetected{Signal: termination.SignalRepeatedToolCall, Repeats: 2}
	want := []termination.Cause{iter, calls, warn}

	type hooked struct {
		at    int // events seen by the consumer when the hook ran
		cause termination.Cause
	}
	for _, path := range []string{"Forward", "Observe"} {
		t.Run(path, func(t *testing.T) {
			rec := &fakeRecorder{}
			var got []hooked
			var seen atomic.Int32
			stage := mustStage(t, "warned", policy(t, src), middleware.WithParticipant(rec),
				middleware.WithOnWarning(func(_ context.Context, _ *middleware.Run, c termination.Cause) {
					got = append(got, hooked{int(seen.Load()) + 1, c})
				}))
			ctx, run := stage.Start(context.Background())
			if path == "Forward" {
				for range middleware.Forward(run, produce(ctx, itemsOf(evs)), decodeItem) {
					seen.Add(1)
				}
			} else {
				for _, ev := range evs {
					_, stop := run.Observe(ev)
					seen.Add(1)
					if stop {
						break
					}
				}
				run.Finish(nil)
			}
			res := run.Wait()
			assert.Equal(t, termination.StallDetected{Signal: termination.SignalRepeatedToolCall, Repeats: 3}, res.Cause)
			assert.Equal(t, 6, res.StoppedAt)
			assert.Equal(t, want, res.Warnings, "the result's warnings")
			assert.Equal(t, want, rec.only(t).snapshot().warnings, "the recorder's Warning calls")
			require.Len(t, got, 3, "the hook is called for every warning, the stall warning included")
			for i, h := range got {
				assert.Equal(t, want[i], h.cause)
			}
			if path == "Observe" {
				assert.Equal(t, []int{3, 4, 4}, []int{got[0].at, got[1].at, got[2].at}, "each warning as its event is evaluated")
			}
		})
	}
}
