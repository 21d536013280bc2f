package fleetmetrics_test

import (
	"testing"

	"go.opentelemetry.io/otel/sdk/metric"

	"github.com/agentstop/agentstop/fleet/internal/fleetmetrics"
	"github.com/agentstop/agentstop/termination"
)

// Metrics promises no allocation once an attribute value has been seen:
// pin it with a real SDK (an attribute value seen once is cached).
func TestMetricsAllocs(t *testing.T) {
	reader := metric.NewManualReader()
	mp := metric.NewMeterProvider(metric.WithReader(reader))
	defer mp.Shutdown(t.Context())
	m := fleetmetrics.New(mp)
	blocked := termination.Skipped{Reason: termination.SkipBlocked}
	m.Error(fleetmetrics.OpSettle)
	m.Pressure(termination.ResourceTotalTokens)
	m.Exhausted(termination.ResourceCost)
	m.Rejected(blocked)
	for name, f := range map[string]func(){
		"Error":     func() { m.Error(fleetmetrics.OpSettle) },
		"Pressure":  func() { m.Pressure(termination.ResourceTotalTokens) },
		"Exhausted": func() { m.Exhausted(termination.ResourceCost) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}
