package termination

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"
)

// AnyOf fires when any child fires. Every child sees every event (no short
// circuit), so counting conditions stay correct and every cause that fires
// on the same event is reported. A limit struct that stands for several
// conditions (TimeLimits, CompletionSignals with several fields set) gives
// them to AnyOf as its own children, as a flat policy lists its keys.
func AnyOf(children ...Condition) Condition {
	out := make(anyOf, 0, len(children))
	for _, c := range children {
		l := lower(c)
		if _, limit := c.(limitStruct); limit {
			if several, ok := l.(anyOf); ok {
				out = append(out, several...) // a limit struct's conditions
				continue
			}
		}
		out = append(out, l)
	}
	return out
}

type anyOf []Condition

func (c anyOf) String() string  { return "any: " + listString(c) }
func (c anyOf) Validate() error { return validateChildren("any", c) }
func (c anyOf) timers(f func(time.Duration, bool)) {
	for _, ch := range c {
		if ch != nil {
			eachTimer(ch, f)
		}
	}
}
func (c anyOf) start() check {
	a := &anyCheck{children: make([]check, len(c))}
	for i, ch := range c {
		a.children[i] = startChild(ch)
	}
	a.dispatch()
	return a
}

// startChild starts a child condition; a nil child (an invalid condition
// that was not validated) never fires rather than crashing the run.
func startChild(c Condition) check {
	if c == nil {
		return neverCheck{}
	}
	return c.start()
}

type neverCheck struct{}

func (neverCheck) observe(*Event, *progress, *sink) {}

// anyCheck calls each child for the kinds of events it acts on (see
// kindFiltered), in the children's order: most events fire nothing, and
// most conditions act on one or two kinds.
type anyCheck struct {
	children []check
	// byKind[k] has bit i set when children[i] acts on events of kind k
	// (byKind[0]: clock ticks); children from maxDispatched on are called
	// for everything.
	byKind [KindFinal + 1]uint16
	// quiet has bit i set when children[i] is a budget that the last
	// event it saw left settled: it is not called for an event that
	// spends nothing and is no model turn (see budgetCheck.settled).
	quiet uint16
	// texts has bit i set when children[i] acts only on an event whose
	// text is at least textMin bytes long (see textFiltered): most tool
	// calls and results are not looked at by a text_mention.
	texts, textMin uint16
}

// maxDispatched is how many children of an AnyOf are dispatched by kind.
const maxDispatched = 16

func (a *anyCheck) dispatch() {
	for i, ch := range a.children[:min(len(a.children), maxDispatched)] {
		ks := checkKinds(ch)
		if b, ok := ch.(*budgetCheck); ok {
			b.quiet, b.quietBit = &a.quiet, 1<<i
		}
		if t, ok := ch.(textFiltered); ok && t.minText() > 0 {
			n := uint16(min(t.minText(), math.MaxUint16))
			if a.texts == 0 || n < a.textMin {
				a.textMin = n
			}
			a.texts |= 1 << i
		}
		for k := range a.byKind {
			if ks&(1<<k) != 0 {
				a.byKind[k] |= 1 << i
			}
		}
	}
}

func (a *anyCheck) appendBudgets(out []BudgetUsage, p *progress, s *sink) []BudgetUsage {
	return appendBudgets(out, a.children, p, s)
}

func (a *allCheck) appendBudgets(out []BudgetUsage, p *progress, s *sink) []BudgetUsage {
	return appendBudgets(out, a.children, p, s)
}

func (a *anyCheck) observe(ev *Event, p *progress, s *sink) {
	k := 0 // a clock tick
	if ev != nil {
		k = int(ev.Kind)
		if k == 0 || k >= len(a.byKind) {
			// Not reached: the Evaluator takes valid events only.
			for _, ch := range a.children {
				ch.observe(ev, p, s)
			}
			return
		}
	}
	children := a.children
	m := a.byKind[k]
	if ev != nil {
		if m&a.quiet != 0 && k != int(KindMessage) && k != int(KindFinal) && ev.Usage.IsZero() && ev.Cost == 0 {
			m &^= a.quiet // settled budgets: nothing to look at
		}
		if len(ev.Text) < int(a.textMin) {
			m &^= a.texts // too short for every text check
		}
	}
	for m != 0 {
		// The child's index is taken before the call, so that only m is
		// kept across it.
		i := bits.TrailingZeros16(m)
		m &= m - 1
		children[i].observe(ev, p, s)
	}
	if len(children) > maxDispatched {
		for _, ch := range children[maxDispatched:] {
			ch.observe(ev, p, s)
		}
	}
}

// AllOf fires All when every child has fired at least once: each child
// latches when it first fires. Causes are listed in the order they fired.
func AllOf(children ...Condition) Condition { return allOf(lowerAll(children)) }

type allOf []Condition

func (c allOf) String() string { return "all: " + listString(c) }
func (c allOf) Validate() error {
	if len(c) == 0 {
		return badSetting("all", "", "needs at least one condition")
	}
	return validateChildren("all", c)
}
func (c allOf) timers(f func(time.Duration, bool)) { anyOf(c).timers(f) }
func (c allOf) start() check {
	a := &allCheck{children: make([]check, len(c)), latched: make([]Cause, len(c))}
	for i, ch := range c {
		a.children[i] = startChild(ch)
	}
	return a
}

type allCheck struct {
	children []check
	latched  []Cause // first cause of each child, nil until it fires
	order    []Cause // latched causes in firing order
	proof    []int   // the union of the latched causes' evidence
	scratch  sink
	done     bool
}

func (a *allCheck) observe(ev *Event, p *progress, s *sink) {
	if a.done {
		return
	}
	a.scratch.run, a.scratch.callKey = s.run, s.callKey
	at := 0 // a clock tick has no event of its own
	if ev != nil {
		at = p.Events
	}
	for i, ch := range a.children {
		a.scratch.reset()
		ch.observe(ev, p, &a.scratch)
		if a.latched[i] == nil && len(a.scratch.fired()) > 0 {
			j := pickIndex(a.scratch.fired())
			c := a.scratch.fired()[j]
			a.latched[i] = c
			a.order = append(a.order, c)
			// Taken now: the child's windows move on with later events.
			a.proof = append(a.proof, a.scratch.evidenceOf(j, at)...)
		}
	}
	if len(a.order) == len(a.children) {
		a.done = true
		s.fire(All{Causes: slices.Clone(a.order)}, a)
	}
}

// evidence is the union of the children's evidence (§3).
func (a *allCheck) evidence(Cause, int) []int {
	return sortedSet(slices.Clone(a.proof))
}

// validateChildren validates each child, naming it by its index under key:
// "any[1].all[0].max_tool_calls: ...".
func validateChildren(key string, cs []Condition) error {
	for i, c := range cs {
		at := fmt.Sprintf("%s[%d]", key, i)
		if c == nil {
			return badSetting(at, "", "nil condition")
		}
		if err := c.Validate(); err != nil {
			var se *settingError
			if !errors.As(err, &se) {
				return fmt.Errorf("%s.%w", at, err)
			}
			return &settingError{cond: at + "." + se.cond, setting: se.setting, msg: se.msg}
		}
	}
	return nil
}

func listString(cs []Condition) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		if c == nil {
			parts[i] = "{<nil>}"
			continue
		}
		parts[i] = "{" + c.String() + "}"
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// pickIndex returns the index of the cause that wins by precedence; ties
// keep firing order.
func pickIndex(fired []Cause) int {
	best := 0
	for i := 1; i < len(fired); i++ {
		if precedes(fired[i], fired[best]) < 0 {
			best = i
		}
	}
	return best
}
