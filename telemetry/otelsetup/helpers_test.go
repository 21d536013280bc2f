package otelsetup_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentstop/agentstop/internal/testutil"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry"
	"github.com/agentstop/agentstop/telemetry/otelsetup"
	"github.com/agentstop/agentstop/termination"
)

// TestDefaultCardinalityLimit: the default SDK limit is the figure
// WithCardinalityLimit's doc states, and still every (stage,
// termination_cause, outcome) a default Recorder can produce.
func TestDefaultCardinalityLimit(t *testing.T) {
	assert.Equal(t, 27135, otelsetup.DefaultCardinalityLimit, "WithCardinalityLimit's doc states 27135")
	assert.Equal(t, (telemetry.DefaultStageLimit+1)*(len(termination.TagValues())+telemetry.MaxCustomTags)*3,
		otelsetup.DefaultCardinalityLimit, "a built-in tag was added: update the limit and its doc")
}

// TestSetupCardinalityLimit: Setup's SDK limit caps the series per
// instrument even when the stage limit would allow more.
func TestSetupCardinalityLimit(t *testing.T) {
	reader := metric.NewManualReader()
	tel, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal(), otelsetup.WithCardinalityLimit(10),
		otelsetup.WithMetricReader(reader), otelsetup.WithSampler(sdktrace.NeverSample()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	st := func(i int) *middleware.Stage {
		s, err := middleware.New(fmt.Sprintf("s%d", i), middleware.WithParticipant(tel.Recorder()))
		require.NoError(t, err)
		return s
	}
	for i := range 50 {
		testutil.Observe(st(i))
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var n int
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				n = len(d.DataPoints)
			case metricdata.Histogram[int64]:
				n = len(d.DataPoints)
			case metricdata.Histogram[float64]:
				n = len(d.DataPoints)
			}
			assert.LessOrEqual(t, n, 10, m.Name)
		}
	}
}
