// Package evalhooks is the seam through which package termination hands
// the live-run side of its Evaluator to package middleware without
// exporting it to users: observing an event in place, timer ticks, a
// stream's own end, warnings and stops that come from a fleet, and the
// timeouts a stage arms timers for.
//
// termination fills in a [Hooks] value in its init with [Set]; middleware
// reads it once, at its own package initialisation, with [Get]. The hooks
// are plain function values, so calling one costs an indirect call and no
// allocation. The package imports nothing of the module so that
// termination can import it; the type parameters carry termination's types
// (E = *termination.Evaluator, Ev = termination.Event, C =
// termination.Cause, Cond = termination.Condition).
package evalhooks

import "time"

// Hooks are the live-run operations of an Evaluator that only middleware
// uses. Each field's doc names the Evaluator behaviour it gives access to.
type Hooks[E, Ev, C, Cond any] struct {
	// ObserveRef is Observe without copying the event: ev is read during
	// the call only.
	ObserveRef func(e E, ev *Ev) (C, bool)
	// Tick evaluates the passing of time with no event (a live stage's
	// timeout timer); it returns like Observe.
	Tick func(e E, now time.Time) (C, bool)
	// EndStream ends the run with c as the stream's own end (nothing
	// fired) unless it has already stopped; it reports whether c became
	// the cause.
	EndStream func(e E, c C) bool
	// AddWarning records a warning from outside the event stream (a
	// fleet's pressure crossing); a stopped run ignores it.
	AddWarning func(e E, c C) bool
	// StopOnEvent ends the run with c as if it had fired on the last
	// observed event, unless it has already stopped.
	StopOnEvent func(e E, c C) bool
	// StopFired ends the run with the causes another evaluator fired (a
	// holder's tree limits; fired[0] is the cause) unless it has already
	// stopped; onEvent: on the run's own last event (StoppedAt names it).
	StopFired func(e E, fired []C, onEvent bool) bool
	// Fired returns what fired when the run stopped, without copying.
	Fired func(e E) []C
	// WarningsSince returns the warnings recorded after the first n,
	// without copying; the slice must not be modified.
	WarningsSince func(e E, n int) []C
	// Timeouts returns the distinct timeout limits of a condition,
	// ascending: a live stage arms a timer for each.
	Timeouts func(c Cond) []time.Duration
	// Idles returns the distinct idle limits of a condition, ascending:
	// a live stage with one arms its run's timer.
	Idles func(c Cond) []time.Duration
	// NextTick returns when the run's next timeout or idle limit falls
	// due, as things stand (an event moves an idle deadline on): the
	// time the run's timer is armed for; ok is false for none.
	NextTick func(e E) (at time.Time, ok bool)
}

var hooks any

// Set publishes h. termination calls it once, in its init.
func Set[E, Ev, C, Cond any](h Hooks[E, Ev, C, Cond]) { hooks = h }

// Get returns the hooks published by Set. It panics when they were not
// published or were published with other type arguments: both are
// programming errors of this module that any test of middleware reveals at
// package initialisation.
func Get[E, Ev, C, Cond any]() Hooks[E, Ev, C, Cond] {
	h, ok := hooks.(Hooks[E, Ev, C, Cond])
	if !ok {
		panic("evalhooks: termination's live-run hooks are not registered with these types")
	}
	return h
}
