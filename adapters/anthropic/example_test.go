package anthropicstop_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go"

	anthropicstop "github.com/agentstop/agentstop/adapters/anthropic"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// The SDK's tool runner, with a model that keeps calling the same tool, is
// stopped on the 4th call.
func ExampleAll() {
	// A scripted model server standing in for the real API: its model calls
	// the search tool on every turn, 50 input and 5 output tokens a turn
	// (see example_helpers_test.go). In your code: client := anthropic.NewClient().
	client, server := runawayAPI()
	defer server.Close()

	stage, _ := middleware.New("researcher",
		middleware.WithPolicy(termination.MustParsePolicy("max_tool_calls: 3")))
	ctx, run := stage.Start(context.Background())

	search := echoTool{"search"} // your anthropic.BetaTool
	runner := client.Beta.Messages.NewToolRunner(anthropicstop.Tools(run, search),
		anthropic.BetaToolRunnerParams{BetaMessageNewParams: anthropic.BetaMessageNewParams{
			Model:     anthropic.ModelClaudeSonnet4_5,
			MaxTokens: 1024,
			Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("What is agentstop?"))},
		}})
	for _, err := range anthropicstop.All(run, runner.All(ctx)) {
		if err != nil {
			break // the run ends with this stream error
		}
	}
	res := run.Wait()

	var limit termination.MaxToolCallsReached
	fmt.Println(res.Tag(), errors.As(context.Cause(ctx), &limit), limit.Count)
	// The scripted server counts the requests: none after the stop.
	fmt.Println("requests:", server.Requests(), "tokens:", res.Tokens.InputTokens, res.Tokens.OutputTokens)
	// Output:
	// max_tool_calls true 4
	// requests: 4 tokens: 200 20
}
