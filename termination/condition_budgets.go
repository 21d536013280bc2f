package termination

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// TokenLimits is a token budget. At least one of Total, Input and Output
// must be set; each set limit must be > 0.
//
// As a Condition, it fires BudgetExhausted on the event at which the
// cumulative usage of any limited resource reaches its limit, and warns or
// stops with BudgetPressure as Pressure and Grace say.
type TokenLimits struct {
	Total, Input, Output int64
	// Pressure is the fraction of a limit, in (0,1), at which a
	// BudgetPressure warning is recorded (0: no warning).
	Pressure float64
	// Grace, when set, stops the run with BudgetPressure on the Grace-th
	// message event after the warning (0: on the warning event itself);
	// nil means warn only (set it with new(n)).
	Grace *int
}

// condition returns the condition l stands for.
func (l TokenLimits) condition() Condition {
	b := &budget{name: "token_budget", threshold: nonZero(l.Pressure), grace: l.Grace}
	for _, r := range []struct {
		res   Resource
		limit int64
	}{{ResourceTotalTokens, l.Total}, {ResourceInputTokens, l.Input}, {ResourceOutputTokens, l.Output}} {
		if r.limit != 0 {
			b.limits = append(b.limits, resourceLimit{r.res, float64(r.limit)})
		}
	}
	return b
}

// CostLimit is a cost budget; Limit must be > 0. As a Condition, it is
// TokenLimits for the events' cost.
type CostLimit struct {
	Limit    float64
	Pressure float64 // as in TokenLimits
	Grace    *int    // as in TokenLimits
}

// condition returns the condition l stands for.
func (l CostLimit) condition() Condition {
	return &budget{name: "cost_budget", threshold: nonZero(l.Pressure), grace: l.Grace,
		limits: []resourceLimit{{ResourceCost, l.Limit}}}
}

type resourceLimit struct {
	res   Resource
	limit float64
}

// budget is token_budget and cost_budget: the limits given (in resource
// order), and the pressure settings.
type budget struct {
	name      string
	limits    []resourceLimit
	threshold setting[float64]
	grace     *int
	scope     string // ScopeTree for a tree limit (Tree), "" for a run's own
}

// budgetKey is the policy file's key of a budget's limit on r:
// token_budget's total, input and output, cost_budget's limit.
func budgetKey(r Resource) string {
	switch r {
	case ResourceTotalTokens:
		return "total"
	case ResourceInputTokens:
		return "input"
	case ResourceOutputTokens:
		return "output"
	}
	return "limit"
}

func (b *budget) String() string {
	parts := make([]string, 0, len(b.limits)+2)
	for _, l := range b.limits {
		parts = append(parts, fmt.Sprintf("%s: %g", budgetKey(l.res), l.limit))
	}
	if b.threshold.set {
		parts = append(parts, fmt.Sprintf("pressure: %g", b.threshold.v))
	}
	if b.grace != nil {
		parts = append(parts, fmt.Sprintf("grace: %d", *b.grace))
	}
	return b.name + ": {" + strings.Join(parts, ", ") + "}"
}

func (b *budget) Validate() error {
	if len(b.limits) == 0 {
		if b.name == "cost_budget" {
			return badSetting(b.name, "limit", "is required")
		}
		return badSetting(b.name, "", "needs at least one of total, input, output")
	}
	for _, l := range b.limits {
		switch {
		case l.res == ResourceCost && (!(l.limit > 0) || math.IsInf(l.limit, 0)):
			return badSetting(b.name, "limit", "must be > 0, got %g", l.limit)
		case l.res != ResourceCost && !(l.limit > 0):
			return badSetting(b.name, limitKey(l.res), "must be a positive int, got %g", l.limit)
		}
	}
	if b.threshold.set && !(b.threshold.v > 0 && b.threshold.v < 1) {
		return badSetting(b.name, "pressure", "must be in (0,1), got %g", b.threshold.v)
	}
	if b.grace != nil {
		if *b.grace < 0 {
			return badSetting(b.name, "grace", "must be an int >= 0, got %d", *b.grace)
		}
		if !b.threshold.set {
			return badSetting(b.name, "grace", "needs pressure")
		}
	}
	return nil
}

// limitKey is the policy key of a token limit: "total", "input", "output".
func limitKey(r Resource) string { return strings.TrimSuffix(string(r), "_tokens") }

func (b *budget) start() check { return &budgetCheck{budget: b} }

