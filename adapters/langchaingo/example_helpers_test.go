package langchaingo_test

import (
	"context"
	"errors"

	"github.com/tmc/langchaingo/callbacks"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/tools"

	"github.com/agentstop/agentstop/internal/adaptertest"
)

// runawayLLM returns the scripted model of ExampleHandler, reporting to h:
// it calls the search tool on every turn, 50 input and 5 output tokens a
// turn (the conformance kit's runaway script). In your code it is a
// provider's model with h as its callback, e.g.
// openai.New(openai.WithCallback(h)).
func runawayLLM(h callbacks.Handler) llms.Model {
	return &scriptedLLM{script: adaptertest.Runaway, CallbacksHandler: h}
}

// downTool is a tool of your own whose backend is down: it reports to no
// handler.
type downTool struct{}

func (downTool) Name() string        { return "search" }
func (downTool) Description() string { return "looks things up" }
func (downTool) Call(context.Context, string) (string, error) {
	return "", errors.New("search backend down")
}

// errorsAsText hands a tool's error to the agent as its observation, so
// that the executor goes on and the model can try again (the executor
// itself stops at a tool's error).
type errorsAsText struct{ tools.Tool }

func (t errorsAsText) Call(ctx context.Context, input string) (string, error) {
	out, err := t.Tool.Call(ctx, input)
	if err != nil {
		return "error: " + err.Error(), nil
	}
	return out, nil
}
