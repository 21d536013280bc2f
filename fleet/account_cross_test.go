package fleet_test

import (
	"testing"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/termination"
)

// One spend that crosses one limit's pressure threshold and reaches
// another limit: the crossing is counted (Status, metrics), so every run
// gets its warning along with the stop, rather than a pressure no run saw.
func TestAccountPressureAndExhaustionOnOneSpend(t *testing.T) {
	spec := termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 1000, InputTokens: 500, Pressure: 0.5}
	a := fleet.NewAccount(fleet.BudgetID{Key: "stage", Value: "s"}, spec, fleet.WindowStart(time.Now(), time.Hour), nil, nil)
	var warned, stopped []termination.Cause
	if _, c := a.Join(fleet.Hooks{
		Stop: func(c termination.Cause) bool { stopped = append(stopped, c); return true },
		Warn: func(c termination.Cause) { warned = append(warned, c) },
	}); c != nil {
		t.Fatal(c)
	}
	self, _ := a.Join(fleet.Hooks{})
	warning, stop := self.Spend(termination.Usage{InputTokens: 500}, 0)
	x, ok := stop.(termination.BudgetExhausted)
	if !ok || x.Resource != termination.ResourceInputTokens || x.Scope != termination.ScopeFleet {
		t.Fatalf("stop = %#v, want BudgetExhausted{input_tokens, scope: fleet}", stop)
	}
	p, ok := warning.(termination.BudgetPressure)
	if !ok || p.Resource != termination.ResourceTotalTokens || p.Used != 500 || p.Scope != termination.ScopeFleet {
		t.Errorf("warning = %#v, want BudgetPressure{total_tokens, used 500, scope: fleet}", warning)
	}
	if st := a.Status(); !st.Pressure || st.Exhausted != termination.ResourceInputTokens {
		t.Errorf("status = %+v", st)
	}
	if len(warned) != 1 || len(stopped) != 1 {
		t.Errorf("the other run got warnings %v and stops %v, want one of each", warned, stopped)
	}
}

// Spend ignores negative amounts as it ignores NaN and -Inf costs: an
// event cannot give a shared budget back (the middleware never passes an
// invalid event's usage; a fleet's other callers get the same guard).
func TestAccountIgnoresNegativeAmounts(t *testing.T) {
	spec := termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 1000, Cost: 10}
	a := fleet.NewAccount(fleet.BudgetID{Key: "stage", Value: "s"}, spec, fleet.WindowStart(time.Now(), time.Hour), nil, nil)
	m, _ := a.Join(fleet.Hooks{})
	m.Spend(termination.Usage{InputTokens: 300, OutputTokens: 200}, 4)
	m.Spend(termination.Usage{InputTokens: -300, OutputTokens: -1000}, -4)
	if st := a.Status(); st.Used != (termination.Usage{InputTokens: 300, OutputTokens: 200}) || st.Cost != 4 {
		t.Errorf("after a negative spend: used %+v, cost %g; want {300 200}, 4", st.Used, st.Cost)
	}
	a.SetLease(fleet.Amounts{InputTokens: 100, Cost: 1})
	m.Spend(termination.Usage{InputTokens: -50}, -1)
	if left, _ := a.Lease(); left != (fleet.Amounts{InputTokens: 100, Cost: 1}) {
		t.Errorf("a negative spend refilled the lease: %+v", left)
	}
}
