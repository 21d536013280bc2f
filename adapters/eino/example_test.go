package eino_test

import (
	"context"
	"fmt"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"

	"github.com/agentstop/agentstop/adapters/eino"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// An adk agent whose model calls the same tool forever is stopped on its
// fourth tool call.
func ExampleForward() {
	// A scripted model standing in for a real one (any
	// model.ToolCallingChatModel): it calls the search tool forever (see
	// example_helpers_test.go).
	chatModel := runawayModel()
	ctx := context.Background()

	stage, _ := middleware.New("research", middleware.WithCondition(termination.ToolCallLimits{Limit: 3}))
	ctx, run := stage.Start(ctx)
	ctx = eino.Context(ctx, run) // the agent's steps wait for Forward: the stop lands before the next call

	search := fixedTool{"search"} // your tool.InvokableTool
	agent, _ := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name: "researcher", Description: "finds facts", Model: chatModel,
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: []tool.BaseTool{search}}},
	})
	runner := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent})

	events := eino.Forward(run, runner.Query(ctx, "Find the CEO of Acme."))
	for {
		if _, ok := events.Next(); !ok {
			break
		}
	}
	res := run.Wait()
	fmt.Println(res.TerminationCause, res.Cause)
	// Output: max_tool_calls agentstop: max tool calls reached (4 > limit 3)
}

// A Handler feeds the run from eino's callbacks, on the agent's own
// goroutine.
func ExampleHandler() {
	// A scripted model standing in for a real one: it answers "Paris." with
	// 12 input and 2 output tokens (see example_helpers_test.go).
	chatModel := answeringModel()
	stage, _ := middleware.New("qa")
	ctx, run := stage.Start(context.Background())
	h := eino.NewHandler(run)
	ctx = h.Context(ctx)

	agent, _ := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{Name: "qa", Description: "answers", Model: chatModel})
	events := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent}).Query(ctx, "Capital of France?")
	for {
		if _, ok := events.Next(); !ok {
			break
		}
	}
	res := h.Finish(nil)
	fmt.Println(res.TerminationCause, res.Iterations, res.Tokens.InputTokens, res.Tokens.OutputTokens)
	// Output: natural_completion 1 12 2
}
