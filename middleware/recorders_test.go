package middleware_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// WithParticipant given twice records every run through both
// participants, the second one's context nested in the first one's.
func TestWithParticipantTwiceFansOut(t *testing.T) {
	first, second := &fakeRecorder{}, &fakeRecorder{}
	stage, err := middleware.New("fan_out", middleware.WithParticipant(first),
		middleware.WithParticipant(second), middleware.WithCondition(termination.ToolCallLimits{Limit: 1}))
	require.NoError(t, err)
	ctx, run := stage.Start(context.Background())
	run.Observe(termination.Event{Kind: termination.KindToolCall, Tool: "a"})
	run.Observe(termination.Event{Kind: termination.KindToolCall, Tool: "b"})
	res := run.Finish(nil)
	assert.Equal(t, "max_tool_calls", res.TerminationCause)

	for name, rec := range map[string]*fakeRecorder{"first": first, "second": second} {
		r := rec.only(t)
		r.mu.Lock()
		assert.Equal(t, []string{"event:tool_call", "event:tool_call", "end"}, r.calls, name)
		assert.Empty(t, r.misuse, name)
		r.mu.Unlock()
	}
	// The run's context carries the last recorder's value, whose parent
	// carries the first's.
	assert.Same(t, second.only(t), ctx.Value(ctxKey{}))
}
