package middleware

import (
	"context"

	"github.com/agentstop/agentstop/termination"
)

// Recorder records a stage's runs. It is the seam between the middleware and
// telemetry: package telemetry implements it with OpenTelemetry; the default
// records nothing. Implementations must be safe for concurrent use.
type Recorder interface {
	// StartRun is called once per run, before any event. The returned
	// context becomes the parent of the run's context (it may carry a span,
	// so the loop's own spans nest under it).
	StartRun(ctx context.Context, stage string) (context.Context, RunRecorder)
}

// RunRecorder records one run. Its methods are called with the run's lock
// held, one at a time, and must not block or call back into the Run.
type RunRecorder interface {
	// Event is called for every evaluated event, on the hot path: it must
	// not allocate. ev is valid only during the call.
	Event(ev *termination.Event)
	// Warning is called for every warning (BudgetPressure, StallDetected),
	// in the order of Result.Warnings.
	Warning(c termination.Cause)
	// Error reports a failure that did not stop the loop, or that the loop
	// should know about: a panicking hook, a decode panic.
	Error(err error)
	// End is called once, with the final result.
	End(res *termination.Result)
}

type nopRecorder struct{}

func (nopRecorder) StartRun(ctx context.Context, _ string) (context.Context, RunRecorder) {
	return ctx, nopRunRecorder{}
}

type nopRunRecorder struct{}

func (nopRunRecorder) Event(*termination.Event)  {}
func (nopRunRecorder) Warning(termination.Cause) {}
func (nopRunRecorder) Error(error)               {}
func (nopRunRecorder) End(*termination.Result)   {}
