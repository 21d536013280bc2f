package middleware

import "github.com/agentstop/agentstop/termination"

// ObserveEach evaluates the events that decode turns item into, in order,
// until the run stops, and returns the cause and true when the run has
// stopped: on one of these events or earlier (the run's context is then
// already cancelled with the cause). Events decode emits after the stop are
// not evaluated. An event with Kind 0 is skipped, as with ForwardEach.
//
// It is the observe step of callback-style adapters (a framework calls back
// with a model response; the adapter reports its events and tells the loop
// whether to go on), the same step ForwardEach takes per item. A nil run
// or decode function reports nothing and returns false. Like Observe it
// takes no stream: it may report events beside a consumer path (doc.go,
// "One run, one way in").
func ObserveEach[T any](run *Run, item T, decode func(item T, emit func(termination.Event))) (termination.Cause, bool) {
	if run == nil || decode == nil {
		return nil, false
	}
	var (
		cause termination.Cause
		stop  bool
	)
	decode(item, func(ev termination.Event) {
		if !stop && ev.Kind != 0 {
			cause, stop = run.Observe(ev)
		}
	})
	if !stop {
		cause, stop = run.Cause()
	}
	return cause, stop
}

// ObserveError reports an error that the loop survives (a failed request
// it retries, a tool error it hands back to the model) as an error event,
// so that the errors condition counts it, and returns the cause and true
// when the loop must stop. An error that ends the loop goes to Run.Finish
// instead. A nil err reports nothing and returns the run's cause, if it has
// stopped.
// A nil *Run reports nothing.
func (r *Run) ObserveError(err error) (termination.Cause, bool) {
	if r == nil {
		return nil, false
	}
	if err == nil {
		return r.Cause()
	}
	return r.Observe(termination.Event{Kind: termination.KindError, Err: err.Error()})
}
