package termination

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/agentstop/agentstop/internal/label"
)

// Cause is why a stage run stopped. Every finished run has exactly one.
//
// A Cause is an error so that it can travel as the cause of a cancelled
// context: errors.As(context.Cause(ctx), &termination.Timeout{}) recovers it.
// Built-in causes are the contract's types below; user-defined cause types
// join the JSON form with codec.RegisterCause. Each says its
// termination_cause tag and its default outcome, the two columns of the
// contract's table (§2).
type Cause interface {
	error
	// TagValue is the low-cardinality termination_cause value of the cause.
	TagValue() string
	// DefaultOutcome is the cause's outcome unless its stage overrides it
	// (middleware.WithTreatAsSuccess): failed for Custom and for a cause
	// type of your own whose runs did not do their job.
	DefaultOutcome() Outcome
}

// Outcome is the roll-up of a cause: succeeded, skipped or failed. A stage
// may override it (treat a cause as success); the cause is never rewritten.
type Outcome uint8

// Outcomes. The zero Outcome is unknown.
const (
	OutcomeSucceeded Outcome = iota + 1
	OutcomeSkipped
	OutcomeFailed
)

// String returns "succeeded", "skipped", "failed" or "unknown".
func (o Outcome) String() string {
	switch o {
	case OutcomeSucceeded:
		return "succeeded"
	case OutcomeSkipped:
		return "skipped"
	case OutcomeFailed:
		return "failed"
	}
	return "unknown"
}

// MarshalText implements encoding.TextMarshaler.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler. It reads what
// MarshalText writes, "unknown" (the zero Outcome) included.
func (o *Outcome) UnmarshalText(b []byte) error {
	for _, v := range []Outcome{0, OutcomeSucceeded, OutcomeSkipped, OutcomeFailed} {
		if v.String() == string(b) {
			*o = v
			return nil
		}
	}
	return fmt.Errorf("unknown outcome %q", b)
}

// defaultOutcome returns c's default outcome, unknown for nil (a typed
// nil included).
func defaultOutcome(c Cause) Outcome {
	if nilCause(c) {
		return 0
	}
	return c.DefaultOutcome()
}

// Tag values: the closed set of termination_cause values.
const (
	TagCompleted         = "completed"
	TagNaturalCompletion = "natural_completion"
	TagHandoff           = "handoff"
	TagMaxIterations     = "max_iterations"
	TagMaxToolCalls      = "max_tool_calls"
	TagBudgetPressure    = "budget_pressure"
	TagBudgetExhausted   = "budget_exhausted"
	TagStall             = "stall"
	TagTimeout           = "timeout"
	TagCancelled         = "cancelled"
	TagFailed            = "failed"
	TagSkipped           = "skipped"
	TagCustom            = "custom"
)

// TagValues lists the built-in termination_cause values, in the contract's
// order. Dashboards and alerts can enumerate it.
func TagValues() []string {
	return []string{TagCompleted, TagNaturalCompletion, TagHandoff, TagMaxIterations,
		TagMaxToolCalls, TagBudgetPressure, TagBudgetExhausted, TagStall, TagTimeout,
		TagCancelled, TagFailed, TagSkipped, TagCustom}
}

// Tag returns the termination_cause value to record for c. Built-in causes
// give their fixed tag; All gives the tag of its last cause; Custom gives its
// reason and a user-defined cause its own TagValue only when allowed reports
// true for it (and the value is a plausible label), "custom" otherwise. A nil
// allowed allows nothing. A nil cause (a typed nil included) gives "".
func Tag(c Cause, allowed func(string) bool) string {
	if nilCause(c) {
		return ""
	}
	switch c := c.(type) {
	case All:
		if len(c.Causes) == 0 || nilCause(c.Causes[len(c.Causes)-1]) {
			return TagCustom
		}
		return Tag(c.Causes[len(c.Causes)-1], allowed)
	case Custom:
		return allowedTag(c.Reason, allowed)
	case Completed, NaturalCompletion, HandoffRequested, MaxIterationsReached, MaxToolCallsReached,
		BudgetPressure, BudgetExhausted, StallDetected, Timeout, Cancelled, Failed, Skipped:
		return c.TagValue() // the contract's own values need no allow-list
	default:
		return allowedTag(c.TagValue(), allowed)
	}
}

func allowedTag(v string, allowed func(string) bool) string {
	if allowed != nil && label.ValidValue(v) && allowed(v) {
		return v
	}
	return TagCustom
}

