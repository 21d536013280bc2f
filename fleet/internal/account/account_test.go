package account

import (
	"math"
	"testing"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// recorder is a member's hooks that record what they are given.
type recorder struct{ stopped, warned []termination.Cause }

func (r *recorder) hooks() Hooks {
	return Hooks{
		Stop: func(c termination.Cause) bool { r.stopped = append(r.stopped, c); return true },
		Warn: func(c termination.Cause) { r.warned = append(r.warned, c) },
	}
}

func exact(spec termination.FleetBudget) *Account {
	return New("stage", "s", spec, WindowStart(time.Now(), spec.Window), nil, nil)
}

// One spend that crosses one limit's pressure threshold and reaches
// another limit: the crossing is counted (Status, metrics), so every run
// gets its warning along with the stop, rather than a pressure no run saw.
func TestPressureAndExhaustionOnOneSpend(t *testing.T) {
	a := exact(termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 1000, InputTokens: 500, Pressure: 0.5})
	var other recorder
	if _, c := a.Join(other.hooks()); c != nil {
		t.Fatal(c)
	}
	self, _ := a.Join(Hooks{})
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
	if len(other.warned) != 1 || len(other.stopped) != 1 {
		t.Errorf("the other run got warnings %v and stops %v, want one of each", other.warned, other.stopped)
	}
}

// Spend ignores negative amounts as it ignores NaN and -Inf costs: an
// event cannot give a shared budget back (the middleware never passes an
// invalid event's usage; a fleet's other callers get the same guard).
func TestIgnoresNegativeAmounts(t *testing.T) {
	spec := termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 1000, Cost: 10}
	a := exact(spec)
	m, _ := a.Join(Hooks{})
	m.Spend(termination.Usage{InputTokens: 300, OutputTokens: 200}, 4)
	m.Spend(termination.Usage{InputTokens: -300, OutputTokens: -1000}, -4)
	if st := a.Status(); st.Used != (Amounts{500, 300, 200, 4}) {
		t.Errorf("after a negative spend: used %v; want [500 300 200 4]", st.Used)
	}
	l := New("stage", "s", spec, WindowStart(time.Now(), time.Hour), nil, &Store{Fraction: 0.1})
	lm := l.Add(Hooks{})
	l.Answer(WindowStart(time.Now(), time.Hour), Amounts{100, 0, 0, 1}, Amounts{100, 0, 0, 1}, true, 1)
	lm.Spend(termination.Usage{InputTokens: -50}, -1)
	if l.bal != (Amounts{100, 0, 0, 1}) {
		t.Errorf("a negative spend refilled the lease: %v", l.bal)
	}
}

func TestOddCosts(t *testing.T) {
	a := New("stage", "s", termination.FleetBudget{Key: "stage", Window: time.Hour, Cost: 10}, time.Unix(0, 0), nil, nil)
	m, _ := a.Join(Hooks{})
	for _, c := range []float64{math.NaN(), math.Inf(-1), 1} {
		if _, stop := m.Spend(termination.Usage{}, c); stop != nil {
			t.Fatalf("cost %g stopped the run", c)
		}
	}
	if got := a.Status().Used[3]; got != 1 {
		t.Errorf("cost = %g, want 1 (NaN and -Inf ignored)", got)
	}
	if _, stop := m.Spend(termination.Usage{}, math.Inf(1)); stop == nil {
		t.Error("an infinite cost did not exhaust the budget")
	}
}

