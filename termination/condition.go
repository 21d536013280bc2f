package termination

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Condition is an immutable description of when a stage run should stop.
// Build one with the constructors of this package or from a [Policy]; the
// interface is sealed so that every condition gets fresh per-run state from
// [NewEvaluator] and can be validated before use.
type Condition interface {
	// String describes the condition in the policy file's terms.
	String() string
	validate() error
	start() check
	// timeouts calls f with every timeout limit in the condition tree.
	timeouts(f func(time.Duration))
}

// check is the per-run state of a Condition.
type check interface {
	// observe is called for every event with the run's progress already
	// updated for it; ev is nil for a clock tick (live timeout timer).
	observe(ev *Event, p *Progress, s *sink)
}

// sink collects what fired on one event.
type sink struct {
	fired    []Cause
	warnings *[]Cause
}

func (s *sink) fire(c Cause) { s.fired = append(s.fired, c) }
func (s *sink) warn(c Cause) { *s.warnings = append(*s.warnings, c) }

// Progress is the running state of a run, after the current event.
type Progress struct {
	Events     int           // events evaluated, the current one included
	Iterations int           // message and final events
	ToolCalls  int           // tool_call events
	Tokens     Usage         // cumulative usage
	Cost       float64       // cumulative cost
	Elapsed    time.Duration // time since the run started, when Clocked
	Clocked    bool          // whether the current event (or tick) has a time
}

// Validate reports whether c and every condition under it are well formed,
// with an error naming the condition and the bad value.
func Validate(c Condition) error {
	if c == nil {
		return errors.New("termination: nil condition")
	}
	return c.validate()
}

// Timeouts returns the distinct timeout limits in c, ascending. A live stage
// arms a timer for each.
func Timeouts(c Condition) []time.Duration {
	var out []time.Duration
	if c == nil {
		return nil
	}
	c.timeouts(func(d time.Duration) {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	})
	slices.Sort(out)
	return out
}

func noTimeouts(func(time.Duration)) {}

// ---- MaxIterations

type maxIterations struct{ limit int }

// MaxIterations allows n iterations (message and final events) and fires
// MaxIterationsReached on the message event that makes the count n+1. A
// final event never fires it. n must be positive.
func MaxIterations(n int) Condition { return &maxIterations{n} }

func (c maxIterations) String() string               { return fmt.Sprintf("max_iterations: %d", c.limit) }
func (c maxIterations) validate() error              { return positive("max_iterations", c.limit) }
func (c *maxIterations) start() check                { return c }
func (c maxIterations) timeouts(func(time.Duration)) {}
func (c maxIterations) observe(ev *Event, p *Progress, s *sink) {
	if ev != nil && ev.Kind == KindMessage && p.Iterations > c.limit {
		s.fire(MaxIterationsReached{Limit: c.limit, Count: p.Iterations})
	}
}

// ---- MaxToolCalls

type maxToolCalls struct{ limit int }

// MaxToolCalls allows n tool calls and fires MaxToolCallsReached on the
// tool_call event that makes the count n+1. n must be positive.
func MaxToolCalls(n int) Condition { return &maxToolCalls{n} }

func (c maxToolCalls) String() string               { return fmt.Sprintf("max_tool_calls: %d", c.limit) }
func (c maxToolCalls) validate() error              { return positive("max_tool_calls", c.limit) }
func (c *maxToolCalls) start() check                { return c }
func (c maxToolCalls) timeouts(func(time.Duration)) {}
func (c maxToolCalls) observe(ev *Event, p *Progress, s *sink) {
	if ev != nil && ev.Kind == KindToolCall && p.ToolCalls > c.limit {
		s.fire(MaxToolCallsReached{Limit: c.limit, Count: p.ToolCalls})
	}
}

// ---- Timeout

type timeoutAfter struct{ limit time.Duration }

// TimeoutAfter fires Timeout once the run has lasted d (elapsed >= d, so a
// run that lasted exactly d has timed out): live, from a timer
// even when no event arrives; in replay, by the events' times since the
// first timed event (events without a time never fire it). d must be > 0.
func TimeoutAfter(d time.Duration) Condition { return &timeoutAfter{d} }

