package genkitstop_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/firebase/genkit/go/ai"

	genkitstop "github.com/agentstop/agentstop/adapters/genkit"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// genkit's tool loop with a model that keeps calling the same tool is
// stopped on the 4th call. Any genkit model plugin works the same.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A genkit instance whose scripted model "scripted/model" stands in for a
	// model plugin's: it calls the search tool on every turn, 120 input and
	// 15 output tokens a turn (see example_helpers_test.go).
	g, model := runawayGenkit(ctx)

	stage, _ := middleware.New("researcher",
		middleware.WithPolicy(termination.MustParsePolicy("max_tool_calls: 3")))
	runCtx, run := stage.Start(ctx)

	for _, err := range genkitstop.GenerateStream(runCtx, g, run,
		ai.WithModelName("scripted/model"),
		ai.WithPrompt("What is agentstop?"),
		ai.WithTools(ai.ToolName("search")),
		ai.WithMaxTurns(100),
	) {
		if err != nil {
			fmt.Println("error:", err)
		}
	}
	res := run.Wait()

	var limit termination.MaxToolCallsReached
	fmt.Println(res.Tag(), errors.As(context.Cause(runCtx), &limit), limit.Count)
	// The scripted model counts its calls: none after the stop.
	fmt.Println("model calls:", model.modelCalls(), "tokens:", res.Tokens.InputTokens, res.Tokens.OutputTokens)
	// Output:
	// max_tool_calls true 4
	// model calls: 4 tokens: 480 60
}
