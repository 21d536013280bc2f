package termination

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"
)

// clockKind says where an Evaluator's time comes from (NewEvaluator's start).
type clockKind uint8

const (
	// wallClock measures elapsed time from the run's start with time.Now:
	// live stages.
	wallClock clockKind = iota
	// eventClock measures elapsed time from the first event that has a Time:
	// replay of recorded logs. Events without a time never fire a timeout.
	eventClock
)

// Evaluator is the state of one run: it takes events one at a time and
// decides whether the run must stop. It is not safe for concurrent use; one
// run, one Evaluator.
type Evaluator struct {
	root     check
	clock    clockKind
	clocked  bool // the condition has a timeout or an idle limit, so time must be read
	callKeys bool // a stall check needs each tool call's key
	stalled  bool // a stall warning was recorded (at most one per run)
	lastKind Kind
	// next is the first of timeouts not yet ticked; nextIdle the first of
	// idles not yet ticked since the last event. (int32s beside the small
	// fields keep a live run's Evaluator in its size class.)
	next, nextIdle int32
	progress       progress
	sink           sink
	start          time.Time
	// last is the time of the last event: live, when it arrived (the
	// start before the first), for the idle limits; in replay, the last
	// event that carried a time (or the deadline that stopped the run).
	last  time.Time
	cause Cause
	// x holds what most live runs never need, nil until one does (a live
	// run's Evaluator is 192 bytes, a size class, without it).
	x *evalRare
}

// evalRare is the part of an Evaluator that most live runs never need:
// made by NewEvaluator for a condition with timers, else on first use.
type evalRare struct {
	warnings []Cause    // the warnings recorded, in order (most runs have none)
	timers   evalTimers // the condition's timer limits; none without any
	end      *evalEnd   // how the run stopped (ending): nil while it runs
	hold     *holdState // hold: (hold.go); nil without one
	lastErr  string     // the error of the last error event
	cur      *Event     // Observe's copy of the event: ObserveRef callers never need it
	raised   *Limits    // what the limits were raised by (hold.go); nil before a raise
}

// rare returns e.x, making it on first use.
func (e *Evaluator) rare() *evalRare {
	if e.x == nil {
		e.x = new(evalRare)
	}
	return e.x
}

// holds returns e's hold state, nil without hold.
func (e *Evaluator) holds() *holdState {
	if e.x == nil {
		return nil
	}
	return e.x.hold
}

// evalTimers are the timer limits of an Evaluator's condition: timeouts,
// ascending (replay ticks at each deadline before the first event past
// it), and idle limits, ascending, counted from the last event; and, on
// a clock tick for an idle limit, how long the run has been idle (0 on
// events and on timeout ticks).
type evalTimers struct {
	timeouts, idles []time.Duration
	idle            time.Duration
	pause           *idlePause // while the idle limits pause for a hold (hold.go); nil before the first
}

// noTimers stands for the timers of a condition without any.
var noTimers evalTimers

// tl returns e's timer limits (noTimers when it has none).
func (e *Evaluator) tl() *evalTimers {
	if e.x == nil {
		return &noTimers
	}
	return &e.x.timers
}

// evalEnd is what an Evaluator records when its run stops. It is
// allocated then, not with every run: a live run is smaller without it.
type evalEnd struct {
	fired     []Cause
	evidence  []int
	stoppedAt int
	ended     time.Time
}

// ending returns the record of how the run stopped, making it on first
// use (once the run stops, or its Result is made).
func (e *Evaluator) ending() *evalEnd {
	x := e.rare()
	if x.end == nil {
		x.end = new(evalEnd)
	}
	return x.end
}

// NewEvaluator starts a run of c. c must be valid ([Condition.Validate]); an
// invalid condition still evaluates, with out-of-range limits behaving as
// written. A nil c never fires.
//
// start is when the run started, on the wall clock: time.Now() for a live
// run, whose timeouts and idle limits count from it and fire from Tick (a
// timer). The zero time puts the Evaluator on the events' clock instead,
// for the replay of a recorded log: elapsed time counts from the first
// event that carries a Time, timeouts fire before the first event at or
// past their deadline, and events without a time never fire one (contract
// §3); Tick and NextTick then do nothing. So a live caller must pass its
// run's real start: an unset time.Time turns its timeouts and idle limits
// off (no timer ever fires them), and a start long past fires them on the
// first event.
func NewEvaluator(c Condition, start time.Time) *Evaluator {
	switch c.(type) {
	case nil:
		c = AnyOf()
	case TimeLimits:
		c = lower(c) // built once, for its check and its timers
	}
	clock := wallClock
	if start.IsZero() {
		clock = eventClock
	}
	e := &Evaluator{root: c.start(), clock: clock}
	e.sink.run = e
	eachTimer(c, func(time.Duration, bool) { e.clocked = true })
	if e.clocked {
		e.rare().timers = evalTimers{timeouts: timeoutsOf(c), idles: idlesOf(c)}
	}
	e.callKeys = usesCallKey(e.root)
	if clock == wallClock {
		e.start = start
		e.last = start
	}
	return e
}

