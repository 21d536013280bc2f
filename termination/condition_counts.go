package termination

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ---- Iterations and tool calls

// IterationLimits is an iteration limit with an optional early warning.
//
// As a Condition, it allows Limit iterations (message and final events)
// and fires MaxIterationsReached on the message event that makes the count
// Limit+1; a final event never fires it. With Pressure
// p it records BudgetPressure{resource: iterations, threshold: p, used:
// count, limit: Limit} the first time count/Limit >= p on a message event
// (55 of 100 at 0.55 warns on the 55th), once per run; the run goes on,
// and the limit is unchanged. A final event never warns.
type IterationLimits struct {
	// Limit is how many iterations (message and final events) are allowed;
	// it must be positive.
	Limit int
	// Pressure, in (0,1), records a BudgetPressure{resource: iterations}
	// warning on the first message event at which count/Limit >= Pressure.
	// 0: no warning.
	Pressure float64
}

// ToolCallLimits is a tool-call limit, overall and per tool, with an
// optional early warning. At least one of Limit and PerTool must be set.
//
// As a Condition, it allows Limit tool calls and fires MaxToolCallsReached
// on the tool_call event that makes the count Limit+1. A per-tool limit N for tool T fires MaxToolCallsReached{limit:
// N, count: N+1, tool: T} on the call of T that makes T's count N+1; when
// the overall limit fires on the same call, both are in Fired, the overall
// one first. Pressure warns as in IterationLimits, with resource
// tool_calls, on a tool_call event.
type ToolCallLimits struct {
	// Limit is how many tool calls are allowed in all; 0: no overall limit.
	Limit int
	// Pressure, in (0,1), records a BudgetPressure{resource: tool_calls}
	// warning on the first tool_call event at which count/Limit >=
	// Pressure. It needs Limit. 0: no warning.
	Pressure float64
	// PerTool allows each named tool that many calls (positive, and at
	// most Limit when Limit is set: a per-tool limit above the overall one
	// could never fire).
	PerTool map[string]int
}

// condition returns the condition l stands for.
func (l IterationLimits) condition() Condition {
	c := l.limit()
	return &c
}

// limit is the countLimit l stands for.
func (l IterationLimits) limit() countLimit {
	return countLimit{res: ResourceIterations, limit: nonZero(l.Limit), pressure: nonZero(l.Pressure),
		long: l.Pressure != 0}
}

// condition returns the condition l stands for.
func (l ToolCallLimits) condition() Condition {
	c := &countLimit{res: ResourceToolCalls, limit: nonZero(l.Limit), pressure: nonZero(l.Pressure),
		long: l.Pressure != 0 || l.PerTool != nil, perToolSet: l.PerTool != nil}
	for name, n := range l.PerTool {
		c.perTool = append(c.perTool, toolLimit{name, n})
	}
	c.sortPerTool()
	return c
}

type toolLimit struct {
	tool  string
	limit int
}

// countLimit is max_iterations and max_tool_calls.
type countLimit struct {
	res        Resource // ResourceIterations or ResourceToolCalls
	limit      setting[int]
	pressure   setting[float64]
	perTool    []toolLimit // by tool name
	perToolSet bool
	long       bool   // written as a mapping: errors name "limit"
	scope      string // ScopeTree for a tree limit (Tree), "" for a run's own
}

func (c *countLimit) sortPerTool() {
	slices.SortFunc(c.perTool, func(a, b toolLimit) int { return strings.Compare(a.tool, b.tool) })
}

func (c *countLimit) key() string {
	if c.res == ResourceIterations {
		return "max_iterations"
	}
	return "max_tool_calls"
}

func (c *countLimit) String() string {
	if !c.long {
		return fmt.Sprintf("%s: %d", c.key(), c.limit.v)
	}
	var parts []string
	if c.limit.set {
		parts = append(parts, fmt.Sprintf("limit: %d", c.limit.v))
	}
	if c.pressure.set {
		parts = append(parts, fmt.Sprintf("pressure: %g", c.pressure.v))
	}
	if c.perToolSet {
		tools := make([]string, len(c.perTool))
		for i, t := range c.perTool {
			tools[i] = fmt.Sprintf("%s: %d", t.tool, t.limit)
		}
		parts = append(parts, "per_tool: {"+strings.Join(tools, ", ")+"}")
	}
	return c.key() + ": {" + strings.Join(parts, ", ") + "}"
}

