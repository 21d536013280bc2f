package middleware

import (
	"github.com/agentstop/agentstop/internal/evalhooks"
	"github.com/agentstop/agentstop/termination"
)

// live is the Evaluator's live-run side (observing in place, timer ticks,
// the stream's own end, fleet warnings and stops), which termination keeps
// out of its exported API. The hooks are function values: calling one
// allocates nothing.
var live = evalhooks.Get[*termination.Evaluator, termination.Event, termination.Cause, termination.Condition]()
