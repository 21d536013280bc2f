package termination

import "github.com/agentstop/agentstop/internal/evalhooks"

// The live-run side of the Evaluator is for package middleware only; it
// reaches it through internal/evalhooks so that users do not see it.
func init() {
	evalhooks.Set(evalhooks.Hooks[*Evaluator, Event, Cause, Condition]{
		ObserveRef:    (*Evaluator).observeRef,
		Tick:          (*Evaluator).tickAt,
		EndStream:     (*Evaluator).endStream,
		AddWarning:    (*Evaluator).addWarning,
		StopOnEvent:   (*Evaluator).stopOnEvent,
		WarningsSince: (*Evaluator).warningsSince,
		StopFired:     (*Evaluator).stopFired,
		Fired:         (*Evaluator).firedCauses,
		Timeouts:      timeoutsOf,
		Idles:         idlesOf,
		NextTick:      (*Evaluator).nextTick,
	})
}
