package account

import (
	"testing"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// BenchmarkAccountSpendAt: fleet.Local's per-event charge of a shared
// budget (no threshold crossed).
func BenchmarkAccountSpendAt(b *testing.B) {
	spec := termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 1 << 50, Cost: 1e12, Pressure: 0.9}
	now := time.Now()
	a := New("stage", "s", spec, WindowStart(now, time.Hour), nil, nil)
	m, _ := a.Join(Hooks{})
	b.ReportAllocs()
	for range b.N {
		m.SpendAt(now, termination.Usage{InputTokens: 100, OutputTokens: 20}, 0.001)
	}
}

// BenchmarkAccountCharge: redisfleet's per-event charge, from a lease.
func BenchmarkAccountCharge(b *testing.B) {
	spec := termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 1 << 50, Cost: 1e12, Pressure: 0.9}
	now := time.Now()
	a := New("stage", "s", spec, WindowStart(now, time.Hour), nil, &Store{Fraction: 0.01, Reachable: func() bool { return true }})
	m := a.Add(Hooks{})
	a.Answer(WindowStart(now, time.Hour), Amounts{1 << 60, 0, 0, 1e15}, Amounts{}, true, 1)
	b.ReportAllocs()
	for range b.N {
		m.Charge(termination.Usage{InputTokens: 100, OutputTokens: 20}, 0.001)
	}
}

// TestSpendDoesNotAllocate: charging a spend that crosses no threshold
// allocates nothing, with or without a store.
func TestSpendDoesNotAllocate(t *testing.T) {
	spec := termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 1 << 50, Cost: 1e12, Pressure: 0.9}
	now := time.Now()
	exact := New("stage", "s", spec, WindowStart(now, time.Hour), nil, nil)
	m, _ := exact.Join(Hooks{})
	leased := New("stage", "s", spec, WindowStart(now, time.Hour), nil, &Store{Fraction: 0.01})
	lm := leased.Add(Hooks{})
	leased.Answer(WindowStart(now, time.Hour), Amounts{1 << 60, 0, 0, 1e15}, Amounts{}, true, 1)
	u := termination.Usage{InputTokens: 100, OutputTokens: 20}
	if n := testing.AllocsPerRun(100, func() { m.SpendAt(now, u, 0.001) }); n != 0 {
		t.Errorf("SpendAt allocates %g times per spend", n)
	}
	if n := testing.AllocsPerRun(100, func() { lm.Charge(u, 0.001) }); n != 0 {
		t.Errorf("Charge allocates %g times per spend", n)
	}
}
