package middleware

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentstop/agentstop/termination"
	"github.com/agentstop/agentstop/tree"
)

// Trees of runs (docs/spec.md §8). A run's place in a tree is a *node that
// the Run points to: the parent link, the run's tree limits and their
// roll-up, and the live children. A run that has no parent, holds no tree
// limits and never had a child has none.
//
// Locks: a Run's mu is taken before a tree's mu (the event path holds the
// run's lock while it feeds its holders' tree limits; a child's start holds
// its parent's run lock while it joins the parent's children), and no code
// holding a tree's mu takes a run's: cascades and warnings copy the
// children out first.

// node is a run's place in a tree of runs.
type node struct {
	run    *Run
	parent string // the parent's run id; "" for a root
	up     *node  // the parent's tree when the parent runs in this process
	// holders are the trees whose limits count this run's events: this one
	// when it holds limits, then its ancestors' that do, nearest first. Set
	// before the run is visible; read only.
	holders []*node
	// ids are the run ids of the holders whose tree limits count this
	// run's events and are shared through a fleet (tree.Sharer), nearest
	// first: this run when it holds shared limits, the remote holders it
	// joined, then its parent's ids (the parent's own slice when the run
	// adds none). Set before the run is visible; read only. They go out in
	// requests (TreeHeader) and into the fleet's registry (RunInfo.Trees).
	ids []string

	mu     sync.Mutex
	limits *termination.Evaluator // the tree limits this run holds; nil for none
	nwarn  int                    // limits' warnings already handed to the subtree
	fired  bool                   // the limits fired and the holder was told
	ended  bool                   // the run ended: its live children were ended
	timer  *time.Timer            // the tree timeout's timer, nil for none
	// A held tree (hold.go): release is closed when the holder's tree
	// limits are raised; holdTimer is the hold timeout.
	release   chan struct{}
	holdTimer *time.Timer
	// The live children: an intrusive list, so that a finished child
	// leaves nothing behind.
	first, prev, next *node

	// Sharing through a fleet (treeshare.go). whole: the tree limits the
	// run holds, as they were when it started (what a fleet shares); held:
	// a fleet shares them. joined: the ids of the remote holders whose
	// limits this run's subtree is charged to. shares: the fleet
	// memberships every event of the subtree is spent through; pending:
	// what the subtree spent since the last Spend; spent: what it spent
	// through them in all (under mu).
	whole      termination.Limits
	held       bool
	joined     []string
	propagated termination.Limits // what the request said was left, when joined
	spent      tree.Usage
	chargeEv   *termination.Event // under mu: the holder's charge's event, made on first use
	uncounted  termination.Totals // under mu: what charge spent that limits did not need to count (treeshare.go)
	shares     []tree.Member
	spends     bool // a member of shares needs the subtree's usage (not every one is a tree.QuietMember)
	pending    tree.Usage
}

// runKey is the context key under which a run's context carries its run.
type runKey struct{}

// runValue is the layer of a run's context that carries the run; it lives
// inside the Run, so carrying it costs no allocation.
type runValue struct {
	context.Context
	run *Run
}

func (c *runValue) Value(key any) any {
	if key == (runKey{}) {
		return c.run
	}
	return c.Context.Value(key)
}

// RunFromContext returns the run whose context ctx is or descends from, or
// nil. A run started under such a context is that run's child.
func RunFromContext(ctx context.Context) *Run {
	if ctx == nil {
		return nil
	}
	r, _ := ctx.Value(runKey{}).(*Run)
	return r
}

// WithParent makes the run a child of the run with id parent (§8): a run
// of this process (any stage) when one is live with that id; a run that
// starts after that parent has ended ends at once as Skipped{reason:
// parent_ended} (the process remembers the last 1,024 runs that
// finished); otherwise the parent runs elsewhere, and the id is recorded
// (Run.Parent, Result.Parent, the recorder's RunInfo.ParentRunID). With a
// fleet (fleet.Membership) the run is then the remote parent's child in the
// fleet: the parent's end reaches it, and when the fleet shares trees
// (tree.Sharer) it joins the shared trees over the parent (the fleet looks
// them up: tree.Sharer.TreesOf), which charge its events and stop it when
// their limits are spent. Without a fleet nothing over the remote parent
// limits or ends it. It takes precedence over the run a context
// carries and over a propagated parent. An empty id is ignored. Default:
// the parent is the run the context passed to Start descends from, if
// any, else the one RunPropagator extracted into it.
func WithParent(parent string) RunOption {
	return runOptionFunc(func(c *runConfig) {
		if parent != "" {
			c.parent = parent
		}
	})
}

