package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/termination"
)

// Raise (docs/spec.md §7, §3 hold): a run held at a limit is released,
// its limits raised, in whichever process it lives; the owning process
// confirms it, as it confirms a stop.

// RaiseRequest asks a fleet to raise one held run.
type RaiseRequest struct {
	RunID  string             // required: the held run
	Limits termination.Limits // the amounts (termination.Limits.ValidateRaise)
	By     string             // who raised it; default USER@HOST of the process
	Wait   time.Duration      // how long to wait for the confirmation; 0: 2s
}

// Validate checks the request; the error wraps ErrInvalid.
func (r RaiseRequest) Validate() error {
	if !runid.Valid(r.RunID) {
		return fmt.Errorf("%w: a raise needs a run id (32 hex digits), got %q", ErrInvalid, r.RunID)
	}
	if err := r.Limits.ValidateRaise(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if r.Wait < 0 {
		return fmt.Errorf("%w: wait must be >= 0, got %s", ErrInvalid, r.Wait)
	}
	return nil
}

// RaiseOutcome is what a raise did.
type RaiseOutcome string

// The outcomes of a raise. Only RaiseRaised changed anything.
const (
	RaiseRaised      RaiseOutcome = "raised"      // the run was held; its limits are raised and it goes on
	RaiseNotHeld     RaiseOutcome = "not_held"    // the run is live but not held (or it ended as the raise arrived), or held at a limit the raise does not name
	RaiseUnknown     RaiseOutcome = "unknown"     // no live run has that id (it never ran, or has ended)
	RaiseUnconfirmed RaiseOutcome = "unconfirmed" // its process did not confirm within the wait
)

// RaiseReport is what a raise achieved.
type RaiseReport struct {
	Outcome RaiseOutcome `json:"outcome"`
	// Held is what the run was held at, as the registry showed it before
	// the raise (nil when it did not show it held).
	Held *Held `json:"held,omitempty"`
}

// Held is what a held run waits on (RunInfo.Held): the limit's
// termination_cause, its cause's text, and since when.
type Held struct {
	Limit string    `json:"limit"` // the termination_cause of the limit, e.g. max_iterations
	Cause string    `json:"cause"` // the cause's text, e.g. "max iterations reached (26 > limit 25)"
	Since time.Time `json:"since"`
}

// SetHeld sets r.Held to what run is held at, nil when it is not held
// (or run is nil): for a fleet's registry.
func (r *RunInfo) SetHeld(run Run) {
	r.Held = nil
	if run == nil {
		return
	}
	if c, since, ok := run.Held(); ok && c != nil {
		r.Held = &Held{Limit: termination.Tag(c, nil), Cause: c.Error(), Since: since.UTC()}
	}
}

// raiseRun applies a raise to a run and says what it did: RaiseRaised, or
// RaiseNotHeld when the run is not held (or has ended, or is nil), or the
// raise misses a limit that holds it (termination.Evaluator.CheckRaise).
func raiseRun(run Run, l termination.Limits) RaiseOutcome {
	// Not held, or ended (termination.ErrNotHeld); invalid amounts were
	// refused by RaiseRequest.Validate before.
	if run == nil || run.Raise(l) != nil {
		return RaiseNotHeld
	}
	return RaiseRaised
}

// Raise implements Control. The run's process is this one: the raise is
// applied before Raise returns, so it is never unconfirmed.
func (l *Local) Raise(ctx context.Context, req RaiseRequest) (RaiseReport, error) {
	if err := req.Validate(); err != nil {
		return RaiseReport{}, err
	}
	if err := ctx.Err(); err != nil {
		return RaiseReport{}, err
	}
	ms := l.members(Selector{RunID: req.RunID})
	if len(ms) == 0 {
		return RaiseReport{Outcome: RaiseUnknown}, nil
	}
	m := ms[0]
	var info RunInfo
	info.SetHeld(m.run)
	rep := RaiseReport{Held: info.Held}
	rep.Outcome = raiseRun(m.run, req.Limits)
	return rep, nil
}