// Observe evaluates one event. It returns the cause and true when the run
// must stop: on this event, or earlier (a stopped Evaluator evaluates
// nothing more). An event that fails [Event.Validate] stops the run with
// Failed{reason: invalid_input} naming it; it counts as evaluated but adds
// nothing to the counts or budgets.
func (e *Evaluator) Observe(ev Event) (Cause, bool) {
	if e.cause != nil {
		return e.cause, true
	}
	return e.ObserveRef(e.copyOf(&ev))
}

// copyOf copies *ev into Observe's copy of the event, made on first use,
// and returns the copy. (A frame of its own: Observe's stays small.)
//
//go:noinline
func (e *Evaluator) copyOf(ev *Event) *Event {
	x := e.rare()
	if x.cur == nil {
		x.cur = new(Event)
	}
	*x.cur = *ev
	return x.cur
}

// ObserveRef is Observe without copying the event, for hot paths: ev is
// read during the call only. Pass a pointer to long-lived memory (a field
// of the caller's own state); a pointer to a local variable makes the
// variable escape to the heap.
func (e *Evaluator) ObserveRef(ev *Event) (Cause, bool) {
	return e.observeRefKeyed(ev, 0, false)
}

// observeRefKeyed is ObserveRef for an event whose args' hash the caller
// may have computed already: argsKey is canonical.ArgsKey(ev.Args) when argsKeyed.
func (e *Evaluator) observeRefKeyed(ev *Event, argsKey uint64, argsKeyed bool) (Cause, bool) {
	if e.cause != nil {
		return e.cause, true
	}
	if !ev.valid() {
		return e.invalid(ev)
	}
	var now time.Time // live: when ev arrived, read once
	if e.clocked {
		if e.clock == wallClock {
			now = time.Now()
		}
		if e.deadlineBefore(ev, now) {
			return e.cause, true // a timeout or idle limit fired before ev: ev is not evaluated
		}
	}
	p := &e.progress
	p.Events++
	switch ev.Kind {
	case KindMessage, KindFinal:
		p.Iterations++
	case KindToolCall:
		p.ToolCalls++
	}
	if !ev.Usage.IsZero() || ev.Cost != 0 { // most events spend nothing
		p.spend(ev)
	}
	e.lastKind = ev.Kind
	if ev.Kind == KindError {
		e.rare().lastErr = ev.ErrorText()
	}
	e.sink.callKey = 0
	if e.callKeys && ev.Kind == KindToolCall {
		// Hashed here rather than under the stall check: the canonical
		// hashing of the args recurses, and a live run's goroutine
		// evaluates with a small stack.
		if argsKeyed && ev.argsHash() == "" {
			e.sink.callKey = pairKey(ev.Tool, argsKey) // callKey, hashed already
		} else {
			e.sink.callKey = callKey(ev)
		}
	}
	// ev is evaluated with the run's clock brought up to it.
	if e.clocked || e.clock == eventClock {
		e.clockTo(ev, now)
	}
	e.sink.reset()
	before := len(e.warns())
	e.root.observe(ev, p, &e.sink)
	if len(e.warns())-before > 1 {
		e.sortWarnings(before)
	}
	if len(e.sink.fired()) == 0 {
		return nil, false // nothing fired: settle's first test, without its call
	}
	return e.settle(p.Events)
}

// spend adds what ev spent to p, in saturating sums: absurd input must
// not wrap a budget around.
func (p *progress) spend(ev *Event) {
	p.Tokens.InputTokens = addTokens(p.Tokens.InputTokens, ev.Usage.InputTokens)
	p.Tokens.OutputTokens = addTokens(p.Tokens.OutputTokens, ev.Usage.OutputTokens)
	switch c := p.Cost + ev.Cost; {
	case math.IsInf(c, 1):
		p.Cost = math.MaxFloat64
	case !math.IsNaN(c) && !math.IsInf(c, -1):
		p.Cost = c
	}
}

