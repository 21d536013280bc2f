package fleet

import (
	"context"
	"slices"
	"sync"

	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/termination"
)

// Local's trees (tree.Sharer): in one process there is nothing to lease. A
// joined run's usage is charged to the holder's limits at once, through
// the holding's Charge hook, so the holder's evaluator sees the whole tree
// exactly; when the holder ends, its joined runs end with Cancelled{
// reason: parent}. (The middleware links a child to a parent that runs in
// its process on the same fleet directly, however the child was started,
// so it joins a Local tree only through runs that joined this fleet by
// other means.)

var _ tree.Sharer = (*Local)(nil)

// localTrees are Local's shared trees, by holder id.
type localTrees struct {
	mu    sync.Mutex
	trees map[string]*localTree
}

// localTree is one holder's tree.
type localTree struct {
	spec   tree.Spec
	holder tree.SharedRun // nil: told nothing
	mu     sync.Mutex
	joined map[*localTreeJoin]struct{}
	end    termination.Cause // set when the holder has stopped
}

// HoldTree is part of the tree sharing the middleware calls (see the
// package doc's "Trees").
func (l *Local) HoldTree(spec tree.Spec, _ tree.Usage, holder tree.SharedRun) tree.Member {
	t := &localTree{spec: spec, holder: holder, joined: map[*localTreeJoin]struct{}{}}
	l.tree.mu.Lock()
	if l.tree.trees == nil {
		l.tree.trees = map[string]*localTree{}
	}
	if old := l.tree.trees[spec.Holder]; old != nil {
		t = old // held twice: the first holding stands
	} else {
		l.tree.trees[spec.Holder] = t
	}
	l.tree.mu.Unlock()
	return &localHolding{l: l, t: t}
}

// JoinTree is part of the tree sharing the middleware calls. A holder this fleet does not hold (it runs
// in another process, or has ended) gives nil: the limits the request
// propagated then apply to the run.
func (l *Local) JoinTree(_ context.Context, holder string, run tree.SharedRun) tree.Member {
	l.tree.mu.Lock()
	t := l.tree.trees[holder]
	l.tree.mu.Unlock()
	if t == nil {
		return nil
	}
	j := &localTreeJoin{t: t, run: run}
	t.mu.Lock()
	if t.end == nil {
		t.joined[j] = struct{}{}
	}
	t.mu.Unlock()
	return j
}

// TreesOf is part of the tree sharing the middleware calls: the holders the registry entry of run, a live
// run of this fleet, lists; nil for a run the fleet does not know.
func (l *Local) TreesOf(_ context.Context, run string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := l.runs[run]; m != nil {
		return slices.Clone(m.info.Trees)
	}
	return nil
}

// localHolding is the holder's tree.Member: its own usage is counted by its
// evaluator already.
type localHolding struct {
	l *Local
	t *localTree
}

var _ tree.QuietMember = (*localHolding)(nil)

func (h *localHolding) Spend(tree.Usage) termination.Cause { return nil }

// SpendsNothing implements tree.QuietMember: the holder's evaluator counts its
// own subtree's events in this process, and joined runs are charged to it
// through the Charge hook at their Spend.
func (h *localHolding) SpendsNothing() {}

func (h *localHolding) Warn(c termination.Cause) {
	for _, j := range h.t.members() {
		if j.run != nil {
			j.run.WarnTree(c)
		}
	}
}

func (h *localHolding) Leave(end termination.Cancelled) {
	t := h.t
	t.mu.Lock()
	if t.end != nil {
		t.mu.Unlock()
		return
	}
	t.end = end
	joined := t.membersLocked()
	clear(t.joined)
	t.mu.Unlock()
	h.l.tree.mu.Lock()
	if h.l.tree.trees[t.spec.Holder] == t {
		delete(h.l.tree.trees, t.spec.Holder)
	}
	h.l.tree.mu.Unlock()
	for _, j := range joined {
		if j.run != nil {
			j.run.StopTree(t.end)
		}
	}
}

func (t *localTree) members() []*localTreeJoin {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.membersLocked()
}

func (t *localTree) membersLocked() []*localTreeJoin {
	out := make([]*localTreeJoin, 0, len(t.joined))
	for j := range t.joined {
		out = append(out, j)
	}
	return out
}

// localTreeJoin is a joined run's tree.Member.
type localTreeJoin struct {
	t   *localTree
	run tree.SharedRun // nil: told nothing
}

// Spend charges the holder at once; once the holder has stopped it
// returns the Cancelled{reason: parent} its joined runs end with.
func (j *localTreeJoin) Spend(u tree.Usage) termination.Cause {
	t := j.t
	t.mu.Lock()
	end := t.end
	t.mu.Unlock()
	if end != nil {
		return end
	}
	if !u.IsZero() && t.holder != nil {
		t.holder.ChargeTree(u) // may stop the holder, whose Leave stops this run
	}
	t.mu.Lock()
	end = t.end
	t.mu.Unlock()
	return end
}

func (j *localTreeJoin) Warn(termination.Cause) {}

func (j *localTreeJoin) Leave(termination.Cancelled) {
	j.t.mu.Lock()
	delete(j.t.joined, j)
	j.t.mu.Unlock()
}