// nilCause reports whether c is nil or a typed nil: a nil pointer (or map,
// slice, func, chan) of a type that implements Cause, which would panic as
// soon as one of its value methods is called. Every place a user-supplied
// Cause enters a run treats a typed nil as no cause at all.
func nilCause(c Cause) bool {
	if c == nil {
		return true
	}
	switch v := reflect.ValueOf(c); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return v.IsNil()
	}
	return false
}

// Completion conditions named by Completed.Condition.
const (
	conditionTextMention  = "text_mention"
	conditionFunctionCall = "function_call"
	conditionStopMessage  = "stop_message"
	conditionSourceMatch  = "source_match"
	conditionPredicate    = "predicate"
)

// Completed: a completion condition fired (the agent said it was done).
type Completed struct {
	Condition string `json:"condition"` // text_mention, function_call, stop_message, source_match, predicate
	Detail    string `json:"detail"`    // the text, tool, source or predicate name that matched
}

// NaturalCompletion: the stream ended by itself with no condition firing.
type NaturalCompletion struct{}

// HandoffRequested: control passed to a watched handoff target.
type HandoffRequested struct {
	Target string `json:"target"`
	Source string `json:"source"`
}

// MaxIterationsReached: more model turns than the limit allows.
type MaxIterationsReached struct {
	Limit int    `json:"limit"`
	Count int    `json:"count"`
	Scope string `json:"scope,omitempty"` // "tree" for a tree limit (§8)
}

// MaxToolCallsReached: more tool calls than the limit allows.
type MaxToolCallsReached struct {
	Limit int `json:"limit"`
	Count int `json:"count"`
	// Tool is set only when a per-tool limit fired.
	Tool  string `json:"tool,omitempty"`
	Scope string `json:"scope,omitempty"` // "tree" for a tree limit (§8)
}

// Resource is a budgeted quantity.
type Resource string

// Budgeted resources.
const (
	ResourceTotalTokens  Resource = "total_tokens"
	ResourceInputTokens  Resource = "input_tokens"
	ResourceOutputTokens Resource = "output_tokens"
	ResourceCost         Resource = "cost"
	ResourceIterations   Resource = "iterations"
	ResourceToolCalls    Resource = "tool_calls"
)

// Scopes of a limit (BudgetPressure.Scope, BudgetExhausted.Scope, and for
// trees MaxIterationsReached, MaxToolCallsReached and Timeout): a run's own
// limit has no scope.
const (
	// ScopeFleet marks a budget shared by a fleet of runs (§7).
	ScopeFleet = "fleet"
	// ScopeTree marks a limit over a run and its descendants (§8).
	ScopeTree = "tree"
)

// BudgetPressure: usage crossed the pressure threshold. As a warning the run
// goes on; as a cause the grace turns after the warning ran out.
type BudgetPressure struct {
	Resource  Resource `json:"resource"`
	Threshold float64  `json:"threshold"` // the pressure fraction
	Used      float64  `json:"used"`
	Limit     float64  `json:"limit"`
	Scope     string   `json:"scope,omitempty"` // "fleet" for a shared budget, "tree" for a tree limit
}

// BudgetExhausted: usage reached the limit.
type BudgetExhausted struct {
	Resource Resource `json:"resource"`
	Used     float64  `json:"used"`
	Limit    float64  `json:"limit"`
	Scope    string   `json:"scope,omitempty"` // "fleet" for a shared budget, "tree" for a tree limit
}

// StallSignal says how a stall was detected.
type StallSignal string

// Stall signals.
const (
	SignalRepeatedToolCall StallSignal = "repeated_tool_call"
	SignalRepeatedResult   StallSignal = "repeated_result"
	SignalRepeatedMessage  StallSignal = "repeated_message"
	SignalCycle            StallSignal = "cycle"
	SignalTokenPlateau     StallSignal = "token_plateau"
)

// StallDetected: the loop repeats itself.
type StallDetected struct {
	Signal  StallSignal `json:"signal"`
	Repeats int         `json:"repeats"`
	Period  int         `json:"period,omitempty"` // cycle only
}

// Timeout: the stage ran for its limit (it fires once elapsed >= limit), or,
// with Idle, no event arrived for its limit (TimeLimits.Idle). Elapsed is
// the limit, live as in replay (a log recorded before 2026-11-29 may carry
// a live timeout's measured time). Its JSON fields are Go duration strings
// ("1m30s").
type Timeout struct {
	Limit   time.Duration `json:"limit"`
	Elapsed time.Duration `json:"elapsed"`
	Scope   string        `json:"scope,omitempty"` // "tree" for a tree limit (§8)
	Idle    bool          `json:"idle,omitempty"`  // an idle limit (policy key idle:), present only for it
}