// Tick evaluates the passing of time with no event: a live stage's timer
// calls it. It fires the timeouts and idle limits due at now, and returns
// like Observe. An Evaluator on the events' clock ignores it.
func (e *Evaluator) Tick(now time.Time) (Cause, bool) {
	if e.cause == nil && e.clock == wallClock {
		e.fireDue(now)
	}
	return e.cause, e.cause != nil
}

// NextTick is when the next timeout or idle limit of a live run falls due,
// as things stand (an event moves the idle deadline on): the time its timer
// is armed for. ok is false when none is left, or the run has stopped.
func (e *Evaluator) NextTick() (at time.Time, ok bool) {
	if e.cause != nil || e.clock != wallClock {
		return time.Time{}, false
	}
	if int(e.next) < len(e.tl().timeouts) {
		at, ok = e.start.Add(e.tl().timeouts[e.next]), true
	}
	if int(e.nextIdle) < len(e.tl().idles) && !e.idlePaused() {
		if d := e.last.Add(e.tl().idles[e.nextIdle]); !ok || d.Before(at) {
			at, ok = d, true
		}
	}
	if d, held := e.holdDue(); held && (!ok || d.Before(at)) {
		at, ok = d, true
	}
	return at, ok
}

// deadlineBefore fires the timeouts and idle limits whose deadline ev is at
// or past before ev is evaluated, as the live timer would have (§3); now
// is when ev arrived, on the wall clock. It reports whether the run
// stopped; StoppedAt is then the last event evaluated.
func (e *Evaluator) deadlineBefore(ev *Event, now time.Time) bool {
	switch {
	case e.clock == wallClock:
		return e.fireDue(now)
	case ev.Time.IsZero() || e.start.IsZero():
		return false
	}
	return e.fireDue(ev.Time)
}

// fireDue ticks at each deadline at or before at, in the order they fall
// due (a timeout before an idle limit due at the same time), each with
// elapsed its limit, live as in replay (doc.go). It reports whether the
// run stopped.
func (e *Evaluator) fireDue(at time.Time) bool {
	for {
		var timeoutAt, idleAt time.Time
		timeout := int(e.next) < len(e.tl().timeouts)
		if timeout {
			timeoutAt = e.start.Add(e.tl().timeouts[e.next])
			timeout = !timeoutAt.After(at)
		}
		idle := int(e.nextIdle) < len(e.tl().idles) && !e.last.IsZero() && !e.idlePaused()
		if idle {
			idleAt = e.idleBase().Add(e.tl().idles[e.nextIdle])
			idle = !idleAt.After(at)
		}
		if holdAt, held := e.holdDue(); held && !holdAt.After(at) && (!timeout || holdAt.Before(timeoutAt)) {
			e.EndHold() // the hold timeout passed: the limit's cause stands
			return true
		}
		var stopped bool
		switch {
		case timeout && (!idle || !idleAt.Before(timeoutAt)):
			tick := e.tl().timeouts[e.next]
			e.next++
			stopped = e.tickClock(tick, 0, e.start.Add(tick))
		case idle:
			limit := e.tl().idles[e.nextIdle]
			e.nextIdle++
			stopped = e.tickClock(0, limit, idleAt)
		default:
			return false
		}
		if stopped {
			return true
		}
	}
}

// tickClock evaluates one clock tick: a timeout's (elapsed > 0: the run's
// age) or an idle limit's (idle > 0: how long no event came). When the
// run stops, a replayed run lasted until end (§4 duration).
func (e *Evaluator) tickClock(elapsed, idle time.Duration, end time.Time) bool {
	p := &e.progress
	saved := *p
	p.Elapsed, p.Clocked = elapsed, idle == 0
	e.sink.reset()
	if idle > 0 { // an idle limit's tick: the run has timers
		e.x.timers.idle = idle
	}
	e.root.observe(nil, p, &e.sink)
	if idle > 0 {
		e.x.timers.idle = 0
	}
	if _, stopped := e.settle(p.Events); stopped {
		if e.clock == eventClock {
			e.last = end
		}
		return true
	}
	*p = saved
	return false
}

