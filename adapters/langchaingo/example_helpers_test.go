package langchaingo_test

import (
	"github.com/tmc/langchaingo/callbacks"
	"github.com/tmc/langchaingo/llms"

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
