package replay

import (
	"time"

	"github.com/agentstop/agentstop/termination"
)

// Events evaluates c over events already decoded, with the events' times
// as the clock, as [Log] evaluates the same events read from a log: it
// stops at the first cause and returns the same Result. Programs that
// evaluate many conditions over one log (the backtest command) decode it
// once and call Events for each condition. c must be valid
// ([termination.Condition.Validate]); an invalid one evaluates as written.
func Events(c termination.Condition, events []termination.Event) termination.Result {
	ev := termination.NewEvaluator(c, time.Time{})
	for i := range events {
		if _, stopped := ev.Observe(events[i]); stopped {
			break
		}
	}
	return ev.Result()
}
