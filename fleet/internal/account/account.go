// Package account is the accounting of one shared budget (a fleet budget,
// docs/spec.md §7) in one process, shared by the fleets: fleet.Local keeps
// each shared budget in one Account, exactly; redisfleet keeps one per
// budget its local runs share and feeds it its store's view in the
// background (Settle, Answer, Exhaust, Press, Expire). It owns charging a
// spend against the view, lease use, the pressure crossing once per
// window, exhaustion and the window roll; it imports only termination.
package account

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// Resources are the resources a shared budget counts, in Amounts' order
// (the order in which the Redis scripts number them, 1..4).
var Resources = [4]termination.Resource{
	termination.ResourceTotalTokens, termination.ResourceInputTokens,
	termination.ResourceOutputTokens, termination.ResourceCost,
}

// Amounts are quantities of a shared budget's resources, in Resources'
// order. Total tokens are a resource of their own: a lease of total tokens
// is not the sum of leases of input and output tokens, so what a run
// spent (termination.Totals) cannot carry them.
type Amounts [4]float64

// Spent returns what an event that used u and cost spends of each
// resource.
func Spent(u termination.Usage, cost float64) Amounts {
	return Amounts{float64(u.InputTokens + u.OutputTokens), float64(u.InputTokens), float64(u.OutputTokens), cost}
}

// LimitsOf returns spec's limits per resource: 0 for one it does not
// limit.
func LimitsOf(spec termination.FleetBudget) Amounts {
	return Amounts{float64(spec.TotalTokens), float64(spec.InputTokens), float64(spec.OutputTokens), spec.Cost}
}

// Index returns r's place in Resources, or -1.
func Index(r termination.Resource) int {
	for i, x := range Resources {
		if x == r {
			return i
		}
	}
	return -1
}

// WindowStart returns the start of the window of length w (aligned to the
// Unix epoch) that holds t.
func WindowStart(t time.Time, w time.Duration) time.Time {
	if w <= 0 {
		return t
	}
	ns := t.UnixNano()
	start := ns - ns%int64(w)
	if ns < 0 && ns%int64(w) != 0 {
		start -= int64(w)
	}
	return time.Unix(0, start)
}

// Hooks are how an Account reaches a member's run: fleet.Run's StopWith and
// Warn.
type Hooks struct {
	Stop func(c termination.Cause) bool
	Warn func(c termination.Cause)
}

// Metrics counts the crossings an Account finds (fleetmetrics.Metrics).
type Metrics interface {
	Pressure(resource termination.Resource)
	Exhausted(resource termination.Resource)
}

// Store configures an Account kept in step with a networked fleet's
// store. Without one (nil), an Account accounts exactly: no leases, and
// the window is known from the start.
type Store struct {
	// Fraction is the lease size as a fraction of each limit (tokens: at
	// least 1).
	Fraction float64
	// Reachable reports whether the store is reachable: while it is not,
	// only the store's word (Exhaust) exhausts the budget (fail-open: a
	// process spends what is left of its lease, then the runs' own limits
	// apply). nil: always.
	Reachable func() bool
	// Exhausted is called, without the Account's lock, when a spend of
	// this process finds the budget exhausted, with the end of the window
	// it was found in.
	Exhausted func(x termination.BudgetExhausted, windowEnd time.Time)
}

// Account is one process's accounting of one shared budget in its current
// window.
//
// The view of the window's usage is, per resource, what the store last
// said is committed (every process's settled usage plus the leases
// granted; 0 without a store) plus what this process spent past its lease
// (without a store: all it spent in the window). A spend is charged to
// the view with no I/O and no allocation unless a threshold is crossed:
// the first limit reached (with no lease left for it) exhausts the budget
// and stops every member with BudgetExhausted{scope: fleet}; the first
// newly crossed pressure threshold (of a limit before it in resource
// order) warns every member with BudgetPressure{scope: fleet}. Each
// crossing happens once per window and is counted once in Metrics. The
// spending member gets them as Spend's results, the others through their
// hooks, called without the lock.
type Account struct {
	key, value string
	spec       termination.FleetBudget
	limits     Amounts
	lease      Amounts // lease size per limited resource (0 without a store)
	leased     bool
	store      Store
	metrics    Metrics

	mu        sync.Mutex
	start     time.Time // the window's start
	end       int64     // the window's end in Unix nanoseconds
	known     bool      // the window is the store's (always, without a store)
	committed Amounts   // the window's committed usage, as the store last said
	used      Amounts   // spent here since the last Settle
	bal       Amounts   // lease left (negative: spent past it)
	sent      Amounts   // spent past the lease, sent in a Settle not answered yet
	pressured uint8     // bit i: pressure crossed on resource i in this window
	exhausted *termination.BudgetExhausted
	exStart   time.Time // the window the exhaustion was found in
	members   map[*Member]struct{}
}