func (c timeoutAfter) String() string { return "timeout: " + c.limit.String() }
func (c timeoutAfter) validate() error {
	if c.limit <= 0 {
		return fmt.Errorf("timeout: must be > 0, got %s", c.limit)
	}
	return nil
}
func (c *timeoutAfter) start() check                  { return c }
func (c timeoutAfter) timeouts(f func(time.Duration)) { f(c.limit) }
func (c timeoutAfter) observe(_ *Event, p *Progress, s *sink) {
	if p.Clocked && p.Elapsed >= c.limit {
		s.fire(Timeout{Limit: c.limit, Elapsed: p.Elapsed})
	}
}

// ---- Budgets

// Pressure configures a budget's early warning. Threshold is the fraction of
// the limit, in (0,1), at which a BudgetPressure warning is recorded (0: no
// warning). Grace, when set, stops the stage with BudgetPressure on the
// Grace-th message event after the warning (0: on the warning event itself);
// nil means warn only.
type Pressure struct {
	Threshold float64
	Grace     *int
}

// GraceTurns returns a pointer to n, for Pressure.Grace.
func GraceTurns(n int) *int { return &n }

// TokenLimits is a token budget. At least one of Total, Input and Output
// must be set; each set limit must be > 0.
type TokenLimits struct {
	Total, Input, Output int64
	Pressure
}