// clockTo brings the run's clock up to ev (arrived at now, live): for a
// condition with timers, or on the events' clock (observeRefKeyed calls it
// only then: otherwise it does nothing).
func (e *Evaluator) clockTo(ev *Event, now time.Time) {
	p := &e.progress
	switch {
	case !e.clocked:
	case e.clock == wallClock:
		p.Elapsed, p.Clocked = now.Sub(e.start), true
		e.last, e.nextIdle = now, 0 // the idle clock restarts at every event
	case ev.Time.IsZero():
		p.Clocked = false
	default:
		if e.start.IsZero() {
			e.start = ev.Time
		}
		p.Elapsed, p.Clocked = ev.Time.Sub(e.start), true
	}
	if e.clock == eventClock && !ev.Time.IsZero() {
		if e.start.IsZero() {
			e.start = ev.Time
		}
		e.last, e.nextIdle = ev.Time, 0 // the idle clock restarts at every timed event
		e.idleRestarted()
	}
}

// sortWarnings puts the warnings from before on, several recorded on one
// event, in the contract's order.
//
//go:noinline
func (e *Evaluator) sortWarnings(before int) {
	slices.SortStableFunc(e.warns()[before:], warningOrder)
}

// invalid stops the run on an event that fails Validate: it counts as
// evaluated (StoppedAt names it) but adds nothing to the counts or budgets.
func (e *Evaluator) invalid(ev *Event) (Cause, bool) {
	e.progress.Events++
	c := Failed{Reason: FailInvalidInput, Err: fmt.Sprintf("event %d: %v", e.progress.Events, ev.Validate())}
	e.cause, e.ending().fired, e.ending().stoppedAt = c, []Cause{c}, e.progress.Events
	e.ending().evidence = []int{e.progress.Events}
	e.ending().ended = time.Now()
	return c, true
}

func (e *Evaluator) settle(at int) (Cause, bool) {
	if len(e.sink.fired()) == 0 {
		return nil, false
	}
	if e.holds() != nil && e.holdOn(at) {
		return nil, false
	}
	e.ending().fired = slices.Clone(e.sink.fired())
	slices.SortStableFunc(e.ending().fired, precedes)
	e.cause, e.ending().stoppedAt = e.ending().fired[0], at
	e.ending().evidence = e.sink.evidenceOf(pickIndex(e.sink.fired()), at)
	e.ending().ended = time.Now()
	return e.cause, true
}

// Stop ends the run with c unless it has already stopped, and reports
// whether c became the run's cause. It is for stops that come from outside
// the event stream: a cancelled context, an external stop, invalid input.
// Fired is [c]. A nil c (a typed nil included) is ignored.
func (e *Evaluator) Stop(c Cause) bool {
	if !e.EndStream(c) {
		return false
	}
	e.ending().fired = []Cause{c}
	return true
}

// EndStream ends the run with c as the stream's own end (a stream error
// reported by the loop) unless it has already stopped, and reports whether
// c became the run's cause. Nothing fired: Fired is empty, as for a stream
// that Result finds ended by itself.
func (e *Evaluator) EndStream(c Cause) bool {
	if e.cause != nil || nilCause(c) {
		return false
	}
	e.cause, e.ending().fired, e.ending().stoppedAt = c, nil, 0
	e.ending().ended = time.Now()
	return true
}

// Stopped returns the cause once the run has stopped.
func (e *Evaluator) Stopped() (Cause, bool) { return e.cause, e.cause != nil }

// Timeouts returns the distinct timeout limits of the condition,
// ascending: a live run arms its timer for the first one due.
func (e *Evaluator) Timeouts() []time.Duration { return slices.Clone(e.tl().timeouts) }

// Idles returns the distinct idle limits of the condition, ascending:
// counted from the run's last event.
func (e *Evaluator) Idles() []time.Duration { return slices.Clone(e.tl().idles) }

// Progress returns what the run spent so far: the events evaluated, their
// iterations, tool calls, tokens and cost.
func (e *Evaluator) Progress() Totals { return e.progress.Totals }

// Events returns how many events were evaluated (Progress().Events,
// without copying the Totals: a live run reads it twice an event).
func (e *Evaluator) Events() int { return e.progress.Events }

// Warnings returns the warnings recorded so far (BudgetPressure,
// StallDetected), in order.
func (e *Evaluator) Warnings() []Cause { return slices.Clone(e.warns()) }

