package termination

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Hold is a policy's top-level hold: key (§3): when a limit fires —
// max_iterations, max_tool_calls, a token or cost budget, the run's own or
// a tree: one — the run is held instead of stopped, until its limits are
// raised, it is stopped, or Timeout passes (it then ends with the limit's
// cause, as it would have ended without hold).
//
//	hold: {timeout: 15m}
type Hold struct {
	Timeout time.Duration // how long a run waits to be raised; > 0
}

// ErrNotHeld is returned by a raise that changed nothing: the run is not
// held at a limit (it never was, it was raised already, or it has ended),
// or it is held at a limit whose resource the raise does not name (the
// error says which).
var ErrNotHeld = errors.New("the run is not held at a limit")

// Hold returns the policy's top-level hold, and whether it has one.
func (p Policy) Hold() (Hold, bool) {
	if p.hold == nil {
		return Hold{}, false
	}
	return *p.hold, true
}

// readHold reads the hold: key's value at path into pol. It returns no
// condition: hold changes what a fired limit does, it fires nothing. The
// key is allowed only at the top level of a policy.
func readHold(p string, v *yaml.Node, pol *Policy) (Condition, error) {
	var h Hold
	err := mapping(p, v, []string{"timeout"}, func(_, kp string, v *yaml.Node) error {
		d, err := durationValue(kp, v)
		if err == nil && d <= 0 {
			err = perr(kp, v, "must be a duration > 0, got %s", d)
		}
		h.Timeout = d
		return err
	})
	if err != nil {
		return nil, err
	}
	if h.Timeout == 0 {
		return nil, perr(p, v, `needs timeout (a Go duration such as "15m")`)
	}
	pol.hold = &h
	return nil, nil
}

// isHoldableKey reports whether the policy key names a limit that hold:
// holds at (the causes Hold.Holds): max_iterations, max_tool_calls,
// token_budget, cost_budget.
func isHoldableKey(key string) bool {
	switch key {
	case "max_iterations", "max_tool_calls", "token_budget", "cost_budget":
		return true
	}
	return false
}

// checkHold accepts a hold: with no limit of its own policy to hold at:
// it holds the tree limits a remote parent propagates (§8), which become
// the run's own tree limits. A command that loads such a policy says so
// (HoldsNothingOfItsOwn).
func checkHold(*yaml.Node, *Policy) error { return nil }

// HoldsNothingOfItsOwn reports whether the policy has hold: but none of
// the limits it holds at (max_iterations, max_tool_calls, token_budget,
// cost_budget, its own or under tree:): its hold can only hold the tree
// limits a remote parent propagates (§8).
func (p Policy) HoldsNothingOfItsOwn() bool { return p.hold != nil && !p.limits }

// Holds reports whether a run under the hold is held rather than stopped
// when c fires (§3): MaxIterationsReached, MaxToolCallsReached (a per-tool
// limit included) and BudgetExhausted of the run's own limits or its
// tree's. A grace stop (BudgetPressure), a fleet budget, stall, errors,
// completion, idle and timeout are never held. The answer does not depend
// on the Timeout: (Hold{}).Holds(w) tells a run's warning w that is a limit
// it was held at from one that is not.
func (Hold) Holds(c Cause) bool {
	switch c := c.(type) {
	case MaxIterationsReached, MaxToolCallsReached:
		return true
	case BudgetExhausted:
		return c.Scope != ScopeFleet
	}
	return false
}

// ValidateRaise checks l as the amounts of a raise (Run.Raise, a raise
// record, agentstop raise): at least one, each positive and finite, and no
// time (a timeout is never held, so never raised). Amounts use the §2
// resource names.
func (l Limits) ValidateRaise() error {
	if l.Has == 0 {
		return errors.New("raise: needs at least one amount (iterations, tool_calls, total_tokens, input_tokens, output_tokens, cost)")
	}
	if l.Has&LimitTime != 0 {
		return errors.New("raise: time cannot be raised (a timeout is never held)")
	}
	bad := func(name string) error { return fmt.Errorf("raise: %s must be a positive amount", name) }
	switch {
	case l.Has&LimitIterations != 0 && l.Iterations <= 0:
		return bad("iterations")
	case l.Has&LimitToolCalls != 0 && l.ToolCalls <= 0:
		return bad("tool_calls")
	case l.Has&LimitTotalTokens != 0 && l.TotalTokens <= 0:
		return bad("total_tokens")
	case l.Has&LimitInputTokens != 0 && l.InputTokens <= 0:
		return bad("input_tokens")
	case l.Has&LimitOutputTokens != 0 && l.OutputTokens <= 0:
		return bad("output_tokens")
	case l.Has&LimitCost != 0 && (!(l.Cost > 0) || math.IsInf(l.Cost, 0)):
		return bad("cost")
	}
	return nil
}

