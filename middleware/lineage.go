package middleware

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/termination"
)

// Trees of runs (docs/spec.md §8). A run's lineage is its own: its parent
// (a run of this process or another), its live children, and the cascade
// that ends them when it ends. Tree limits — limits over a run and all its
// descendants, their holds and their sharing through a fleet — are
// package internal/tree's: a run whose events some tree limits count has a
// *tree.Node among its parts (the stage's own part, after its shadow
// policies), which the run reaches only through the seam
// (participant.go). This file keeps the lineage and wires the tree part.
//
// Locks: a child's start takes its parent's run lock while it joins the
// parent's children; a run's lock comes before a tree node's; no code
// holding a node's lock takes a run's (tree.Run).

// lineage is a run's place among its relatives in this process, made for
// a run with a parent here and, on first use, for a run whose first child
// starts.
type lineage struct {
	up       *Run // the parent, when it runs in this process; read only once set
	first    *Run // under the run's mu: its first live child
	prev     *Run // under up's mu: the previous live sibling
	next     *Run // under up's mu: the next live sibling
	cascaded bool // under the run's mu: its end has reached its children
}

// runKey is the context key under which a run's context carries its run.
type runKey struct{}

// runValue is the layer of a run's context that carries the run; it lives
// inside the Run, so carrying it costs no allocation. It is also the
// layer that drops the cancellation of the context below it, as
// context.WithoutCancel does (one allocation less): it never ends, and
// the run's context (its child) ends with the run's own cause.
type runValue struct {
	context.Context
	run *Run
}

// Done returns nil: the layer never ends (see runValue).
func (c *runValue) Done() <-chan struct{} { return nil }

// Err returns nil: the layer never ends (see runValue).
func (c *runValue) Err() error { return nil }

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
// (fleet.Local and fleet/redisfleet do) it joins the shared trees over the
// parent (the fleet looks them up), which charge its events and stop it when
// their limits are spent. Without a fleet nothing over the remote parent
// limits or ends it. It takes precedence over the run a context
// carries and over a propagated parent. An empty id is ignored. Default:
// the parent is the run the context passed to Start descends from, if
// any, else the one Propagator extracted into it.
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
// conditions ([termination.TreeLimits] of them, or one of them, or AnyOf them);
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

// liveRuns finds a live run by id, for WithParent. Every live run is in
// it, so it is keyed by a 64-bit hash of the id rather than by the id (a
// third less memory a live run); a run whose hash another live run's
// already has (one chance in 2^64) is kept by its id in clash.
var liveRuns = struct {
	sync.Mutex
	m     map[uint64]*Run
	clash map[string]*Run
	ended struct { // the last recentlyEnded finished runs, oldest at next
		ids  []string
		runs map[string]endedRun
		next int
	}
}{m: map[uint64]*Run{}}

// idSeed seeds idKey.
var idSeed = maphash.MakeSeed()

// idKey is liveRuns' key for a run id.
func idKey(id string) uint64 { return maphash.String(idSeed, id) }

func registerRun(r *Run) {
	k := idKey(r.id)
	liveRuns.Lock()
	if liveRuns.m[k] == nil {
		liveRuns.m[k] = r
	} else {
		if liveRuns.clash == nil {
			liveRuns.clash = map[string]*Run{}
		}
		liveRuns.clash[r.id] = r
	}
	liveRuns.Unlock()
}

