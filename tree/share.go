package tree

import (
	"context"
	"math"

	"github.com/agentstop/agentstop/termination"
)

type Sharer interface {
	// HoldTree shares the tree limits of the run spec.Holder, which runs
	// in this process, with its descendants in other processes. used is
	// what the holder's tree has spent so far (charged at once). Hooks.Stop
	// ends the holder with a tree limit's cause (scope tree) when the
	// fleet finds the limits spent; Hooks.Charge is given the usage that
	// other processes spent under the tree. It never waits on the network.
	// The caller may hold a lock that the hooks take: HoldTree must not
	// call them, and the fleet never calls a hook while holding a lock
	// that HoldTree or a Member's methods take.
	HoldTree(spec Spec, used Usage, hooks Hooks) Member
	// JoinTree charges a run of this process, a descendant of the remote
	// run holder that holds tree limits, and the runs under it, to the
	// holder's tree limits. Hooks.Stop ends the run with Cancelled{reason:
	// parent} naming the holder when the fleet finds the limits spent;
	// Hooks.Warn gives it the holder's tree pressure warnings. It may ask
	// the store whether the tree is held, within ctx (as Join may for a
	// remote parent's child), and otherwise never waits on the network. It
	// returns nil when the fleet knows that no process holds
	// the tree (the holder is not one of its runs': another fleet's, or
	// ended long ago): the run then takes the limits the request
	// propagated as its own, as without a fleet.
	JoinTree(ctx context.Context, holder string, hooks Hooks) Member
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

type Spec struct {
	Holder string // the holder's run id
	Stage  string // the holder's stage: a stopped descendant's detail names it
	// Limits are the holder's tree limits (middleware: the stage's tree:
	// limits, whole); Time is not shared (the holder's timer ends the tree,
	// and its end reaches every process).
	Limits termination.Limits
}

type Hooks struct {
	// Stop ends the run with c and reports whether this call stopped it.
	Stop func(c termination.Cause) bool
	// Warn gives the run (and its descendants) a tree warning raised in
	// another process: a joined run only.
	Warn func(c termination.Cause)
	// Charge adds usage spent in other processes under the tree to the
	// holder's tree limits: the holding only. It may fire them (the
	// holder then ends as its own limits would end it).
	Charge func(u Usage)
}

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

type QuietMember interface {
	Member
	// SpendsNothing marks the member as quiet; it is never called.
	SpendsNothing()
}

type Usage struct {
	Iterations  int64             `json:"iterations,omitempty"`
	ToolCalls   int64             `json:"tool_calls,omitempty"`
	Tokens      termination.Usage `json:"tokens,omitzero"`
	Cost        float64           `json:"cost,omitempty"`
	Finals      int64             `json:"finals,omitempty"`      // final events, among Iterations
	FinalTokens termination.Usage `json:"final_tokens,omitzero"` // their tokens, among Tokens
	FinalCost   float64           `json:"final_cost,omitempty"`  // their cost, among Cost
}

func (u Usage) IsZero() bool { return u == Usage{} }

func (u Usage) Add(o Usage) Usage {
	return Usage{Iterations: u.Iterations + o.Iterations, ToolCalls: u.ToolCalls + o.ToolCalls,
		Tokens: addUsage(u.Tokens, o.Tokens), Cost: u.Cost + o.Cost,
		Finals: u.Finals + o.Finals, FinalTokens: addUsage(u.FinalTokens, o.FinalTokens), FinalCost: u.FinalCost + o.FinalCost}
}

func addUsage(a, b termination.Usage) termination.Usage {
	return termination.Usage{InputTokens: a.InputTokens + b.InputTokens, OutputTokens: a.OutputTokens + b.OutputTokens}
}

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
		u.Finals, u.FinalTokens, u.FinalCost = 1, u.Tokens, u.Cost
	}
	return u
}

func LimitCause(resource termination.Resource, used, limit float64) termination.Cause {
	switch resource {
	case termination.ResourceIterations:
		return termination.MaxIterationsReached{Limit: int(limit), Count: int(used), Scope: termination.ScopeTree}
	case termination.ResourceToolCalls:
		return termination.MaxToolCallsReached{Limit: int(limit), Count: int(used), Scope: termination.ScopeTree}
	}
	return termination.BudgetExhausted{Resource: resource, Used: used, Limit: limit, Scope: termination.ScopeTree}
}

func StopCause(holderStage string, c termination.Cause) termination.Cancelled {
	return termination.ParentEnded(holderStage, termination.Tag(c, nil))
}
