package tree

import (
	"context"
	"math"
	"time"

	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/termination"
)

// Sharer is implemented by a fleet that shares tree limits (docs/spec.md
// §8) across processes: a run that holds tree limits and has descendants
// in other processes (started from requests its Propagator-carried context
// made) is charged their usage, and they are charged against its limits,
// through the fleet, in leases keyed by the holder's run id, as shared
// budgets are (§7). Package middleware uses it when a stage's fleet
// implements it; fleet.Local and redisfleet do.
//
// The holder's process calls HoldTree when the holder starts (docs/spec.md
// §8, clarified 2026-11-28: a holder's tree is shared whenever it has
// tree: limits, not only once its id leaves the process), and registers
// it, and every run under it, with the holders' ids ([RunInfo.Sharer]).
// Each process where a descendant starts calls JoinTree for every holder
// the request named or, for a child started with only its parent's id
// (middleware.WithParent: a job queue), for every holder [Sharer.TreesOf]
// finds in the parent's registry entry. Every event of the
// holder's subtree is then spent, in its own process, through a
// [Member] (the holder's process through the holding, the others
// through their joins), with no I/O per event. The holder's
// [SharedRun.ChargeTree] receives what the other processes spent, so that the
// holder's own evaluator sees the whole tree and fires the limit with its
// exact cause; a process that finds the tree's limits spent (its lease is
// used up and nothing is left to reserve) stops its members at once.
//
// Overshoot: while the store is reachable, the tree's usage past a tree
// limit is at most one lease per process taking part (the holder's
// included) plus the usage of the events in flight when the limit is
// reached, as for fleet budgets; without the store each process spends
// what is left of its lease, and then only the limits the request
// propagated (and each run's own) apply.
type Sharer interface {
	// HoldTree shares the tree limits of the run spec.Holder, which runs
	// in this process, with its descendants in other processes. used is
	// what the holder's tree has spent so far (charged at once).
	// holder.StopTree ends the holder with a tree limit's cause (scope
	// tree) when the fleet finds the limits spent (never when spec.Hold:
	// the holder's evaluator holds the tree); holder.ChargeTree is
	// given the usage that other processes spent under the tree. It never
	// waits on the network. The caller may hold a lock that holder's
	// methods take: HoldTree must not call them, and the fleet never calls
	// them while holding a lock that HoldTree or a Member's methods take.
	// A nil holder is told nothing.
	HoldTree(spec Spec, used Usage, holder SharedRun) Member
	// JoinTree charges a run of this process, a descendant of the remote
	// run holder that holds tree limits, and the runs under it, to the
	// holder's tree limits. run.StopTree ends the run with Cancelled{reason:
	// parent} naming the holder when the fleet finds the limits spent
	// (run.HoldTree holds it instead when the holder's tree holds, until
	// run.ReleaseTree or the holder's end);
	// run.WarnTree gives it the holder's tree pressure warnings (a nil run
	// is told nothing). It may ask
	// the store whether the tree is held, within ctx (as Join may for a
	// remote parent's child), and otherwise never waits on the network. It
	// returns nil when the fleet knows that no process holds
	// the tree (the holder is not one of its runs': another fleet's, or
	// ended long ago): the run then takes the limits the request
	// propagated as its own, as without a fleet.
	JoinTree(ctx context.Context, holder string, run SharedRun) Member
	// TreesOf returns the holders whose shared tree limits count the
	// events of run, a run of any process of the fleet, as its registry
	// entry lists them ([RunInfo.Sharer]), nearest first: a child started
	// with only run's id joins them. It returns nil for a run in no shared
	// tree, and for one the fleet cannot find (it ended, it never joined
	// the fleet, or the store cannot be reached: the child then runs under
	// its own limits). It may ask the store, within ctx, and wait up to
	// one sync of the fleet for a run that has just started; otherwise it
	// never waits on the network.
	TreesOf(ctx context.Context, run string) []string
}

