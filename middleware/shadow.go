package middleware

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentstop/agentstop/internal/label"
	"github.com/agentstop/agentstop/termination"
)

// Shadow policies (contract §5.2). A stage's shadow policies are evaluated
// on every event its runs evaluate, beside the enforced condition, and
// never act: they do not stop, hold or warn. Everything they need lives in
// this file; Run touches them at two points, one call per evaluated event
// (observeLocked) and one when the run's result is built (finish).

// shadowConfig is the stage's shadow policies, part of config.
type shadowConfig struct {
	shadows []shadowPolicy
}

// shadowPolicy is one named candidate policy.
type shadowPolicy struct {
	name string
	cond termination.Condition
}

// WithShadowPolicy evaluates p on every event of every run of the stage,
// beside the enforced policy, without ever acting on it: a shadow policy
// stops, holds and warns nothing, and the run's cause, context, warnings
// and hooks are the enforced policy's alone. When p would have stopped a
// run, the run's Result says how in Shadow[name] (the cause and the event
// it would have stopped at); a recorder (package telemetry) puts it on the
// run's span and counts it on agent.stage.shadow.stops {stage, policy,
// termination_cause}. A shadow policy that has "stopped" is no longer fed;
// one that would not have stopped the run is nil in Result.Shadow. It sees
// exactly the events the run evaluates, so a run that the enforced policy
// stops first ends its shadows' verdicts there.
//
// name names the candidate in results, span attributes and metrics: it
// follows the rules of a stage name (a label
// value that is a safe file name: see New). A second policy of the same name
// is an error. A shadow policy judges the run's own events: one that holds
// timeout, idle, tree, hold or fleet_budget is an error naming the key. Each
// shadow policy costs at most one evaluation of its own per event, without
// allocating. Repeatable. Default: none.
func WithShadowPolicy(name string, p termination.Policy) Option {
	return optionFunc(func(c *config) {
		if err := c.checkShadow(name, p); err != nil {
			c.errs = append(c.errs, fmt.Errorf("WithShadowPolicy(%q): %w", name, err))
			return
		}
		c.shadows = append(c.shadows, shadowPolicy{name: name, cond: p.Condition()})
	})
}

// checkShadow reports what is wrong with a shadow policy named name.
func (c *shadowConfig) checkShadow(name string, p termination.Policy) error {
	if err := label.ValidateStage(name); err != nil {
		return fmt.Errorf("the name follows the rules of a stage name (it is a label value and a directory name): %w", err)
	}
	for _, s := range c.shadows {
		if s.name == name {
			return errors.New("a second shadow policy with this name; each needs its own")
		}
	}
	const why = "a shadow policy judges the run's own events and may not hold timeout, idle, tree, hold or fleet_budget"
	cond := p.Condition()
	switch {
	case len(termination.NewEvaluator(cond, time.Time{}).Timeouts()) > 0:
		return fmt.Errorf("the policy holds timeout: %s", why)
	case len(termination.NewEvaluator(cond, time.Time{}).Idles()) > 0:
		return fmt.Errorf("the policy holds idle: %s", why)
	case p.Tree() != nil:
		return fmt.Errorf("the policy holds tree: %s", why)
	case p.FleetBudget() != nil:
		return fmt.Errorf("the policy holds fleet_budget: %s", why)
	}
	if _, ok := p.Hold(); ok {
		return fmt.Errorf("the policy holds hold: %s", why)
	}
	if err := cond.Validate(); err != nil {
		return err
	}
	return nil
}

// shadowRun is a run's shadow policies: one evaluator each, and what each
// would have done. It is guarded by the run's lock.
type shadowRun struct {
	policies []shadowPolicy // the stage's, shared: read only
	evals    []shadowEval
	going    int // evaluators not yet stopped
}

type shadowEval struct {
	eval    *termination.Evaluator
	verdict termination.ShadowVerdict // Cause nil until it would have stopped the run
}

// shadowParticipant is the stage's shadow policies, the stage's own
// participant: it comes before those given with WithParticipant, so that
// its part fills Result.Shadow before they are told of the result.
type shadowParticipant struct{ policies []shadowPolicy }

// Join gives the run one evaluator per shadow policy.
func (p shadowParticipant) Join(ctx context.Context, _ *Run) (context.Context, Part) {
	s := &shadowRun{policies: p.policies, evals: make([]shadowEval, len(p.policies)), going: len(p.policies)}
	for i, sp := range p.policies {
		// No timeouts or idle limits (checkShadow): the clock is never read.
		s.evals[i].eval = termination.NewEvaluator(sp.cond, time.Now())
	}
	return ctx, s
}

// Event evaluates the event with the shadow policies (observe).
func (s *shadowRun) Event(ev *termination.Event) { s.observe(ev) }

// Warning, Error: a shadow policy's warnings are its own (its verdict).
func (s *shadowRun) Warning(termination.Cause) {}
func (s *shadowRun) Error(error)               {}

// Stopped and End give the result the verdicts: final, since the shadows
// saw every evaluated event.
func (s *shadowRun) Stopped(res *termination.Result) { res.Shadow = s.verdicts() }
func (s *shadowRun) End(res *termination.Result)     { res.Shadow = s.verdicts() }

// observe evaluates ev, an event the run evaluated, with every shadow
// policy that has not stopped yet. It allocates nothing.
func (s *shadowRun) observe(ev *termination.Event) {
	if s.going == 0 {
		return
	}
	for i := range s.evals {
		e := &s.evals[i]
		if e.verdict.Cause != nil {
			continue
		}
		if c, stop := e.eval.ObserveRef(ev); stop {
			e.verdict = termination.ShadowVerdict{Cause: c, StoppedAt: e.eval.Progress().Events}
			s.going--
		}
	}
}

// verdicts returns the run's Result.Shadow.
func (s *shadowRun) verdicts() map[string]*termination.ShadowVerdict {
	out := make(map[string]*termination.ShadowVerdict, len(s.evals))
	for i := range s.evals {
		var v *termination.ShadowVerdict
		if s.evals[i].verdict.Cause != nil {
			copied := s.evals[i].verdict
			v = &copied
		}
		out[s.policies[i].name] = v
	}
	return out
}
