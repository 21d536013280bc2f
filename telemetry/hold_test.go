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

// heldMetrics reads agent.stage.held and agent.stage.held.oldest for
// stage s (ok false: no data point).
func heldMetrics(t testing.TB, h *harness, s string) (held int64, oldest float64, ok bool) {
	t.Helper()
	m := h.collect(t)
	c, found := m["agent.stage.held"]
	if !found {
		return 0, 0, false
	}
	assert.Equal(t, "{run}", c.Unit)
	sum := c.Data.(metricdata.Sum[int64])
	assert.False(t, sum.IsMonotonic)
	for _, dp := range sum.DataPoints {
		if st, _ := dp.Attributes.Value("stage"); st.AsString() == s {
			held, ok = dp.Value, true
		}
	}
	g, found := m["agent.stage.held.oldest"]
	require.True(t, found, "agent.stage.held.oldest is not exported")
	assert.Equal(t, "s", g.Unit)
	for _, dp := range g.Data.(metricdata.Gauge[float64]).DataPoints {
		require.Equal(t, 1, dp.Attributes.Len())
		if st, _ := dp.Attributes.Value("stage"); st.AsString() == s {
			oldest = dp.Value
		}
	}
	return held, oldest, ok
}

// TestHeldRuns: a held run counts on agent.stage.held and its wait on
// agent.stage.held.oldest until it is raised; the limit is a span event
// agentstop.held and the raise agentstop.raise.
func TestHeldRuns(t *testing.T) {
	h := newHarness(t, nil)
	st := h.stage(t, "held", middleware.WithPolicy(termination.MustParsePolicy("max_tool_calls: 1\nhold: {timeout: 1m}")))
	_, a := st.Start(context.Background())
	_, b := st.Start(context.Background())
	call := termination.Event{Kind: termination.KindToolCall, Tool: "search"}
	for _, r := range []*middleware.Run{a, b} {
		r.Observe(call)
		_, stop := r.Observe(call)
		require.False(t, stop)
	}
	time.Sleep(20 * time.Millisecond)
	held, oldest, ok := heldMetrics(t, h, "held")
	require.True(t, ok)
	assert.EqualValues(t, 2, held)
	assert.GreaterOrEqual(t, oldest, 0.02)
	require.NoError(t, a.Raise(termination.Limits{ToolCalls: 3, Has: termination.LimitToolCalls}))
	held, _, _ = heldMetrics(t, h, "held")
	assert.EqualValues(t, 1, held)
	b.Stop("nobody raised it")
	a.Finish(nil)
	res := b.Finish(nil)
	assert.Equal(t, termination.TagMaxToolCalls, res.Tag())
	held, oldest, _ = heldMetrics(t, h, "held")
	assert.EqualValues(t, 0, held)
	assert.Zero(t, oldest, "no run held: the gauge shows 0")

	events := map[string]int{}
	for _, s := range h.spans.Ended() {
		for _, e := range s.Events() {
			events[e.Name]++
		}
	}
	assert.Equal(t, 2, events["agentstop.held"])
	assert.Equal(t, 1, events["agentstop.raise"])
}