// warns returns the warnings recorded so far, without copying.
func (e *Evaluator) warns() []Cause {
	if e.x == nil {
		return nil
	}
	return e.x.warnings
}

// addWarning records a warning.
func (e *Evaluator) addWarning(c Cause) {
	x := e.rare()
	x.warnings = append(x.warnings, c)
}

// Result ends the run if it is still going (the stream ended by itself:
// Failed{reason: stream_error} if the last event was an error event,
// NaturalCompletion otherwise; nothing fired) and reports it. The outcome is the cause's
// default; the stage name and tag are left for the caller.
func (e *Evaluator) Result() Result {
	if e.cause == nil {
		if e.lastKind == KindError {
			e.EndStream(Failed{Reason: FailStreamError, Err: e.rare().lastErr})
			e.ending().evidence = []int{e.progress.Events} // the final error event
		} else {
			e.EndStream(NaturalCompletion{})
		}
	}
	r := Result{
		Cause:     e.cause,
		Outcome:   defaultOutcome(e.cause),
		Fired:     slices.Clone(e.ending().fired),
		Warnings:  slices.Clone(e.warns()),
		StoppedAt: e.ending().stoppedAt,
		Totals:    e.progress.Totals,
		Evidence:  slices.Clone(e.ending().evidence),
	}
	// The budgets are found when the result is made rather than listed in
	// the Evaluator: a live run is smaller without the list.
	r.Budgets = appendBudgets(nil, []check{e.root}, &e.progress, &e.sink)
	switch {
	case e.clock == wallClock:
		r.Duration = e.ending().ended.Sub(e.start)
	case e.start.IsZero():
		r.Untimed = true // no event carried a time
	default:
		r.Duration = e.last.Sub(e.start)
		if t, ok := e.cause.(Timeout); ok && t.Scope == "" && !t.Idle {
			// A replayed timeout fires as the timer would have: the run
			// lasted until the limit, not until the last event before it.
			r.Duration = max(r.Duration, t.Elapsed)
		}
	}
	return r
}

// Result is what a finished stage run amounts to.
type Result struct {
	Stage string // the stage name, set by the caller
	// Cause is why the run stopped; never rewritten.
	Cause Cause
	// TerminationCause is the termination_cause value recorded for Cause
	// (see Tag); "" means Tag(Cause, nil).
	TerminationCause string
	Outcome          Outcome // the cause's default outcome, or the stage's override
	Fired            []Cause // every cause that fired on the stopping event (or timer tick, or Stop), in precedence order; empty when the stream ended by itself
	Warnings         []Cause // warnings (BudgetPressure, StallDetected) in the order recorded; several on one event in the contract's order
	StoppedAt        int     // 1-based index of the event that fired; 0 when nothing fired on an event
	Totals                   // what the evaluated events spent (Events: how many were evaluated)
	Drained          int     // events discarded after the stop so the producer never blocked (live only)
	// Duration is how long the run lasted: live, from its start to its
	// end; in replay, from the first event that carries a time to the last
	// evaluated event that carries one, or to the timeout.
	Duration time.Duration
	// Untimed is set by replay when no evaluated event carried a time:
	// Duration is then unknown, and the JSON form has no "duration".
	Untimed bool
	// Evidence is the 1-based indices of the events that make up the
	// cause's signal, ascending (§3 "Evidence"); nil for a timeout, a
	// cancellation or a natural completion.
	Evidence []int
	// Truncated is set when a lenient replay reached a truncated last line
	// (§1, §4).
	Truncated bool
	// Run is the run's id and Parent its parent run's id, when known (§8).
	Run, Parent string
	// Budgets is the usage of every budgeted resource at the end of the
	// run, for utilization metrics.
	Budgets []BudgetUsage
	// Tree is what the run and all its descendants spent, as its tree
	// limits counted it (§8), beside the run's own Iterations, ToolCalls,
	// Tokens and Cost: the figures a tree cause's used and count come
	// from. It is set only for a run that holds tree limits (a policy's
	// tree:, middleware.WithTreeLimits, or limits a remote caller
	// propagated), nil otherwise.
	Tree *Totals
	// Shadow holds the verdicts of the stage's shadow policies (§5.2),
	// by name: the cause and event at which each would have stopped the
	// run, nil for a policy that would not have. It is nil for a stage
	// without shadow policies (the JSON form then has no "shadow").
	// Shared by every copy of the Result: read only.
	Shadow map[string]*ShadowVerdict
	// FromRecord is set by a replay whose policy did not stop the run
	// before its end record (§4 "Recorded runs"): the cause, stopped_at
	// and events are the recorded end's, not derived from the events.
	FromRecord bool
	// Live is the termination_cause the run's end record gives (how it
	// ended live), on every replayed result of a run with an end record;
	// "" for a run without one.
	Live string
	// Incomplete is set by replay for a run whose lines the recorder
	// dropped under load (a line with "dropped"): its events are not all
	// in the log.
	Incomplete bool
}

