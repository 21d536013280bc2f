package adk_test

import (
	"github.com/agentstop/agentstop/internal/adaptertest"

	"github.com/agentstop/agentstop/adapters/adk/internal/runner"
)

// runawayRunner returns the stand-in ADK runner of Example: an agent named
// "researcher" whose model calls search on every turn, 50 input and 5
// output tokens a turn (the conformance kit's runaway script). In your code
// it is runner.New from google.golang.org/adk/runner with your agent.
func runawayRunner() *runner.Runner {
	return &runner.Runner{Agent: "researcher", Model: scripted(adaptertest.Runaway)}
}