// TestLeases: a networked fleet's account spends from its lease, asks for
// more when it runs low, settles what it spent, takes the store's word on
// crossings once per window, and starts afresh in the next window.
func TestLeases(t *testing.T) {
	spec := termination.FleetBudget{Key: "stage", Window: time.Hour, InputTokens: 1000, Pressure: 0.5}
	start := WindowStart(time.Now(), time.Hour)
	a := New("stage", "s", spec, start, nil, &Store{Fraction: 0.1})
	var other recorder
	if _, c := a.Join(other.hooks()); c != nil {
		t.Fatal(c)
	}
	self, _ := a.Join(Hooks{})
	if s := a.Settle(start, 2); s.Want != (Amounts{0, 100, 0, 0}) || !s.Start.IsZero() {
		t.Fatalf("first Settle = %+v, want a whole lease of input tokens, in no known window", s)
	}
	a.Answer(start, Amounts{0, 100, 0, 0}, Amounts{0, 100, 0, 0}, true, 2)
	if _, _, wake, _ := self.Charge(termination.Usage{InputTokens: 40}, 0); wake {
		t.Fatal("low at 60 of 100 left")
	}
	if _, _, wake, _ := self.Charge(termination.Usage{InputTokens: 20}, 0); !wake {
		t.Fatal("not low at 40 of 100 left")
	}
	s := a.Settle(start, 2)
	if s.Used != (Amounts{60, 60, 0, 0}) || s.Want[1] != 60 || s.Held[1] != 40 || !s.Start.Equal(start) {
		t.Errorf("Settle() = %+v", s)
	}
	if again := a.Settle(start, 2); again.Used != (Amounts{}) {
		t.Errorf("second Settle() = %+v", again)
	}
	// The store found the other processes' usage: 100 leased here + 420
	// elsewhere; its pressure crossing is warned once.
	a.Answer(start, Amounts{0, 60, 0, 0}, Amounts{0, 520, 0, 0}, true, 2)
	w := termination.BudgetPressure{Resource: termination.ResourceInputTokens, Threshold: 0.5, Used: 520, Limit: 1000, Scope: termination.ScopeFleet}
	a.Press(start, w)
	a.Press(start, w)
	a.Press(start.Add(-time.Hour), w)
	if len(other.warned) != 1 || other.warned[0].(termination.BudgetPressure).Used != 520 {
		t.Errorf("warnings = %v", other.warned)
	}
	x := termination.BudgetExhausted{Resource: termination.ResourceInputTokens, Used: 1000, Limit: 1000, Scope: termination.ScopeFleet}
	if !a.Exhaust(start, x) || a.Exhaust(start, x) || len(other.stopped) != 1 {
		t.Errorf("stops = %v, want one", other.stopped)
	}
	if _, stop := self.Spend(termination.Usage{InputTokens: 1}, 0); stop == nil {
		t.Error("a spend after the exhaustion did not stop")
	}
	if _, c := a.Join(Hooks{}); c == nil || c.(termination.Skipped).Reason != termination.SkipFleetBudgetExhausted {
		t.Errorf("Join after exhaustion = %v", c)
	}
	if a.Expire(start.Add(time.Hour - time.Nanosecond)) {
		t.Error("expired within the window")
	}
	if !a.Expire(start.Add(time.Hour)) {
		t.Error("not expired at the window's end")
	}
	if s := a.Settle(start.Add(time.Hour), 2); s.Want[1] != 100 || s.Held[1] != 0 || !s.Dry[1] {
		t.Errorf("Settle at the window's end = %+v, want a whole lease for the next window", s)
	}
	a.Answer(start.Add(time.Hour), Amounts{0, 100, 0, 0}, Amounts{0, 100, 0, 0}, true, 2)
	if st := a.Status(); st.Exhausted != "" || st.Used != (Amounts{0, 100, 0, 0}) || st.Pressure || !st.Start.Equal(start.Add(time.Hour)) {
		t.Errorf("in the next window: %+v", st)
	}
	if self.Leave() != 1 {
		t.Error("Leave counts")
	}
	if s := a.Settle(start.Add(time.Hour), 0); s.Release[1] != 100 || !a.Idle() {
		t.Errorf("Settle with no run = %+v, idle %v: want the lease returned", s, a.Idle())
	}
}