// Reason says why a run was cancelled, failed or was skipped: the reason
// field of Cancelled, Failed and Skipped (§2).
type Reason string

// Reasons: Cancel… of Cancelled, Fail… of Failed, Skip… of Skipped.
// Skipped reasons are set by a fleet (package fleet), and SkipParentEnded
// for a child run that starts after its parent run has ended (§8).
const (
	CancelContext  Reason = "context"  // the caller's context ended
	CancelExternal Reason = "external" // Stop was called
	CancelParent   Reason = "parent"   // an ancestor run ended (§8)

	FailStreamError    Reason = "stream_error"
	FailErrorThreshold Reason = "error_threshold"
	FailPanic          Reason = "panic"
	FailInvalidInput   Reason = "invalid_input"

	SkipBlocked              Reason = "blocked"
	SkipFleetBudgetExhausted Reason = "fleet_budget_exhausted"
	SkipFleetUnavailable     Reason = "fleet_unavailable"
	SkipParentEnded          Reason = "parent_ended"
)

// Cancelled: the run was cancelled before any condition fired.
type Cancelled struct {
	Reason Reason `json:"reason"` // a Cancel… reason
	Detail string `json:"detail"`
}

// Failed: the run failed. Err is the error text (the field is named Err
// because Failed is itself an error).
type Failed struct {
	Reason Reason `json:"reason"` // a Fail… reason
	Err    string `json:"error"`
}

// Skipped: the stage did not run.
type Skipped struct {
	Reason Reason `json:"reason"` // a Skip… reason, or one of a fleet of your own
	Detail string `json:"detail,omitempty"`
}

// Custom: a user-defined stop. Its tag is "custom" unless the stage
// allow-lists Reason.
type Custom struct {
	Reason     string         `json:"reason"`
	Properties map[string]any `json:"properties"`
}

// All: every child of an AllOf condition fired; Causes are in the order they
// fired.
type All struct {
	Causes []Cause `json:"causes"`
}

// TagValue implements Cause.
func (Completed) TagValue() string            { return TagCompleted }
func (NaturalCompletion) TagValue() string    { return TagNaturalCompletion }
func (HandoffRequested) TagValue() string     { return TagHandoff }
func (MaxIterationsReached) TagValue() string { return TagMaxIterations }
func (MaxToolCallsReached) TagValue() string  { return TagMaxToolCalls }
func (BudgetPressure) TagValue() string       { return TagBudgetPressure }
func (BudgetExhausted) TagValue() string      { return TagBudgetExhausted }
func (StallDetected) TagValue() string        { return TagStall }
func (Timeout) TagValue() string              { return TagTimeout }
func (Cancelled) TagValue() string            { return TagCancelled }
func (Failed) TagValue() string               { return TagFailed }
func (Skipped) TagValue() string              { return TagSkipped }
func (Custom) TagValue() string               { return TagCustom }

// TagValue implements Cause: the tag of the last cause, "custom" when empty.
func (a All) TagValue() string {
	if len(a.Causes) == 0 || nilCause(a.Causes[len(a.Causes)-1]) {
		return TagCustom
	}
	return a.Causes[len(a.Causes)-1].TagValue()
}

// DefaultOutcome is succeeded (§2).
func (Completed) DefaultOutcome() Outcome { return OutcomeSucceeded }

// DefaultOutcome is succeeded (§2).
func (NaturalCompletion) DefaultOutcome() Outcome { return OutcomeSucceeded }

// DefaultOutcome is succeeded (§2).
func (HandoffRequested) DefaultOutcome() Outcome { return OutcomeSucceeded }

// DefaultOutcome is succeeded (§2).
func (BudgetPressure) DefaultOutcome() Outcome { return OutcomeSucceeded }

// DefaultOutcome is skipped (§2).
func (Skipped) DefaultOutcome() Outcome { return OutcomeSkipped }

// DefaultOutcome is failed (§2).
func (MaxIterationsReached) DefaultOutcome() Outcome { return OutcomeFailed }

// DefaultOutcome is failed (§2).
func (MaxToolCallsReached) DefaultOutcome() Outcome { return OutcomeFailed }

// DefaultOutcome is failed (§2).
func (BudgetExhausted) DefaultOutcome() Outcome { return OutcomeFailed }

// DefaultOutcome is failed (§2).
func (StallDetected) DefaultOutcome() Outcome { return OutcomeFailed }

// DefaultOutcome is failed (§2).
func (Timeout) DefaultOutcome() Outcome { return OutcomeFailed }

// DefaultOutcome is failed (§2).
func (Cancelled) DefaultOutcome() Outcome { return OutcomeFailed }

