package openaistop_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	openaistop "github.com/agentstop/agentstop/adapters/openai"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// A hand-written Responses API tool loop whose model keeps calling the same
// tool is stopped on the 4th call.
func ExampleObserveResponse() {
	// A scripted model server standing in for the real API: its model calls
	// the search tool on every turn, 50 input and 5 output tokens a turn
	// (see example_helpers_test.go). In your code: client := openai.NewClient().
	client, server := runawayResponsesAPI()
	defer server.Close()

	stage, _ := middleware.New("researcher",
		middleware.WithPolicy(termination.MustParsePolicy("max_tool_calls: 3")))
	ctx, run := stage.Start(context.Background())

	input := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("What is agentstop?", responses.EasyInputMessageRoleUser),
	}
loop:
	for {
		resp, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: "gpt-5-mini",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		})
		if err != nil {
			run.Finish(err)
			break loop
		}
		if _, stop := openaistop.ObserveResponse(run, resp); stop {
			break loop
		}
		calls := 0
		for _, item := range resp.Output {
			if item.Type != "function_call" {
				continue
			}
			calls++
			out := "no results" // run the tool here
			if _, stop := openaistop.ObserveResponseToolResult(run, item, out, nil); stop {
				break loop // the run's context is cancelled: no further request
			}
			result := responses.ResponseInputItemParamOfFunctionCallOutput(out)
			result.OfFunctionCallOutput.CallID = openai.String(item.CallID)
			input = append(input,
				responses.ResponseInputItemParamOfFunctionCall(item.Arguments.OfString, item.CallID, item.Name),
				result)
		}
		if calls == 0 {
			break loop // the final answer
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
