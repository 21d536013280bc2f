package middleware

import (
	"context"
	"fmt"

	"github.com/agentstop/agentstop/termination"
)

// Recorder records a stage's runs. It is the seam between the middleware and
// telemetry: package telemetry implements it with OpenTelemetry; the default
// records nothing. Implementations must be safe for concurrent use.
type Recorder interface {
	// StartRun is called once per run, before any event, with what the
	// run is known by. The returned context becomes the parent of the
	// run's context (it may carry a span, so the loop's own spans nest
	// under it).
	StartRun(ctx context.Context, info RunInfo) (context.Context, RunRecorder)
}

// RunInfo is what a Recorder is told about a run when it starts. The stage
// fills it; a caller of Start can set only the agent and conversation ids
// (WithAgentID, WithConversationID).
type RunInfo struct {
	// Stage is the stage's name (New).
	Stage string
	// Provider is the GenAI provider the stage's loop talks to
	// (WithProviderName; the span's gen_ai.provider.name); "" when not
	// given.
	Provider string
	// AgentID and ConversationID are the run's ids (WithAgentID,
	// WithConversationID); "" when not given.
	AgentID        string
	ConversationID string
	// RunID identifies the run (32 hex digits, 128 random bits; every
	// run has one, with or without a fleet).
	RunID string
	// ParentRunID is the id of the run's parent (§8: the run its context
	// descends from, WithParent, or a parent Propagator extracted); ""
	// for a run without one.
	ParentRunID string
	// CustomReasons is the stage's allow-list of custom termination_cause
	// values (WithCustomReasons): the only custom values a Recorder may
	// record as themselves; any other custom reason is recorded as
	// "custom". The recorder takes the tag from the typed cause
	// (termination.Tag with this list), never from a string a caller wrote
	// into the Result. Shared by every run of the stage: read only.
	CustomReasons []string
	// Policy names the stage's enforced policy, as an end record gives it
	// (§1): "sha256:" and the hex digest of its canonical JSON
	// (termination.Policy.Hash) for a stage whose conditions are one
	// policy (WithPolicy), or "code" for a stage whose conditions are Go
	// code (WithCondition, WithTreeLimits) or several policies.
	Policy string
}

// policyHash is RunInfo.Policy for the configuration: the one policy's
// hash, "code" otherwise (the empty stage's is the empty policy's).
func (c *config) policyHash() string {
	switch {
	case c.code || len(c.policies) > 1:
		return "code"
	case len(c.policies) == 1:
		return c.policies[0]
	}
	return termination.Policy{}.Hash()
}

// Allowed reports whether tag is in the stage's allow-list: the func to
// give termination.Tag.
func (i *RunInfo) Allowed(tag string) bool {
	for _, r := range i.CustomReasons {
		if r == tag {
			return true
		}
	}
	return false
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
	// End is called once, with the final result (its Shadow holds the
	// verdicts of the stage's shadow policies, WithShadowPolicy).
	End(res *termination.Result)
}

// StopRecorder is a RunRecorder that is also told the moment its run's
// cause is decided — an event or a timer that fired, Stop, a fleet stop,
// a parent's cascade — before the run's descendants are ended and before
// the loop returns and calls Finish (End). An event log writes the run's
// end record then (package eventlog), so that in the log a run ends where
// it really ended, before the lines of its descendants' cascade. Stopped
// is called at most once per run, with the run's lock held, and never for
// a run whose cause Finish decides (the stream's end: End is the first to
// know). res is valid only during the call; its Outcome is the cause's
// default (a WithTreatAsSuccess override is applied at Finish).
type StopRecorder interface {
	Stopped(res *termination.Result)
}

// WithProviderName names the GenAI provider the stage's loop talks to
// ("openai", "anthropic", "gcp.gemini", … — the well-known values of the
// GenAI semantic conventions' gen_ai.provider.name), recorded on the run's
// span and the gen_ai.invoke_agent.duration metric. The conventions require
// it; it is left out when not given. It must be at most 64 bytes without
// spaces or control characters. Default: none.
func WithProviderName(name string) Option {
	return optionFunc(func(c *config) {
		if err := validProviderName(name); err != nil {
			c.errs = append(c.errs, fmt.Errorf("WithProviderName: %w", err))
			return
		}
		c.providerName = name
	})
}

func validProviderName(name string) error {
	if name == "" {
		return fmt.Errorf("empty name")
	}
	if len(name) > 64 {
		return fmt.Errorf("%q is longer than 64 bytes", name)
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("%q contains a space or control character", name)
		}
	}
	return nil
}

type nopRecorder struct{}

func (nopRecorder) StartRun(ctx context.Context, _ RunInfo) (context.Context, RunRecorder) {
	return ctx, nopRunRecorder{}
}

type nopRunRecorder struct{}

func (nopRunRecorder) Event(*termination.Event)  {}
func (nopRunRecorder) Warning(termination.Cause) {}
func (nopRunRecorder) Error(error)               {}
func (nopRunRecorder) End(*termination.Result)   {}