// TestOverdraft: past its lease a process's spends count in the view; the
// budget is exhausted when no lease is left and the view reaches the
// limit, but only by the store's word while the store is unreachable.
func TestOverdraft(t *testing.T) {
	spec := termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 1000}
	start := WindowStart(time.Now(), time.Hour)
	up := true
	var found []termination.BudgetExhausted
	a := New("stage", "s", spec, start, nil, &Store{Fraction: 0.1, Reachable: func() bool { return up },
		Exhausted: func(x termination.BudgetExhausted, _ time.Time) { found = append(found, x) }})
	m := a.Add(Hooks{})
	a.Answer(start, Amounts{100}, Amounts{950}, true, 1)
	if _, stop, _, over := m.Charge(termination.Usage{InputTokens: 100}, 0); stop != nil || over {
		t.Fatalf("spending the lease: stop %v, over %v", stop, over)
	}
	up = false
	if _, stop, _, _ := m.Charge(termination.Usage{InputTokens: 60}, 0); stop != nil {
		t.Fatalf("the unreachable store's budget stopped the run: %v", stop)
	}
	up = true
	_, stop, _, over := m.Charge(termination.Usage{InputTokens: 40}, 0)
	if x, ok := stop.(termination.BudgetExhausted); !ok || x.Used != 1050 || len(found) != 1 {
		t.Errorf("at 950 + 100 past the lease: stop %#v, found %v", stop, found)
	}
	if !over {
		t.Error("a whole lease past the grant is not over")
	}
	if c, over := a.Overdrawn(); c == nil || !over {
		t.Errorf("Overdrawn() = %v, %v", c, over)
	}
	s := a.Settle(start, 1)
	a.Unsettle(s)
	if again := a.Settle(start, 1); again.Used != s.Used || again.Debt != s.Debt {
		t.Errorf("after Unsettle, Settle = %+v, want %+v", again, s)
	}
}

// TestSpendAt: a spend is charged to the window its clock reading
// falls in. A reading at or past the window's end starts the window that
// holds it (afresh: usage, crossings and exhaustion reset), even when
// nothing else noticed the end; a reading before the current window (a
// spender that read the clock before another started the next window) is
// charged to the current one.
func TestSpendAt(t *testing.T) {
	spec := termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 100}
	start := time.Unix(0, 0).Add(1000 * time.Hour)
	a := New("stage", "s", spec, start, nil, nil)
	m, c := a.Join(Hooks{})
	if c != nil {
		t.Fatal(c)
	}
	steps := []struct {
		at       time.Duration // from start
		tokens   int64
		stopped  bool
		winStart time.Duration // the window's start after the spend
	}{
		{time.Minute, 100, true, 0},
		{time.Hour - time.Nanosecond, 1, true, 0},
		{time.Hour, 60, false, time.Hour},                     // the next window, afresh
		{time.Hour - time.Second, 30, false, time.Hour},       // read before the roll: the current window
		{3*time.Hour + time.Minute, 99, false, 3 * time.Hour}, // windows without spends are skipped
		{3*time.Hour + 2*time.Minute, 1, true, 3 * time.Hour},
	}
	for i, s := range steps {
		_, stop := m.SpendAt(start.Add(s.at), termination.Usage{InputTokens: s.tokens}, 0)
		if (stop != nil) != s.stopped {
			t.Errorf("step %d: stop = %v, want stopped %v", i, stop, s.stopped)
		}
		if ws, _ := a.Window(); !ws.Equal(start.Add(s.winStart)) {
			t.Errorf("step %d: window starts at %v, want %v", i, ws.Sub(start), s.winStart)
		}
	}
	if st := a.Status(); st.Used[1] != 100 {
		t.Errorf("the last window used %g tokens, want 100", st.Used[1])
	}
}

// TestStoreWordBeforeWindowKnown: before the store told the window, its
// word on a crossing names the window (the account's own estimate may be
// off by the clock); once told, a word on another window is ignored.
func TestStoreWordBeforeWindowKnown(t *testing.T) {
	spec := termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 1000, Pressure: 0.5}
	guess := WindowStart(time.Now(), time.Hour)
	a := New("stage", "s", spec, guess, nil, &Store{Fraction: 0.1})
	var r recorder
	self := a.Add(r.hooks())
	server := guess.Add(time.Hour)
	w := termination.BudgetPressure{Resource: termination.ResourceTotalTokens, Threshold: 0.5, Used: 600, Limit: 1000, Scope: termination.ScopeFleet}
	a.Press(server, w)
	if start, _ := a.Window(); !start.Equal(server) || len(r.warned) != 1 {
		t.Fatalf("window %v, warnings %v: want the store's window and one warning", start, r.warned)
	}
	a.Answer(server, Amounts{100}, Amounts{700}, true, 1)
	if warning, _ := self.Spend(termination.Usage{InputTokens: 300}, 0); warning != nil {
		t.Errorf("the crossing the store warned of was warned again: %v", warning)
	}
	x := termination.BudgetExhausted{Resource: termination.ResourceTotalTokens, Used: 1000, Limit: 1000, Scope: termination.ScopeFleet}
	if a.Exhaust(guess, x) || len(r.stopped) != 0 {
		t.Error("the store's word on another window stopped the runs")
	}
}
