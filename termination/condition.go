package termination

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The conditions live in files by family: condition_counts.go (iterations,
// tool calls, time limits), condition_budgets.go, condition_stall.go,
// condition_errors.go, condition_completion.go (completion signals and Go
// functions), condition_combinators.go (AnyOf, AllOf) and
// condition_limits.go (the limit structs as Conditions).

// Condition is an immutable description of when a stage run should stop.
// Build one from this package's limit structs (IterationLimits, TimeLimits,
// CompletionSignals, …), its constructors (AnyOf, AllOf, CauseFunc,
// TreeLimits) or a [Policy]; the interface is sealed so that every
// condition gets fresh per-run state from [NewEvaluator] and can be
// validated before use.
type Condition interface {
	// String describes the condition in the policy file's terms.
	String() string
	// Validate reports whether the condition and every condition under it
	// are well formed, with an error naming the condition, the setting and
	// the bad value ("token_budget.pressure: must be in (0,1), got 1.5").
	// Policies are validated by the same code when they are parsed.
	Validate() error
	start() check
}

// timed is implemented by the conditions that hold timers (TimeLimits,
// tree limits and the combinators): the others need no timer.
type timed interface {
	// timers calls f with every timer limit in the condition tree: idle
	// for an idle limit (TimeLimits.Idle), false for a timeout.
	timers(f func(d time.Duration, idle bool))
}

// eachTimer calls f with every timer limit in c.
func eachTimer(c Condition, f func(d time.Duration, idle bool)) {
	if t, ok := c.(timed); ok {
		t.timers(f)
	}
}

// check is the per-run state of a Condition.
type check interface {
	// observe is called for every event with the run's progress already
	// updated for it; ev is nil for a clock tick (live timeout timer).
	observe(ev *Event, p *progress, s *sink)
}

// sink collects what fired on one event. Its run is the run's Evaluator,
// so that every sink of a run (AllOf's children report into a scratch
// sink) records into the run's warnings, and reads its raised limits and
// its idle time.
type sink struct {
	// f is what fired on the current event, nil until something first
	// fires in the run: most live runs never fire (one stops on its
	// first cause), and an Evaluator is smaller without the two lists.
	f   *fired
	run *Evaluator
	// callKey is the tool_call's key (tool and canonical args), 0 when not
	// computed: the Evaluator computes it before the checks run, high on
	// the evaluating goroutine's stack, when a stall check will need it.
	// (A key that is 0, one in 2^64, is computed again by the check: the
	// same key. No flag beside it keeps a live run's Evaluator smaller.)
	callKey uint64
}

// fired is what fired on one event: the causes, and by[i] gives the
// evidence of causes[i] (see witness); nil means the firing event alone.
type fired struct {
	causes []Cause
	by     []witness
}

// fired returns the causes that fired on the current event.
func (s *sink) fired() []Cause {
	if s.f == nil {
		return nil
	}
	return s.f.causes
}

// fire records a cause that fired on the current event; w gives its
// evidence if it is the run's cause (nil: the firing event alone).
func (s *sink) fire(c Cause, w witness) {
	if s.f == nil {
		s.f = new(fired)
	}
	s.f.causes = append(s.f.causes, c)
	s.f.by = append(s.f.by, w)
}

// reset empties the sink for the next event.
func (s *sink) reset() {
	f := s.f
	if f == nil || len(f.causes) == 0 && len(f.by) == 0 {
		return // the common case: nothing fired on the last event
	}
	f.causes = f.causes[:0]
	clear(f.by)
	f.by = f.by[:0]
}

// witness is implemented by the checks whose causes have evidence other
// than the firing event (contract §3 "Evidence"). Evidence is asked for
// only once a cause is reported, on the event that fired it, so the checks
// keep no more than the event indices already in their windows and nothing
// is allocated until a run stops.
type witness interface {
	// evidence returns the 1-based indices of the events that make up c,
	// which the check fired on event at, ascending.
	evidence(c Cause, at int) []int
}

// noEvidence is the witness of the causes that list no events: a timeout.
type noEvidence struct{}

func (noEvidence) evidence(Cause, int) []int { return nil }

// evidenceOf returns the evidence of the fired cause i of s on event at.
func (s *sink) evidenceOf(i, at int) []int {
	if w := s.f.by[i]; w != nil {
		return w.evidence(s.f.causes[i], at)
	}
	if at <= 0 {
		return nil
	}
	return []int{at}
}
func (s *sink) warn(c Cause) { s.run.addWarning(c) }

// stallWarned reports whether the run has a stall warning (at most one
// per run).
func (s *sink) stallWarned() bool { return s.run.stalled }

// warnStall records a stall warning unless the run already has one.
func (s *sink) warnStall(c StallDetected) {
	if s.run.stalled {
		return
	}
	s.run.stalled = true
	s.run.addWarning(c)
}

// idle is, on a clock tick for an idle limit (TimeLimits.Idle), how long the run
// has been idle; 0 on events and on timeout ticks.
func (s *sink) idle() time.Duration {
	if x := s.run.x; x != nil {
		return x.timers.idle
	}
	return 0
}

// raised is what the run's limits were raised by (hold.go), nil until a
// raise: the count and budget checks add it to their limits.
func (s *sink) raised() *Limits {
	if x := s.run.x; x != nil {
		return x.raised
	}
	return nil
}

// progress is the running state of a run, after the current event.
type progress struct {
	Totals                // what the run spent: its events, the current one included
	Elapsed time.Duration // time since the run started, when Clocked
	Clocked bool          // whether the current event (or tick) has a time
}

// timeoutsOf returns the distinct timeout limits in c, ascending: the
// deadlines of a run, counted from its start.
func timeoutsOf(c Condition) []time.Duration { return timersOf(c, false) }

// idlesOf returns the distinct idle limits in c, ascending: counted from
// the run's last event.
func idlesOf(c Condition) []time.Duration { return timersOf(c, true) }

func timersOf(c Condition, idle bool) []time.Duration {
	var out []time.Duration
	if c == nil {
		return nil
	}
	eachTimer(c, func(d time.Duration, isIdle bool) {
		if isIdle == idle && !slices.Contains(out, d) {
			out = append(out, d)
		}
	})
	slices.Sort(out)
	return out
}

// settingError is a condition's validation error: cond is the condition's
// policy key, with the path of the combinators above it ("any[1].stall");
// setting the setting under it ("pressure", "per_tool.search",
// "sources[1]"; "" for the condition as a whole); msg what is wrong. The
// policy parser maps setting onto the document to report the key path and
// line the user wrote.
type settingError struct {
	cond    string
	setting string
	msg     string
}

func (e *settingError) Error() string { return joinPath(e.cond, e.setting) + ": " + e.msg }

func badSetting(cond, setting, format string, args ...any) error {
	return &settingError{cond: cond, setting: setting, msg: fmt.Sprintf(format, args...)}
}

// joinPath appends a setting path to a key path: "a" + "b" is "a.b", "a" +
// "[1]" is "a[1]".
func joinPath(base, sub string) string {
	switch {
	case sub == "":
		return base
	case base == "":
		return sub
	case strings.HasPrefix(sub, "["):
		return base + sub
	}
	return base + "." + sub
}

// setting is a numeric setting and whether it was given. A policy may write
// 0, which must be refused as out of range rather than read as "not set";
// the Go constructors, whose zero values mean "not set", use nonZero.
type setting[T int | int64 | float64] struct {
	v   T
	set bool
}

func given[T int | int64 | float64](v T) setting[T]   { return setting[T]{v, true} }
func nonZero[T int | int64 | float64](v T) setting[T] { return setting[T]{v, v != 0} }

func positive(cond, name string, n setting[int]) error {
	if n.set && n.v <= 0 {
		return badSetting(cond, name, "must be a positive int, got %d", n.v)
	}
	return nil
}

func validNames(cond, sub string, names []string, emptyOK bool) error {
	if len(names) == 0 && !emptyOK {
		return badSetting(cond, sub, "needs at least one name")
	}
	for i, n := range names {
		if n == "" {
			return badSetting(cond, joinPath(sub, fmt.Sprintf("[%d]", i)), "must not be empty")
		}
	}
	return nil
}

// pressureReached reports whether used has reached fraction of limit, by
// the ratio rule of the budgets (see reached).
func pressureReached(used, limit int, fraction float64) bool {
	if u, l := float64(used), float64(limit); u < l*fraction*farBelow && l > 0 && fraction > 0 {
		// Far below (the common case, on every counted event): the ratio
		// is below the fraction whatever the rounding, and needs no
		// division (tens of cycles).
		return false
	}
	return float64(used)/float64(limit) >= fraction
}
