package fleet

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// Amounts are quantities of a shared budget's resources: tokens and cost.
type Amounts struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Cost         float64 `json:"cost"`
}

// Add returns a + b.
func (a Amounts) Add(b Amounts) Amounts {
	return Amounts{InputTokens: a.InputTokens + b.InputTokens, OutputTokens: a.OutputTokens + b.OutputTokens, Cost: a.Cost + b.Cost}
}

// Sub returns a - b.
func (a Amounts) Sub(b Amounts) Amounts {
	return Amounts{InputTokens: a.InputTokens - b.InputTokens, OutputTokens: a.OutputTokens - b.OutputTokens, Cost: a.Cost - b.Cost}
}

// IsZero reports whether a holds nothing.
func (a Amounts) IsZero() bool { return a == Amounts{} }

// Of returns the amount of resource r (total_tokens, input_tokens,
// output_tokens or cost; 0 for any other).
func (a Amounts) Of(r termination.Resource) float64 {
	switch r {
	case termination.ResourceTotalTokens:
		return float64(a.InputTokens + a.OutputTokens)
	case termination.ResourceInputTokens:
		return float64(a.InputTokens)
	case termination.ResourceOutputTokens:
		return float64(a.OutputTokens)
	case termination.ResourceCost:
		return a.Cost
	}
	return 0
}

// Account is one process's accounting of one shared budget (a [BudgetID]
// under a [termination.FleetBudget]) in its current window. [Local] keeps
// each shared budget in one Account; a networked fleet can keep one per
// budget its local runs share and feed it the store's view in the
// background (Take, Apply, SetLease, Exhaust, Roll).
//
// The Account's view of the window's usage is Shared (what the store
// reported: every process's settled usage) plus Unsettled (spent here since
// the last [Account.Take]). [Account.Spend] charges the local part and
// decides on the view, with no I/O and no allocation unless a threshold is
// crossed: when a limit is reached every member is stopped with
// BudgetExhausted{scope: fleet}; when the pressure threshold is crossed
// every member is warned with BudgetPressure{scope: fleet}. Each crossing
// happens once per window and is counted once in [Metrics].
//
// Leases. A networked fleet reserves usage from the store in leases
// ([Account.SetLease]); Spend draws the lease down and calls the low
// function given to [NewAccount] (once, until the next SetLease) when any
// leased resource falls below half of what was granted, so that the
// background can reserve more before it runs out. Spending never waits for
// a lease: the overshoot bound in the package documentation comes from
// this. An Account without a lease (Local) accounts exactly.
//
// Members and hooks are called without the Account's lock held.
type Account struct {
	id      BudgetID
	spec    termination.FleetBudget
	limits  []termination.BudgetUsage // spec's limits in resource order, built once
	metrics *Metrics
	low     func()
	end     atomic.Int64 // the window's end in Unix nanoseconds, readable without the lock

	mu        sync.Mutex
	start     time.Time // the window's start
	shared    Amounts
	local     Amounts
	lease     Amounts // what is left of the current lease
	granted   Amounts // the current lease as granted
	leased    bool
	lowSent   bool
	pressured uint8 // bit i: pressure crossed on limits[i] in this window
	exhausted *termination.BudgetExhausted
	members   map[*AccountMember]struct{}
}

// AccountMember is a run's place in an Account, from [Account.Join].
type AccountMember struct {
	a     *Account
	hooks Hooks
}

// NewAccount returns the Account of budget id under spec for the window
// starting at start. low, if not nil, is called without the lock when the
// lease runs low (see SetLease); it must not block. m may be nil.
func NewAccount(id BudgetID, spec termination.FleetBudget, start time.Time, m *Metrics, low func()) *Account {
	a := &Account{id: id, spec: spec, limits: spec.Limits(), metrics: m, low: low, start: start,
		members: map[*AccountMember]struct{}{}}
	a.end.Store(start.Add(spec.Window).UnixNano())
	return a
}

// WindowEnd returns the current window's end in Unix nanoseconds, without
// taking the lock: a cheap per-event check of whether to Roll.
func (a *Account) WindowEnd() int64 { return a.end.Load() }

// ID returns the budget's id.
func (a *Account) ID() BudgetID { return a.id }

// Spec returns the budget's limits as stored by its first run.
func (a *Account) Spec() termination.FleetBudget { return a.spec }

// Window returns the current window's start and end.
func (a *Account) Window() (start, end time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.start, a.start.Add(a.spec.Window)
}

// Join adds a run to the account, or returns the Skipped{
// fleet_budget_exhausted} cause when the budget is exhausted in the
// current window (the run must not start).
func (a *Account) Join(h Hooks) (*AccountMember, termination.Cause) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.exhausted != nil {
		return nil, a.exhaustedSkip()
	}
	m := &AccountMember{a: a, hooks: h}
	a.members[m] = struct{}{}
	return m, nil
}

