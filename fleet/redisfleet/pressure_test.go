package redisfleet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestPressureOncePerRun: crossing a shared budget's pressure threshold
// warns every sharing run in every process exactly once, however many
// events and syncs follow.
func TestPressureOncePerRun(t *testing.T) {
	a, b := twoProcesses(t)
	budget := termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 10000, Pressure: 0.5}
	var mu sync.Mutex
	warnings := map[string]int{}
	hook := func(name string) middleware.Option {
		return middleware.WithOnWarning(func(_ context.Context, _ *middleware.Run, w termination.Cause) {
			if p, ok := w.(termination.BudgetPressure); ok && p.Scope == termination.ScopeFleet {
				mu.Lock()
				warnings[name]++
				mu.Unlock()
			}
		})
	}
	sa := budgetStage(t, "pressure", a, budget, hook("a"))
	sb := budgetStage(t, "pressure", b, budget, hook("b"))
	_, r1 := sa.Start(t.Context())
	defer r1.Finish(nil)
	_, r2 := sb.Start(t.Context())
	defer r2.Finish(nil)
	ev := func(n int64) termination.Event {
		return termination.Event{Kind: termination.KindMessage, Text: "x", Usage: termination.Usage{InputTokens: n}}
	}
	r1.Observe(ev(6000)) // past 0.5 × 10000
	time.Sleep(500 * time.Millisecond)
	for range 5 {
		r1.Observe(ev(10))
		r2.Observe(ev(10)) // a warning reaches the hook with the run's next event
		_ = a.Flush(t.Context())
		_ = b.Flush(t.Context())
	}
	mu.Lock()
	defer mu.Unlock()
	if warnings["a"] != 1 || warnings["b"] != 1 {
		t.Errorf("fleet pressure warnings per run = %v, want one each", warnings)
	}
}