// TokenBudget fires BudgetExhausted on the event at which cumulative usage
// of any limited resource reaches its limit, and warns or stops with
// BudgetPressure as Pressure says.
func TokenBudget(l TokenLimits) Condition {
	b := budget{name: "token_budget", pressure: l.Pressure}
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

// CostLimit is a cost budget; Limit must be > 0.
type CostLimit struct {
	Limit float64
	Pressure
}

// CostBudget is TokenBudget for the events' cost.
func CostBudget(l CostLimit) Condition {
	return budget{name: "cost_budget", pressure: l.Pressure, limits: []resourceLimit{{ResourceCost, l.Limit}}}
}

type resourceLimit struct {
	res   Resource
	limit float64
}

type budget struct {
	name     string
	limits   []resourceLimit
	pressure Pressure
}

func (b budget) String() string {
	parts := make([]string, 0, len(b.limits)+2)
	for _, l := range b.limits {
		parts = append(parts, fmt.Sprintf("%s=%g", l.res, l.limit))
	}
	if b.pressure.Threshold > 0 {
		parts = append(parts, fmt.Sprintf("pressure=%g", b.pressure.Threshold))
	}
	if b.pressure.Grace != nil {
		parts = append(parts, fmt.Sprintf("grace=%d", *b.pressure.Grace))
	}
	return b.name + ": {" + strings.Join(parts, ", ") + "}"
}

func (b budget) validate() error {
	if len(b.limits) == 0 {
		if b.name == "cost_budget" {
			return errors.New("cost_budget.limit: must be > 0")
		}
		return errors.New("token_budget: needs at least one of total, input, output")
	}
	for _, l := range b.limits {
		if !(l.limit > 0) || math.IsInf(l.limit, 0) {
			return fmt.Errorf("%s.%s: must be > 0, got %g", b.name, limitKey(b.name, l.res), l.limit)
		}
	}
	return validatePressure(b.name, b.pressure)
}

func limitKey(name string, r Resource) string {
	if name == "cost_budget" {
		return "limit"
	}
	return strings.TrimSuffix(string(r), "_tokens")
}

func validatePressure(name string, p Pressure) error {
	if p.Threshold != 0 && !(p.Threshold > 0 && p.Threshold < 1) {
		return fmt.Errorf("%s.pressure: must be in (0,1), got %g", name, p.Threshold)
	}
	if p.Grace != nil {
		if *p.Grace < 0 {
			return fmt.Errorf("%s.grace: must be >= 0, got %d", name, *p.Grace)
		}
		if p.Threshold == 0 {
			return fmt.Errorf("%s.grace: needs pressure", name)
		}
	}
	return nil
}

func (b budget) timeouts(func(time.Duration)) {}

func (b budget) start() check {
	return &budgetCheck{budget: b, warned: make([]bool, len(b.limits))}
}

type budgetCheck struct {
	budget
	warned    []bool
	graceOn   bool // a warning started the grace count
	graceLeft int  // message events left before the stop
	warnRes   int  // index of the resource that warned first
}

func used(r Resource, p *Progress) float64 {
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

// reached reports whether used has reached fraction of limit. The ratio is
// compared rather than fraction*limit, because a product such as 0.07*100
// rounds above 7 while 7/100 rounds to exactly 0.07: a threshold written in
// decimal is reached when usage equals it. Token counts are exact; cost
// comparisons allow costTolerance.
func reached(r Resource, used, limit, fraction float64) bool {
	if r == ResourceCost {
		return used/limit >= fraction*(1-costTolerance)
	}
	if fraction == 1 {
		return used >= limit
	}
	return used/limit >= fraction
}

func (b *budgetCheck) observe(ev *Event, p *Progress, s *sink) {
	if ev == nil {
		return
	}
	// A message after the warning spends one grace turn.
	if b.graceOn && ev.Kind == KindMessage {
		b.graceLeft--
	}
	for i, l := range b.limits {
		u := used(l.res, p)
		if reached(l.res, u, l.limit, 1) {
			s.fire(BudgetExhausted{Resource: l.res, Used: u, Limit: l.limit})
		}
		if b.pressure.Threshold > 0 && !b.warned[i] && reached(l.res, u, l.limit, b.pressure.Threshold) {
			b.warned[i] = true
			s.warn(BudgetPressure{Resource: l.res, Threshold: b.pressure.Threshold, Used: u, Limit: l.limit})
			if b.pressure.Grace != nil && !b.graceOn {
				b.graceOn, b.graceLeft, b.warnRes = true, *b.pressure.Grace, i
			}
		}
	}
	if b.graceOn && b.graceLeft <= 0 && ev.Kind != KindFinal {
		l := b.limits[b.warnRes]
		s.fire(BudgetPressure{Resource: l.res, Threshold: b.pressure.Threshold, Used: used(l.res, p), Limit: l.limit})
	}
}

// ---- Stall

// StallLimits configures stall detection. Repeats (>= 2) is how many
// identical consecutive tool calls or messages make a stall; TokenTolerance,
// when > 0 (and < 1), also detects a token plateau.
type StallLimits struct {
	Repeats        int
	TokenTolerance float64
}

// Stall fires StallDetected: repeated_tool_call on a tool_call when the last
// Repeats tool calls had the same tool and canonically equal args;
// repeated_message on a message when the last Repeats messages with
// non-empty text came from the same source with the same trimmed text;
// token_plateau on a message when each of the last Repeats iterations that
// carry usage spent total tokens within TokenTolerance of the one before.
// A final event never fires it.
func Stall(l StallLimits) Condition { return stall(l) }

type stall StallLimits

func (c stall) String() string {
	if c.TokenTolerance > 0 {
		return fmt.Sprintf("stall: {repeats: %d, token_tolerance: %g}", c.Repeats, c.TokenTolerance)
	}
	return fmt.Sprintf("stall: {repeats: %d}", c.Repeats)
}

func (c stall) validate() error {
	if c.Repeats < 2 {
		return fmt.Errorf("stall.repeats: must be >= 2, got %d", c.Repeats)
	}
	if !(c.TokenTolerance >= 0 && c.TokenTolerance < 1) {
		return fmt.Errorf("stall.token_tolerance: must be in [0,1), got %g", c.TokenTolerance)
	}
	return nil
}

func (c stall) timeouts(func(time.Duration)) {}

func (c stall) start() check {
	n := c.Repeats
	return &stallCheck{
		stall:  c,
		calls:  make([]callKey, n),
		msgs:   make([]msgKey, n),
		tokens: make([]int64, n),
	}
}

type callKey struct {
	tool string
	args uint64
}

type msgKey struct{ source, text string }

// stallCheck keeps the last Repeats keys of each signal in rings.
type stallCheck struct {
	stall
	calls                  []callKey
	msgs                   []msgKey
	tokens                 []int64
	nCalls, nMsgs, nTokens int
}

func (c *stallCheck) observe(ev *Event, _ *Progress, s *sink) {
	if ev == nil {
		return
	}
	n := c.Repeats
	switch ev.Kind {
	case KindToolCall:
		c.calls[c.nCalls%n] = callKey{ev.Tool, argsHash(ev.Args)}
		c.nCalls++
		if c.nCalls >= n && allEqual(c.calls) {
			s.fire(StallDetected{Signal: SignalRepeatedToolCall, Repeats: n})
		}
	case KindMessage, KindFinal:
		if ev.Kind == KindMessage {
			if text := strings.TrimSpace(ev.Text); text != "" {
				c.msgs[c.nMsgs%n] = msgKey{ev.Source, text}
				c.nMsgs++
				if c.nMsgs >= n && allEqual(c.msgs) {
					s.fire(StallDetected{Signal: SignalRepeatedMessage, Repeats: n})
				}
			}
		}
		if c.TokenTolerance > 0 {
			if total := ev.Usage.Total(); total > 0 {
				c.tokens[c.nTokens%n] = total
				c.nTokens++
				if ev.Kind == KindMessage && c.nTokens >= n && c.plateau() {
					s.fire(StallDetected{Signal: SignalTokenPlateau, Repeats: n})
				}
			}
		}
	}
}

func allEqual[T comparable](ring []T) bool {
	for _, v := range ring[1:] {
		if v != ring[0] {
			return false
		}
	}
	return true
}

// plateau reports whether each of the last n totals is within tolerance of
// the one before it (in order of arrival).
func (c *stallCheck) plateau() bool {
	n := c.Repeats
	oldest := c.nTokens % n // ring index of the oldest of the last n
	for i := 1; i < n; i++ {
		prev := c.tokens[(oldest+i-1)%n]
		cur := c.tokens[(oldest+i)%n]
		if math.Abs(float64(cur-prev))/float64(prev) > c.TokenTolerance {
			return false
		}
	}
	return true
}

// ---- Errors

// ErrorLimits configures the error threshold; set at least one, each > 0.
type ErrorLimits struct {
	Consecutive int // errors in a row; reset by a message, final or successful tool_result
	Total       int // errors in the run
}

// Errors fires Failed{reason: error_threshold} when error events and failed
// tool results reach either limit.
func Errors(l ErrorLimits) Condition { return errorLimit(l) }

type errorLimit ErrorLimits

func (c errorLimit) String() string {
	return fmt.Sprintf("errors: {consecutive: %d, total: %d}", c.Consecutive, c.Total)
}

func (c errorLimit) validate() error {
	if c.Consecutive == 0 && c.Total == 0 {
		return errors.New("errors: needs consecutive or total")
	}
	if c.Consecutive < 0 {
		return fmt.Errorf("errors.consecutive: must be > 0, got %d", c.Consecutive)
	}
	if c.Total < 0 {
		return fmt.Errorf("errors.total: must be > 0, got %d", c.Total)
	}
	return nil
}

func (c errorLimit) timeouts(func(time.Duration)) {}
func (c errorLimit) start() check                 { return &errorCheck{limits: c} }

type errorCheck struct {
	limits             errorLimit
	consecutive, total int
}

func (c *errorCheck) observe(ev *Event, _ *Progress, s *sink) {
	if ev == nil {
		return
	}
	switch {
	case ev.Failed():
		c.consecutive++
		c.total++
		if (c.limits.Consecutive > 0 && c.consecutive >= c.limits.Consecutive) ||
			(c.limits.Total > 0 && c.total >= c.limits.Total) {
			s.fire(Failed{Reason: FailErrorThreshold, Err: ev.ErrorText()})
		}
	case ev.Kind == KindMessage, ev.Kind == KindFinal, ev.Kind == KindToolResult:
		c.consecutive = 0
	}
}

// ---- Completion conditions

// TextMention fires Completed{condition: text_mention} when an event other
// than input has text containing text (case-sensitive), optionally only
// from the given sources.
func TextMention(text string, sources ...string) Condition {
	return &textMention{text: text, sources: slices.Clone(sources)}
}

type textMention struct {
	text    string
	sources []string
}

func (c textMention) String() string {
	if len(c.sources) == 0 {
		return fmt.Sprintf("text_mention: {text: %q}", c.text)
	}
	return fmt.Sprintf("text_mention: {text: %q, sources: %q}", c.text, c.sources)
}

func (c textMention) validate() error {
	if c.text == "" {
		return errors.New("text_mention.text: must not be empty")
	}
	return validNames("text_mention.sources", c.sources, true)
}
func (c *textMention) start() check                { return c }
func (c textMention) timeouts(func(time.Duration)) {}
func (c textMention) observe(ev *Event, _ *Progress, s *sink) {
	if ev == nil || ev.Kind == KindInput || !strings.Contains(ev.Text, c.text) {
		return
	}
	if len(c.sources) > 0 && !slices.Contains(c.sources, ev.Source) {
		return
	}
	s.fire(Completed{Condition: ConditionTextMention, Detail: c.text})
}

// nameMatch is FunctionCall, Handoff and SourceMatch: an event kind and a
// field matched against a list of names.
type nameMatch struct {
	key   string // policy key
	names []string
	any   bool // an empty list matches every name
}

func (c nameMatch) String() string               { return fmt.Sprintf("%s: %q", c.key, c.names) }
func (c nameMatch) validate() error              { return validNames(c.key, c.names, c.any) }
func (c nameMatch) timeouts(func(time.Duration)) {}
func (c nameMatch) match(name string) bool {
	return (c.any && len(c.names) == 0) || slices.Contains(c.names, name)
}

// FunctionCall fires Completed{condition: function_call} on a successful
// tool_result of one of the named tools.
func FunctionCall(tools ...string) Condition {
	return &functionCall{nameMatch{key: "function_call", names: slices.Clone(tools)}}
}

type functionCall struct{ nameMatch }

func (c *functionCall) start() check { return c }
func (c functionCall) observe(ev *Event, _ *Progress, s *sink) {
	if ev != nil && ev.Kind == KindToolResult && ev.Err == "" && c.match(ev.Tool) {
		s.fire(Completed{Condition: ConditionFunctionCall, Detail: ev.Tool})
	}
}

// Handoff fires HandoffRequested on a handoff to one of the targets, or to
// any target when none is given.
func Handoff(targets ...string) Condition {
	return &handoff{nameMatch{key: "handoff", names: slices.Clone(targets), any: true}}
}

type handoff struct{ nameMatch }

func (c *handoff) start() check { return c }
func (c handoff) observe(ev *Event, _ *Progress, s *sink) {
	if ev != nil && ev.Kind == KindHandoff && c.match(ev.Target) {
		s.fire(HandoffRequested{Target: ev.Target, Source: ev.Source})
	}
}

// SourceMatch fires Completed{condition: source_match} on a message or final
// event from one of the sources.
func SourceMatch(sources ...string) Condition {
	return &sourceMatch{nameMatch{key: "source_match", names: slices.Clone(sources)}}
}

type sourceMatch struct{ nameMatch }

func (c *sourceMatch) start() check { return c }
func (c sourceMatch) observe(ev *Event, _ *Progress, s *sink) {
	if ev != nil && (ev.Kind == KindMessage || ev.Kind == KindFinal) && c.match(ev.Source) {
		s.fire(Completed{Condition: ConditionSourceMatch, Detail: ev.Source})
	}
}

// StopMessage fires Completed{condition: stop_message} on a stop event.
func StopMessage() Condition { return &stopMessage{} }

type stopMessage struct{}

func (stopMessage) String() string               { return "stop_message: true" }
func (stopMessage) validate() error              { return nil }
func (c *stopMessage) start() check              { return c }
func (stopMessage) timeouts(func(time.Duration)) {}
func (stopMessage) observe(ev *Event, _ *Progress, s *sink) {
	if ev != nil && ev.Kind == KindStop {
		s.fire(Completed{Condition: ConditionStopMessage, Detail: ev.Text})
	}
}

func validNames(key string, names []string, emptyOK bool) error {
	if len(names) == 0 && !emptyOK {
		return fmt.Errorf("%s: needs at least one name", key)
	}
	for i, n := range names {
		if n == "" {
			return fmt.Errorf("%s[%d]: must not be empty", key, i)
		}
	}
	return nil
}

func positive(key string, n int) error {
	if n <= 0 {
		return fmt.Errorf("%s: must be a positive int, got %d", key, n)
	}
	return nil
}

// ---- Go functions

// Predicate fires Completed{condition: predicate, detail: name} on an event
// for which fn returns true. A panic in fn fires Failed{reason: panic}
// instead of crashing the loop. fn runs while the run evaluates the event (a
// live stage holds the run's lock): it must be quick and must not call back
// into the run.
func Predicate(name string, fn func(Event) bool) Condition {
	return &funcCondition{name: name, pred: fn}
}

// Func fires whatever cause fn returns (a Custom cause, typically) for an
// event; nil (a typed nil such as a nil *Custom included) means nothing
// fired. fn sees the run's progress including the
// event. A panic in fn fires Failed{reason: panic}. Like Predicate's, fn
// must be quick and must not call back into the run.
func Func(name string, fn func(Event, Progress) Cause) Condition {
	return &funcCondition{name: name, fn: fn}
}

type funcCondition struct {
	name string
	pred func(Event) bool
	fn   func(Event, Progress) Cause
}

func (c funcCondition) String() string { return fmt.Sprintf("predicate: %q", c.name) }
func (c funcCondition) validate() error {
	if c.name == "" {
		return errors.New("predicate: empty name")
	}
	if c.pred == nil && c.fn == nil {
		return fmt.Errorf("predicate %q: nil func", c.name)
	}
	return nil
}
func (c *funcCondition) start() check                { return c }
func (c funcCondition) timeouts(func(time.Duration)) {}
func (c funcCondition) observe(ev *Event, p *Progress, s *sink) {
	if ev == nil {
		return
	}
	if cause := c.call(ev, p); !nilCause(cause) {
		s.fire(cause)
	}
}

func (c funcCondition) call(ev *Event, p *Progress) (cause Cause) {
	defer func() {
		if r := recover(); r != nil {
			cause = Failed{Reason: FailPanic, Err: fmt.Sprintf("predicate %q panicked: %v", c.name, r)}
		}
	}()
	if c.pred != nil {
		if c.pred(*ev) {
			return Completed{Condition: ConditionPredicate, Detail: c.name}
		}
		return nil
	}
	return c.fn(*ev, *p)
}

// ---- Combinators

// AnyOf fires when any child fires. Every child sees every event (no short
// circuit), so counting conditions stay correct and every cause that fires
// on the same event is reported.
func AnyOf(children ...Condition) Condition { return anyOf(slices.Clone(children)) }

type anyOf []Condition

func (c anyOf) String() string  { return "any: " + listString(c) }
func (c anyOf) validate() error { return validateChildren("any", c) }
func (c anyOf) timeouts(f func(time.Duration)) {
	for _, ch := range c {
		if ch != nil {
			ch.timeouts(f)
		}
	}
}
func (c anyOf) start() check {
	checks := make(anyCheck, len(c))
	for i, ch := range c {
		checks[i] = startChild(ch)
	}
	return checks
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

func (neverCheck) observe(*Event, *Progress, *sink) {}

type anyCheck []check

// budgetHolder is a check that holds budgets, for Result.Budgets.
type budgetHolder interface{ eachBudget(func(*budgetCheck)) }

func eachBudget(checks []check, f func(*budgetCheck)) {
	for _, c := range checks {
		if h, ok := c.(budgetHolder); ok {
			h.eachBudget(f)
		}
	}
}

func (c anyCheck) eachBudget(f func(*budgetCheck))     { eachBudget(c, f) }
func (a *allCheck) eachBudget(f func(*budgetCheck))    { eachBudget(a.children, f) }
func (b *budgetCheck) eachBudget(f func(*budgetCheck)) { f(b) }

func (c anyCheck) observe(ev *Event, p *Progress, s *sink) {
	for _, ch := range c {
		ch.observe(ev, p, s)
	}
}

// AllOf fires All when every child has fired at least once: each child
// latches when it first fires. Causes are listed in the order they fired.
func AllOf(children ...Condition) Condition { return allOf(slices.Clone(children)) }

type allOf []Condition

func (c allOf) String() string { return "all: " + listString(c) }
func (c allOf) validate() error {
	if len(c) == 0 {
		return errors.New("all: needs at least one condition")
	}
	return validateChildren("all", c)
}
func (c allOf) timeouts(f func(time.Duration)) { anyOf(c).timeouts(f) }
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
	scratch  sink
	done     bool
}

func (a *allCheck) observe(ev *Event, p *Progress, s *sink) {
	if a.done {
		return
	}
	a.scratch.warnings = s.warnings
	for i, ch := range a.children {
		a.scratch.fired = a.scratch.fired[:0]
		ch.observe(ev, p, &a.scratch)
		if a.latched[i] == nil && len(a.scratch.fired) > 0 {
			c := pick(a.scratch.fired)
			a.latched[i] = c
			a.order = append(a.order, c)
		}
	}
	if len(a.order) == len(a.children) {
		a.done = true
		s.fire(All{Causes: slices.Clone(a.order)})
	}
}

func validateChildren(key string, cs []Condition) error {
	for i, c := range cs {
		if c == nil {
			return fmt.Errorf("%s[%d]: nil condition", key, i)
		}
		if err := c.validate(); err != nil {
			return fmt.Errorf("%s[%d].%w", key, i, err)
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

// pick returns the cause that wins by precedence; ties keep firing order.
func pick(fired []Cause) Cause {
	best := fired[0]
	for _, c := range fired[1:] {
		if rank(c) < rank(best) {
			best = c
		}
	}
	return best
}