func (a *Account) exhaustedSkip() termination.Skipped {
	x := a.exhausted
	return termination.Skipped{Reason: termination.SkipFleetBudgetExhausted,
		Detail: fmt.Sprintf("shared budget %s=%s: %s %g of %g used; the window ends at %s",
			a.id.Key, a.id.Value, x.Resource, x.Used, x.Limit, a.start.Add(a.spec.Window).UTC().Format(time.RFC3339))}
}

// Leave removes the member and reports how many members remain.
func (m *AccountMember) Leave() int {
	a := m.a
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.members, m)
	return len(a.members)
}

// Members returns how many runs share the account in this process.
func (a *Account) Members() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.members)
}

// Spend charges one event's usage for member m to the current window and
// returns the warning and stop cause for m's own run (see Member.Spend);
// the other members get them through their hooks. Negative amounts and a
// NaN cost count as 0, an infinite cost as the largest one. It does not
// allocate unless a threshold is crossed.
func (m *AccountMember) Spend(u termination.Usage, cost float64) (warning, stop termination.Cause) {
	return m.spend(0, u, cost)
}

// SpendAt is Spend for a spend made at now (the spender's clock reading):
// when now is at or past the current window's end, the window that holds
// now starts first (as Roll), under the same lock as the charge, so the
// spend is charged to the window its own clock reading falls in, never to
// an earlier one. A reading before the current window (a spend that read
// the clock before another started the next window) is charged to the
// current window.
func (m *AccountMember) SpendAt(now time.Time, u termination.Usage, cost float64) (warning, stop termination.Cause) {
	return m.spend(now.UnixNano(), u, cost)
}

// spend is Spend at now (Unix nanoseconds; 0: in the current window).
func (m *AccountMember) spend(now int64, u termination.Usage, cost float64) (warning, stop termination.Cause) {
	a := m.a
	switch {
	case math.IsInf(cost, 1):
		cost = math.MaxFloat64 // as the run's own cost budget: an infinite cost exhausts it
	case !(cost > 0): // NaN, -Inf, negative: an event cannot give a budget back
		cost = 0
	}
	u.InputTokens, u.OutputTokens = max(u.InputTokens, 0), max(u.OutputTokens, 0)
	a.mu.Lock()
	if now != 0 && now >= a.end.Load() {
		a.rollLocked(WindowStart(time.Unix(0, now), a.spec.Window))
	}
	if a.exhausted != nil {
		// Exhausted before this event reached us (another run, another
		// process): this run stops too.
		x := *a.exhausted
		a.local = a.local.Add(Amounts{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Cost: cost})
		a.mu.Unlock()
		return nil, x
	}
	a.local.InputTokens += u.InputTokens
	a.local.OutputTokens += u.OutputTokens
	a.local.Cost += cost
	low := false
	if a.leased {
		a.lease.InputTokens -= u.InputTokens
		a.lease.OutputTokens -= u.OutputTokens
		a.lease.Cost -= cost
		if !a.lowSent && a.leaseLow() {
			a.lowSent, low = true, true
		}
	}
	warn, x := a.check()
	if warn == nil && x == nil {
		a.mu.Unlock()
		if low && a.low != nil {
			a.low()
		}
		return nil, nil
	}
	others := a.othersLocked(m)
	a.mu.Unlock()
	if low && a.low != nil {
		a.low()
	}
	a.notify(others, warn, x)
	if warn != nil {
		warning = *warn
	}
	if x != nil {
		stop = *x
	}
	return warning, stop
}

// leaseLow reports whether any leased resource fell below half its grant.
func (a *Account) leaseLow() bool {
	g, l := a.granted, a.lease
	return g.InputTokens > 0 && l.InputTokens*2 < g.InputTokens ||
		g.OutputTokens > 0 && l.OutputTokens*2 < g.OutputTokens ||
		g.Cost > 0 && l.Cost*2 < g.Cost ||
		g.IsZero() // an empty grant: ask again
}

