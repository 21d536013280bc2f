package adk_test

import (
	"context"
	"fmt"

	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"

	"github.com/agentstop/agentstop/adapters/adk/internal/genai"
	"github.com/agentstop/agentstop/adapters/adk/internal/runner"
)

// The recipe wraps an ADK runner's event sequence; a runaway agent is
// stopped on its fourth tool call.
func Example() {
	r := &runner.Runner{Agent: "researcher", Model: scripted(adaptertest.Script{Repeat: true, Turns: []adaptertest.Turn{{
		ToolCalls: []adaptertest.ToolCall{{Name: "search", Args: `{"query":"Acme CEO"}`}},
		Usage:     termination.Usage{InputTokens: 50, OutputTokens: 5},
	}}})}

	stage, _ := middleware.New("research", middleware.WithCondition(termination.ToolCallLimits{Limit: 3}))
	ctx, run := stage.Start(context.Background())
	events := r.Run(ctx, "user", "session", genai.NewContentFromText("Find the CEO of Acme.", "user"))
	for range middleware.ForwardSeqEach(run, events, decodeADK) {
	}
	res := run.Wait()
	fmt.Println(res.TerminationCause, res.ToolCalls, res.Tokens.InputTokens, res.Tokens.OutputTokens)
	// Output: max_tool_calls 4 200 20
}