// Totals is what a run spent — events evaluated, iterations (message and
// final events), tool calls, tokens and cost: the one shape of it, in a
// Result (its own events), Evaluator.Progress (so far), a holder's Result.Tree
// (its subtree, which counts no events) and a backtest's savings.
type Totals struct {
	Events     int
	Iterations int
	ToolCalls  int
	Tokens     Usage
	Cost       float64
}

// Add adds o to t.
func (t *Totals) Add(o Totals) {
	t.Events += o.Events
	t.Iterations += o.Iterations
	t.ToolCalls += o.ToolCalls
	t.Tokens = t.Tokens.Add(o.Tokens)
	t.Cost += o.Cost
}

// BudgetUsage is how much of a budgeted resource a run used.
type BudgetUsage struct {
	Resource Resource
	Used     float64
	Limit    float64
}

// Utilization returns Used / Limit.
func (b BudgetUsage) Utilization() float64 { return b.Used / b.Limit }

// Tag returns the result's termination_cause value.
func (r Result) Tag() string {
	if r.TerminationCause != "" {
		return r.TerminationCause
	}
	return Tag(r.Cause, nil)
}

// MarshalJSON writes the contract's replay object: stage,
// termination_cause, outcome, cause, fired, warnings, stopped_at, events,
// iterations, tool_calls, tokens {input, output}, cost, evidence (always an
// array), duration (a Go duration string such as "41s"; absent when
// Untimed), truncated (only when true), run and parent when set (§8), and
// tree (only for a holder of tree limits: {iterations, tool_calls, tokens
// {input, output}, cost}, the subtree's totals), and shadow (only for a
// stage with shadow policies: {NAME: {cause, stopped_at} or null}).
func (r Result) MarshalJSON() ([]byte, error) {
	cause, err := marshalOptionalCause(r.Cause)
	if err != nil {
		return nil, err
	}
	fired, err := marshalCauses(r.Fired)
	if err != nil {
		return nil, err
	}
	warnings, err := marshalCauses(r.Warnings)
	if err != nil {
		return nil, err
	}
	return json.Marshal(resultJSON{
		Stage: r.Stage, TerminationCause: r.Tag(), Outcome: r.Outcome,
		Cause: cause, Fired: fired, Warnings: warnings,
		StoppedAt: r.StoppedAt, Evidence: evidenceJSON(r.Evidence), Events: r.Events, Iterations: r.Iterations, ToolCalls: r.ToolCalls,
		Tokens: tokensJSON{Input: r.Tokens.InputTokens, Output: r.Tokens.OutputTokens}, Cost: r.Cost,
		Duration: durationJSON(r), Truncated: r.Truncated,
		Run: r.Run, Parent: r.Parent, Tree: totalsJSONOf(r.Tree), Shadow: r.Shadow,
		FromRecord: r.FromRecord, Live: r.Live, Incomplete: r.Incomplete,
	})
}