// Member is a run's place in an Account, from Join or Add.
type Member struct {
	a     *Account
	hooks Hooks
}

// New returns the Account of budget key=value under spec for the window
// starting at start (without a store: the window; with one: an estimate
// until the store's first Answer). m may be nil; store is nil for an
// exact account.
func New(key, value string, spec termination.FleetBudget, start time.Time, m Metrics, store *Store) *Account {
	a := &Account{key: key, value: value, spec: spec, limits: LimitsOf(spec), metrics: m, start: start, known: true,
		members: map[*Member]struct{}{}}
	if store != nil {
		a.store, a.leased, a.known = *store, true, false
		for i, l := range a.limits {
			if l > 0 {
				a.lease[i] = l * store.Fraction
				if Resources[i] != termination.ResourceCost && a.lease[i] < 1 {
					a.lease[i] = 1 // tokens: whole units
				}
			}
		}
	}
	a.end = start.Add(spec.Window).UnixNano()
	return a
}

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
func (a *Account) Join(h Hooks) (*Member, termination.Cause) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.exhausted != nil {
		x := a.exhausted
		return nil, termination.Skipped{Reason: termination.SkipFleetBudgetExhausted,
			Detail: fmt.Sprintf("shared budget %s=%s: %s %g of %g used; the window ends at %s",
				a.key, a.value, x.Resource, x.Used, x.Limit, a.start.Add(a.spec.Window).UTC().Format(time.RFC3339))}
	}
	return a.addLocked(h), nil
}

// Add adds a run to the account whatever its state: the fleet decided to
// admit it (a networked fleet admits by its store's word).
func (a *Account) Add(h Hooks) *Member {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addLocked(h)
}

func (a *Account) addLocked(h Hooks) *Member {
	m := &Member{a: a, hooks: h}
	a.members[m] = struct{}{}
	return m
}