// holdState is an Evaluator's hold: set by SetHold, nil without one.
type holdState struct {
	timeout time.Duration
	held    bool
	heldAt  time.Time // when the run was held (live: the wall clock)
	// What would have stopped the run: restored by EndHold.
	cause     Cause
	fired     []Cause
	stoppedAt int
	evidence  []int
}

// SetHold makes the evaluator hold at a limit instead of stopping (§3
// hold). Call it before the first event; a Timeout <= 0 is ignored.
func (e *Evaluator) SetHold(h Hold) {
	if h.Timeout > 0 {
		e.rare().hold = &holdState{timeout: h.Timeout}
	}
}

// Held returns the cause of the limit the run is held at, and true while
// it is held.
func (e *Evaluator) Held() (Cause, bool) {
	if e.holds() == nil || !e.holds().held {
		return nil, false
	}
	return e.holds().cause, true
}

// HeldSince returns when the run was held (on the evaluator's clock) and
// true while it is held.
func (e *Evaluator) HeldSince() (time.Time, bool) {
	if e.holds() == nil || !e.holds().held {
		return time.Time{}, false
	}
	return e.holds().heldAt, true
}

// Raise adds l's amounts to the run's limits of those resources and
// releases the held run: its next event is evaluated against the raised
// limits (a limit that is still reached fires again, and holds again).
// It returns ErrNotHeld, changing nothing, when the run is not held, and
// ValidateRaise's error for invalid amounts. A tool_calls amount raises
// max_tool_calls and every per-tool limit. A hold timeout (or a timeout)
// due before the raise has ended the run, though its timer has not fired
// yet: the raise returns ErrNotHeld, as replay finds it. On the wall clock the idle
// limits paused while the run was held: their clock resumes where it was;
// on the events' clock too, when [Evaluator.Advance] gave the raise's
// time (a raise record's).
func (e *Evaluator) Raise(l Limits) error {
	if e.clock == wallClock && e.cause == nil && e.holds() != nil && e.holds().held {
		e.fireDue(time.Now()) // a hold timeout or timeout due before the raise stands, its timer late or not
	}
	if err := e.CheckRaise(l); err != nil {
		return err
	}
	x := e.rare()
	if x.raised == nil {
		x.raised = new(Limits)
	}
	r := x.raised
	r.Has |= l.Has
	r.Iterations = satInt(r.Iterations, l.Iterations)
	r.ToolCalls = satInt(r.ToolCalls, l.ToolCalls)
	r.TotalTokens = addTokens(r.TotalTokens, l.TotalTokens)
	r.InputTokens = addTokens(r.InputTokens, l.InputTokens)
	r.OutputTokens = addTokens(r.OutputTokens, l.OutputTokens)
	r.Cost += l.Cost
	h := e.holds()
	e.resumeIdle(pauseOwn, e.raisedAt()) // idle paused while held
	*h = holdState{timeout: h.timeout}
	return nil
}

// CheckRaise reports what Raise would return, changing nothing:
// ValidateRaise's error for invalid amounts; ErrNotHeld when the run is
// not held, or when l does not name the resource of every limit that
// holds it (all that fired on the event that reached them: a raise that
// left one reached would release the run for one event, which would
// reach it again). A tool_calls amount names per-tool limits too.
func (e *Evaluator) CheckRaise(l Limits) error {
	if err := l.ValidateRaise(); err != nil {
		return err
	}
	h := e.holds()
	if h == nil || !h.held || e.cause != nil {
		return ErrNotHeld
	}
	var missing []string
	for _, c := range h.fired {
		if _, name := raiseBit(c); !l.Raises(c) && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
	}
	if missing != nil {
		return fmt.Errorf("%w the raise names: it is held at %s (%s), so a raise must name %s",
			ErrNotHeld, h.cause.TagValue(), h.cause.Error(), strings.Join(missing, " and "))
	}
	return nil
}

// Raises reports whether l, as a raise, names the resource of the limit
// whose cause is c (a holdable cause: MaxIterationsReached by iterations,
// MaxToolCallsReached by tool_calls, BudgetExhausted by its resource); false
// for any other cause.
func (l Limits) Raises(c Cause) bool {
	bit, _ := raiseBit(c)
	return bit != 0 && l.Has&bit != 0
}

