package middleware_test

import (
	"context"
	"fmt"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// A planner's tree: limits hold for its researchers too: the fourth tool
// call of the tree, whoever makes it, ends the planner and every live
// run under it.
func ExampleWithTreeLimits() {
	policy := termination.MustParsePolicy(`tree: {max_tool_calls: 3, token_budget: {total: 100000}}`)
	planner, _ := middleware.New("planner", middleware.WithPolicy(policy))
	researcher, _ := middleware.New("researcher")

	ctx, plan := planner.Start(context.Background())
	_, a := researcher.Start(ctx) // a child: ctx descends from the planner's run
	_, b := researcher.Start(ctx)
	search := termination.Event{Kind: termination.KindToolCall, Tool: "search"}
	a.Observe(search)
	a.Observe(search)
	fmt.Println("left for the tree:", b.Remaining().ToolCalls, "tool call")
	b.Observe(search)
	_, stop := b.Observe(search) // the tree's fourth call

	fmt.Println(stop, b.Parent() == plan.ID())
	fmt.Println("planner:", plan.Finish(nil).Cause)
	fmt.Println("researcher:", a.Finish(nil).Cause)
	// Output:
	// left for the tree: 1 tool call
	// true true
	// planner: agentstop: max tool calls reached (4 > limit 3, scope tree)
	// researcher: agentstop: cancelled (parent): planner ended: max_tool_calls
}