// Leave removes the member and reports how many members remain.
func (m *Member) Leave() int {
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
// returns the warning and stop cause for m's own run; the other members
// get them through their hooks. Negative amounts and a NaN cost count as
// 0, an infinite cost as the largest one. It does not allocate unless a
// threshold is crossed.
func (m *Member) Spend(u termination.Usage, cost float64) (warning, stop termination.Cause) {
	warning, stop, _, _ = m.charge(0, u, cost)
	return warning, stop
}

// SpendAt is Spend for a spend made at now (the spender's clock reading):
// when now is at or past the current window's end, the window that holds
// now starts first (as Roll), under the same lock as the charge, so the
// spend is charged to the window its own clock reading falls in, never to
// an earlier one. A reading before the current window (a spend that read
// the clock before another started the next window) is charged to the
// current window.
func (m *Member) SpendAt(now time.Time, u termination.Usage, cost float64) (warning, stop termination.Cause) {
	warning, stop, _, _ = m.charge(now.UnixNano(), u, cost)
	return warning, stop
}

// Charge is Spend for a networked fleet: wake reports that the store
// should hear now (the lease runs low, below half its size on a resource,
// or a threshold was crossed), over that this process has spent a whole
// lease past what the store granted on a resource (see Overdrawn).
func (m *Member) Charge(u termination.Usage, cost float64) (warning, stop termination.Cause, wake, over bool) {
	return m.charge(0, u, cost)
}

// charge is Charge at now (Unix nanoseconds; 0: in the current window).
func (m *Member) charge(now int64, u termination.Usage, cost float64) (warning, stop termination.Cause, wake, over bool) {
	a := m.a
	switch {
	case math.IsInf(cost, 1):
		cost = math.MaxFloat64 // as the run's own cost budget: an infinite cost exhausts it
	case !(cost > 0): // NaN, -Inf, negative: an event cannot give a budget back
		cost = 0
	}
	u.InputTokens, u.OutputTokens = max(u.InputTokens, 0), max(u.OutputTokens, 0)
	d := Spent(u, cost)
	a.mu.Lock()
	if now != 0 && now >= a.end {
		a.rollLocked(WindowStart(time.Unix(0, now), a.spec.Window))
	}
	for i := range d {
		a.bal[i] -= d[i]
	}
	if a.leased { // only a store settles what was spent
		for i := range d {
			a.used[i] += d[i]
		}
	}
	if a.exhausted != nil {
		// Exhausted before this event reached us (another run, another
		// process): this run stops too.
		x := *a.exhausted
		a.mu.Unlock()
		return nil, x, false, false
	}
	wake, over = a.leaseLocked()
	warn, x := a.checkLocked()
	if warn == nil && x == nil {
		a.mu.Unlock()
		return nil, nil, wake, over
	}
	others := a.othersLocked(m)
	end := a.start.Add(a.spec.Window)
	a.mu.Unlock()
	a.notify(others, warn, x)
	if warn != nil {
		warning = *warn
	}
	if x != nil {
		stop = *x
		if a.store.Exhausted != nil {
			a.store.Exhausted(*x, end)
		}
	}
	return warning, stop, true, over
}

// leaseLocked reports whether the lease runs low (below half its size) on
// a limited resource, and whether this process has spent a whole lease
// past what the store granted on one (nothing without a store).
func (a *Account) leaseLocked() (low, over bool) {
	if !a.leased {
		return false, false
	}
	for i, l := range a.limits {
		if l == 0 {
			continue
		}
		if a.bal[i] < a.lease[i]/2 {
			low = true
		}
		if a.sent[i]-a.bal[i] >= a.lease[i] {
			over = true
		}
	}
	return low, over
}

// viewLocked is the view of resource i: the committed usage plus what this
// process spent past its lease.
func (a *Account) viewLocked(i int) float64 {
	return a.committed[i] + max(-a.bal[i], 0)
}

// checkLocked decides on the view after a spend: the first limit reached
// with no lease left for it exhausts the budget (while the store is
// reachable); the first newly crossed pressure threshold (of a limit
// before it in resource order) warns, with the exhaustion when both happen
// at once, since the crossing is marked and counted either way.
func (a *Account) checkLocked() (*termination.BudgetPressure, *termination.BudgetExhausted) {
	if a.exhausted != nil {
		return nil, nil
	}
	var warn *termination.BudgetPressure
	for i, l := range a.limits {
		if l == 0 {
			continue
		}
		used := a.viewLocked(i)
		if used >= l && a.bal[i] <= 0 && (a.store.Reachable == nil || a.store.Reachable()) {
			a.exhausted = &termination.BudgetExhausted{Resource: Resources[i], Used: used, Limit: l, Scope: termination.ScopeFleet}
			a.exStart = a.start
			a.count(Resources[i], false)
			return warn, a.exhausted
		}
		if a.spec.Pressure > 0 && warn == nil && a.pressured&(1<<i) == 0 && used >= a.spec.Pressure*l {
			a.pressured |= 1 << i
			a.count(Resources[i], true)
			warn = &termination.BudgetPressure{Resource: Resources[i], Threshold: a.spec.Pressure, Used: used, Limit: l, Scope: termination.ScopeFleet}
		}
	}
	return warn, nil
}

// count counts a crossing in the metrics.
func (a *Account) count(r termination.Resource, pressure bool) {
	switch {
	case a.metrics == nil:
	case pressure:
		a.metrics.Pressure(r)
	default:
		a.metrics.Exhausted(r)
	}
}

func (a *Account) othersLocked(self *Member) []*Member {
	out := make([]*Member, 0, len(a.members))
	for m := range a.members {
		if m != self {
			out = append(out, m)
		}
	}
	return out
}

// notify hands a warning and a stop to members, without the lock.
func (a *Account) notify(members []*Member, warn *termination.BudgetPressure, x *termination.BudgetExhausted) {
	for _, m := range members {
		if warn != nil && m.hooks.Warn != nil {
			m.hooks.Warn(*warn)
		}
		if x != nil && m.hooks.Stop != nil {
			m.hooks.Stop(*x)
		}
	}
}

// StopAll stops every member with c (a networked fleet's mismatch of the
// stored limits).
func (a *Account) StopAll(c termination.Cause) {
	a.mu.Lock()
	members := a.othersLocked(nil)
	a.mu.Unlock()
	for _, m := range members {
		if m.hooks.Stop != nil {
			m.hooks.Stop(c)
		}
	}
}

// Roll starts the window at start (later than the current one): the view,
// crossings, exhaustion and the lease are reset; members stay. Earlier or
// equal starts are ignored; it reports whether the window changed.
func (a *Account) Roll(start time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !start.After(a.start) {
		return false
	}
	a.rollLocked(start)
	return true
}

// rollLocked starts the window at start. The usage spent here and not
// settled stays, for the store to settle; a lease of a window the store
// told is void in the next.
func (a *Account) rollLocked(start time.Time) {
	a.start = start
	a.end = start.Add(a.spec.Window).UnixNano()
	if a.known {
		a.bal = Amounts{}
	}
	a.committed, a.sent = Amounts{}, Amounts{}
	a.pressured, a.exhausted = 0, nil
}

// Status is an account as fleet.Control's Budgets lists it.
type Status struct {
	Start, End time.Time
	Used       Amounts // the view
	Pressure   bool
	Exhausted  termination.Resource // "" when not exhausted
	Runs       int
}

// Status returns the account's status.
func (a *Account) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := Status{Start: a.start, End: a.start.Add(a.spec.Window), Pressure: a.pressured != 0, Runs: len(a.members)}
	for i := range s.Used {
		s.Used[i] = a.viewLocked(i)
	}
	if a.exhausted != nil {
		s.Exhausted = a.exhausted.Resource
	}
	return s
}