// raiseBit is the amount of a raise that raises the limit whose cause is c
// (a holdable cause), and its §2 resource name.
func raiseBit(c Cause) (LimitMask, string) {
	switch c := c.(type) {
	case MaxIterationsReached:
		return LimitIterations, string(ResourceIterations)
	case MaxToolCallsReached:
		return LimitToolCalls, string(ResourceToolCalls)
	case BudgetExhausted:
		for _, f := range limitFields {
			if f.name == string(c.Resource) {
				return f.bit, f.name
			}
		}
	}
	return 0, ""
}

// EndHold ends a held run with the limit's cause, as it would have ended
// without hold (Fired, StoppedAt and Evidence those of the event that
// reached the limit): a stop of the held run, or its hold timeout. It
// returns the cause and true when the run was held.
func (e *Evaluator) EndHold() (Cause, bool) {
	if e.holds() == nil || !e.holds().held || e.cause != nil {
		return nil, false
	}
	h := e.holds()
	e.cause, e.ending().fired, e.ending().stoppedAt, e.ending().evidence = h.cause, h.fired, h.stoppedAt, h.evidence
	e.ending().ended = time.Now()
	h.held = false
	return e.cause, true
}

// holdOn holds the run at the causes the sink fired on event at instead of
// stopping it, when the evaluator holds and every one of them is
// holdable; it reports whether it did. The limit's cause is recorded as a
// warning. An event evaluated while the run is held (the live stage lets
// none through; a tree's other runs may have one under way) is counted,
// and a limit it reaches keeps the hold as it was.
func (e *Evaluator) holdOn(at int) bool {
	for _, c := range e.sink.fired() {
		if !(Hold{}).Holds(c) {
			return false
		}
	}
	h := e.holds()
	if h.held {
		// An event evaluated while held (another run of a held tree got
		// there first): the hold stands, at its first limit.
		return true
	}
	h.fired = slices.Clone(e.sink.fired())
	slices.SortStableFunc(h.fired, precedes)
	h.cause, h.stoppedAt = h.fired[0], at
	h.evidence = e.sink.evidenceOf(pickIndex(e.sink.fired()), at)
	h.held = true
	h.heldAt = e.last
	if e.clock == wallClock {
		h.heldAt = time.Now()
	}
	e.pauseIdle(pauseOwn, h.heldAt)
	e.addWarning(h.cause)
	return true
}

// holdDue is when a held run's hold timeout passes; ok is false when the
// run is not held, or is held on the events' clock before any event
// carried a time.
func (e *Evaluator) holdDue() (time.Time, bool) {
	h := e.holds()
	if h == nil || !h.held || h.heldAt.IsZero() {
		return time.Time{}, false
	}
	return h.heldAt.Add(h.timeout), true
}

// raisedAt is when a raise of the held run happens, on the evaluator's
// clock: now on the wall clock; on the events' clock the time Advance
// brought (zero when none did: the idle limits then count the hold).
func (e *Evaluator) raisedAt() time.Time {
	if e.clock == wallClock {
		return time.Now()
	}
	if p := e.tl().pause; p != nil {
		return p.reached
	}
	return time.Time{}
}

// Advance brings a held run's clock, on the events' clock, to at without
// an event: replay calls it with the time of a line that is no event of
// the run (a raise record). When the hold timeout is due at or before at,
// the hold has ended as its timer would have ended it live: with the
// limit's cause (StoppedAt the event that reached it), or with a timeout,
// which keeps counting while the run is held, when that was due first.
// Otherwise a raise that follows resumes the idle limits at at (a timeout
// alone is left to the run's next event, as for a run that is not held).
// It returns like Observe. A run that is not held, a zero at and the wall
// clock (use Tick) change nothing.
func (e *Evaluator) Advance(at time.Time) (Cause, bool) {
	h := e.holds()
	if e.cause != nil || e.clock != eventClock || at.IsZero() || h == nil || !h.held {
		return e.cause, e.cause != nil
	}
	if p := e.tl().pause; p != nil && at.After(p.reached) {
		p.reached = at // a raise resumes the idle limits here
	}
	if due, ok := e.holdDue(); ok && !due.After(at) && !e.start.IsZero() {
		e.fireDue(at) // the hold timeout, or a timeout due before it
	}
	return e.cause, e.cause != nil
}

// Idle pauses (§3 hold: "idle pauses while the run is held"). A run's idle
// limits pause while it is held at its own limit (holdOn, until Raise) and
// while a limit outside its evaluator holds it (a tree's: PauseIdle, until
// ResumeIdle); when the last of them ends, the time paused is added to the
// idle clock's base, so it resumes where it was.

