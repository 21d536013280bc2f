package termination

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Tree limits (docs/spec.md §8): limits over a run and all its descendants.
//
// A tree limit is an ordinary count, budget or timeout condition whose
// causes carry Scope "tree"; what makes it a tree limit is what it is fed.
// The run that holds tree limits (its policy's tree: key, or Tree in Go)
// keeps one more Evaluator over them, and every event of the run and of
// its descendants, however deep, is evaluated by it at the event that
// spends it: by the run's own condition first, then by the tree limits of
// the run itself and of its ancestors, nearest first. When a tree limit
// fires, the holder ends with the cause and its descendants with
// Cancelled{reason: parent}. Package middleware does this live;
// package replay does it over a recorded log.

// treeKeys are the keys a tree: mapping may hold, in the contract's order.
var treeKeys = []string{"max_iterations", "max_tool_calls", "token_budget", "cost_budget", "timeout"}

// TreeLimits returns tree limits: the given max_iterations, max_tool_calls,
// token budget, cost budget and timeout conditions ([IterationLimits],
// [ToolCallLimits], [TokenLimits], [CostLimit], [TimeLimits] (its Timeout), and AnyOf
// of them), evaluated over a run
// and its descendants when a stage holds them (middleware.WithTreeLimits,
// or a policy's tree: key). Their causes and warnings carry Scope
// [ScopeTree]. Any other condition is a validation error naming it.
//
// Used as a run's own condition, tree limits count the run's own events
// only, like the conditions they are made of.
func TreeLimits(limits ...Condition) Condition {
	t := &treeLimits{}
	for _, c := range limits {
		t.add(c)
	}
	return t
}

// treeLimits is Tree's condition: copies of the given conditions with
// their scope set to ScopeTree.
type treeLimits struct {
	limits []Condition
	bad    error // the first condition that is not a tree limit
}

func (t *treeLimits) add(c Condition) {
	switch c := lower(c).(type) {
	case *countLimit:
		cp := *c
		cp.scope = ScopeTree
		t.limits = append(t.limits, &cp)
	case *budget:
		cp := *c
		cp.scope = ScopeTree
		t.limits = append(t.limits, &cp)
	case *timeoutAfter:
		t.limits = append(t.limits, &timeoutAfter{limit: c.limit, scope: ScopeTree})
	case anyOf:
		for _, ch := range c {
			t.add(ch)
		}
	case *treeLimits:
		t.limits = append(t.limits, c.limits...)
		if t.bad == nil {
			t.bad = c.bad
		}
	case nil:
		if t.bad == nil {
			t.bad = badSetting("tree", "", "nil condition")
		}
	case *unset:
		var se *settingError
		if t.bad == nil && errors.As(c.err, &se) {
			t.bad = &settingError{cond: joinPath("tree", se.cond), setting: se.setting, msg: se.msg}
		}
	default:
		if t.bad == nil {
			name, _, _ := strings.Cut(c.String(), ":")
			t.bad = badSetting("tree", "", "%s is not a tree limit (tree limits are %s)", name, strings.Join(treeKeys, ", "))
		}
	}
}

func (t *treeLimits) String() string {
	parts := make([]string, len(t.limits))
	for i, c := range t.limits {
		parts[i] = c.String()
	}
	return "tree: {" + strings.Join(parts, ", ") + "}"
}

func (t *treeLimits) Validate() error {
	if t.bad != nil {
		return t.bad
	}
	if len(t.limits) == 0 {
		return badSetting("tree", "", "needs at least one of %s", strings.Join(treeKeys, ", "))
	}
	for _, c := range t.limits {
		if err := c.Validate(); err != nil {
			var se *settingError
			if errors.As(err, &se) {
				return &settingError{cond: joinPath("tree", se.cond), setting: se.setting, msg: se.msg}
			}
			return fmt.Errorf("tree: %w", err)
		}
	}
	return nil
}

func (t *treeLimits) start() check { return anyOf(t.limits).start() }

func (t *treeLimits) timers(f func(time.Duration, bool)) { anyOf(t.limits).timers(f) }

// Tree returns the policy's top-level tree: limits as a condition (see
// [TreeLimits]), or nil when the policy has none. A stage that uses the policy
// (middleware.WithPolicy) holds them for each of its runs.
func (p Policy) Tree() Condition {
	if p.tree == nil {
		return nil
	}
	return p.tree
}