// unregisterRun removes a finished run from liveRuns and remembers it
// among the recently ended runs, with the detail a late child's
// Skipped{parent_ended} gives.
func unregisterRun(r *Run, res *termination.Result) {
	end := endedRun{stage: r.stage.name, tag: res.Tag()}
	k := idKey(r.id)
	liveRuns.Lock()
	if liveRuns.m[k] == r {
		delete(liveRuns.m, k)
	} else if liveRuns.clash[r.id] == r {
		delete(liveRuns.clash, r.id)
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
	k := idKey(id)
	liveRuns.Lock()
	defer liveRuns.Unlock()
	if r := liveRuns.m[k]; r != nil && r.id == id {
		return r, ""
	}
	if r := liveRuns.clash[id]; r != nil {
		return r, ""
	}
	if e, ok := liveRuns.ended.runs[id]; ok {
		return nil, cascade.ParentEnded(e.stage, e.tag).Detail
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
// ctx descends from, else a parent the Propagator extracted into ctx. f is
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
		if r != nil && sameFleet(f, r.stage.trees.Sharer()) {
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

// link makes the starting run its local parent's child. It returns the
// cause the run ends with at once when its parent has ended: Skipped{
// reason: parent_ended} naming the parent's stage and cause.
func (r *Run) link(p parentRef) termination.Cause {
	if p.ended != "" {
		return termination.Skipped{Reason: termination.SkipParentEnded, Detail: p.ended}
	}
	up := p.run
	if up == nil {
		return nil
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if c, ended := up.eval.Stopped(); ended {
		return termination.Skipped{Reason: termination.SkipParentEnded,
			Detail: cascade.ParentEnded(up.stage.name, termination.Tag(c, up.stage.allowed)).Detail}
	}
	if up.lin == nil {
		up.lin = &lineage{}
	}
	l := &lineage{up: up, next: up.lin.first}
	if l.next != nil {
		l.next.lin.prev = r
	}
	up.lin.first = r
	r.mu.Lock()
	r.lin = l // before the run is visible to its parent's cascade
	r.mu.Unlock()
	return nil
}

// unlink takes a finished run out of its parent's live children, so that
// the parent holds nothing for it.
func (r *Run) unlink() {
	r.mu.Lock()
	l := r.lin
	r.mu.Unlock()
	if l == nil || l.up == nil {
		return
	}
	up := l.up
	up.mu.Lock()
	if l.prev != nil {
		l.prev.lin.next = l.next
	} else if up.lin.first == r {
		up.lin.first = l.next
	}
	if l.next != nil {
		l.next.lin.prev = l.prev
	}
	l.prev, l.next = nil, nil
	up.mu.Unlock()
}

// children returns the run's live children.
func (r *Run) children() []*Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lin == nil {
		return nil
	}
	var out []*Run
	for k := r.lin.first; k != nil; k = k.lin.next {
		out = append(out, k)
	}
	return out
}

// decidedLocked is called, with r.mu held, the moment the run's cause is
// decided (the evaluator has just stopped). In the same critical section
// it tells the StopRecorders (an event log writes the end record) and
// ends the run's live descendants with the cascade's cause, holding
// their locks throughout (cascade): nothing the run or a descendant does
// can come between its cause and its end record, nor between its end
// record and its descendants'. So in the log every run ends where it
// ended live, under load too: a child's own timer that fires as its
// parent ends, or a child's event, is either before the parent's end
// record (the child's lock was taken first) or finds the child ended by
// the cascade.
func (r *Run) decidedLocked() {
	if r.stopTold {
		return
	}
	if r.lin == nil || r.lin.first == nil {
		r.recordStop()
		return
	}
	locked := r.lockDescendants(nil)
	recordPending(locked)
	r.recordStop()
	stopDescendants(locked)
	unlockAll(locked)
}

// lockDescendants locks the run's live descendants, with r.mu held,
// parents before their children (the order a child's start takes them
// in), and returns them appended to locked in that order.
func (r *Run) lockDescendants(locked []*Run) []*Run {
	if r.lin == nil {
		return locked
	}
	for k := r.lin.first; k != nil; k = k.lin.next {
		k.mu.Lock()
		locked = append(locked, k)
		locked = k.lockDescendants(locked)
	}
	return locked
}

// recordPending records the end of the locked descendants whose cause is
// decided but not recorded yet (one whose stream ended: Finish records it
// once its result is final), before their ancestor's end.
func recordPending(locked []*Run) {
	for _, k := range locked {
		if _, stopped := k.eval.Stopped(); stopped {
			k.recordStop()
		}
	}
}

// stopDescendants ends the locked descendants (lockDescendants' order: a parent
// before its children) once their ancestor has stopped, each with its
// parent's childCause, and records their ends. What else a stop does (the
// parts' Stopping, the contexts' cancellation) follows without the
// locks: endChildren.
func stopDescendants(locked []*Run) {
	for _, k := range locked {
		up := k.lin.up
		if c, stopped := up.eval.Stopped(); stopped && k.eval.Stop(up.childCause(c)) {
			k.recordStop()
		}
	}
}

// unlockAll unlocks what lockDescendants locked, children first.
func unlockAll(locked []*Run) {
	for i := len(locked) - 1; i >= 0; i-- {
		locked[i].mu.Unlock()
	}
}

// childCause is the cause the run's end gives its descendants: c itself
// when c is a parent's cascade that reached this run, so that a
// grandchild names the run whose end started it, and Cancelled{reason:
// parent, detail: "STAGE ended: TAG"} naming this run otherwise.
func (r *Run) childCause(c termination.Cause) termination.Cancelled {
	cause, ok := c.(termination.Cancelled)
	if !ok || cause.Reason != termination.CancelParent {
		cause = cascade.ParentEnded(r.stage.name, termination.Tag(c, r.stage.allowed))
	}
	return cause
}

// endChildren finishes the stop of the run's live descendants (once, when
// the run has stopped with c), whose causes decidedLocked decided: the
// parts' Stopping, their own descendants, their contexts. Each child ends
// its own children the same way.
func (r *Run) endChildren(c termination.Cause) {
	r.mu.Lock()
	if r.lin == nil || r.lin.cascaded {
		r.mu.Unlock()
		return
	}
	r.lin.cascaded = true
	r.mu.Unlock()
	kids := r.children()
	if len(kids) == 0 {
		return
	}
	cause := r.childCause(c)
	for _, k := range kids {
		// A child that had ended on its own before keeps its cause.
		if kc, _ := k.Cause(); kc == termination.Cause(cause) {
			k.stopped(cause)
		}
	}
}

// Parent returns the id of the run's parent (§8), or "" for a run that has
// none.
func (r *Run) Parent() string { return r.from().parentID }

// joinTree returns the starting run's node in its trees (package internal/tree),
// or nil when no tree limits count its events, and ctx with the tree's
// deadline. The node is the stage's own part, the run's first.
func (s *Stage) joinTree(ctx context.Context, r *Run, up parentRef) (context.Context, Part) {
	p := tree.Parent{ID: up.id, Limits: up.limits, Holders: up.holders, ByID: up.byID, Valid: validHolders}
	if up.run != nil {
		p.Node = up.run.treeNode()
	}
	if up.ended != "" {
		p.Holders, p.ByID = nil, false // the run is skipped: it joins nothing
	}
	ctx, n := s.trees.Join(ctx, (*treeRun)(r), p)
	if n == nil {
		return ctx, nil
	}
	return ctx, n
}

// treeNode returns the run's node in its trees, nil for none.
func (r *Run) treeNode() *tree.Node {
	for _, p := range r.parts.all {
		if n, ok := p.(*tree.Node); ok {
			return n
		}
	}
	return nil
}

// treeRun is a Run as its tree nodes see it (tree.Run): what they call
// lives here, not among the Run's own methods.
type treeRun Run

func (t *treeRun) ID() string                        { return t.id }
func (t *treeRun) StopWith(c termination.Cause) bool { return (*Run)(t).stopWith(c) }
func (t *treeRun) Warn(c termination.Cause)          { (*Run)(t).Warn(c) }
func (t *treeRun) DeliverWarnings()                  { (*Run)(t).deliverWarnings() }
func (t *treeRun) Raised(l termination.Limits)       { (*Run)(t).recordRaised(l) }
func (t *treeRun) Release(release <-chan struct{})   { (*Run)(t).releaseShared(release) }
func (t *treeRun) StopFired(fired []termination.Cause, onEvent bool) bool {
	return (*Run)(t).stopFired(fired, onEvent)
}

func (t *treeRun) HoldOn(release <-chan struct{}, c termination.Cause, since time.Time) {
	(*Run)(t).holdShared(release, c, since)
}

func (t *treeRun) EachLive(f func(tree.Run)) {
	f(t)
	for _, k := range (*Run)(t).children() {
		(*treeRun)(k).EachLive(f)
	}
}

// stopFired ends the run with what its tree limits fired.
func (r *Run) stopFired(fired []termination.Cause, onEvent bool) bool {
	r.mu.Lock()
	ok := r.eval.StopFired(fired, onEvent)
	if ok {
		r.decidedLocked()
	}
	r.mu.Unlock()
	if ok {
		r.stopped(fired[0])
	}
	return ok
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
// resource: what Propagator sends a remote child.
func (r *Run) treeRemaining() termination.Limits {
	var left termination.Limits
	for _, p := range r.parts.all {
		if l, ok := p.(limiter); ok {
			left = left.Min(l.Remaining())
		}
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
// whose runs joined the run's tree through a fleet that shares trees, or are
// linked to it in this process (a callee in this process on the same
// fleet), is charged to it already: charging its reported usage too
// counts it twice.
func (r *Run) Charge(usage termination.Usage, cost float64) {
	ev := &termination.Event{Kind: termination.KindToolResult, Usage: usage, Cost: cost}
	if err := ev.Validate(); err != nil {
		r.report(fmt.Errorf("middleware: stage %q: Charge: %w", r.stage.name, err))
		return
	}
	seq := r.parts.seq
	r.mu.Lock()
	if _, stopped := r.eval.Stopped(); stopped || seq == nil {
		r.mu.Unlock()
		return
	}
	settle := seq.Charge(ev)
	r.mu.Unlock()
	if settle {
		seq.Settle()
	}
}

// sharedHolders returns TreeHeader's value for a request the run makes:
// the ids of the holders whose tree limits count its events and are
// shared through a fleet, nearest first.
func (r *Run) sharedHolders() string {
	return strings.Join(r.sharedTrees(), " ")
}

// SharedTrees returns the ids of the runs whose tree limits count this
// run's events and are shared through a fleet that shares trees, nearest
// first: a fleet's registry lists them with the run, so that a child
// started elsewhere with only this run's id joins them (§8). nil for a run
// in no shared tree.
func (r *Run) SharedTrees() []string {
	if ids := r.sharedTrees(); len(ids) > 0 {
		return slices.Clone(ids)
	}
	return nil
}

func (r *Run) sharedTrees() []string {
	for _, p := range r.parts.all {
		if s, ok := p.(treeSharer); ok {
			return s.SharedTrees()
		}
	}
	return nil
}