// WithTreeLimits makes every run of the stage hold tree limits (§8, a
// policy's tree: key): limits over the run and all its descendants,
// however deep, in this process. c holds count, budget and timeout
// conditions ([termination.Tree] of them, or one of them, or AnyOf them);
// any other condition is an error from New naming it. Given several
// times, or with a policy's tree:, the limits combine (each fires on its
// own). Default: none. nil is ignored.
func WithTreeLimits(c termination.Condition) Option {
	return optionFunc(func(cfg *config) {
		if c == nil {
			return
		}
		cfg.trees = append(cfg.trees, termination.TreeLimits(c))
		cfg.code = true
	})
}

// liveRuns finds a live run by id, for WithParent.
var liveRuns = struct {
	sync.Mutex
	m     map[string]*Run
	ended struct { // the last recentlyEnded finished runs, oldest at next
		ids  []string
		runs map[string]endedRun
		next int
	}
}{m: map[string]*Run{}}

func registerRun(r *Run) {
	liveRuns.Lock()
	liveRuns.m[r.id] = r
	liveRuns.Unlock()
}

// unregisterRun removes a finished run from liveRuns and remembers it
// among the recently ended runs, with the detail a late child's
// Skipped{parent_ended} gives.
func unregisterRun(r *Run, res *termination.Result) {
	end := endedRun{stage: r.stage.name, tag: res.Tag()}
	liveRuns.Lock()
	if liveRuns.m[r.id] == r {
		delete(liveRuns.m, r.id)
	}
	e := &liveRuns.ended
	if e.ids == nil {
		e.ids, e.runs = make([]string, recentlyEnded), make(map[string]endedRun, recentlyEnded)
	}
	if old := e.ids[e.next]; old != "" {
		delete(e.runs, old)
	}
	e.ids[e.next], e.runs[r.id] = r.id, end
	e.next = (e.next + 1) % recentlyEnded
	liveRuns.Unlock()
}

// recentlyEnded is how many finished runs WithParent still knows as ended
// (a bounded memory: a child naming an older one is taken for a child of a
// run elsewhere).
const recentlyEnded = 1024

// lookupRun returns the live run with id, or the Skipped detail of a
// recently ended one.
func lookupRun(id string) (*Run, string) {
	liveRuns.Lock()
	defer liveRuns.Unlock()
	if r := liveRuns.m[id]; r != nil {
		return r, ""
	}
	if e, ok := liveRuns.ended.runs[id]; ok {
		return nil, termination.ParentEnded(e.stage, e.tag).Detail
	}
	return nil, ""
}

// endedRun is what a late child's Skipped detail says of a finished run.
type endedRun struct{ stage, tag string }

// parentRef is who a starting run's parent is.
type parentRef struct {
	run       *Run   // in this process; nil for none or a remote parent
	id        string // the parent's id; "" for none
	limits    termination.Limits
	hasLimits bool     // limits propagated from a remote parent
	holders   []string // the remote holders of tree limits the request named (Propagator)
	ended     string   // WithParent named a run of this process that has finished: the Skipped detail
	byID      bool     // WithParent named a run that is not live in this process
}

// findParent resolves a starting run's parent: WithParent, else the run
// ctx descends from, else a parent the RunPropagator extracted into ctx. f is
// the starting run's stage's participant that shares trees (nil for none).
func findParent(ctx context.Context, rc *runConfig, f tree.Sharer) parentRef {
	if rc.parent != "" {
		r, ended := lookupRun(rc.parent)
		return parentRef{run: r, id: rc.parent, ended: ended, byID: r == nil && ended == ""}
	}
	if p := RunFromContext(ctx); p != nil {
		return parentRef{run: p, id: p.id}
	}
	if rp, ok := ctx.Value(remoteKey{}).(remoteParent); ok {
		// A request served by this process may name one of its own runs:
		// one that has ended refuses the child, as WithParent does; a live
		// one on the same fleet is the child's parent here, as a context's
		// or WithParent's is (§8: a child is a child however it was
		// started). Without a shared fleet the request counts as one from
		// another process: the propagated limits become the child's own.
		r, ended := lookupRun(rp.id)
		if r != nil && sameFleet(f, r.stage.trees) {
			return parentRef{run: r, id: rp.id}
		}
		return parentRef{id: rp.id, limits: rp.limits, hasLimits: rp.limits.Has != 0, holders: rp.holders, ended: ended}
	}
	return parentRef{}
}