// UnmarshalJSON reads the form written by MarshalJSON.
func (r *Result) UnmarshalJSON(b []byte) error {
	var raw resultJSON
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := Result{Stage: raw.Stage, TerminationCause: raw.TerminationCause, Outcome: raw.Outcome,
		StoppedAt: raw.StoppedAt, Evidence: slices.Clip(raw.Evidence),
		Totals: Totals{Events: raw.Events, Iterations: raw.Iterations, ToolCalls: raw.ToolCalls,
			Tokens: Usage{InputTokens: raw.Tokens.Input, OutputTokens: raw.Tokens.Output}, Cost: raw.Cost},
		Run: raw.Run, Parent: raw.Parent, FromRecord: raw.FromRecord, Live: raw.Live, Incomplete: raw.Incomplete}
	if len(raw.Shadow) > 0 {
		out.Shadow = raw.Shadow
	}
	if t := raw.Tree; t != nil {
		out.Tree = &Totals{Iterations: t.Iterations, ToolCalls: t.ToolCalls,
			Tokens: Usage{InputTokens: t.Tokens.Input, OutputTokens: t.Tokens.Output}, Cost: t.Cost}
	}
	var err error
	if len(raw.Cause) > 0 && string(raw.Cause) != "null" {
		if out.Cause, err = unmarshalCause(raw.Cause); err != nil {
			return err
		}
	}
	out.Truncated = raw.Truncated
	if raw.Duration == nil {
		out.Untimed = true
	} else if out.Duration, err = time.ParseDuration(*raw.Duration); err != nil {
		return fmt.Errorf("duration: must be a duration such as 41s or 1m30s, got %q", *raw.Duration)
	}
	if len(out.Evidence) == 0 {
		out.Evidence = nil
	}
	if out.Fired, err = unmarshalCauses(raw.Fired); err != nil {
		return err
	}
	if out.Warnings, err = unmarshalCauses(raw.Warnings); err != nil {
		return err
	}
	*r = out
	return nil
}

type resultJSON struct {
	Stage            string            `json:"stage"`
	TerminationCause string            `json:"termination_cause"`
	Outcome          Outcome           `json:"outcome"`
	Cause            json.RawMessage   `json:"cause"`
	Fired            []json.RawMessage `json:"fired"`
	Warnings         []json.RawMessage `json:"warnings"`
	StoppedAt        int               `json:"stopped_at"`
	Events           int               `json:"events"`
	Iterations       int               `json:"iterations"`
	ToolCalls        int               `json:"tool_calls"`
	Tokens           tokensJSON        `json:"tokens"`
	Cost             float64           `json:"cost"`
	Evidence         []int             `json:"evidence"`
	Duration         *string           `json:"duration,omitempty"`
	Truncated        bool              `json:"truncated,omitempty"`
	Run              string            `json:"run,omitempty"`         // §8: a run of a multi-run log
	Parent           string            `json:"parent,omitempty"`      // §8: its parent run
	Tree             *totalsJSON       `json:"tree,omitempty"`        // §8: a holder's subtree totals
	FromRecord       bool              `json:"from_record,omitempty"` // §4: the recorded end
	Live             string            `json:"live,omitempty"`        // §4: the recorded cause's tag
	Incomplete       bool              `json:"incomplete,omitempty"`  // §1: the recorder dropped lines of the run
	// §5.2: the shadow policies' verdicts, null for one that would not
	// have stopped the run.
	Shadow map[string]*ShadowVerdict `json:"shadow,omitempty"`
}

// totalsJSON is the JSON form of Totals, as a result's own totals are
// written.
type totalsJSON struct {
	Iterations int        `json:"iterations"`
	ToolCalls  int        `json:"tool_calls"`
	Tokens     tokensJSON `json:"tokens"`
	Cost       float64    `json:"cost"`
}

func totalsJSONOf(t *Totals) *totalsJSON {
	if t == nil {
		return nil
	}
	return &totalsJSON{Iterations: t.Iterations, ToolCalls: t.ToolCalls,
		Tokens: tokensJSON{Input: t.Tokens.InputTokens, Output: t.Tokens.OutputTokens}, Cost: t.Cost}
}

// durationJSON is the "duration" of r: nil (absent) when Untimed.
func durationJSON(r Result) *string {
	if r.Untimed {
		return nil
	}
	d := r.Duration.String()
	return &d
}

type tokensJSON struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
}

// evidenceJSON is the evidence as written: [] rather than null when none.
func evidenceJSON(ev []int) []int {
	if ev == nil {
		return []int{}
	}
	return ev
}

func marshalOptionalCause(c Cause) (json.RawMessage, error) {
	if c == nil {
		return json.RawMessage("null"), nil
	}
	return marshalCause(c)
}

// addTokens adds two token counts, saturating at the int64 limits.
func addTokens(a, b int64) int64 {
	c := a + b
	if (c > a) == (b > 0) {
		return c
	}
	if b > 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}

// WarningsSince returns the warnings recorded after the first n, without
// copying: a live stage uses it to hand new warnings to its hooks. The slice
// must not be modified.
func (e *Evaluator) WarningsSince(n int) []Cause {
	w := e.warns()
	if n >= len(w) {
		return nil
	}
	return w[n:]
}