// Spec is a tree's limits as its holder shares them.
type Spec struct {
	Holder string // the holder's run id
	Stage  string // the holder's stage: a stopped descendant's detail names it
	// Limits are the holder's tree limits (middleware: the stage's tree:
	// limits, whole); Time is not shared (the holder's timer ends the tree,
	// and its end reaches every process).
	Limits termination.Limits
	// Hold, when > 0, is the hold timeout of the holder's stage, which
	// holds at its tree limits instead of stopping (§3 hold:). A fleet
	// that finds the limits spent then holds the tree's runs of its
	// process (SharedRun.HoldTree) instead of ending them, the holder's
	// evaluator decides the rest (its hold timeout ends the tree with the
	// limit's cause), and a raise of the holder's limits (Raiser) releases
	// the tree in every process.
	Hold time.Duration
}

// SharedRun is a run whose tree a fleet shares, as the fleet reaches it:
// the holder (HoldTree) or a joined descendant (JoinTree). Package tree's
// nodes give one of each. Its methods are safe to call from any goroutine,
// return quickly, never block on the run's loop, and do nothing once the
// run has ended.
type SharedRun interface {
	// StopTree ends the run with c — a tree limit's cause (scope tree) for
	// the holder, Cancelled{reason: parent} naming the holder for a joined
	// run — and reports whether this call stopped it.
	StopTree(c termination.Cause) bool
	// WarnTree gives a joined run and its descendants a tree warning
	// raised in another process (the holder ignores it).
	WarnTree(c termination.Cause)
	// ChargeTree adds usage spent in other processes under the tree to the
	// holder's tree limits; it may fire them (the holder then ends as its
	// own limits would end it). A joined run ignores it.
	ChargeTree(u Usage)
	// HoldTree holds a joined run and its live descendants in this
	// process at c, a tree limit's cause (scope tree), when the fleet
	// finds the limits of a tree that holds (Spec.Hold) spent, until
	// ReleaseTree; it does nothing for the holder, whose evaluator holds
	// its own tree, nor for a run held already by its fleet.
	HoldTree(c termination.Cause)
	// ReleaseTree lets the runs HoldTree held go on: the holder's limits
	// were raised, or its tree is no longer shared (its record is gone).
	ReleaseTree()
}

// Raiser is implemented by a Member through which a raise of a held
// tree's limits (§3 hold, §7 raise) reaches the fleet; redisfleet's
// members implement it. A member that does not leaves the raise to the
// holder's process alone (fleet.Local's: in its one process the holder's
// evaluator is the tree's, and its runs are linked directly).
type Raiser interface {
	// RaiseTree, on the holding, is told that the holder's tree limits
	// were raised by l (the holder's evaluator raised them): the fleet
	// raises the shared limits by as much, and the runs it held in any
	// process go on once they learn it. On a joined member it asks the
	// holder's process to raise the holder's tree limits by l (a raise of
	// a descendant raises its holder's tree limits) and returns an error
	// wrapping termination.ErrNotHeld when the holder is not held (or
	// cannot be reached).
	RaiseTree(l termination.Limits) error
}

// Member is a run's part in a tree shared through a fleet.
type Member interface {
	// Spend charges usage of the run's subtree spent in this process. It
	// is on the per-event path: no allocation, no network (a networked
	// fleet waits for its sync loop, at most its operation timeout and
	// never while its store is unreachable, only when this process spent
	// a whole lease past its grants within one round trip, as
	// Member.Spend, or spent past its grants once the tree has no room
	// left, or, in a joined process, before its first reserve told it the
	// limits: this is what bounds the overshoot). It
	// returns the cause the run must end with when the tree's limits are
	// spent (a tree limit's cause for the holder, Cancelled{reason:
	// parent} for a joined run), nil otherwise; the fleet stops the
	// tree's other members of this process through their hooks. Usage
	// that only finals spent never returns a stop (§3: a final never
	// fires a limit). An event in flight may Spend after Leave: the
	// member may still charge it, and returns nil or the cause the tree
	// ended with.
	Spend(u Usage) (stop termination.Cause)
	// Warn hands a tree warning of the holder (its tree pressure) to the
	// tree's joined runs in every process: the holding only.
	Warn(c termination.Cause)
	// Leave is called once, when the run has stopped, with what its
	// descendants end with: Cancelled{reason: parent, detail: "STAGE
	// ended: TAG"} naming the run, or the cascade that reached it naming
	// the run whose end started it. A holding's end ends the tree: nothing
	// more is granted, and its joined runs end with end (fleet.Local stops them
	// itself; a networked fleet leaves it to the cascade of §8, which
	// reaches them through the runs' parent links anyway).
	Leave(end termination.Cancelled)
}