// check decides on the view after a change: the first limit reached
// exhausts the budget; the first newly crossed pressure threshold (of a
// limit before it in resource order) warns, with the exhaustion when both
// happen at once, since the crossing is marked and counted either way.
// Called with the lock held.
func (a *Account) check() (*termination.BudgetPressure, *termination.BudgetExhausted) {
	if a.exhausted != nil {
		return nil, nil
	}
	view := a.shared.Add(a.local)
	var warn *termination.BudgetPressure
	for i, l := range a.limits {
		used := view.Of(l.Resource)
		if used >= l.Limit {
			a.exhausted = &termination.BudgetExhausted{Resource: l.Resource, Used: used, Limit: l.Limit, Scope: termination.ScopeFleet}
			a.metrics.Exhausted(l.Resource)
			return warn, a.exhausted
		}
		if a.spec.Pressure > 0 && warn == nil && a.pressured&(1<<i) == 0 && used >= a.spec.Pressure*l.Limit {
			a.pressured |= 1 << i
			a.metrics.Pressure(l.Resource)
			warn = &termination.BudgetPressure{Resource: l.Resource, Threshold: a.spec.Pressure, Used: used, Limit: l.Limit, Scope: termination.ScopeFleet}
		}
	}
	return warn, nil
}

func (a *Account) othersLocked(self *AccountMember) []*AccountMember {
	out := make([]*AccountMember, 0, len(a.members))
	for m := range a.members {
		if m != self {
			out = append(out, m)
		}
	}
	return out
}

// notify hands a warning and a stop to members, without the lock.
func (a *Account) notify(members []*AccountMember, warn *termination.BudgetPressure, x *termination.BudgetExhausted) {
	for _, m := range members {
		if warn != nil && m.hooks.Warn != nil {
			m.hooks.Warn(*warn)
		}
		if x != nil && m.hooks.Stop != nil {
			m.hooks.Stop(*x)
		}
	}
}

// Apply sets the store's view of the window's usage (every process's
// settled usage, this one's included) and acts on it as Spend would: a
// networked fleet calls it after every settlement or read. It reports
// whether the budget is exhausted.
func (a *Account) Apply(shared Amounts) bool {
	a.mu.Lock()
	a.shared = shared
	warn, x := a.check()
	var members []*AccountMember
	if warn != nil || x != nil {
		members = a.othersLocked(nil)
	}
	done := a.exhausted != nil
	a.mu.Unlock()
	a.notify(members, warn, x)
	return done
}

// Exhaust marks the budget exhausted on resource (the store says another
// process reached the limit, or that nothing more can be reserved) and
// stops every member. It does nothing if the budget is already exhausted.
func (a *Account) Exhaust(resource termination.Resource, used, limit float64) {
	a.mu.Lock()
	if a.exhausted != nil {
		a.mu.Unlock()
		return
	}
	a.exhausted = &termination.BudgetExhausted{Resource: resource, Used: used, Limit: limit, Scope: termination.ScopeFleet}
	a.metrics.Exhausted(resource)
	members := a.othersLocked(nil)
	x := a.exhausted
	a.mu.Unlock()
	a.notify(members, nil, x)
}

// Take returns the usage spent here since the last Take (to be settled
// with the store) and counts it as shared from now on.
func (a *Account) Take() Amounts {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.local
	a.shared = a.shared.Add(t)
	a.local = Amounts{}
	return t
}

// SetLease records a new lease: what this process may spend before it
// must reserve more. An empty lease means the store granted nothing.
func (a *Account) SetLease(lease Amounts) {
	a.mu.Lock()
	a.lease, a.granted, a.leased, a.lowSent = lease, lease, true, false
	a.mu.Unlock()
}

// Lease returns what is left of the current lease and whether there is one.
func (a *Account) Lease() (Amounts, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lease, a.leased
}

// Roll starts the window at start (later than the current one): usage,
// crossings, exhaustion and the lease are reset; members stay. Earlier or
// equal starts are ignored; it reports whether the window changed.
func (a *Account) Roll(start time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rollLocked(start)
}

// rollLocked is Roll with a.mu held.
func (a *Account) rollLocked(start time.Time) bool {
	if !start.After(a.start) {
		return false
	}
	a.start = start
	a.end.Store(start.Add(a.spec.Window).UnixNano())
	a.shared, a.local, a.lease, a.granted = Amounts{}, Amounts{}, Amounts{}, Amounts{}
	a.leased, a.lowSent, a.pressured, a.exhausted = false, false, 0, nil
	return true
}

// Status returns the account as Budgets lists it.
func (a *Account) Status() Budget {
	a.mu.Lock()
	defer a.mu.Unlock()
	view := a.shared.Add(a.local)
	b := Budget{Key: a.id.Key, Value: a.id.Value, Policy: a.spec,
		WindowStart: a.start, WindowEnd: a.start.Add(a.spec.Window),
		Used: termination.Usage{InputTokens: view.InputTokens, OutputTokens: view.OutputTokens}, Cost: view.Cost,
		Pressure: a.pressured != 0, Runs: len(a.members)}
	if a.exhausted != nil {
		b.Exhausted = a.exhausted.Resource
	}
	return b
}
