package langchaingo_test

import (
	"context"
	"fmt"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/tools"

	"github.com/agentstop/agentstop/adapters/langchaingo"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// An executor whose model calls the same tool forever is stopped on its
// fourth tool call; the executor returns with the cancelled context.
func ExampleHandler() {
	stage, _ := middleware.New("research", middleware.WithCondition(termination.ToolCallLimits{Limit: 3}))
	ctx, run := stage.Start(context.Background())
	h := langchaingo.NewHandler(run)

	// A scripted model standing in for a real one, e.g.
	// openai.New(openai.WithCallback(h)): it calls the search tool forever
	// (see example_helpers_test.go).
	llm := runawayLLM(h)
	search := fixedTool{name: "search", CallbacksHandler: h} // your tools.Tool, reporting to h
	agent := agents.NewOpenAIFunctionsAgent(llm, []tools.Tool{search}, agents.WithCallbacksHandler(h))
	executor := agents.NewExecutor(agent, agents.WithCallbacksHandler(h), agents.WithMaxIterations(100))

	_, err := chains.Run(ctx, executor, "Find the CEO of Acme.")
	res := h.Finish(err)
	fmt.Println(res.TerminationCause, res.ToolCalls, res.Tokens.InputTokens, res.Tokens.OutputTokens)
	// Output: max_tool_calls 4 200 20
}

// Your own tools report their results through Tools. Here the search
// backend is down on every call, the agent is handed the error and tries
// again, and errors.consecutive stops the run on the third failure.
func ExampleTools() {
	stage, _ := middleware.New("research", middleware.WithCondition(termination.ErrorLimits{Consecutive: 3}))
	ctx, run := stage.Start(context.Background())
	h := langchaingo.NewHandler(run)

	llm := runawayLLM(h) // a scripted model that calls search forever
	search := langchaingo.Tools(h, downTool{})[0]
	// The executor ends at a tool's error; this wrapper (yours) hands the
	// error to the model instead (see example_helpers_test.go).
	agent := agents.NewOpenAIFunctionsAgent(llm, []tools.Tool{errorsAsText{search}}, agents.WithCallbacksHandler(h))
	executor := agents.NewExecutor(agent, agents.WithCallbacksHandler(h), agents.WithMaxIterations(100))

	_, err := chains.Run(ctx, executor, "Find the CEO of Acme.")
	res := h.Finish(err)
	fmt.Println(res.TerminationCause, res.ToolCalls)
	fmt.Println(res.Cause)
	// Output:
	// failed 3
	// agentstop: failed (error_threshold): search backend down
}