// readTree reads the tree: key's value at path into pol. It returns no
// condition: tree limits are not the run's own (the holder evaluates them
// over its subtree). The key is allowed only at the top level of a policy.
func readTree(p string, v *yaml.Node, pol *Policy) (Condition, error) {
	var conds []Condition
	err := mapping(p, v, treeKeys, func(key, kp string, kv *yaml.Node) error {
		c, err := findPolicyKey(key).read(kp, kv, pol)
		if err != nil {
			return err
		}
		if err := c.Validate(); err != nil {
			return settingErr(p, v, err)
		}
		pol.limits = pol.limits || isHoldableKey(key)
		conds = append(conds, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(conds) == 0 {
		return nil, perr(p, v, "needs at least one of %s", strings.Join(treeKeys, ", "))
	}
	pol.tree = TreeLimits(conds...)
	return nil, nil
}

// LimitMask says which fields of a [Limits] hold a limit.
type LimitMask uint8

// The members of a LimitMask.
const (
	LimitIterations LimitMask = 1 << iota
	LimitToolCalls
	LimitTotalTokens
	LimitInputTokens
	LimitOutputTokens
	LimitCost
	LimitTime
)

// Limits are amounts of what a limit caps: what is left of a run's limits
// ([Evaluator.Remaining], middleware's Run.Remaining), the amounts an
// orchestrator splits across its children or tells a remote agent. A
// field counts only when its bit is in Has; the zero Limits limits
// nothing. Amounts never go below zero: 0 left means spent.
type Limits struct {
	Iterations   int           // iterations (message and final events) left
	ToolCalls    int           // tool calls left
	TotalTokens  int64         // input + output tokens left
	InputTokens  int64         // input tokens left
	OutputTokens int64         // output tokens left
	Cost         float64       // cost left
	Time         time.Duration // time left before a timeout
	Has          LimitMask     // which of the above are limited
}

// Min returns, for every resource, the smaller of l's and o's amounts (the
// one that is limited, when only one is).
func (l Limits) Min(o Limits) Limits {
	out := l
	out.Has |= o.Has
	pick := func(bit LimitMask, mine, theirs float64) bool {
		return o.Has&bit != 0 && (l.Has&bit == 0 || theirs < mine)
	}
	if pick(LimitIterations, float64(l.Iterations), float64(o.Iterations)) {
		out.Iterations = o.Iterations
	}
	if pick(LimitToolCalls, float64(l.ToolCalls), float64(o.ToolCalls)) {
		out.ToolCalls = o.ToolCalls
	}
	if pick(LimitTotalTokens, float64(l.TotalTokens), float64(o.TotalTokens)) {
		out.TotalTokens = o.TotalTokens
	}
	if pick(LimitInputTokens, float64(l.InputTokens), float64(o.InputTokens)) {
		out.InputTokens = o.InputTokens
	}
	if pick(LimitOutputTokens, float64(l.OutputTokens), float64(o.OutputTokens)) {
		out.OutputTokens = o.OutputTokens
	}
	if pick(LimitCost, l.Cost, o.Cost) {
		out.Cost = o.Cost
	}
	if pick(LimitTime, float64(l.Time), float64(o.Time)) {
		out.Time = o.Time
	}
	return out
}

// Condition returns conditions that allow exactly what l has left, as
// tree limits ([TreeLimits]): a remote child's tree limits from what its caller
// propagated. An amount of 0 fires on the first event that spends any of
// it (a token or cost budget with nothing left fires on the first event).
// It returns nil when l limits nothing.
func (l Limits) Condition() Condition {
	t := &treeLimits{}
	if l.Has&LimitIterations != 0 {
		t.limits = append(t.limits, &countLimit{res: ResourceIterations, limit: given(l.Iterations), scope: ScopeTree})
	}
	if l.Has&LimitToolCalls != 0 {
		t.limits = append(t.limits, &countLimit{res: ResourceToolCalls, limit: given(l.ToolCalls), scope: ScopeTree})
	}
	tokens := &budget{name: "token_budget", scope: ScopeTree}
	for _, r := range []struct {
		bit LimitMask
		res Resource
		v   int64
	}{{LimitTotalTokens, ResourceTotalTokens, l.TotalTokens}, {LimitInputTokens, ResourceInputTokens, l.InputTokens}, {LimitOutputTokens, ResourceOutputTokens, l.OutputTokens}} {
		if l.Has&r.bit != 0 {
			tokens.limits = append(tokens.limits, resourceLimit{r.res, float64(r.v)})
		}
	}
	if len(tokens.limits) > 0 {
		t.limits = append(t.limits, tokens)
	}
	if l.Has&LimitCost != 0 {
		t.limits = append(t.limits, &budget{name: "cost_budget", scope: ScopeTree, limits: []resourceLimit{{ResourceCost, l.Cost}}})
	}
	if l.Has&LimitTime != 0 {
		t.limits = append(t.limits, &timeoutAfter{limit: max(l.Time, time.Nanosecond), scope: ScopeTree})
	}
	if len(t.limits) == 0 {
		return nil
	}
	return t
}

// limitFields are Limits' fields in their text form's order.
var limitFields = []struct {
	name string
	bit  LimitMask
}{
	{"iterations", LimitIterations}, {"tool_calls", LimitToolCalls}, {"total_tokens", LimitTotalTokens},
	{"input_tokens", LimitInputTokens}, {"output_tokens", LimitOutputTokens}, {"cost", LimitCost}, {"time", LimitTime},
}

// String writes l as "iterations=12;total_tokens=5000;cost=0.5;time=1m30s"
// (the limited fields only, in that order; "" when nothing is limited),
// the form [Limits.Set] reads.
func (l Limits) String() string {
	var b strings.Builder
	for _, f := range limitFields {
		if l.Has&f.bit == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(';')
		}
		b.WriteString(f.name)
		b.WriteByte('=')
		switch f.bit {
		case LimitIterations:
			b.WriteString(strconv.Itoa(l.Iterations))
		case LimitToolCalls:
			b.WriteString(strconv.Itoa(l.ToolCalls))
		case LimitTotalTokens:
			b.WriteString(strconv.FormatInt(l.TotalTokens, 10))
		case LimitInputTokens:
			b.WriteString(strconv.FormatInt(l.InputTokens, 10))
		case LimitOutputTokens:
			b.WriteString(strconv.FormatInt(l.OutputTokens, 10))
		case LimitCost:
			b.WriteString(strconv.FormatFloat(l.Cost, 'g', -1, 64))
		case LimitTime:
			b.WriteString(l.Time.String())
		}
	}
	return b.String()
}

// Set reads s, the form String writes, into l (so *Limits is a
// flag.Value). Every field must be known, given once, and hold a
// non-negative amount (a finite cost, a Go duration for time); an error
// names the field and leaves l unchanged.
func (l *Limits) Set(s string) error {
	parsed, err := parseLimits(s)
	if err == nil {
		*l = parsed
	}
	return err
}

// parseLimits reads the form Limits.String writes.
func parseLimits(s string) (Limits, error) {
	var l Limits
	if s == "" {
		return l, nil
	}
	for part := range strings.SplitSeq(s, ";") {
		name, val, ok := strings.Cut(part, "=")
		if !ok {
			return Limits{}, fmt.Errorf("limits: %q is not NAME=AMOUNT", part)
		}
		var bit LimitMask
		for _, f := range limitFields {
			if f.name == name {
				bit = f.bit
			}
		}
		if bit == 0 {
			return Limits{}, fmt.Errorf("limits: unknown field %q", name)
		}
		if l.Has&bit != 0 {
			return Limits{}, fmt.Errorf("limits: %s given twice", name)
		}
		l.Has |= bit
		var err error
		switch bit {
		case LimitCost:
			l.Cost, err = strconv.ParseFloat(val, 64)
			if err == nil && (l.Cost < 0 || math.IsNaN(l.Cost) || math.IsInf(l.Cost, 0)) {
				err = errors.New("out of range")
			}
		case LimitTime:
			l.Time, err = time.ParseDuration(val)
			if err == nil && l.Time < 0 {
				err = errors.New("out of range")
			}
		default:
			var n int64
			n, err = strconv.ParseInt(val, 10, 64)
			if err == nil && n < 0 {
				err = errors.New("out of range")
			}
			switch bit {
			case LimitIterations:
				l.Iterations = int(min(n, math.MaxInt32))
			case LimitToolCalls:
				l.ToolCalls = int(min(n, math.MaxInt32))
			case LimitTotalTokens:
				l.TotalTokens = n
			case LimitInputTokens:
				l.InputTokens = n
			case LimitOutputTokens:
				l.OutputTokens = n
			}
		}
		if err != nil {
			return Limits{}, fmt.Errorf("limits: %s: %q is not a non-negative amount", name, val)
		}
	}
	return l, nil
}

// Remaining returns what is left of the count, budget and timeout limits
// of the evaluator's condition (those that stop on their own: limits under
// an all: do not), the smallest when several cap one resource. Per-tool
// limits are not reported. Time left is measured on the evaluator's clock.
func (e *Evaluator) Remaining() Limits {
	var out Limits
	p := &e.progress
	elapsed := p.Elapsed
	switch {
	case e.clock == wallClock:
		elapsed = time.Since(e.start)
	case !e.start.IsZero():
		elapsed = e.last.Sub(e.start)
	}
	eachLimit(e.root, func(c check) {
		var l Limits
		switch c := c.(type) {
		case statelessCount:
			l = c.countLimit.remaining(p, e.sink.raisedCount(c.res))
		case *countCheck:
			l = c.countLimit.remaining(p, e.sink.raisedCount(c.res))
		case *toolCountCheck:
			l = c.countLimit.remaining(p, e.sink.raisedCount(c.res))
		case *budgetCheck:
			for _, r := range c.limits {
				left := max(r.limit+e.sink.raisedBy(r.res)-used(r.res, p), 0)
				switch r.res {
				case ResourceTotalTokens:
					l.TotalTokens, l.Has = int64(left), l.Has|LimitTotalTokens
				case ResourceInputTokens:
					l.InputTokens, l.Has = int64(left), l.Has|LimitInputTokens
				case ResourceOutputTokens:
					l.OutputTokens, l.Has = int64(left), l.Has|LimitOutputTokens
				case ResourceCost:
					l.Cost, l.Has = left, l.Has|LimitCost
				}
			}
		case *timeoutAfter:
			l.Time, l.Has = max(c.limit-elapsed, 0), LimitTime
		}
		out = out.Min(l)
	})
	return out
}

func (c *countLimit) remaining(p *progress, raised int) Limits {
	if !c.limit.set {
		return Limits{}
	}
	if c.res == ResourceIterations {
		return Limits{Iterations: max(c.limit.v+raised-p.Iterations, 0), Has: LimitIterations}
	}
	return Limits{ToolCalls: max(c.limit.v+raised-p.ToolCalls, 0), Has: LimitToolCalls}
}

// eachLimit calls f with every check of c that stops on its own: c itself
// and, through AnyOf, its children.
func eachLimit(c check, f func(check)) {
	if a, ok := c.(*anyCheck); ok {
		for _, ch := range a.children {
			eachLimit(ch, f)
		}
		return
	}
	f(c)
}

// StopFired ends the run with the causes another evaluator fired (a
// holder's tree limits), fired[0] the cause, unless it has already
// stopped; onEvent: the run's own last event crossed the limit (StoppedAt
// and Evidence name it), otherwise the stop came from outside its stream
// (StoppedAt 0, no evidence). It reports whether the run stopped.
func (e *Evaluator) StopFired(fired []Cause, onEvent bool) bool {
	if e.cause != nil || len(fired) == 0 {
		return false
	}
	e.cause, e.ending().fired = fired[0], append([]Cause(nil), fired...)
	e.ending().stoppedAt, e.ending().evidence = 0, nil
	if onEvent {
		// The evidence is the holder's own event that crossed the limit:
		// the tree's other events are other runs'.
		e.ending().stoppedAt, e.ending().evidence = e.progress.Events, []int{e.progress.Events}
	}
	e.ending().ended = time.Now()
	return true
}

// Fired returns what fired when the evaluator stopped, without
// copying; nil while it runs.
func (e *Evaluator) Fired() []Cause {
	if e.x == nil || e.x.end == nil {
		return nil
	}
	return e.x.end.fired
}
