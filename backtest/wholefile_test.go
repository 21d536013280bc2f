package backtest

import "github.com/agentstop/agentstop/termination"

// amountsOf sums events, in order.
func amountsOf(events []termination.Event) Amounts {
	var a Amounts
	for i := range events {
		a.addEvent(&events[i])
	}
	return a
}
