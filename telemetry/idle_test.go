package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// idleStops reads agent.stage.idle.stops by stage.
func idleStops(t testing.TB, h *harness) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	c, ok := h.collect(t)["agent.stage.idle.stops"]
	if !ok {
		return out
	}
	assert.Equal(t, "{run}", c.Unit)
	sum := c.Data.(metricdata.Sum[int64])
	assert.True(t, sum.IsMonotonic)
	for _, dp := range sum.DataPoints {
		require.Equal(t, 1, dp.Attributes.Len(), "agent.stage.idle.stops attributes: %v", dp.Attributes.ToSlice())
		st, _ := dp.Attributes.Value("stage")
		out[st.AsString()] = dp.Value
	}
	return out
}

// TestIdleStopsFromCause: agent.stage.idle.stops counts the runs whose
// cause is an idle Timeout (for All, the last cause to fire), and nothing
// else; every stage's series starts at 0 with its first run.
func TestIdleStopsFromCause(t *testing.T) {
	idle := termination.Timeout{Limit: time.Minute, Elapsed: time.Minute, Idle: true}
	for _, tc := range []struct {
		name  string
		cause termination.Cause
		want  int64
	}{
		{"idle", idle, 1},
		{"total timeout", termination.Timeout{Limit: time.Minute, Elapsed: time.Minute}, 0},
		{"tree timeout", termination.Timeout{Limit: time.Minute, Elapsed: time.Minute, Scope: termination.ScopeTree}, 0},
		{"all, last idle", termination.All{Causes: []termination.Cause{termination.Completed{Condition: "text_mention"}, idle}}, 1},
		{"all, last not idle", termination.All{Causes: []termination.Cause{idle, termination.Completed{Condition: "text_mention"}}}, 0},
		{"natural completion", termination.NaturalCompletion{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			_, rr := h.rec.StartRun(context.Background(), middleware.RunInfo{Stage: "s", RunID: "r"})
			assert.Equal(t, map[string]int64{"s": 0}, idleStops(t, h), "exported at 0 from the stage's first run")
			rr.End(&termination.Result{Cause: tc.cause, Outcome: termination.OutcomeFailed})
			assert.Equal(t, map[string]int64{"s": tc.want}, idleStops(t, h))
		})
	}
}

// TestIdleStopLive: a live run that an idle limit stops is counted once,
// under its stage, and tagged timeout.
func TestIdleStopLive(t *testing.T) {
	h := newHarness(t, nil)
	stage := h.stage(t, "fixer", middleware.WithPolicy(termination.MustParsePolicy(`idle: 30ms`)))
	_, run := stage.Start(context.Background())
	run.Observe(termination.Event{Kind: termination.KindMessage, Text: "calling the model"})
	waitDone(t, run, 5*time.Second)
	res := run.Finish(nil)
	assert.Equal(t, termination.TagTimeout, res.Tag())
	assert.Equal(t, map[string]int64{"fixer": 1}, idleStops(t, h))
}
