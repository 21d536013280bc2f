package redisfleet

import (
	"testing"
	"time"

	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/termination"
)

// TestOvershootBound: runs in two processes that spend far faster than a
// reserve's round trip (events microseconds apart, interleaved) stop with
// the shared usage past the limit within the documented bound: lease size
// × processes + one event in flight per run. Before a process's usage
// past its lease was capped, each process spent into debt all the room it
// had seen at its last reserve, so the two together spent it twice.
func TestOvershootBound(t *testing.T) {
	srv := redistest.Start(t)
	a := newTestFleet(t, srv, WithLeaseFraction(0.1))
	b := newTestFleet(t, srv, WithPrefix(a.cfg.prefix), WithLeaseFraction(0.1))
	const (
		limit = 1000
		event = 100
		lease = limit / 10
	)
	budget := termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: limit}
	ev := termination.Event{Kind: termination.KindMessage, Text: "x", Usage: termination.Usage{InputTokens: event}}
	runs := []interface {
		Observe(termination.Event) (termination.Cause, bool)
	}{}
	for _, f := range []*Fleet{a, b} {
		_, r := budgetStage(t, "overshoot", f, budget).Start(t.Context())
		defer r.Finish(nil)
		runs = append(runs, r)
		if err := f.Flush(t.Context()); err != nil { // each holds its lease
			t.Fatal(err)
		}
	}
	spent := 0
	live := []bool{true, true}
	for n := 0; (live[0] || live[1]) && n < 1000; n++ {
		for i, r := range runs {
			if !live[i] {
				continue
			}
			spent += event // the event that finds the limit is spent too
			if _, stop := r.Observe(ev); stop {
				live[i] = false
			}
		}
	}
	bound := lease*2 + event*2
	if over := spent - limit; over > bound {
		t.Errorf("spent %d tokens of a %d limit: overshoot %d, bound %d", spent, limit, over, bound)
	}
	if spent < limit-lease*2 {
		t.Errorf("spent %d tokens of a %d limit: stopped before the leases were spent", spent, limit)
	}
}
