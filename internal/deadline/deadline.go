// Package deadline reports deadlines that a run enforces itself: a
// context whose Deadline says when the run's timers will stop it (with a
// typed cause), without the context ending on its own.
package deadline

import (
	"context"
	"time"
)

// Earliest returns the earliest of ctx's deadline and each timeout (> 0)
// from now; ok is false when there is none.
func Earliest(ctx context.Context, timeouts ...time.Duration) (d time.Time, ok bool) {
	d, ok = ctx.Deadline()
	for _, t := range timeouts {
		if t > 0 && (!ok || time.Now().Add(t).Before(d)) {
			d, ok = time.Now().Add(t), true
		}
	}
	return d, ok
}

// Report returns ctx reporting d as its Deadline, without enforcing it.
func Report(ctx context.Context, d time.Time) context.Context { return reported{ctx, d} }

type reported struct {
	context.Context
	deadline time.Time
}

func (c reported) Deadline() (time.Time, bool) { return c.deadline, true }
