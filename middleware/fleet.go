package middleware

import (
	"fmt"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/termination"
)

// fleetConfig is the stage's fleet configuration, part of config.
type fleetConfig struct {
	fleet       fleet.Fleet
	fleetBudget *termination.FleetBudget
}

// WithFleet makes every run of the stage join f when it starts (package
// fleet): the run gets an id ([Run.ID]), is visible in f's registry with
// its labels ([WithLabels]) and figures, can be stopped by an operator
// (Cancelled{reason: external, detail: "REASON (by WHO)"}), is skipped
// when a block matches it (Skipped{reason: blocked}), and shares the
// stage's fleet_budget ([WithPolicy], [WithFleetBudget]) with the other
// runs of the same key. Per event the run charges its usage to the shared
// budget in-process, without allocating and without waiting on the
// network. A fleet warning that this run's own event raised reaches
// [WithOnWarning] at once; one that another run raised is in the run's
// result at once and reaches the hook and the recorder with this run's
// next event (the recorder at the run's end if none comes). Default: no fleet; a fleet_budget is ignored. nil is ignored.
func WithFleet(f fleet.Fleet) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.fleet = f
		}
	})
}

// WithFleetBudget gives the stage a budget shared across its fleet, as the
// policy key fleet_budget does; it takes effect with [WithFleet] and is
// ignored without one. b must be valid (termination.FleetBudget.Validate).
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
// WithFleetBudget), or nil. It is enforced only when the stage has a fleet.
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
	if len(r.info.labels) == 0 {
		return nil
	}
	out := make(map[string]string, len(r.info.labels))
	for k, v := range r.info.labels {
		out[k] = v
	}
	return out
}

// runID returns a new run id. Start takes it before the recorder hears of
// the run, so that the recorder can be told it.
func (s *Stage) runID() string { return fleet.NewRunID() }

// startFleet checks the run's labels and joins the stage's fleet. It
// reports whether the run was ended at once (bad labels, or the fleet
// refused it).
func (r *Run) startFleet() bool {
	if err := termination.ValidateLabels(r.info.labels); err != nil {
		r.stopWith(termination.Failed{Reason: termination.FailInvalidInput,
			Err: fmt.Sprintf("middleware: stage %q: WithLabels: %v", r.stage.name, err)})
		return true
	}
	f := r.stage.cfg.fleet
	if f == nil {
		return false
	}
	info := fleet.RunInfo{ID: r.id, Stage: r.stage.name, Labels: r.info.labels, Started: time.Now()}
	r.mu.Lock()
	if t := r.tree; t != nil {
		info.Parent, info.Trees = t.parent, t.ids // ids: read only once set
	}
	r.mu.Unlock()
	m, cause := f.Join(r.parent, info, r.stage.cfg.fleetBudget, fleet.Hooks{Stop: r.fleetStop, Warn: r.fleetWarn, Progress: r.progress, Raise: r.Raise, Held: r.Held})
	// A member that came with a cause (Join should return none) still
	// leaves when the run ends; a typed-nil cause is no cause.
	r.member = m
	return cause != nil && r.stopWith(cause)
}

// progress returns the run's running figures: the fleet reads them when it
// lists or publishes the run (fleet.Hooks.Progress), so no event hands
// them over.
func (r *Run) progress() termination.Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.eval.Progress()
}

// fleetWarn records a warning from the fleet (another run crossed the
// shared budget's pressure threshold). It joins the result at once; the
// warning hook and the recorder get it with the run's next event, on the
// loop's goroutine, or at the run's end.
func (r *Run) fleetWarn(c termination.Cause) {
	r.mu.Lock()
	r.eval.AddWarning(c)
	r.mu.Unlock()
}

// fleetEvent charges an evaluated event to the run's fleet membership and
// acts on what the fleet says. It runs without the run's lock (the fleet
// may stop other runs from here). It reports the run's stop cause when the
// shared budget is exhausted.
func (r *Run) fleetEvent(u termination.Usage, cost float64) (termination.Cause, bool) {
	if u.IsZero() && cost == 0 {
		return nil, false
	}
	warning, stop := r.member.Spend(u, cost)
	if warning != nil {
		r.mu.Lock()
		r.eval.AddWarning(warning)
		r.mu.Unlock()
		r.deliverWarnings()
	}
	if stop == nil {
		return nil, false
	}
	r.mu.Lock()
	ok := r.eval.StopOnEvent(stop) // refuses a typed nil: no stop
	c, stopped := r.eval.Stopped()
	r.mu.Unlock()
	if ok {
		r.stopped(stop)
	}
	return c, stopped
}

// deliverWarnings hands warnings recorded since the last delivery to the
// recorder and the warning hook, in order.
func (r *Run) deliverWarnings() {
	r.mu.Lock()
	w := r.eval.WarningsSince(r.nwarn)
	r.nwarn += len(w)
	for _, c := range w {
		r.rec.Warning(c)
	}
	r.mu.Unlock()
	for _, c := range w {
		r.warn(c)
	}
}

// leaveFleet ends the run's fleet membership with its final result.
func (r *Run) leaveFleet(res *termination.Result) {
	if r.member != nil {
		r.member.Leave(res)
	}
}
