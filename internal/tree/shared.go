package tree

import (
	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/termination"
)

// Tree limits shared through a fleet (docs/spec.md §8, "Across
// processes"). When a run that holds tree limits starts in a stage whose
// fleet implements Sharer, the fleet shares them at once (HoldTree, keyed
// by the run's id: clarified 2026-11-28, a holder's tree is shared
// whenever it has tree: limits, not only once its id leaves). A request
// the run or a descendant makes names the holders (middleware.TreeHeader),
// and the fleet's registry lists them with every run of the tree, so that
// a child started in another process from the request, or with
// middleware.WithParent and only a run's id (Sharer.TreesOf), finds them.
// In the callee's process such a run joins each holder's tree (JoinTree):
// its events and its descendants' are spent through the fleet, in leases
// keyed by the holder's id, and the holder's evaluator is charged what the
// other processes spent (SharedRun.ChargeTree), so that a tree limit
// fires in the holder's process with its usual cause, and the tree ends by
// the cascade. A process that finds the limits spent ends its joined runs
// at once with Cancelled{reason: parent}.
//
// Per event nothing more happens than for a tree in one process, plus,
// per holder with fleet memberships, one more lock of its tree (act) and
// one Spend per membership, without locks (it may stop other runs); the
// run's warnings and cause are read again only when something happened
// (Settle).

// join charges the run's subtree to the remote holders' tree limits
// through the stage's fleet, and reports whether the fleet knows every
// holder (a fleet that knows none of them shares nothing: the run then
// takes the propagated limits as its own). It is called by joinTree before
// the run is visible, so it needs no lock.
func (n *Node) join(holders []string, propagated termination.Limits) bool {
	trees := n.stage.sharer
	known := true
	for _, id := range holders {
		m := trees.JoinTree(n.ctx, id, (*joining)(n))
		if m == nil {
			known = false
			continue
		}
		n.mu.Lock()
		ended := n.ended // a hook stopped the run already
		if !ended {
			n.shares, n.spends = append(n.shares, m), true
			n.joined = append(n.joined, id)
			n.propagated = propagated
		}
		n.mu.Unlock()
		if ended {
			m.Leave(cascade.ParentEnded(n.stage.name, termination.TagCancelled))
		}
	}
	return known
}

// joining is a joined run's node as the fleet that shares its holders'
// trees reaches it (SharedRun): a stop ends the run (Cancelled{reason:
// parent} naming the holder), a holder's tree warning raised in another
// process reaches the run and its live descendants.
type joining Node

func (j *joining) StopTree(c termination.Cause) bool { return j.run.StopWith(c) }
func (j *joining) WarnTree(c termination.Cause) {
	(*Node)(j).warnSubtree([]termination.Cause{c})
}
func (j *joining) ChargeTree(Usage)             {}
func (j *joining) HoldTree(c termination.Cause) { (*Node)(j).holdByFleet(c) }
func (j *joining) ReleaseTree()                 { (*Node)(j).releaseByFleet() }

// holding is a holder's node as the fleet that shares its tree limits
// reaches it (SharedRun): a stop ends the holder with the tree limit's
// cause; what other processes spent is charged to its limits (charge).
type holding Node

func (h *holding) StopTree(c termination.Cause) bool {
	return h.run.StopFired([]termination.Cause{c}, false)
}
func (h *holding) WarnTree(termination.Cause) {}
func (h *holding) ChargeTree(u Usage)         { (*Node)(h).charge(u) }

// HoldTree and ReleaseTree do nothing for the holder: its evaluator holds
// its tree (hold.go), charged with what other processes spent.
func (h *holding) HoldTree(termination.Cause) {}
func (h *holding) ReleaseTree()               {}

// hold shares the tree limits the run holds (its stage's, and what a
// caller propagated to it when it did not join the caller's trees) through
// its stage's fleet, once, when the run starts (share). It reports whether
// the run's limits are shared (a fleet that shares trees, and limits the
// run holds).
func (n *Node) hold() bool {
	trees := n.stage.sharer
	if trees == nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.held {
		return true
	}
	if n.ended || n.limits == nil {
		return false
	}
	n.held = true
	p := n.limits.Progress()
	used := Usage{Totals: p}
	used.Events = 0
	spec := Spec{Holder: n.run.ID(), Stage: n.stage.name, Limits: n.whole, Hold: n.stage.holdTimeout()}
	// HoldTree calls no method of the holding before it returns: holding the lock keeps the
	// subtree's events from slipping between used and the first Spend.
	m := trees.HoldTree(spec, used, (*holding)(n))
	n.shares, n.holdingM = append(n.shares, m), m
	if _, quiet := m.(QuietMember); !quiet {
		n.spends = true // a quiet holding (fleet.Local's) is spent nothing
	}
	return true
}