type budgetCheck struct {
	*budget
	// rare is the run state of the limits and of the grace count, made
	// when a final first reaches a limit or the threshold, or a warning
	// starts the grace count: a live run's check is 32 bytes.
	rare    *budgetRare
	graceOn bool // a warning started the grace count
	// settled is set when the last event reached nothing (no limit, no
	// threshold, no final's mark) outside a grace count: an event that
	// then spends nothing and is no model turn changes nothing either
	// (the usage is the same, and limits change only after a stop, by a
	// raise, and only upwards), and is not looked at. (Beside graceOn, it
	// takes no word of its own.)
	settled bool
	warnRes uint8  // index of the resource that warned first (of at most three)
	warned  uint16 // bit i: limit i recorded its pressure warning
	// quietBit is the check's bit in quiet, the mask of the AnyOf it is a
	// child of (nil for none): set while the check is settled, so that the
	// AnyOf does not call it for an event that spends nothing and is no
	// model turn (what observe itself would return on at once).
	quietBit uint16
	quiet    *uint16
}

// budgetRare is the part of a budgetCheck that most runs never need.
type budgetRare struct {
	states    []limitState // one per limit
	graceLeft int          // message events left before the stop
	warnedAt  int          // the event that recorded the warning that started the grace count
}

// rareState returns b's rare state, making it on first use.
func (b *budgetCheck) rareState() *budgetRare {
	if b.rare == nil {
		b.rare = &budgetRare{states: make([]limitState, len(b.limits))}
	}
	return b.rare
}

// warnedAt is the event that recorded the warning that started the grace
// count, 0 for none.
func (b *budgetCheck) warnedAt() int {
	if b.rare == nil {
		return 0
	}
	return b.rare.warnedAt
}

// limitState is the run state of one budgeted resource: finalAt and
// finalWarnAt are the final events at which the limit and the pressure
// threshold were first reached, 0 if none: a final never fires or warns
// (§3), the next event does, and the evidence names the final.
type limitState struct{ finalAt, finalWarnAt int }

// state returns the run state of limit i.
func (b *budgetCheck) state(i int) limitState {
	if b.rare == nil {
		return limitState{}
	}
	return b.rare.states[i]
}

// warnedOf reports whether limit i recorded its pressure warning.
func (b *budgetCheck) warnedOf(i int) bool { return b.warned&(1<<i) != 0 }

func used(r Resource, p *progress) float64 {
	switch r {
	case ResourceTotalTokens:
		return float64(p.Tokens.Total())
	case ResourceInputTokens:
		return float64(p.Tokens.InputTokens)
	case ResourceOutputTokens:
		return float64(p.Tokens.OutputTokens)
	default:
		return p.Cost
	}
}

// costTolerance is the relative slack of cost comparisons: costs are
// decimal amounts summed in binary floating point, so ten events costing 0.1
// add up to 0.9999999999999999 and must still reach a limit of 1.
const costTolerance = 1e-9

// farBelow scales a limit to a usage that is below it by much more than
// costTolerance and the rounding of a ratio: usage under it has not
// reached the limit.
const farBelow = 1 - 1e-6

// farAbove is farBelow's mirror: a ratio whose numerator is above
// farAbove times the denominator and the threshold is above the threshold.
const farAbove = 1 + 1e-6

// reached reports whether used has reached fraction of limit. The ratio is
// compared rather than fraction*limit, because a product such as 0.07*100
// rounds above 7 while 7/100 rounds to exactly 0.07: a threshold written in
// decimal is reached when usage equals it. Token counts are exact; cost
// comparisons allow costTolerance.
func reached(r Resource, used, limit, fraction float64) bool {
	if used < limit*fraction*farBelow && limit > 0 && fraction > 0 {
		// Far below the fraction (the common case, on every event): the
		// ratio is below it whatever the rounding, and needs no division.
		return false
	}
	if r == ResourceCost {
		return used/limit >= fraction*(1-costTolerance)
	}
	if fraction == 1 {
		return used >= limit
	}
	return used/limit >= fraction
}

func (b *budgetCheck) observe(ev *Event, p *progress, s *sink) {
	if ev == nil {
		return
	}
	if ev.Kind != KindFinal && !b.graceOn && s.raised() == nil {
		// The common case, in a small frame: the usage is far below every
		// limit and its threshold (see reached), and no grace count runs:
		// what the loop of observeUsage finds, in one comparison a limit.
		far := true
		for i := range b.limits {
			l := &b.limits[i]
			u := used(l.res, p)
			if !(u < l.limit*farBelow && l.limit > 0) || b.threshold.set && !(u < l.limit*b.threshold.v*farBelow && b.threshold.v > 0) {
				far = false
				break
			}
		}
		if far {
			b.setSettled(true)
			return
		}
	}
	b.observeUsage(ev, p, s)
}

