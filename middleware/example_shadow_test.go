package middleware_test

import (
	"context"
	"fmt"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// A candidate policy tried in shadow: evaluated on every event beside the
// enforced one, it never acts; the result says what it would have done.
func ExampleWithShadowPolicy() {
	enforced := termination.MustParsePolicy(`max_tool_calls: 10`)
	candidate := termination.MustParsePolicy(`stall: {repeats: 2}`)
	stage, _ := middleware.New("researcher", middleware.WithPolicy(enforced),
		middleware.WithShadowPolicy("strict", candidate))

	_, run := stage.Start(context.Background())
	search := termination.Event{Kind: termination.KindToolCall, Tool: "search", Args: []byte(`{"q":"x"}`)}
	for range 3 {
		run.Observe(search) // the candidate would stop at the 2nd; the run goes on
	}
	res := run.Finish(nil)
	fmt.Println("enforced:", res.Cause)
	v := res.Shadow["strict"]
	fmt.Println("strict would have stopped it at event", v.StoppedAt, "with:", v.Cause)
	// Output:
	// enforced: agentstop: completed naturally
	// strict would have stopped it at event 2 with: agentstop: stall detected (repeated_tool_call, 2 repeats)
}
