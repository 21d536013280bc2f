package middleware_test

import (
	"context"
	"fmt"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// A run held at its limit waits for a person's judgement: here the loop's
// third turn reaches max_iterations, the warning hook tells someone, and
// they give the run two more turns; unraised, it would end with the
// limit's cause after 15 minutes.
func ExampleRun_Raise() {
	stage, _ := middleware.New("writer",
		middleware.WithPolicy(termination.MustParsePolicy("max_iterations: 2\nhold: {timeout: 15m}")),
		middleware.WithOnWarning(func(_ context.Context, run *middleware.Run, w termination.Cause) {
			if (termination.Hold{}).Holds(w) {
				fmt.Println("held at:", w)
				// Someone decides the work is worth two more turns.
				go func() { _ = run.Raise(termination.Limits{Iterations: 2, Has: termination.LimitIterations}) }()
			}
		}))
	_, run := stage.Start(context.Background())
	for range 4 {
		run.Observe(termination.Event{Kind: termination.KindMessage}) // the 4th waits for the raise
	}
	res := run.Finish(nil)
	fmt.Println(res.Tag(), res.Events)
	// Output:
	// held at: agentstop: max iterations reached (3 > limit 2)
	// natural_completion 4
}
