package redisfleet

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestCrossingsCountedOncePerProcess: runs of one shared budget that start
// and finish one after another in one process (so the process drops the
// budget between them) count the window's pressure crossing and its
// exhaustion once each in agent.fleet.budget.pressure / .exhausted, and
// only the run live at the crossing is warned.
func TestCrossingsCountedOncePerProcess(t *testing.T) {
	srv := redistest.Start(t)
	reader := sdkmetric.NewManualReader()
	f := newTestFleet(t, srv, WithLeaseFraction(0.1),
		WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	budget := termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 1000, Pressure: 0.5}
	// Keep the runs in one window: wait out the last 20 s of an hour.
	if left := time.Hour - time.Duration(time.Now().UnixNano())%time.Hour; left < 20*time.Second {
		time.Sleep(left + time.Second)
	}
	var mu sync.Mutex
	warned := map[int]int{}
	run := 0
	stage, err := middleware.New("recount", middleware.WithParticipant(fleet.Membership(f)), middleware.WithFleetBudget(budget),
		middleware.WithOnWarning(func(_ context.Context, _ *middleware.Run, w termination.Cause) {
			if p, ok := w.(termination.BudgetPressure); ok && p.Scope == termination.ScopeFleet {
				mu.Lock()
				warned[run]++
				mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	ev := termination.Event{Kind: termination.KindMessage, Text: "x", Usage: termination.Usage{InputTokens: 150}}
	nothing := termination.Event{Kind: termination.KindMessage, Text: "x"}
	var exhausted, skipped bool
	dropped := 0
	for i := range 8 {
		mu.Lock()
		run = i
		mu.Unlock()
		_, r := stage.Start(t.Context())
		_ = f.Flush(t.Context()) // the run's first reserve
		r.Observe(ev)
		r.Observe(ev)
		_ = f.Flush(t.Context())
		r.Observe(nothing) // a warning found by the sync loop reaches the hook here
		res := r.Finish(nil)
		_ = f.Flush(t.Context()) // returns the lease and drops the budget
		f.mu.Lock()
		if len(f.budgets) == 0 {
			dropped++
		}
		f.mu.Unlock()
		switch c := res.Cause.(type) {
		case termination.BudgetExhausted:
			exhausted = true
		case termination.Skipped:
			if c.Reason != termination.SkipFleetBudgetExhausted {
				t.Fatalf("run %d: %v, want skipped as fleet_budget_exhausted", i, c)
			}
			skipped = true
		}
		if skipped {
			break
		}
	}
	if !exhausted || !skipped {
		t.Fatalf("exhausted %v, skipped afterwards %v: want both", exhausted, skipped)
	}
	if dropped < 2 {
		t.Fatalf("the process dropped the idle budget %d times between runs, want at least 2", dropped)
	}
	pressure, exhaustions := crossings(t, reader)
	if pressure != 1 || exhaustions != 1 {
		t.Errorf("agent.fleet.budget.pressure = %d, .exhausted = %d in one window, want 1 and 1", pressure, exhaustions)
	}
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, n := range warned {
		total += n
	}
	if total != 1 {
		t.Errorf("fleet pressure warnings per run = %v, want one in all (the run live at the crossing)", warned)
	}
}

func crossings(t *testing.T, r *sdkmetric.ManualReader) (pressure, exhausted int64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, p := range sum.DataPoints {
				switch m.Name {
				case "agent.fleet.budget.pressure":
					pressure += p.Value
				case "agent.fleet.budget.exhausted":
					exhausted += p.Value
				}
			}
		}
	}
	return pressure, exhausted
}

// TestPressureOnceWhileUnreachable: with the server unreachable from the
// start (fail-open, no lease ever tells the window), a run past the
// pressure threshold is warned once and the crossing counted once, however
// many events follow.
func TestPressureOnceWhileUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	reader := sdkmetric.NewManualReader()
	f, err := New(context.Background(), "redis://"+addr, WithTimeout(200*time.Millisecond), WithLease(2*time.Second),
		WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = f.Close(ctx)
	})
	budget := termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 1000, Pressure: 0.5}
	var mu sync.Mutex
	warnings := 0
	stage, err := middleware.New("unreachable", middleware.WithParticipant(fleet.Membership(f)), middleware.WithFleetBudget(budget),
		middleware.WithOnWarning(func(_ context.Context, _ *middleware.Run, w termination.Cause) {
			if p, ok := w.(termination.BudgetPressure); ok && p.Scope == termination.ScopeFleet {
				mu.Lock()
				warnings++
				mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	_, r := stage.Start(t.Context())
	for range 10 {
		r.Observe(termination.Event{Kind: termination.KindMessage, Text: "x", Usage: termination.Usage{InputTokens: 300}})
	}
	res := r.Finish(nil)
	if res.Cause != nil {
		if _, ok := res.Cause.(termination.BudgetExhausted); ok {
			t.Fatalf("fail-open run stopped by the unreachable fleet's budget: %v", res.Cause)
		}
	}
	pressure, _ := crossings(t, reader)
	mu.Lock()
	defer mu.Unlock()
	if warnings != 1 || pressure != 1 {
		t.Errorf("fleet pressure warnings = %d, agent.fleet.budget.pressure = %d, want 1 and 1", warnings, pressure)
	}
}

// TestIdleBudgetForgottenAfterWindow: what a process remembers of a budget
// it dropped lasts until the budget's window ends, so it cannot grow
// without bound.
func TestIdleBudgetForgottenAfterWindow(t *testing.T) {
	srv := redistest.Start(t)
	f := newTestFleet(t, srv)
	budget := termination.FleetBudget{Key: "stage", Window: time.Second, TotalTokens: 1000, Pressure: 0.5}
	stage, err := middleware.New("forget", middleware.WithParticipant(fleet.Membership(f)), middleware.WithFleetBudget(budget))
	if err != nil {
		t.Fatal(err)
	}
	idle := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.idle)
	}
	// A window of 1 s may end between the run's start and its drop: try a
	// few times to see the budget remembered.
	seen := false
	for range 5 {
		_, r := stage.Start(t.Context())
		_ = f.Flush(t.Context())
		r.Observe(termination.Event{Kind: termination.KindMessage, Text: "x", Usage: termination.Usage{InputTokens: 600}})
		r.Finish(nil)
		_ = f.Flush(t.Context())
		if idle() == 1 {
			seen = true
			break
		}
	}
	if !seen {
		t.Fatal("the dropped budget was not remembered")
	}
	deadline := time.Now().Add(5 * time.Second)
	for idle() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d dropped budgets still remembered 5 s after their 1 s window", idle())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