// sameFleet reports whether a and b are one fleet's participant (not
// nil). Participants of a type that cannot be compared are no other's.
func sameFleet(a, b tree.Sharer) (same bool) {
	if a == nil || b == nil {
		return false
	}
	defer func() {
		if recover() != nil { // an incomparable type: not the same
			same = false
		}
	}()
	return a == b
}

// joinTree gives a starting run its place in a tree: its tree limits (the
// stage's, and those a remote parent propagated), and its parent's
// children. It reports whether the run was ended at once: its parent had
// ended (Skipped{reason: parent_ended}).
func (r *Run) joinTree(p parentRef) bool {
	limits := r.stage.tree
	// With a fleet that shares trees, the request's holders are charged
	// through it (treeshare.go): the propagated limits, a snapshot of what
	// was left at the call, are then what Remaining reports, not limits of
	// the run's own. Without one, or when the fleet does not know one of
	// the holders, they become the run's tree limits.
	var t *node
	shared := false
	if r.stage.trees != nil && p.byID {
		// WithParent named a run of another process (a job queue carries
		// only its id): the fleet's registry says whose trees count its
		// events.
		p.holders = validHolders(r.stage.trees.TreesOf(r.parent, p.id))
	}
	if r.stage.trees != nil && len(p.holders) > 0 && p.ended == "" {
		// Published before the fleet can stop the run through a hook, so
		// that the stop's cascade finds it.
		t = &node{run: r, parent: p.id}
		r.mu.Lock()
		r.tree = t
		r.mu.Unlock()
		shared = t.join(p.holders, p.limits)
	}
	whole := r.stage.treeLimits
	if p.hasLimits && !shared {
		if remote := p.limits.Condition(); remote != nil {
			whole = whole.Min(p.limits)
			if limits != nil {
				limits = termination.TreeLimits(limits, remote)
			} else {
				limits = remote
			}
		}
	}
	if p.id == "" && limits == nil && t == nil {
		return false
	}
	if t == nil {
		t = &node{run: r, parent: p.id}
	}
	if limits != nil {
		t.limits = termination.NewEvaluator(limits, termination.WallClock)
		if h, ok := r.stage.cfg.holdOf(); ok {
			t.limits.SetHold(h) // hold.go
		}
		t.whole = whole
	}
	t.mu.Lock()
	joined := len(t.joined) > 0 // joined, even if a hook has stopped the run since
	t.mu.Unlock()
	if limits != nil || joined {
		t.holders = []*node{t}
	}
	r.mu.Lock()
	r.tree = t // before the run is visible to its parent's cascade
	r.mu.Unlock()
	if p.ended != "" {
		r.stopWith(termination.Skipped{Reason: termination.SkipParentEnded, Detail: p.ended})
		return true
	}
	var upIDs []string
	if up := p.run; up != nil {
		up.mu.Lock()
		if c, ended := up.eval.Stopped(); ended {
			up.mu.Unlock()
			r.stopWith(termination.Skipped{Reason: termination.SkipParentEnded,
				Detail: termination.ParentEnded(up.stage.name, termination.Tag(c, up.stage.allowed)).Detail})
			return true
		}
		ut := up.treeLocked()
		if len(ut.holders) > 0 { // read only once set: no lock needed
			t.holders = append(t.holders[:len(t.holders):len(t.holders)], ut.holders...)
		}
		t.up, upIDs = ut, ut.ids
		ut.mu.Lock()
		t.next = ut.first
		if ut.first != nil {
			ut.first.prev = t
		}
		ut.first = t
		ut.mu.Unlock()
		up.mu.Unlock()
	}
	if limits != nil {
		if ts := termination.NewEvaluator(limits, termination.EventClock).Timeouts(); len(ts) > 0 {
			t.mu.Lock()
			t.timer = time.AfterFunc(ts[0], t.timeout)
			t.mu.Unlock()
		}
	}
	t.share(upIDs)
	return false
}

