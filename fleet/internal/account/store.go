package account

import (
	"time"

	"github.com/agentstop/agentstop/termination"
)

// The store's side of an Account (a networked fleet, in the background):
// Settle and Answer around each reserve of leases, Expire when the
// window ends, Exhaust and Press for the store's word on a crossing.

// Settlement is what one reserve sends the store: the usage spent here
// since the last Settle (in window Start; zero when the store has not told
// the window yet), per limited resource the usage spent past the lease
// (Debt), the lease returned (Release), the lease wanted (Want), whether
// the store may record the budget exhausted when it has no room (Dry),
// and the lease still held (Held).
type Settlement struct {
	Start                           time.Time
	Used, Debt, Release, Want, Held Amounts
	Dry                             [4]bool
}

// Settle takes what this process spent since the last Settle, to be
// settled with the store, and decides what to ask for: a new lease when
// what is left of one is below half its size (or the budget is exhausted
// here), a whole lease when the window the store told is over at now, and
// none, the lease returned, when no run shares the budget (members 0).
func (a *Account) Settle(now time.Time, members int) Settlement {
	a.mu.Lock()
	defer a.mu.Unlock()
	rollover := a.known && !now.Before(a.start.Add(a.spec.Window))
	s := Settlement{Used: a.used}
	if a.known {
		s.Start = a.start
	}
	a.used = Amounts{}
	for i, l := range a.limits {
		if l == 0 {
			a.bal[i] = 0 // not leased: its usage is in Used
			continue
		}
		if a.bal[i] < 0 {
			s.Debt[i] = -a.bal[i]
			a.bal[i] = 0
		}
		a.sent[i] = s.Debt[i]
		if a.exhausted != nil && a.exhausted.Resource == Resources[i] {
			s.Dry[i] = true // exhausted here: the store records it unless it has room
		}
		switch {
		case members == 0:
			s.Release[i] = a.bal[i]
			a.bal[i] = 0
		case rollover:
			s.Want[i] = a.lease[i]
			s.Dry[i] = true
		case a.bal[i] < a.lease[i]/2 || a.exhausted != nil:
			s.Want[i] = a.lease[i] - a.bal[i]
			s.Dry[i] = a.bal[i] <= 0
		}
		if !rollover {
			s.Held[i] = a.bal[i]
		}
	}
	return s
}

// Unsettle puts back what a Settle took when the store did not answer:
// the next Settle settles it.
func (a *Account) Unsettle(s Settlement) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.used {
		a.used[i] += s.Used[i]
		a.bal[i] += s.Release[i] - s.Debt[i]
	}
	a.sent = Amounts{}
}

// Answer applies the store's answer to a Settle: the window it counted in
// (a new one voids the old window's lease), the lease it granted and the
// window's committed usage. room says that the store found room: an
// exhaustion found here in that window or before is lifted when runs
// still share the budget (another process returned its lease).
func (a *Account) Answer(start time.Time, granted, committed Amounts, room bool, members int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !start.Equal(a.start) {
		a.rollLocked(start)
	}
	a.known = true
	a.sent = Amounts{}
	for i := range a.bal {
		a.bal[i] += granted[i]
	}
	a.committed = committed
	if room && a.exhausted != nil && members > 0 && !a.exStart.After(start) {
		a.exhausted = nil
	}
}

// Expire reports whether the window the store told is over at now (a
// Settle is due, for a whole lease in the next), and lifts the window's
// exhaustion if so.
func (a *Account) Expire(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	over := a.known && !now.Before(a.start.Add(a.spec.Window))
	if over {
		a.exhausted = nil
	}
	return over
}

// Overdrawn returns the budget's exhaustion (nil if it is not), and
// whether this process's usage past its leases is a whole lease or more
// on a limited resource: it must wait for the store before spending more.
func (a *Account) Overdrawn() (termination.Cause, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, over := a.leaseLocked()
	if a.exhausted == nil {
		return nil, over
	}
	return *a.exhausted, over
}

// Exhaust marks the budget exhausted in the window starting at start (the
// store says a process reached the limit, or that nothing more can be
// reserved) and stops every member. It counts the crossing unless the
// budget is already exhausted here (counted then), and stops the members
// only when start is the window the store told; it reports whether it
// stopped them.
func (a *Account) Exhaust(start time.Time, x termination.BudgetExhausted) bool {
	a.mu.Lock()
	if a.exhausted != nil {
		a.mu.Unlock()
		return false
	}
	a.count(x.Resource, false)
	if !a.storeWindowLocked(start) {
		a.mu.Unlock()
		return false
	}
	a.exhausted, a.exStart = &x, start
	members := a.othersLocked(nil)
	a.mu.Unlock()
	a.notify(members, nil, &x)
	return true
}

// Press warns every member that the budget crossed its pressure threshold
// on a resource (the store's word) in the window starting at start, once
// per window and resource, and counts the crossing. It does nothing when
// the crossing was already warned or start is not the window the store
// told.
func (a *Account) Press(start time.Time, w termination.BudgetPressure) {
	i := Index(w.Resource)
	a.mu.Lock()
	if i < 0 || !a.storeWindowLocked(start) || a.pressured&(1<<i) != 0 {
		a.mu.Unlock()
		return
	}
	a.pressured |= 1 << i
	a.count(w.Resource, true)
	members := a.othersLocked(nil)
	a.mu.Unlock()
	a.notify(members, &w, nil)
}

// storeWindowLocked reports whether the store's word on window start is
// for the current window. Before the store told the window (the account
// has its own estimate), the word's window is taken as the current one.
func (a *Account) storeWindowLocked(start time.Time) bool {
	switch {
	case start.Equal(a.start):
		return true
	case a.known:
		return false
	}
	a.rollLocked(start)
	return true
}

// Idle reports whether the account holds nothing to settle or return.
func (a *Account) Idle() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.used == Amounts{} && a.bal == Amounts{}
}

// Known reports whether the store has told the window.
func (a *Account) Known() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.known
}
