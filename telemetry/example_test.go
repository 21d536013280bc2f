package telemetry_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry"
	"github.com/agentstop/agentstop/termination"
)

// A Recorder on an in-memory metric reader: the run that exceeds its
// iteration limit is counted under termination_cause="max_iterations".
func ExampleNewRecorder() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	rec := telemetry.NewRecorder(telemetry.WithMeterProvider(mp))
	stage, _ := middleware.New("planner",
		middleware.WithPolicy(termination.MustParsePolicy("max_iterations: 2")),
		middleware.WithParticipant(rec))

	_, run := stage.Start(context.Background())
	for i := range 5 {
		if _, stop := run.Observe(termination.Event{Kind: termination.KindMessage, Text: fmt.Sprint("turn ", i)}); stop {
			break
		}
	}
	res := run.Finish(nil)
	fmt.Println(res.Tag(), res.Outcome)

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "agent.stage.terminations" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				stage, _ := dp.Attributes.Value(telemetry.KeyStage)
				cause, _ := dp.Attributes.Value(telemetry.KeyTerminationCause)
				outcome, _ := dp.Attributes.Value(telemetry.KeyOutcome)
				fmt.Printf("%s{stage=%s,termination_cause=%s,outcome=%s} %d\n",
					m.Name, stage.Emit(), cause.Emit(), outcome.Emit(), dp.Value)
			}
		}
	}
	// Output:
	// max_iterations failed
	// agent.stage.terminations{stage=planner,termination_cause=max_iterations,outcome=failed} 1
}