// DefaultOutcome is failed (§2).
func (Failed) DefaultOutcome() Outcome { return OutcomeFailed }

// DefaultOutcome is failed (§2).
func (Custom) DefaultOutcome() Outcome { return OutcomeFailed }

// DefaultOutcome is the default outcome of the last cause.
func (a All) DefaultOutcome() Outcome {
	if len(a.Causes) == 0 || nilCause(a.Causes[len(a.Causes)-1]) {
		return OutcomeFailed
	}
	return a.Causes[len(a.Causes)-1].DefaultOutcome()
}

func (c Completed) Error() string {
	return fmt.Sprintf("agentstop: completed (%s %q)", c.Condition, c.Detail)
}
func (NaturalCompletion) Error() string { return "agentstop: completed naturally" }
func (c HandoffRequested) Error() string {
	return fmt.Sprintf("agentstop: handoff from %q to %q", c.Source, c.Target)
}
func (c MaxIterationsReached) Error() string {
	return fmt.Sprintf("agentstop: max iterations reached (%d > limit %d%s)", c.Count, c.Limit, scopeText(c.Scope))
}

// scopeText is the end of a scoped cause's text: ", scope tree".
func scopeText(scope string) string {
	if scope == "" {
		return ""
	}
	return ", scope " + scope
}
func (c MaxToolCallsReached) Error() string {
	if c.Tool != "" {
		return fmt.Sprintf("agentstop: max tool calls to %q reached (%d > limit %d%s)", c.Tool, c.Count, c.Limit, scopeText(c.Scope))
	}
	return fmt.Sprintf("agentstop: max tool calls reached (%d > limit %d%s)", c.Count, c.Limit, scopeText(c.Scope))
}
func (c BudgetPressure) Error() string {
	return fmt.Sprintf("agentstop: budget pressure on %s (%g of %g used, threshold %g%s)", c.Resource, c.Used, c.Limit, c.Threshold, scopeText(c.Scope))
}
func (c BudgetExhausted) Error() string {
	return fmt.Sprintf("agentstop: %s budget exhausted (%g of %g used%s)", c.Resource, c.Used, c.Limit, scopeText(c.Scope))
}
func (c StallDetected) Error() string {
	if c.Period > 0 {
		return fmt.Sprintf("agentstop: stall detected (%s of %d calls, %d repeats)", c.Signal, c.Period, c.Repeats)
	}
	return fmt.Sprintf("agentstop: stall detected (%s, %d repeats)", c.Signal, c.Repeats)
}
func (c Timeout) Error() string {
	if c.Idle {
		return fmt.Sprintf("agentstop: idle for %s (limit %s)", c.Elapsed, c.Limit)
	}
	return fmt.Sprintf("agentstop: timeout after %s (limit %s%s)", c.Elapsed, c.Limit, scopeText(c.Scope))
}
func (c Cancelled) Error() string {
	if c.Detail == "" {
		return fmt.Sprintf("agentstop: cancelled (%s)", c.Reason)
	}
	return fmt.Sprintf("agentstop: cancelled (%s): %s", c.Reason, c.Detail)
}
func (c Failed) Error() string {
	if c.Err == "" {
		return fmt.Sprintf("agentstop: failed (%s)", c.Reason)
	}
	return fmt.Sprintf("agentstop: failed (%s): %s", c.Reason, c.Err)
}
func (c Skipped) Error() string { return fmt.Sprintf("agentstop: skipped: %s", c.Reason) }
func (c Custom) Error() string {
	if c.Reason == "" {
		return "agentstop: stopped (custom, no reason given)"
	}
	return fmt.Sprintf("agentstop: stopped: %s", c.Reason)
}
func (a All) Error() string {
	parts := make([]string, len(a.Causes))
	for i, c := range a.Causes {
		if nilCause(c) {
			parts[i] = "<nil>"
			continue
		}
		parts[i] = strings.TrimPrefix(c.Error(), "agentstop: ")
	}
	return "agentstop: all of [" + strings.Join(parts, "; ") + "]"
}

// rank is the contract's precedence of causes that fire on the same event;
// lower wins.
func rank(c Cause) int {
	switch c := c.(type) {
	case Completed:
		return 0
	case HandoffRequested:
		return 1
	case Failed:
		return 2
	case BudgetExhausted:
		return 3
	case BudgetPressure:
		return 4
	case MaxToolCallsReached:
		return 5
	case MaxIterationsReached:
		return 6
	case StallDetected:
		return 7
	case Timeout:
		return 8
	case All:
		if len(c.Causes) > 0 {
			return rank(c.Causes[len(c.Causes)-1])
		}
	}
	return 9
}