// QuietMember is implemented by a Member whose Spend does nothing and
// returns nil whatever it is given: fleet.Local's holding, since in one
// process the holder's own evaluator counts every event its process
// spends under it. The middleware spends nothing through a quiet member,
// so a tree shared from its holder's start only so that it can be joined
// costs its events nothing more than a tree that is not shared. Its Warn
// and Leave are called as any member's.
type QuietMember interface {
	Member
	// SpendsNothing marks the member as quiet; it is never called.
	SpendsNothing()
}

// Usage is what events spent of a tree's limits: iterations (message and
// final events), tool calls, tokens and cost (Events is not counted), and
// in Final how much of that final events spent: a final counts, but never
// fires a limit or warns (§3), so a holder charged with it feeds it as
// finals.
type Usage struct {
	termination.Totals
	Final termination.Totals // what final events spent, among the above
}

// IsZero reports whether u spends nothing.
func (u Usage) IsZero() bool { return u == Usage{} }

// Add returns u + o.
func (u Usage) Add(o Usage) Usage {
	u.Totals.Add(o.Totals)
	u.Final.Add(o.Final)
	return u
}

// UsageOf returns what one event spends of a tree's limits, as an
// Evaluator counts it: an iteration for a message or final (a final also
// in Final), a tool call for a tool_call, its tokens and cost (negative or
// non-finite amounts, which a valid event never has, count as 0).
func UsageOf(ev *termination.Event) Usage {
	var u Usage
	switch ev.Kind {
	case termination.KindMessage, termination.KindFinal:
		u.Iterations = 1
	case termination.KindToolCall:
		u.ToolCalls = 1
	}
	u.Tokens.InputTokens, u.Tokens.OutputTokens = max(ev.Usage.InputTokens, 0), max(ev.Usage.OutputTokens, 0)
	if ev.Cost > 0 && ev.Cost <= math.MaxFloat64 {
		u.Cost = ev.Cost
	}
	if ev.Kind == termination.KindFinal {
		u.Final = u.Totals
	}
	return u
}

// LimitCause is the cause a tree limit on resource fires with when a fleet
// finds it spent (scope tree): MaxIterationsReached or MaxToolCallsReached
// for counts (count = used), BudgetExhausted otherwise.
func LimitCause(resource termination.Resource, used, limit float64) termination.Cause {
	switch resource {
	case termination.ResourceIterations:
		return termination.MaxIterationsReached{Limit: int(limit), Count: int(used), Scope: termination.ScopeTree}
	case termination.ResourceToolCalls:
		return termination.MaxToolCallsReached{Limit: int(limit), Count: int(used), Scope: termination.ScopeTree}
	}
	return termination.BudgetExhausted{Resource: resource, Used: used, Limit: limit, Scope: termination.ScopeTree}
}

// StopCause is what a joined run ends with when its tree's limits are
// spent: Cancelled{reason: parent, detail: "STAGE ended: TAG"} naming the
// holder's stage and the tag of cause c.
func StopCause(holderStage string, c termination.Cause) termination.Cancelled {
	return cascade.ParentEnded(holderStage, termination.Tag(c, nil))
}