// spend spends the subtree's usage through the holder's fleet
// memberships, and ends the holder when one finds the tree's limits spent;
// it reports whether one did.
func (n *Node) spend(shares []Member, u Usage, onEvent bool) bool {
	var stop termination.Cause
	for _, s := range shares { // every tree is charged, whatever one says
		if c := s.Spend(u); c != nil && stop == nil {
			stop = c
		}
	}
	if stop != nil {
		n.run.StopFired([]termination.Cause{stop}, onEvent)
	}
	return stop != nil
}

// shareWarnings hands a holder's tree warnings to its descendants in
// other processes, through its holding (a joined run's memberships ignore
// them).
func shareWarnings(shares []Member, w []termination.Cause) {
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
func (n *Node) charge(u Usage) {
	n.mu.Lock()
	if n.limits == nil {
		n.mu.Unlock()
		return
	}
	if n.chargeEv == nil {
		n.chargeEv = new(termination.Event) // reused: charging allocates once per holder
	}
	ev := n.chargeEv
	before := n.limits.Progress()
	var left termination.Limits
	if u.Iterations > 1 || u.ToolCalls > 1 {
		left = n.limits.Remaining()
	}
	limits := n.limits
	feed := func(kind termination.Kind, k int, bit termination.LimitMask, room int) {
		if k > 1 {
			if left.Has&bit == 0 {
				k = 1 // unlimited: one event does what any number would
			} else {
				k = min(k, room+1) // past room+1 the limit has fired
			}
		}
		*ev = termination.Event{Kind: kind}
		for ; k > 0; k-- {
			if _, stop := limits.ObserveRef(ev); stop {
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
		n.limits.ObserveRef(ev)
	}
	for k := u.Final.Iterations; k > 0; k-- {
		*ev = termination.Event{Kind: termination.KindFinal}
		if k == u.Final.Iterations {
			ev.Usage, ev.Cost = u.Final.Tokens, u.Final.Cost
		}
		if _, stop := n.limits.ObserveRef(ev); stop {
			break
		}
	}
	n.uncount(u, before)
	n.mu.Unlock()
	// The warnings reach the holder's hook and recorder with its next
	// event, on its own goroutine (or at its end).
	n.act(false)
}

// uncount adds to n.uncounted what charge did not feed of u to the tree
// limits (feeding since before): the iterations and tool calls past what
// can change anything, and what came after the limits fired. The limits
// need no more; Result.Tree counts it. n.mu is held.
func (n *Node) uncount(u Usage, before termination.Totals) {
	after := n.limits.Progress()
	n.uncounted.Iterations += u.Iterations - (after.Iterations - before.Iterations)
	n.uncounted.ToolCalls += u.ToolCalls - (after.ToolCalls - before.ToolCalls)
	n.uncounted.Tokens.InputTokens += u.Tokens.InputTokens - (after.Tokens.InputTokens - before.Tokens.InputTokens)
	n.uncounted.Tokens.OutputTokens += u.Tokens.OutputTokens - (after.Tokens.OutputTokens - before.Tokens.OutputTokens)
	n.uncounted.Cost += u.Cost - (after.Cost - before.Cost)
}

// lessSpent returns what is left of l once u is spent (never below 0).
func lessSpent(l termination.Limits, u Usage) termination.Limits {
	l.Iterations = max(l.Iterations-u.Iterations, 0)
	l.ToolCalls = max(l.ToolCalls-u.ToolCalls, 0)
	l.TotalTokens = max(l.TotalTokens-u.Tokens.InputTokens-u.Tokens.OutputTokens, 0)
	l.InputTokens = max(l.InputTokens-u.Tokens.InputTokens, 0)
	l.OutputTokens = max(l.OutputTokens-u.Tokens.OutputTokens, 0)
	l.Cost = max(l.Cost-u.Cost, 0)
	return l
}