// The reasons an idle clock pauses: bits of idlePause.by.
const (
	pauseOwn     uint8 = 1 << iota // the run's own hold
	pauseOutside                   // a hold outside the evaluator (a tree's)
)

// idlePause is an Evaluator's idle pause, made at its first pause.
type idlePause struct {
	by    uint8     // the reasons the idle clock is paused now; 0 when it runs
	since time.Time // when the current pause began (zero: unknown)
	// shift is, on the events' clock, the time paused since the last
	// timed event: the idle clock's base is that event's time plus shift
	// (the event's time itself stays the run's last, for Duration). On
	// the wall clock the base moves instead.
	shift time.Duration
	// reached is, on the events' clock, the latest time Advance brought
	// while the run is held (a raise record's): a raise resumes the idle
	// limits there.
	reached time.Time
}

// PauseIdle pauses the run's idle limits at at, on the evaluator's clock:
// a limit outside the evaluator holds the run (a tree's, at which every
// live run of the tree is held). ResumeIdle resumes them. An evaluator
// without idle limits ignores it.
func (e *Evaluator) PauseIdle(at time.Time) { e.pauseIdle(pauseOutside, at) }

// ResumeIdle resumes at at the idle limits PauseIdle paused: the time
// between the two is not idle time (unless the run's own hold still
// pauses them). A zero at, or one before the pause, resumes them without
// moving their base.
func (e *Evaluator) ResumeIdle(at time.Time) { e.resumeIdle(pauseOutside, at) }

// pauseIdle pauses the idle clock at at for reason.
func (e *Evaluator) pauseIdle(reason uint8, at time.Time) {
	if len(e.tl().idles) == 0 {
		return
	}
	p := e.x.timers.pause
	if p == nil {
		p = new(idlePause)
		e.x.timers.pause = p
	}
	if p.by == 0 {
		p.since = at
	}
	if reason == pauseOwn {
		p.reached = time.Time{} // a new hold: no raise time yet
	}
	p.by |= reason
}

// resumeIdle ends the pause for reason at at; the idle clock runs again
// when no other reason pauses it, its base moved on by the time paused.
func (e *Evaluator) resumeIdle(reason uint8, at time.Time) {
	p := e.tl().pause
	if p == nil || p.by&reason == 0 {
		return
	}
	p.by &^= reason
	if p.by != 0 || p.since.IsZero() || !at.After(p.since) {
		return
	}
	paused := at.Sub(p.since)
	switch {
	case e.clock == eventClock:
		p.shift += paused
	case !e.last.IsZero():
		e.last = e.last.Add(paused)
	}
}

// idlePaused reports whether the run's idle limits are paused.
func (e *Evaluator) idlePaused() bool {
	p := e.tl().pause
	return p != nil && p.by != 0
}

// idleBase is the time the idle clock counts from: the last event's (on
// the events' clock, plus the time paused since it).
func (e *Evaluator) idleBase() time.Time {
	if p := e.tl().pause; p != nil {
		return e.last.Add(p.shift)
	}
	return e.last
}

// idleRestarted is called at every timed event on the events' clock: the
// idle clock restarts at its time, with nothing paused since.
func (e *Evaluator) idleRestarted() {
	if e.x != nil && e.x.timers.pause != nil {
		e.x.timers.pause.shift = 0
	}
}

// raisedBy is how much the run's limits of r were raised.
func (s *sink) raisedBy(r Resource) float64 {
	raised := s.raised()
	if raised == nil || raised.Has == 0 {
		return 0
	}
	switch r {
	case ResourceTotalTokens:
		return float64(raised.TotalTokens)
	case ResourceInputTokens:
		return float64(raised.InputTokens)
	case ResourceOutputTokens:
		return float64(raised.OutputTokens)
	case ResourceCost:
		return raised.Cost
	case ResourceIterations:
		return float64(raised.Iterations)
	case ResourceToolCalls:
		return float64(raised.ToolCalls)
	}
	return 0
}

// raisedCount is how much the count limit of r was raised.
func (s *sink) raisedCount(r Resource) int {
	raised := s.raised()
	if raised == nil || raised.Has == 0 {
		return 0
	}
	if r == ResourceIterations {
		return raised.Iterations
	}
	return raised.ToolCalls
}

// satInt adds two non-negative ints, saturating.
func satInt(a, b int) int {
	if c := a + b; c >= a {
		return c
	}
	return math.MaxInt
}
