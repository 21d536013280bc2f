package termination

// ReplayEvents evaluates c over events already decoded, with the events'
// times as the clock, as [Replay] evaluates the same events read from a log:
// it stops at the first cause and returns the same Result. Programs that
// evaluate many conditions over one log (the backtest command) decode it
// once and call ReplayEvents for each condition.
func ReplayEvents(c Condition, events []Event) Result {
	ev := NewEvaluator(c, EventClock)
	for i := range events {
		if _, stopped := ev.Observe(events[i]); stopped {
			break
		}
	}
	return ev.Result()
}

// Conditions returns the policy's top-level conditions, one per key of a
// flat policy (and the children of a top-level any:), in the order the
// policy file lists them; the policy stops a run when any of them fires.
// Evaluated on its own, each says when that condition alone would have
// fired (the backtest command's -all). An empty policy has none.
func (p Policy) Conditions() []Condition {
	switch c := p.Condition().(type) {
	case anyOf:
		out := make([]Condition, 0, len(c))
		for _, ch := range c {
			if ch != nil {
				out = append(out, ch)
			}
		}
		return out
	default:
		return []Condition{c}
	}
}
