package middleware_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestLiveTimeoutStopsAfterTheLastEvent: the timer's timeout stops the run
// after the last event evaluated, as replay does (§3): StoppedAt is that
// event, elapsed the limit (as in replay), no evidence; an event that comes after
// is not evaluated.
func TestLiveTimeoutStopsAfterTheLastEvent(t *testing.T) {
	// Long enough that both events are evaluated before the timer fires on
	// a loaded machine under the race detector.
	stage := mustStage(t, "timer", middleware.WithCondition(termination.TimeLimits{Timeout: 300 * time.Millisecond}))
	_, run := stage.Start(context.Background())
	for range 2 {
		_, stop := run.Observe(termination.Event{Kind: termination.KindMessage, Text: "thinking"})
		require.False(t, stop)
	}
	select {
	case <-run.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the timeout timer did not stop the run")
	}
	_, stop := run.Observe(termination.Event{Kind: termination.KindMessage, Text: "late"})
	require.True(t, stop)
	res := run.Finish(nil)
	to, ok := res.Cause.(termination.Timeout)
	require.True(t, ok, "cause %v", res.Cause)
	assert.Equal(t, termination.Timeout{Limit: 300 * time.Millisecond, Elapsed: 300 * time.Millisecond}, to, "elapsed is the limit, as in replay")
	assert.GreaterOrEqual(t, res.Duration, 300*time.Millisecond, "the duration is the time measured")
	assert.Equal(t, 2, res.StoppedAt, "the last event evaluated")
	assert.Equal(t, 2, res.Events)
	assert.Empty(t, res.Evidence)
}
