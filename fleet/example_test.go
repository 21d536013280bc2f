package fleet_test

import (
	"context"
	"fmt"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// An operator stops one tenant's runs and blocks the stage; a later run is
// skipped.
func ExampleLocal() {
	ctx := context.Background()
	f := fleet.NewLocal()
	policy := termination.MustParsePolicy(`
max_iterations: 25
fleet_budget: {key: "label:tenant", window: 1h, total_tokens: 2000000, pressure: 0.8}
`)
	stage, err := middleware.New("research", middleware.WithPolicy(policy), middleware.WithParticipant(fleet.Membership(f)))
	if err != nil {
		panic(err)
	}
	runCtx, run := stage.Start(ctx, middleware.WithLabels(map[string]string{"tenant": "acme"}))
	run.Observe(termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 1200, OutputTokens: 300}})

	runs, _ := f.Runs(ctx, fleet.Selector{Stage: "research"})
	fmt.Println("live runs:", len(runs), "tokens:", runs[0].InputTokens+runs[0].OutputTokens)

	rep, _ := f.Stop(ctx, fleet.StopRequest{
		Selector: fleet.Selector{Labels: map[string]string{"tenant": "acme"}},
		Reason:   "runaway tool loop", By: "oncall",
	})
	fmt.Println("stopped:", rep.Stopped)
	fmt.Println(context.Cause(runCtx))
	run.Finish(nil)

	f.Block(ctx, fleet.BlockRequest{Selector: fleet.Selector{Stage: "research"}, Reason: "incident 42", By: "oncall"})
	_, later := stage.Start(ctx, middleware.WithLabels(map[string]string{"tenant": "globex"}))
	res := later.Finish(nil)
	fmt.Println(res.TerminationCause, res.Cause.(termination.Skipped).Detail)
	// Output:
	// live runs: 1 tokens: 1500
	// stopped: 1
	// agentstop: cancelled (external): runaway tool loop (by oncall)
	// skipped incident 42 (by oncall)
}
