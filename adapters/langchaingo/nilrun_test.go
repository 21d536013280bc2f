package langchaingo_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/agentstop/agentstop/adapters/langchaingo"
)

// TestNilRun: a Handler of a nil run reports nothing, Finish included,
// as its callbacks already do, instead of panicking at the end of the run.
func TestNilRun(t *testing.T) {
	ctx := context.Background()
	h := langchaingo.NewHandler(nil)
	h.HandleLLMGenerateContentEnd(ctx, &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: "42"}}})
	h.HandleAgentAction(ctx, schema.AgentAction{Tool: "search", ToolInput: "x"})
	h.HandleToolError(ctx, errors.New("boom"))
	h.HandleAgentFinish(ctx, schema.AgentFinish{ReturnValues: map[string]any{"output": "42"}})
	if res := h.Finish(nil); res.Cause != nil || res.Iterations != 0 {
		t.Errorf("Finish of a nil run = %+v, want the zero result", res)
	}
}
