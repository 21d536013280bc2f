package middleware

import (
	"slices"
	"strings"

	"github.com/agentstop/agentstop/termination"
	"github.com/agentstop/agentstop/tree"
)

// Tree limits shared through a fleet (docs/spec.md §8, "Across
// processes"). When a run that holds tree limits starts in a stage whose
// fleet implements tree.Sharer, the fleet shares them at once (HoldTree,
// keyed by the run's id: clarified 2026-11-28, a holder's tree is shared
// whenever it has tree: limits, not only once its id leaves). A request
// the run or a descendant makes names the holders (TreeHeader), and the
// fleet's registry lists them with every run of the tree (RunInfo.Trees),
// so that a child started in another process from the request, or with
// WithParent and only a run's id (the fleet's TreesOf), finds them. In the
// callee's process such a run joins each holder's tree (JoinTree): its
// events and its descendants' are spent through the fleet, in leases keyed by the
// holder's id, and the holder's evaluator is charged what the other
// processes spent (the holding's Charge hook), so that a tree limit fires
// in the holder's process with its usual cause, and the tree ends by the
// cascade. A process that finds the limits spent ends its joined runs at
// once with Cancelled{reason: parent}.
//
// Per event nothing more happens than for a tree in one process, plus,
// per holder with fleet memberships, one more lock of its tree (act) and
// one Spend per membership, without locks (it may stop other runs); the
// run's warnings and cause are read again only when something happened
// (treeEvent).

// join charges the run's subtree to the remote holders' tree limits
// through the stage's fleet, and reports whether the fleet knows every
// holder (a fleet that knows none of them shares nothing: the run then
// takes the propagated limits as its own). It is called by joinTree before
// the run is visible, so it needs no lock.
func (t *node) join(holders []string, propagated termination.Limits) bool {
	trees := t.run.stage.trees
	hooks := tree.Hooks{Stop: t.run.stopWith, Warn: t.treeWarning}
	known := true
	for _, id := range holders {
		m := trees.JoinTree(t.run.parent, id, hooks)
		if m == nil {
			known = false
			continue
		}
		t.mu.Lock()
		ended := t.ended // a hook stopped the run already
		if !ended {
			t.shares, t.spends = append(t.shares, m), true
			t.joined = append(t.joined, id)
			t.propagated = propagated
		}
		t.mu.Unlock()
		if ended {
			m.Leave(termination.ParentEnded(t.run.stage.name, termination.TagCancelled))
		}
	}
	return known
}

// treeWarning is a joined run's hook for a holder's tree warning raised in
// another process: the run and its live descendants get it.
func (t *node) treeWarning(c termination.Cause) {
	t.warnSubtree([]termination.Cause{c})
}

// hold shares the tree limits the run holds (its stage's, and what a
// caller propagated to it when it did not join the caller's trees) through
// its stage's fleet, once, when the run starts (share). It reports whether
// the run's limits are shared (a fleet that shares trees, and limits the
// run holds).
func (t *node) hold() bool {
	trees := t.run.stage.trees
	if trees == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held {
		return true
	}
	if t.ended || t.limits == nil {
		return false
	}
	t.held = true
	p := t.limits.Progress()
	used := tree.Usage{Totals: p.Totals}
	used.Events = 0
	spec := tree.Spec{Holder: t.run.id, Stage: t.run.stage.name, Limits: t.whole}
	// HoldTree calls no hook before it returns: holding the lock keeps the
	// subtree's events from slipping between used and the first Spend.
	m := trees.HoldTree(spec, used, tree.Hooks{
		Stop:   func(c termination.Cause) bool { return t.run.stopTree([]termination.Cause{c}, false) },
		Charge: t.charge,
	})
	t.shares = append(t.shares, m)
	if _, quiet := m.(tree.QuietMember); !quiet {
		t.spends = true // a quiet holding (fleet.Local's) is spent nothing
	}
	return true
}

// spend spends the subtree's usage through the holder's fleet
// memberships, and ends the holder when one finds the tree's limits spent;
// it reports whether one did.
func (t *node) spend(shares []tree.Member, u tree.Usage, onEvent bool) bool {
	var stop termination.Cause
	for _, s := range shares { // every tree is charged, whatever one says
		if c := s.Spend(u); c != nil && stop == nil {
			stop = c
		}
	}
	if stop != nil {
		t.run.stopTree([]termination.Cause{stop}, onEvent)
	}
	return stop != nil
}

// shareWarnings hands a holder's tree warnings to its descendants in
// other processes, through its holding (a joined run's memberships ignore
// them).
func shareWarnings(shares []tree.Member, w []termination.Cause) {
	for _, s := range shares {
		for _, c := range w {
			s.Warn(c)
		}
	}
}

