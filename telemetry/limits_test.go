package telemetry_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/agentstop/agentstop/telemetry"
)

// TestBadLimitsAreReportedAndIgnored: WithStageLimit and WithToolLimit
// below 1 go to otel.Handle, naming the option, and the defaults stand
// (a limit of 0 would record every stage and tool as "_other").
func TestBadLimitsAreReportedAndIgnored(t *testing.T) {
	errs := captureErrors(t)
	h := newHarness(t, nil, telemetry.WithStageLimit(0), telemetry.WithToolLimit(-1))
	err := errs.All()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WithStageLimit(0): must be >= 1")
	assert.Contains(t, err.Error(), "WithToolLimit(-1): must be >= 1")
	assert.Equal(t, 2, strings.Count(err.Error(), "telemetry: "), "one report per bad option")

	observe(h.stage(t, "planner"), call("search", `{}`), result("search", ""))
	m := h.collect(t)
	terms := m["agent.stage.terminations"].Data.(metricdata.Sum[int64]).DataPoints
	tools := m["gen_ai.execute_tool.duration"].Data.(metricdata.Histogram[float64]).DataPoints
	require.Len(t, terms, 1)
	require.Len(t, tools, 1)
	for _, dp := range terms {
		v, _ := dp.Attributes.Value("stage")
		assert.Equal(t, "planner", v.AsString())
	}
	for _, dp := range tools {
		v, _ := dp.Attributes.Value("gen_ai.tool.name")
		assert.Equal(t, "search", v.AsString())
	}
}