// share shares the tree limits the run holds through its stage's fleet
// from its start (§8, clarified 2026-11-28: a holder's tree is shared
// whenever it has tree: limits, so that a child started anywhere, with
// only the holder's id, can join it), and sets t.ids: the holders of the
// run's shared trees. A run that holds no limits, joined no remote tree
// and whose ancestors share none does nothing here; one that adds no
// holder of its own takes its parent's ids as they are (no allocation).
func (t *node) share(upIDs []string) {
	held := t.limits != nil && t.hold()
	t.mu.Lock()
	joined := t.joined
	t.mu.Unlock()
	if !held && len(joined) == 0 {
		t.ids = upIDs
		return
	}
	ids := make([]string, 0, 1+len(joined)+len(upIDs))
	if held {
		ids = append(ids, t.run.id)
	}
	for _, id := range joined {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, id := range upIDs {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	t.ids = ids
}

// treeLocked returns the run's tree, made on first use (a run becomes a
// tree's root when its first child starts). r.mu is held.
func (r *Run) treeLocked() *node {
	if r.tree == nil {
		r.tree = &node{run: r}
	}
	return r.tree
}

// leave takes a finished run out of its parent's live children, so
// that the parent holds nothing for it, and stops its tree timer.
func (t *node) leave() {
	t.mu.Lock()
	if t.timer != nil {
		t.timer.Stop()
	}
	if t.holdTimer != nil {
		t.holdTimer.Stop()
	}
	t.mu.Unlock()
	up := t.up
	if up == nil {
		return
	}
	up.mu.Lock()
	if t.prev != nil {
		t.prev.next = t.next
	} else if up.first == t {
		up.first = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	}
	t.prev, t.next = nil, nil
	up.mu.Unlock()
}

// children returns the live children.
func (t *node) children() []*node {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*node
	for c := t.first; c != nil; c = c.next {
		out = append(out, c)
	}
	return out
}

// endChildren ends the run's live descendants (once, when the run has
// stopped with c): with c itself when c is a parent's cascade that reached
// this run, so that a grandchild names the run whose end started it, and
// with Cancelled{reason: parent, detail: "STAGE ended: TAG"} naming this
// run otherwise. Each child ends its own children the same way.
func (t *node) endChildren(c termination.Cause) {
	t.mu.Lock()
	if t.ended {
		t.mu.Unlock()
		return
	}
	t.ended = true
	shares, spent := t.shares, t.pending
	t.shares, t.pending = nil, tree.Usage{}
	t.mu.Unlock()
	if len(shares) > 0 && !spent.IsZero() {
		// The event that ended the run (its own condition fired) is the
		// trees' too: charge it before leaving them.
		for _, s := range shares {
			s.Spend(spent)
		}
	}
	kids := t.children()
	if len(kids) == 0 && len(shares) == 0 {
		return
	}
	cause, ok := c.(termination.Cancelled)
	if !ok || cause.Reason != termination.CancelParent {
		cause = termination.ParentEnded(t.run.stage.name, termination.Tag(c, t.run.stage.allowed))
	}
	for _, s := range shares {
		s.Leave(cause)
	}
	for _, k := range kids {
		k.run.stopWith(cause)
	}
}

// rollUp evaluates the run's event ev with its holders' tree limits,
// nearest first, with the run's lock and root's (the last holder's, see
// lockRoot) held. It reports whether any of them warned or fired: the
// caller then calls Run.treeEvent without the lock.
func (t *node) rollUp(ev *termination.Event, root *node) bool {
	acted := false
	for _, h := range t.holders {
		if h != root {
			h.mu.Lock()
		}
		if h.limits == nil {
			// Only charged through a fleet: no limits of its own here.
		} else if _, stopped := h.limits.Stopped(); !stopped {
			_, stop := h.limits.ObserveRef(ev)
			acted = acted || stop || len(h.limits.WarningsSince(h.nwarn)) > 0
		}
		if h.spends {
			h.pending = h.pending.Add(tree.UsageOf(ev))
			acted = true
		}
		if h != root {
			h.mu.Unlock()
		}
	}
	return acted
}

// lockRoot locks the root-most holder of the run's tree limits and
// returns it, with the run's lock held. The run's event is evaluated, recorded and
// rolled up with it held, so that the events of a tree are evaluated in
// one order, the order they are recorded in (an event log replays them in
// that order, §4), and none is evaluated after a tree limit fired (see
// firedHolder). It returns nil for a run without holders.
func (t *node) lockRoot() *node {
	if t == nil || len(t.holders) == 0 {
		return nil
	}
	root := t.holders[len(t.holders)-1]
	root.mu.Lock()
	return root
}

// firedHolder returns the nearest holder whose tree limits have fired
// (with root locked) and what they fired: the tree has ended, though the
// cascade may not have reached this run yet. An event that comes now is
// not evaluated: replay ends the holder's tree at the event that crossed
// the limit, and so does the live run.
func (t *node) firedHolder(root *node) (*node, []termination.Cause) {
	for _, h := range t.holders {
		if h != root {
			h.mu.Lock()
		}
		var fired []termination.Cause
		if h.limits != nil {
			if _, stopped := h.limits.Stopped(); stopped {
				fired = h.limits.Fired()
			}
		}
		if h != root {
			h.mu.Unlock()
		}
		if fired != nil {
			return h, fired
		}
	}
	return nil, nil
}

// endByTree ends the run whose holder h's tree limits fired before its
// event: the holder with what they fired, a descendant with the cascade
// that the holder's end sends it (Cancelled{reason: parent} naming the
// holder). Called without locks; the event is not evaluated.
func (r *Run) endByTree(h *node, fired []termination.Cause) (termination.Cause, bool, bool) {
	if h == r.tree {
		r.stopTree(fired, false)
	} else {
		hr := h.run
		r.stopWith(termination.ParentEnded(hr.stage.name, termination.Tag(fired[0], hr.stage.allowed)))
	}
	c, _ := r.Cause()
	return c, true, true
}

// treeEvent acts on what the run's last event did to its holders' tree
// limits: their warnings go to each holder and its live descendants, and
// a holder whose limits fired ends with their cause (its descendants,
// this run included, with Cancelled{reason: parent}). It reports whether
// anything but spending through a holder's own fleet holding happened
// (a warning, a stop, a spend through a joined tree, which may warn or
// stop this run): only then may the run have a new warning or cause. So
// an event of a tree that is shared only because it could be joined
// (§8: from its holder's start) costs one lock per holder and a Spend.
func (r *Run) treeEvent() bool {
	acted := false
	for _, h := range r.tree.holders {
		if h.act(h == r.tree) {
			acted = true
		}
	}
	if acted {
		r.deliverWarnings()
	}
	return acted
}

// act acts on what the holder's tree limits did since it last acted: their
// warnings go to the holder and its live descendants (and, when the limits
// are shared through a fleet, to their descendants elsewhere), and limits
// that fired end the holder (onEvent: the holder's own last event crossed
// them). The subtree's usage since the last event is spent through the
// holder's fleet memberships (treeshare.go). Called without locks. It
// reports what treeEvent does.
func (h *node) act(onEvent bool) bool {
	h.mu.Lock()
	var w, fired []termination.Cause
	var holdAt termination.Cause // the limit the tree is held at (hold.go)
	limited := false             // the limits have fired, here or in a concurrent act
	if h.limits != nil {
		w = h.limits.WarningsSince(h.nwarn)
		h.nwarn += len(w)
		if _, limited = h.limits.Stopped(); limited && !h.fired {
			h.fired, fired = true, h.limits.Fired()
		}
		if len(w) > 0 && h.release == nil {
			holdAt, _ = h.limits.Held()
		}
	}
	shares, spent, held, joined := h.shares, h.pending, h.held, len(h.joined) > 0
	h.pending = tree.Usage{}
	if len(shares) > 0 {
		h.spent = h.spent.Add(spent)
	}
	h.mu.Unlock()
	if len(w) > 0 {
		h.warnSubtree(w)
		if held {
			shareWarnings(shares, w)
		}
	}
	if holdAt != nil {
		h.holdTree(holdAt)
	}
	// The fleet first: when the event spent a shared tree's limits, the
	// holder's end (a joined run's Cancelled{reason: parent}) stands over
	// what the limits propagated to this run fired.
	stopped := false
	if len(shares) > 0 && !spent.IsZero() {
		stopped = h.spend(shares, spent, onEvent)
	}
	if fired != nil {
		h.run.stopTree(fired, onEvent)
	}
	return len(w) > 0 || limited || stopped || joined && !spent.IsZero()
}

// warnSubtree records the holder's tree warnings on the holder and every
// live descendant. A run hands them to its hook and recorder with its next
// event, or at its end (the run whose event raised them, at once).
func (t *node) warnSubtree(w []termination.Cause) {
	r := t.run
	r.mu.Lock()
	for _, c := range w {
		r.eval.AddWarning(c)
	}
	r.mu.Unlock()
	for _, k := range t.children() {
		k.warnSubtree(w)
	}
}

// stopTree ends the run with what its tree limits fired.
func (r *Run) stopTree(fired []termination.Cause, onEvent bool) bool {
	r.mu.Lock()
	ok := r.eval.StopFired(fired, onEvent)
	r.mu.Unlock()
	if ok {
		r.stopped(fired[0])
	}
	return ok
}

// timeout is the tree timeout's timer: the holder's tree has lasted its
// shortest tree timeout.
func (t *node) timeout() {
	t.mu.Lock()
	if t.limits == nil {
		t.mu.Unlock()
		return
	}
	_, stop := t.limits.Tick(time.Now())
	var fired []termination.Cause
	if stop && !t.fired {
		t.fired, fired = true, t.limits.Fired()
	}
	t.mu.Unlock()
	if fired != nil {
		t.run.stopTree(fired, false)
	}
}

// totals is what the run and its descendants spent, as the tree limits
// the run holds counted it (what other processes spent under a shared
// tree included), for Result.Tree; nil when it holds none. The run's lock
// may be held (a run's lock comes before a tree's).
func (t *node) totals() *termination.Totals {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.limits == nil {
		return nil
	}
	tot := t.limits.Progress().Totals
	tot.Events = 0 // a subtree's totals count no events (§8 "tree")
	u := t.uncounted
	tot.Iterations += u.Iterations
	tot.ToolCalls += u.ToolCalls
	tot.Tokens.InputTokens += u.Tokens.InputTokens
	tot.Tokens.OutputTokens += u.Tokens.OutputTokens
	tot.Cost += u.Cost
	return &tot
}

// Parent returns the id of the run's parent (§8), or "" for a run that has
// none.
func (r *Run) Parent() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tree == nil {
		return ""
	}
	return r.tree.parent
}

// Remaining returns what is left of the run's limits: its own count,
// budget and timeout limits and the tree limits of the run and its
// ancestors in this process (including those a remote caller propagated),
// the smallest for each resource. An orchestrator splits it across
// children or tells a remote agent its budget.
func (r *Run) Remaining() termination.Limits {
	r.mu.Lock()
	left := r.eval.Remaining()
	r.mu.Unlock()
	return left.Min(r.treeRemaining())
}

// treeRemaining is what is left of the tree limits that count the run's
// events (its own tree limits and its ancestors'), the smallest for each
// resource: what RunPropagator sends a remote child.
func (r *Run) treeRemaining() termination.Limits {
	r.mu.Lock()
	t := r.tree
	r.mu.Unlock()
	var left termination.Limits
	if t == nil {
		return left
	}
	for _, h := range t.holders {
		h.mu.Lock()
		if h.limits != nil {
			left = left.Min(h.limits.Remaining())
		}
		if h.propagated.Has != 0 {
			left = left.Min(lessSpent(h.propagated, h.spent))
		}
		h.mu.Unlock()
	}
	return left
}

// Charge charges usage and cost spent on the run's behalf outside its own
// events (a remote agent's usage, reported when the call returns) to the
// tree limits of the run and its ancestors, nearest first, as an event of
// the run would: they may warn or fire. The run's own limits and counts
// count its own events only. A run that holds no tree limits and has no
// ancestor that does, or that has stopped, ignores it. Negative or
// non-finite amounts are reported to the recorder and ignored. A callee
// whose runs joined the run's tree through a fleet (tree.Sharer), or are
// linked to it in this process (a callee in this process on the same
// fleet), is charged to it already: charging its reported usage too
// counts it twice.
func (r *Run) Charge(usage termination.Usage, cost float64) {
	ev := &termination.Event{Kind: termination.KindToolResult, Usage: usage, Cost: cost}
	if err := ev.Validate(); err != nil {
		r.report(fmt.Errorf("middleware: stage %q: Charge: %w", r.stage.name, err))
		return
	}
	r.mu.Lock()
	t := r.tree
	if _, stopped := r.eval.Stopped(); stopped || t == nil || len(t.holders) == 0 {
		r.mu.Unlock()
		return
	}
	root := t.lockRoot()
	acted := t.rollUp(ev, root)
	root.mu.Unlock()
	r.mu.Unlock()
	if acted {
		r.treeEvent()
	}
}