// charge adds what other processes spent under the tree to the holder's
// tree limits (the holding's Charge hook, from the fleet's goroutine), as
// events of the tree would: iterations as message events, tool calls as
// tool_call events (only as many as can still change anything), tokens
// and cost as one event. It then acts on what they did.
func (t *node) charge(u tree.Usage) {
	t.mu.Lock()
	if t.limits == nil {
		t.mu.Unlock()
		return
	}
	if t.chargeEv == nil {
		t.chargeEv = new(termination.Event) // reused: charging allocates once per holder
	}
	ev := t.chargeEv
	before := t.limits.Progress()
	var left termination.Limits
	if u.Iterations > 1 || u.ToolCalls > 1 {
		left = t.limits.Remaining()
	}
	feed := func(kind termination.Kind, n int, bit termination.LimitMask, room int) {
		if n > 1 {
			if left.Has&bit == 0 {
				n = 1 // unlimited: one event does what any number would
			} else {
				n = min(n, room+1) // past room+1 the limit has fired
			}
		}
		*ev = termination.Event{Kind: kind}
		for ; n > 0; n-- {
			if _, stop := t.limits.ObserveRef(ev); stop {
				return
			}
		}
	}
	// What finals spent comes last, as finals: it counts, but never fires
	// a limit or warns (§3); whatever it reached fires on the next event.
	tokens := termination.Usage{InputTokens: u.Tokens.InputTokens - u.Final.Tokens.InputTokens,
		OutputTokens: u.Tokens.OutputTokens - u.Final.Tokens.OutputTokens}
	feed(termination.KindMessage, u.Iterations-u.Final.Iterations, termination.LimitIterations, left.Iterations)
	feed(termination.KindToolCall, u.ToolCalls, termination.LimitToolCalls, left.ToolCalls)
	if !tokens.IsZero() || u.Cost-u.Final.Cost > 0 {
		*ev = termination.Event{Kind: termination.KindToolResult, Usage: tokens, Cost: u.Cost - u.Final.Cost}
		t.limits.ObserveRef(ev)
	}
	for n := u.Final.Iterations; n > 0; n-- {
		*ev = termination.Event{Kind: termination.KindFinal}
		if n == u.Final.Iterations {
			ev.Usage, ev.Cost = u.Final.Tokens, u.Final.Cost
		}
		if _, stop := t.limits.ObserveRef(ev); stop {
			break
		}
	}
	t.uncount(u, before)
	t.mu.Unlock()
	// The warnings reach the holder's hook and recorder with its next
	// event, on its own goroutine (or at its end).
	t.act(false)
}

// uncount adds to t.uncounted what charge did not feed of u to the tree
// limits (feeding since before): the iterations and tool calls past what
// can change anything, and what came after the limits fired. The limits
// need no more; Result.Tree counts it. t.mu is held.
func (t *node) uncount(u tree.Usage, before termination.Progress) {
	after := t.limits.Progress()
	t.uncounted.Iterations += u.Iterations - (after.Iterations - before.Iterations)
	t.uncounted.ToolCalls += u.ToolCalls - (after.ToolCalls - before.ToolCalls)
	t.uncounted.Tokens.InputTokens += u.Tokens.InputTokens - (after.Tokens.InputTokens - before.Tokens.InputTokens)
	t.uncounted.Tokens.OutputTokens += u.Tokens.OutputTokens - (after.Tokens.OutputTokens - before.Tokens.OutputTokens)
	t.uncounted.Cost += u.Cost - (after.Cost - before.Cost)
}

// lessSpent returns what is left of l once u is spent (never below 0).
func lessSpent(l termination.Limits, u tree.Usage) termination.Limits {
	l.Iterations = max(l.Iterations-u.Iterations, 0)
	l.ToolCalls = max(l.ToolCalls-u.ToolCalls, 0)
	l.TotalTokens = max(l.TotalTokens-u.Tokens.InputTokens-u.Tokens.OutputTokens, 0)
	l.InputTokens = max(l.InputTokens-u.Tokens.InputTokens, 0)
	l.OutputTokens = max(l.OutputTokens-u.Tokens.OutputTokens, 0)
	l.Cost = max(l.Cost-u.Cost, 0)
	return l
}

// sharedHolders returns TreeHeader's value for a request the run makes:
// the ids of the holders whose tree limits count its events and are
// shared through a fleet, nearest first (t.ids: every such holder of this
// process shared its limits when it started; holders that the run's tree
// joined from a caller are passed on).
func (r *Run) sharedHolders() string {
	r.mu.Lock()
	t := r.tree
	r.mu.Unlock()
	if t == nil {
		return ""
	}
	return strings.Join(t.ids, " ") // read only once set
}

// SharedTrees returns the ids of the runs whose tree limits count this
// run's events and are shared through a fleet (tree.Sharer), nearest
// first: a fleet's registry lists them with the run, so that a child
// started elsewhere with only this run's id joins them (§8). nil for a run
// in no shared tree.
func (r *Run) SharedTrees() []string {
	r.mu.Lock()
	t := r.tree
	r.mu.Unlock()
	if t == nil || len(t.ids) == 0 {
		return nil
	}
	return slices.Clone(t.ids) // read only once set
}
