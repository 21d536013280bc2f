package adk_test

import (
	"context"
	"fmt"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"

	"github.com/agentstop/agentstop/adapters/adk/internal/genai"
)

// The recipe wraps an ADK runner's event sequence; a runaway agent is
// stopped on its fourth tool call.
func Example() {
	// An agent whose model calls the search tool forever, in a stand-in for
	// an ADK runner (runner.New of google.golang.org/adk; see
	// example_helpers_test.go).
	r := runawayRunner()

	stage, _ := middleware.New("research", middleware.WithCondition(termination.ToolCallLimits{Limit: 3}))
	ctx, run := stage.Start(context.Background())
	events := r.Run(ctx, "user", "session", genai.NewContentFromText("Find the CEO of Acme.", "user"))
	for range middleware.ForwardSeqEach(run, events, decodeADK) { // decodeADK: the README's recipe
	}
	res := run.Wait()
	fmt.Println(res.TerminationCause, res.ToolCalls, res.Tokens.InputTokens, res.Tokens.OutputTokens)
	// Output: max_tool_calls 4 200 20
}
