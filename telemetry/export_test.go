package telemetry

import (
	"context"

	"github.com/agentstop/agentstop/middleware"
)

// StartRun starts a run's recording from its info alone, for tests that
// record runs without a stage.
func (r *Recorder) StartRun(ctx context.Context, info middleware.RunInfo) (context.Context, middleware.Part) {
	return r.startRun(ctx, info)
}

// The bucket layouts, for the tests that compare them with the contract.
var (
	DurationBuckets     = durationBuckets
	CountBuckets        = countBuckets
	AgentCallBuckets    = agentCallBuckets
	UtilizationBuckets  = utilizationBuckets
	ToolDurationBuckets = toolDurationBuckets
)