func (c *countLimit) Validate() error {
	key, limitKey := c.key(), ""
	if c.long {
		limitKey = "limit"
	}
	switch {
	case c.limit.set:
		if err := positive(key, limitKey, c.limit); err != nil {
			return err
		}
	case c.res == ResourceIterations:
		return badSetting(key, "limit", "is required")
	case !c.perToolSet:
		return badSetting(key, "", "needs limit or per_tool")
	}
	if c.pressure.set {
		if !(c.pressure.v > 0 && c.pressure.v < 1) {
			return badSetting(key, "pressure", "must be in (0,1), got %g", c.pressure.v)
		}
		if !c.limit.set {
			return badSetting(key, "pressure", "needs limit")
		}
	}
	if c.perToolSet && len(c.perTool) == 0 {
		return badSetting(key, "per_tool", "must not be empty")
	}
	for _, t := range c.perTool {
		if t.tool == "" {
			return badSetting(key, "per_tool", "tool names must not be empty")
		}
		if t.limit <= 0 {
			return badSetting(key, "per_tool."+t.tool, "must be a positive int, got %d", t.limit)
		}
		if c.limit.set && t.limit > c.limit.v {
			// The overall limit stops the run first: it could never fire.
			return badSetting(key, "per_tool."+t.tool, "must be <= limit (%d), got %d: a per-tool limit above the overall one can never fire", c.limit.v, t.limit)
		}
	}
	return nil
}

func (c *countLimit) start() check {
	if c.res == ResourceToolCalls && len(c.perTool) == 0 && !c.pressure.set {
		return statelessCount{c}
	}
	if len(c.perTool) == 0 {
		return &countCheck{countLimit: c}
	}
	return &toolCountCheck{countCheck{countLimit: c}, make([]int, len(c.perTool))}
}

// countCheck is the per-run state of a countLimit with pressure, or of an
// iteration limit (which notes the final event that took the count past
// it, for the evidence).
type countCheck struct {
	*countLimit
	finalAt int // the final event that took the iterations past the limit, 0 if none
	warned  bool
}

// toolCountCheck is countCheck for a tool-call limit with per-tool limits:
// it counts the calls of each (a check without them is 24 bytes, not 48).
type toolCountCheck struct {
	countCheck
	perToolCount []int
}

// statelessCount is the check of a plain tool-call limit, which needs no
// run state.
type statelessCount struct{ *countLimit }

func (s statelessCount) observe(ev *Event, p *progress, sk *sink) {
	if count, ok := s.counted(ev, p); ok && s.limit.set && count > s.limit.v+sk.raisedCount(s.res) {
		s.fireLimit(count, sk, nil)
	}
}

// counted returns the count of the condition's resource when ev is an
// event that may fire or warn it: a message for iterations (never a final),
// a tool_call for tool calls.
func (c *countLimit) counted(ev *Event, p *progress) (int, bool) {
	switch {
	case ev == nil:
		return 0, false
	case c.res == ResourceIterations:
		return p.Iterations, ev.Kind == KindMessage
	default:
		return p.ToolCalls, ev.Kind == KindToolCall
	}
}

func (c *countLimit) fireLimit(count int, s *sink, w witness) {
	limit := c.limit.v + s.raisedCount(c.res)
	if c.res == ResourceIterations {
		s.fire(MaxIterationsReached{Limit: limit, Count: count, Scope: c.scope}, w)
	} else {
		s.fire(MaxToolCallsReached{Limit: limit, Count: count, Scope: c.scope}, w)
	}
}

// observe counts the calls of each per-tool limit, after the overall
// limit (which fires first) and the pressure.
func (c *toolCountCheck) observe(ev *Event, p *progress, s *sink) {
	c.countCheck.observe(ev, p, s)
	if ev == nil || ev.Kind != KindToolCall {
		return
	}
	for i, t := range c.perTool {
		if t.tool == ev.Tool {
			c.perToolCount[i]++
			if n, limit := c.perToolCount[i], t.limit+s.raisedCount(ResourceToolCalls); n > limit {
				c.fireTool(t.tool, n, limit, s)
			}
		}
	}
}

func (c *countCheck) observe(ev *Event, p *progress, s *sink) {
	if ev != nil && ev.Kind == KindFinal {
		// A final never fires a limit (§3); the next message does, and its
		// evidence names the final that took the count past the limit.
		if c.res == ResourceIterations && c.limit.set && c.finalAt == 0 && p.Iterations > c.limit.v+s.raisedCount(c.res) {
			c.finalAt = p.Events
		}
		return
	}
	count, ok := c.counted(ev, p)
	if !ok {
		return
	}
	if c.limit.set && count > c.limit.v+s.raisedCount(c.res) {
		c.fireLimit(count, s, c)
	}
	if c.pressure.set && !c.warned && pressureReached(count, c.limit.v, c.pressure.v) {
		c.warned = true
		c.warn(count, s)
	}
}

// fireTool and warn fire and warn in frames of their own: observe runs on
// a live run's small stack, and causes built in its frame would make it
// larger.
//
//go:noinline
func (c *countCheck) fireTool(tool string, n, limit int, s *sink) {
	s.fire(MaxToolCallsReached{Limit: limit, Count: n, Tool: tool, Scope: c.scope}, nil)
}

