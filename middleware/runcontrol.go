package middleware

import (
	"errors"
	"fmt"

	"github.com/agentstop/agentstop/internal/label"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/termination"
)

// fleetConfig is the stage's fleet budget, part of config: a policy's
// fleet_budget, enforced by the participant that makes the stage's runs
// members of a fleet (package fleet's Membership reads Stage.FleetBudget).
type fleetConfig struct {
	fleetBudget *termination.FleetBudget
}

// Fleet is a fleet of runs as [WithFleet] takes it (§7): package fleet's
// Local, fleet/redisfleet's Fleet, any fleet.Fleet. It takes part in runs
// through the seam, as the Participant it gives (package fleet's
// Membership), so that this package imports no fleet package.
type Fleet interface {
	Participant() Participant
}

// WithFleet makes every run of the stage a member of f (§7): listed in
// f's registry, stopped and raised by an operator, skipped when a block
// matches it, sharing the stage's fleet budget ([WithFleetBudget], a
// policy's fleet_budget) and its tree limits with the runs of other
// processes. It is WithParticipant(f.Participant()); a nil f is an error.
func WithFleet(f Fleet) Option {
	if isNil(f) {
		return optionFunc(func(c *config) {
			c.errs = append(c.errs, errors.New("WithFleet: nil fleet (to use none, leave WithFleet out)"))
		})
	}
	return WithParticipant(f.Participant())
}

// WithFleetBudget gives the stage a budget shared across its fleet, as the
// policy key fleet_budget does; it takes effect with a fleet's participant
// (package fleet's Membership) and is ignored without one. b must be valid (termination.FleetBudget.Validate).
// A stage has at most one fleet budget, whether from here or from a policy.
// Default: none.
func WithFleetBudget(b termination.FleetBudget) Option {
	return optionFunc(func(c *config) {
		if err := b.Validate(); err != nil {
			c.errs = append(c.errs, fmt.Errorf("WithFleetBudget: %w", err))
			return
		}
		c.setFleetBudget(&b, "WithFleetBudget")
	})
}

// setFleetBudget records the stage's fleet budget, rejecting a second one.
func (c *config) setFleetBudget(b *termination.FleetBudget, from string) {
	if b == nil {
		return
	}
	if c.fleetBudget != nil {
		c.errs = append(c.errs, fmt.Errorf("%s: the stage already has a fleet_budget (%s); a stage shares at most one", from, c.fleetBudget))
		return
	}
	c.fleetBudget = b
}

// FleetBudget returns the stage's fleet budget (from a policy or
// WithFleetBudget), or nil. It is enforced only when a fleet takes part in
// the stage's runs (package fleet's Membership).
func (s *Stage) FleetBudget() *termination.FleetBudget {
	if s.cfg.fleetBudget == nil {
		return nil
	}
	b := *s.cfg.fleetBudget
	return &b
}

// ID returns the run's id: 32 hex digits, 128 random bits. Every run has
// one, with or without a fleet, so that parents, results, event logs and
// traces can name it.
func (r *Run) ID() string { return r.id }

// Labels returns a copy of the labels the run was started with.
func (r *Run) Labels() map[string]string {
	labels := r.from().info.labels
	if len(labels) == 0 {
		return nil
	}
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		out[k] = v
	}
	return out
}

// runID returns a new run id. Start takes it before the participants hear
// of the run, so that they can be told it.
func (s *Stage) runID() string { return runid.New() }

// begin checks the run's labels and starts its parts (a fleet registers
// the run). It reports whether the run was ended at once (bad labels, or
// a participant refused it).
func (r *Run) begin() bool {
	if err := label.ValidateLabels(r.from().info.labels); err != nil {
		r.stopWith(termination.Failed{Reason: termination.FailInvalidInput,
			Err: fmt.Sprintf("middleware: stage %q: WithLabels: %v", r.stage.name, err)})
		return true
	}
	err := r.parts.start()
	if err == nil {
		return false
	}
	var c termination.Cause
	if !errors.As(err, &c) || c == nil {
		c = termination.Failed{Reason: termination.FailInvalidInput, Err: errorText(err)}
	}
	return r.stopWith(c)
}

// Progress returns what the run spent so far: a fleet reads it when it
// lists or publishes the run, so no event hands them over.
func (r *Run) Progress() termination.Totals {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.eval.Progress()
}

// Warn records a warning raised outside the run's events (another run of a
// fleet crossed a shared budget's pressure threshold). It is in the run's
// result at once; the warning hook and the participants get it with the
// run's next event, on the loop's goroutine, or as the run ends, before
// Wait returns (see WithOnWarning). A run that has stopped ignores it.
func (r *Run) Warn(c termination.Cause) {
	r.mu.Lock()
	r.eval.AddWarning(c)
	r.mu.Unlock()
}

// StopWith ends the run with c — a fleet's stop (Cancelled{reason:
// external}), its shared budget's end (BudgetExhausted{scope: fleet}), a
// remote parent's end (Cancelled{reason: parent}) — unless it has already
// stopped, and reports whether c became the run's cause. A run held at a
// limit (hold:) that is stopped from outside (Cancelled{reason: external})
// ends with its limit's cause, as Stop ends it; StopWith then reports true.
// A nil cause changes nothing.
func (r *Run) StopWith(c termination.Cause) bool {
	if c == nil {
		return false
	}
	if cc, ok := c.(termination.Cancelled); ok && cc.Reason == termination.CancelExternal && r.stopHeld() {
		return true
	}
	return r.stopWith(c)
}

// spend gives an evaluated event's usage to the run's Spenders and acts on
// what they say. It runs without the run's lock (a fleet may stop other
// runs from here). It reports the run's stop cause when a Spender ended
// it (a shared budget is exhausted).
func (r *Run) spend(u termination.Usage, cost float64) (termination.Cause, bool) {
	if u.IsZero() && cost == 0 {
		return nil, false
	}
	var stop termination.Cause
	for _, s := range r.parts.spenders {
		warning, st := s.Spend(u, cost)
		if warning != nil {
			r.Warn(warning)
			r.deliverWarnings()
		}
		if st != nil && stop == nil {
			stop = st
		}
	}
	if stop == nil {
		return nil, false
	}
	r.mu.Lock()
	ok := r.eval.StopOnEvent(stop) // refuses a typed nil: no stop
	if ok {
		r.decidedLocked()
	}
	c, stopped := r.eval.Stopped()
	r.mu.Unlock()
	if ok {
		r.stopped(stop)
	}
	return c, stopped
}

// deliverWarnings hands warnings recorded since the last delivery to the
// participants and the warning hook, in order.
func (r *Run) deliverWarnings() {
	r.mu.Lock()
	w := r.eval.WarningsSince(int(r.nwarn))
	r.nwarn += int32(len(w))
	for _, c := range w {
		r.parts.warning(c)
	}
	r.mu.Unlock()
	for _, c := range w {
		r.warn(c)
	}
}
