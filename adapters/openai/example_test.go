package openaistop_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"

	openaistop "github.com/agentstop/agentstop/adapters/openai"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// A hand-written tool loop whose model keeps calling the same tool is
// stopped on the 4th call.
func Example() {
	// A scripted model server standing in for the real API: its model calls
	// the search tool on every turn, 50 input and 5 output tokens a turn
	// (see example_helpers_test.go). In your code: client := openai.NewClient().
	client, server := runawayAPI()
	defer server.Close()

	stage, _ := middleware.New("researcher",
		middleware.WithPolicy(termination.MustParsePolicy("max_tool_calls: 3")))
	ctx, run := stage.Start(context.Background())

	params := openai.ChatCompletionNewParams{
		Model:    "gpt-5-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is agentstop?")},
	}
loop:
	for {
		completion, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			run.Finish(err)
			break loop
		}
		if _, stop := openaistop.Observe(run, completion); stop {
			break loop
		}
		msg := completion.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			break loop
		}
		params.Messages = append(params.Messages, msg.ToParam())
		for _, call := range msg.ToolCalls {
			out := "no results" // run the tool here
			if _, stop := openaistop.ObserveToolResult(run, call, out, nil); stop {
				break loop // the run's context is cancelled: no further request
			}
			params.Messages = append(params.Messages, openai.ToolMessage(out, call.ID))
		}
	}
	res := run.Finish(nil)

	var limit termination.MaxToolCallsReached
	fmt.Println(res.Tag(), errors.As(context.Cause(ctx), &limit), limit.Count)
	// The scripted server counts the requests: none after the stop.
	fmt.Println("requests:", server.Requests(), "tokens:", res.Tokens.InputTokens, res.Tokens.OutputTokens)
	// Output:
	// max_tool_calls true 4
	// requests: 4 tokens: 200 20
}
