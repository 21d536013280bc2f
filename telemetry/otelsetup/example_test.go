package otelsetup_test

import (
	"context"
	"fmt"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry/otelsetup"
	"github.com/agentstop/agentstop/termination"
)

// The two lines of setup, then a stage recording through them. (Without
// OTEL_* variables nothing leaves the process; WithoutGlobal keeps the
// example from installing global providers.)
func ExampleSetup() {
	ctx := context.Background()
	tel, _ := otelsetup.Setup(ctx, otelsetup.WithoutGlobal()) // SDK, Prometheus /metrics, OTLP from OTEL_*
	rec := tel.Recorder()                                     // a telemetry.Recorder on those providers
	defer tel.Shutdown(ctx)

	stage, _ := middleware.New("planner", middleware.WithParticipant(rec), middleware.WithProviderName("openai"),
		middleware.WithPolicy(termination.MustParsePolicy("max_iterations: 1")))
	_, run := stage.Start(ctx, middleware.WithAgentID("planner-1"), middleware.WithConversationID("conv-1"))
	run.Observe(termination.Event{Kind: termination.KindMessage, Model: "gpt-4o"})
	run.Observe(termination.Event{Kind: termination.KindMessage, Model: "gpt-4o"})
	res := run.Finish(nil)
	fmt.Println(res.Tag(), res.Outcome, tel.TracesExported)
	// Output: max_iterations failed false
}
