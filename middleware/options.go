package middleware

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/agentstop/agentstop/internal/label"
	"github.com/agentstop/agentstop/termination"
)

// defaultDrainTimeout is how long a stopped run keeps draining its input by
// default.
const defaultDrainTimeout = 5 * time.Second

// Option configures a Stage.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	conds          []termination.Condition
	policies       []string // the hash of each WithPolicy's policy (RunInfo.Policy)
	code           bool     // a condition given as Go code (WithCondition, WithTreeLimits)
	treatAsSuccess func(termination.Cause) bool
	onWarning      func(context.Context, *Run, termination.Cause)
	drainTimeout   time.Duration
	participants   []Participant // WithParticipant, in order (participant.go)
	customReasons  []string
	providerName   string
	errs           []error
	trees          []termination.Condition // tree limits: WithTreeLimits, a policy's tree: (lineage.go, package internal/tree)
	hold           *termination.Hold       // WithHold, a policy's hold: (hold.go); nil for none

	fleetConfig  // fleet.go
	shadowConfig // shadow.go
}

// WithPolicy adds the policy's conditions to the stage. Several policies and
// conditions combine as "any of". A policy's fleet_budget becomes the
// stage's fleet budget, enforced only with fleet.Membership; a second one is an
// error. A policy's tree: limits become tree limits that every run of the
// stage holds ([WithTreeLimits]). A policy's hold: makes the stage hold
// its runs at a limit ([WithHold]). Default: no conditions; the stream's
// end decides.
func WithPolicy(p termination.Policy) Option {
	return optionFunc(func(c *config) {
		c.conds = append(c.conds, p.Condition())
		c.policies = append(c.policies, p.Hash())
		if t := p.Tree(); t != nil {
			c.trees = append(c.trees, t)
		}
		c.setFleetBudget(p.FleetBudget(), "WithPolicy") // fleet.go
		if h, ok := p.Hold(); ok {
			c.hold = &h // hold.go
		}
	})
}

// WithCondition adds a condition to the stage; nil is ignored.
func WithCondition(cond termination.Condition) Option {
	return optionFunc(func(c *config) {
		if cond != nil {
			c.conds = append(c.conds, cond)
			c.code = true
		}
	})
}

// WithTreatAsSuccess makes the outcome "succeeded" for causes for which f
// returns true (a handoff the stage expects, a custom reason that is a normal
// end). The cause itself is never rewritten. f runs once per run, when the
// run finishes, without the run's lock: it may call the Run's methods.
// Default: the cause's own outcome. nil is ignored.
func WithTreatAsSuccess(f func(termination.Cause) bool) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.treatAsSuccess = f
		}
	})
}

// WithOnWarning calls f with every warning of a run: BudgetPressure (token
// and cost budgets, and the pressure of max_iterations and max_tool_calls,
// resources iterations and tool_calls) and StallDetected (stall.warn_at, at
// most one per run). Several warnings on one event come in the contract's
// order. f runs synchronously, on the goroutine that delivered the event
// that raised the warning, with the run's context and the run that warned
// (its ID, Parent and Stage tell the runs of one stage, and of one tree,
// apart: a tree's pressure warning reaches every live run of the tree):
// the loop can inject a "wrap up now" or "you are repeating yourself"
// instruction into the right agent. A warning that another run's event
// raised (a tree's pressure, a fleet budget's) reaches f with the run's
// own next event, on its goroutine, or, when none comes (a planner waiting
// on its sub-agents, a sub-agent blocked in a tool call), as the run ends:
// in Finish (or the way in, at the end of the stream), on that goroutine,
// before the run has ended, so that Wait returns after f. f may call the
// run's methods but Wait (on the loop's goroutine, or as the run ends, it
// would wait for itself); a Finish or Stop from f ends the run there. A
// panic in f is recovered and reported. Default: none. nil is ignored.
func WithOnWarning(f func(ctx context.Context, run *Run, warning termination.Cause)) Option {
	return optionFunc(func(c *config) {
		if f != nil {
			c.onWarning = f
		}
	})
}

// WithDrainTimeout sets how long a stopped Forward keeps draining its input
// so that the producer does not block. It must be > 0. Default:
// 5s.
func WithDrainTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("WithDrainTimeout: must be > 0, got %s", d))
			return
		}
		c.drainTimeout = d
	})
}

// isNil reports whether v is nil or holds a nil pointer, map, slice, func
// or channel.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// WithCustomReasons allow-lists Custom reasons (and the tags of registered
// user cause types) as termination_cause values of their own; any other
// custom reason is recorded as "custom". Each must be a snake_case label of
// at most 64 characters that is not a built-in tag value. This is the one
// allow-list: the stage's Result carries the tag, and a Recorder gets the
// list with each run (RunInfo.CustomReasons).
func WithCustomReasons(reasons ...string) Option {
	return optionFunc(func(c *config) {
		for _, r := range reasons {
			if !label.ValidValue(r) {
				c.errs = append(c.errs, fmt.Errorf("WithCustomReasons: %q is not a snake_case label of at most 64 characters", r))
				continue
			}
			for _, t := range termination.TagValues() {
				if r == t {
					c.errs = append(c.errs, fmt.Errorf("WithCustomReasons: %q is a built-in termination_cause", r))
				}
			}
			c.customReasons = append(c.customReasons, r)
		}
	})
}

func newConfig(stage string, opts []Option) (config, error) {
	c := config{drainTimeout: defaultDrainTimeout}
	if err := label.ValidateStage(stage); err != nil {
		return c, fmt.Errorf("middleware: New(%q): %w", stage, err)
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if len(c.errs) > 0 {
		return c, fmt.Errorf("middleware: New(%q): %w", stage, errors.Join(c.errs...))
	}
	for i, cond := range c.conds {
		if err := cond.Validate(); err != nil {
			return c, fmt.Errorf("middleware: New(%q): condition %d: %w", stage, i, err)
		}
	}
	for _, t := range c.trees {
		if err := t.Validate(); err != nil {
			return c, fmt.Errorf("middleware: New(%q): WithTreeLimits: %w", stage, err)
		}
	}
	return c, nil
}