//go:noinline
func (c *countCheck) warn(count int, s *sink) {
	s.warn(BudgetPressure{Resource: c.res, Threshold: c.pressure.v, Used: float64(count), Limit: float64(c.limit.v), Scope: c.scope})
}

// evidence is the firing event, preceded by the final event that took the
// iterations past the limit when there was one.
func (c *countCheck) evidence(cause Cause, at int) []int {
	if _, ok := cause.(MaxIterationsReached); ok && c.finalAt > 0 && c.finalAt < at {
		return []int{c.finalAt, at}
	}
	return []int{at}
}

// ---- Timeout and idle

// TimeLimits are the policy's timeout and idle keys (§3); at least one is
// set, each > 0, and the run stops when either fires.
//
//	termination.TimeLimits{Timeout: 30 * time.Minute, Idle: 90 * time.Second}
type TimeLimits struct {
	// Timeout fires Timeout once the run has lasted this long (elapsed >=
	// Timeout, so a run that lasted exactly Timeout has timed out): live,
	// from a timer even when no event arrives; in replay, as that timer
	// would have, by the events' times since the first timed event: before
	// the first event whose time is at or past the deadline, which is not
	// evaluated (events without a time never fire it). Elapsed is the
	// limit, live as in replay. It fires on clock ticks only: a live event
	// that arrives past the deadline is preceded by a tick, as in replay.
	Timeout time.Duration
	// Idle fires Timeout{Limit: Idle, Elapsed: Idle, Idle: true} once no
	// event has arrived for this long: a model call or a tool that hangs,
	// a consumer that stopped reading. Live, from a timer that starts with
	// the run and restarts at every event (a run's one timer checks the
	// time of its last event, so an event costs no timer work); in replay,
	// as that timer would have, by the events' times: before the first
	// event whose time is at or past the previous timed event's time +
	// Idle (the first timed event starts the clock), which is not
	// evaluated; events without a time neither fire nor restart it. When
	// a timeout and an idle limit are due before the same event, the one
	// due first fires, the timeout on a tie. Its tag is timeout; Idle tells
	// it apart.
	Idle time.Duration
}

func (l TimeLimits) condition() Condition {
	if l.Timeout == 0 && l.Idle == 0 {
		return &unset{key: "time limits", err: badSetting("time limits", "", "needs Timeout or Idle")}
	}
	var out anyOf
	if l.Timeout != 0 {
		out = append(out, &timeoutAfter{limit: l.Timeout})
	}
	if l.Idle != 0 {
		out = append(out, &idleAfter{limit: l.Idle})
	}
	if len(out) == 1 {
		return out[0]
	}
	return out
}

// String describes the limits in the policy file's terms.
func (l TimeLimits) String() string { return l.condition().String() }

// Validate reports a limit that is not > 0, or none set.
func (l TimeLimits) Validate() error {
	switch {
	case l.Timeout == 0 && l.Idle == 0:
		return l.condition().Validate()
	case l.Timeout < 0:
		return badSetting("timeout", "", "must be > 0, got %s", l.Timeout)
	case l.Idle < 0:
		return badSetting("idle", "", "must be > 0, got %s", l.Idle)
	}
	return nil
}
func (l TimeLimits) start() check                       { return l.condition().start() }
func (l TimeLimits) timers(f func(time.Duration, bool)) { eachTimer(l.condition(), f) }

type timeoutAfter struct {
	limit time.Duration
	scope string // ScopeTree for a tree limit (Tree), "" for a run's own
}

func (c *timeoutAfter) String() string { return "timeout: " + c.limit.String() }
func (c *timeoutAfter) Validate() error {
	if c.limit <= 0 {
		return badSetting("timeout", "", "must be > 0, got %s", c.limit)
	}
	return nil
}
func (c *timeoutAfter) start() check                       { return c }
func (c *timeoutAfter) timers(f func(time.Duration, bool)) { f(c.limit, false) }
func (c *timeoutAfter) observe(ev *Event, p *progress, s *sink) {
	if ev == nil && p.Clocked && p.Elapsed >= c.limit {
		s.fire(Timeout{Limit: c.limit, Elapsed: p.Elapsed, Scope: c.scope}, noEvidence{})
	}
}

// ---- Idle

type idleAfter struct{ limit time.Duration }

func (c *idleAfter) String() string { return "idle: " + c.limit.String() }
func (c *idleAfter) Validate() error {
	if c.limit <= 0 {
		return badSetting("idle", "", "must be > 0, got %s", c.limit)
	}
	return nil
}
func (c *idleAfter) start() check                       { return c }
func (c *idleAfter) timers(f func(time.Duration, bool)) { f(c.limit, true) }
func (c *idleAfter) observe(ev *Event, _ *progress, s *sink) {
	if ev == nil && s.idle() >= c.limit {
		s.fire(Timeout{Limit: c.limit, Elapsed: c.limit, Idle: true}, noEvidence{})
	}
}