// observeUsage is observe for an event that may reach a limit or a
// threshold, or is a final, or comes in a grace count.
func (b *budgetCheck) observeUsage(ev *Event, p *progress, s *sink) {
	if b.settled && ev.Kind != KindMessage && ev.Kind != KindFinal && ev.Usage.IsZero() && ev.Cost == 0 {
		return // a tool call or result that spends nothing, after a quiet event
	}
	b.setSettled(false)
	if ev.Kind == KindFinal {
		// A final's usage counts, but it never fires or warns (§3): a loop
		// that delivers its final answer has not run away. Whatever it
		// reached fires on the next event.
		for i, l := range b.limits {
			st, u := b.state(i), used(l.res, p)
			if st.finalAt == 0 && reached(l.res, u, l.limit+s.raisedBy(l.res), 1) {
				b.rareState().states[i].finalAt = p.Events
			}
			if b.threshold.set && !b.warnedOf(i) && st.finalWarnAt == 0 && reached(l.res, u, l.limit, b.threshold.v) {
				b.rareState().states[i].finalWarnAt = p.Events
			}
		}
		return
	}
	// A message after the warning spends one grace turn.
	if b.graceOn && ev.Kind == KindMessage {
		b.rare.graceLeft--
	}
	quiet := true
	for i := range b.limits {
		l := &b.limits[i]
		u := used(l.res, p)
		if limit := l.limit + s.raisedBy(l.res); reached(l.res, u, limit, 1) {
			b.exhausted(l.res, u, limit, s)
			quiet = false
		}
		if b.threshold.set && !b.warnedOf(i) && reached(l.res, u, l.limit, b.threshold.v) {
			b.pressure(i, u, p, s)
			quiet = false
		}
	}
	if b.graceOn && b.rare.graceLeft <= 0 {
		b.graceOver(p, s)
	}
	b.setSettled(quiet && !b.graceOn)
}

// setSettled sets settled, and the check's bit in its AnyOf's quiet mask.
func (b *budgetCheck) setSettled(v bool) {
	b.settled = v
	if b.quiet != nil {
		if v {
			*b.quiet |= b.quietBit
		} else {
			*b.quiet &^= b.quietBit
		}
	}
}

// exhausted, pressure and graceOver fire and warn in frames of their own:
// observe runs on a live run's small stack, and causes built in its frame
// would make it larger.
//
//go:noinline
func (b *budgetCheck) exhausted(r Resource, used, limit float64, s *sink) {
	s.fire(BudgetExhausted{Resource: r, Used: used, Limit: limit, Scope: b.scope}, b)
}

// pressure records that limit i reached the threshold, at usage u.
//
//go:noinline
func (b *budgetCheck) pressure(i int, u float64, p *progress, s *sink) {
	l := b.limits[i]
	b.warned |= 1 << i
	s.warn(BudgetPressure{Resource: l.res, Threshold: b.threshold.v, Used: u, Limit: l.limit, Scope: b.scope})
	if b.grace != nil && !b.graceOn {
		r := b.rareState()
		b.graceOn, b.warnRes = true, uint8(i)
		r.graceLeft, r.warnedAt = *b.grace, p.Events
	}
}

//go:noinline
func (b *budgetCheck) graceOver(p *progress, s *sink) {
	l := b.limits[b.warnRes]
	s.fire(BudgetPressure{Resource: l.res, Threshold: b.threshold.v, Used: used(l.res, p), Limit: l.limit, Scope: b.scope}, b)
}

// evidence is the event that exhausted the budget, preceded by the final
// that reached the limit first if one did; for a grace stop, the event that
// recorded the warning and the one that stopped (and the final that reached
// the threshold first, if one did).
func (b *budgetCheck) evidence(c Cause, at int) []int {
	var out []int
	switch c := c.(type) {
	case BudgetExhausted:
		for i, l := range b.limits {
			if l.res == c.Resource && b.state(i).finalAt > 0 {
				out = append(out, b.state(i).finalAt)
				break
			}
		}
	case BudgetPressure:
		if f := b.state(int(b.warnRes)).finalWarnAt; f > 0 {
			out = append(out, f)
		}
		out = append(out, b.warnedAt())
	}
	return sortedSet(append(out, at))
}

// sortedSet sorts the indices and drops duplicates and zeros.
func sortedSet(s []int) []int {
	slices.Sort(s)
	s = slices.Compact(s)
	if len(s) > 0 && s[0] <= 0 {
		s = s[1:]
	}
	return s
}

// budgetHolder is a check that holds budgets, for Result.Budgets: it
// appends their usage (p, with the raises in s) to out, in order.
type budgetHolder interface {
	appendBudgets(out []BudgetUsage, p *progress, s *sink) []BudgetUsage
}

// appendBudgets appends the usage of the budgets among checks, in order.
// (An append rather than a callback: a callback that captured the result
// being made would move it to the heap.)
func appendBudgets(out []BudgetUsage, checks []check, p *progress, s *sink) []BudgetUsage {
	for _, c := range checks {
		if h, ok := c.(budgetHolder); ok {
			out = h.appendBudgets(out, p, s)
		}
	}
	return out
}

func (b *budgetCheck) appendBudgets(out []BudgetUsage, p *progress, s *sink) []BudgetUsage {
	for _, l := range b.limits {
		out = append(out, BudgetUsage{Resource: l.res, Used: used(l.res, p), Limit: l.limit + s.raisedBy(l.res)})
	}
	return out
}
