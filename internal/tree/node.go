package tree

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/internal/deadline"
	"github.com/agentstop/agentstop/termination"
)

// Run is what a tree needs of one of its runs; package middleware's runs
// provide it. Its methods are safe for use from any goroutine and take the
// run's own lock: a tree never calls them with a Node's lock held (a run's
// lock comes before a tree's).
type Run interface {
	// ID is the run's id.
	ID() string
	// StopWith ends the run with c unless it has stopped, and reports
	// whether c became its cause.
	StopWith(c termination.Cause) bool
	// StopFired ends the run with what its own tree limits fired (fired[0]
	// is its cause; onEvent: its own last event crossed them), unless it
	// has stopped, and reports whether they became its cause.
	StopFired(fired []termination.Cause, onEvent bool) bool
	// Warn records a tree warning on the run; the run hands it on with
	// its next event, or at its end.
	Warn(c termination.Cause)
	// DeliverWarnings hands the warnings recorded so far to the run's
	// hook and participants now.
	DeliverWarnings()
	// HoldOn holds the run at c (since then) until release is closed,
	// unless it has stopped or is held already.
	HoldOn(release <-chan struct{}, c termination.Cause, since time.Time)
	// Release lets the run go on if release holds it (another limit may
	// hold it again).
	Release(release <-chan struct{})
	// Raised records a raise of the run's tree limits by l, and raises
	// the run's own limits by l when they hold it too (a raise names a
	// run, and raises every limit that holds it: §3).
	Raised(l termination.Limits)
	// EachLive calls f with the run and each of its live descendants in
	// this process.
	EachLive(f func(Run))
}

// Stage is the tree limits of one stage's runs, and how their trees are
// shared (package middleware makes one per stage: WithTreeLimits, a
// policy's tree:).
type Stage struct {
	name    string
	tag     func(termination.Cause) string
	cond    termination.Condition // the tree limits every run holds; nil for none
	whole   termination.Limits    // cond's limits, whole: what a fleet shares
	timeout time.Duration         // cond's shortest timeout, 0 for none
	hold    *termination.Hold
	sharer  Sharer
}

// NewStage returns the tree limits of the runs of stage name: cond (nil
// for none), held at a limit instead of stopped when hold is not nil, and
// shared through sharer when it is not nil. tag gives a cause's
// termination_cause tag (a descendant's Cancelled{reason: parent} names
// it).
func NewStage(name string, tag func(termination.Cause) string, cond termination.Condition, hold *termination.Hold, sharer Sharer) *Stage {
	s := &Stage{name: name, tag: tag, cond: cond, hold: hold, sharer: sharer}
	if cond != nil {
		s.whole = termination.NewEvaluator(cond, time.Now()).Remaining()
		if ts := termination.NewEvaluator(cond, time.Time{}).Timeouts(); len(ts) > 0 {
			s.timeout = ts[0]
		}
	}
	return s
}

// Timeout is the shortest timeout of the stage's tree limits, 0 for none:
// part of each run's context deadline.
func (s *Stage) Timeout() time.Duration { return s.timeout }

// Sharer is the participant the stage's trees are shared through, nil for
// none.
func (s *Stage) Sharer() Sharer { return s.sharer }

// Parent is where a starting run comes from, as its tree sees it.
type Parent struct {
	ID   string // the parent's run id; "" for none
	Node *Node  // the parent's node, when it runs in this process and has one
	// Limits are what a remote parent's request said was left of its tree
	// limits (Has == 0: none); Holders the holders of the shared trees it
	// named.
	Limits  termination.Limits
	Holders []string
	// ByID: the parent was named by id and does not run in this process;
	// with a Sharer, the fleet's registry says whose trees count it.
	ByID bool
	// Valid filters the holder ids a fleet returns (malformed or too many:
	// none).
	Valid func([]string) []string
}

// Node is a run's place in its trees: the tree limits it holds and the
// holders whose limits count its events. A run that holds no tree limits
// and has no ancestor that does has none. It takes part in the run
// (package middleware's seam): its methods are called by the run.
type Node struct {
	run   Run
	stage *Stage
	ctx   context.Context // the context the run was started with, until Start
	p     Parent          // until Start
	// holders are the trees whose limits count this run's events: this
	// one when it holds limits (or may join a remote tree), then its
	// ancestors' that do, nearest first. Set before the run is visible;
	// read only.
	holders []*Node
	// ids are the run ids of the holders whose tree limits count this
	// run's events and are shared through a fleet, nearest first: this
	// run when it holds shared limits, the remote holders it joined, then
	// its parent's ids. Set by Start; read only. They go out in requests
	// (middleware.TreeHeader) and into the fleet's registry.
	ids []string
	// entered is the root Enter locked, until Exit: under the run's lock.
	entered *Node

	mu     sync.Mutex
	limits *termination.Evaluator // the tree limits this run holds; nil for none
	nwarn  int                    // limits' warnings already handed to the subtree
	fired  bool                   // the limits fired and the holder was told
	ended  bool                   // the run stopped: its shares were left
	timer  *time.Timer            // the tree timeout's timer, nil for none
	// A held tree (hold.go): release is closed when the holder's tree
	// limits are raised; holdTimer is the hold timeout.
	release   chan struct{}
	holdTimer *time.Timer
	// A joined run held by its fleet at a remote holder's tree limit
	// (SharedRun.HoldTree): fleetRelease is closed when the fleet
	// releases it; fleetCause and fleetSince are what it waits at.
	fleetRelease chan struct{}
	fleetCause   termination.Cause
	fleetSince   time.Time

	// Sharing through a fleet (shared.go). whole: the tree limits the run
	// holds, as they were when it started (what a fleet shares); held: a
	// fleet shares them. joined: the ids of the remote holders whose
	// limits this run's subtree is charged to. shares: the fleet
	// memberships every event of the subtree is spent through; pending:
	// what the subtree spent since the last Spend; spent: what it spent
	// through them in all (under mu).
	whole      termination.Limits
	held       bool
	joined     []string
	propagated termination.Limits // what the request said was left, when joined
	spent      Usage
	chargeEv   *termination.Event // the holding's charge's event, made on first use
	uncounted  termination.Totals // what charge spent that limits did not need to count
	shares     []Member
	holdingM   Member // of shares, the holding of the run's own limits (hold), nil for none
	spends     bool   // a member of shares needs the subtree's usage (not every one is a QuietMember)
	pending    Usage
}

// Join returns the node of a run of the stage that starts under p, or nil
// when no tree limits can count its events: it holds none, its parent's
// tree has no holder, and no remote parent propagated limits or named
// holders. ctx is the context the run is started with (a fleet's lookups
// honour it); the returned context reports the earliest of its deadline,
// the stage's shortest tree timeout and the time a remote parent
// propagated as its Deadline (the run's timers enforce them). The node is
// ready once [Node.Start] has run.
func (s *Stage) Join(ctx context.Context, run Run, p Parent) (context.Context, *Node) {
	var up []*Node
	if p.Node != nil {
		up = p.Node.holders
	}
	mayJoin := s.sharer != nil && (len(p.Holders) > 0 || p.ByID)
	own := s.cond != nil || p.Limits.Has != 0 || mayJoin
	if !own && len(up) == 0 {
		return ctx, nil
	}
	n := &Node{run: run, stage: s, ctx: ctx, p: p}
	if own {
		n.holders = append(make([]*Node, 0, 1+len(up)), n)
	}
	n.holders = append(n.holders, up...)
	return withTimeouts(ctx, s.timeout, p.Limits.Time), n
}

// withTimeouts returns ctx reporting the earliest of its deadline and the
// timeouts (> 0) from now as its Deadline, without enforcing it.
func withTimeouts(ctx context.Context, timeouts ...time.Duration) context.Context {
	own, _ := ctx.Deadline()
	d, ok := deadline.Earliest(ctx, timeouts...)
	if !ok || d.Equal(own) {
		return ctx
	}
	return deadline.Report(ctx, d)
}

// Start joins the trees of the run's remote holders through the stage's
// fleet, sets the limits the run holds (the stage's, and those a remote
// parent propagated when it joined none of its trees), arms the tree
// timeout and shares the run's limits through the fleet. A run's start
// calls it once its context exists and before the run is visible to
// others by id.
func (n *Node) Start() error {
	s, p := n.stage, n.p
	n.p = Parent{}
	if s.sharer != nil && p.ByID && p.Valid != nil {
		// WithParent named a run of another process (a job queue carries
		// only its id): the fleet's registry says whose trees count its
		// events.
		p.Holders = p.Valid(s.sharer.TreesOf(n.ctx, p.ID))
	}
	shared := false
	if s.sharer != nil && len(p.Holders) > 0 {
		shared = n.join(p.Holders, p.Limits)
	}
	n.ctx = nil
	limits, whole := s.cond, s.whole
	if p.Limits.Has != 0 && !shared {
		// Without a fleet that shares trees, or when the fleet does not
		// know one of the holders, the propagated limits (a snapshot of
		// what was left at the call) become the run's tree limits.
		if remote := p.Limits.Condition(); remote != nil {
			whole = whole.Min(p.Limits)
			if limits != nil {
				limits = termination.TreeLimits(limits, remote)
			} else {
				limits = remote
			}
		}
	}
	if limits != nil {
		ev := termination.NewEvaluator(limits, time.Now())
		if s.hold != nil {
			ev.SetHold(*s.hold) // hold.go
		}
		n.mu.Lock()
		n.limits, n.whole = ev, whole
		if ts := termination.NewEvaluator(limits, time.Time{}).Timeouts(); len(ts) > 0 {
			n.timer = time.AfterFunc(ts[0], n.timeout)
		}
		n.mu.Unlock()
	}
	var upIDs []string
	if p.Node != nil {
		upIDs = p.Node.ids
	}
	n.share(upIDs)
	return nil
}

// share shares the tree limits the run holds through its stage's fleet
// from its start (§8, clarified 2026-11-28: a holder's tree is shared
// whenever it has tree: limits, so that a child started anywhere, with
// only the holder's id, can join it), and sets n.ids: the holders of the
// run's shared trees. A run that holds no limits, joined no remote tree
// and whose ancestors share none takes its parent's ids as they are (no
// allocation).
func (n *Node) share(upIDs []string) {
	held := n.hold()
	n.mu.Lock()
	joined := n.joined
	n.mu.Unlock()
	if !held && len(joined) == 0 {
		n.ids = upIDs
		return
	}
	ids := make([]string, 0, 1+len(joined)+len(upIDs))
	if held {
		ids = append(ids, n.run.ID())
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
	n.ids = ids
}

// SharedTrees returns the ids of the runs whose tree limits count the
// run's events and are shared through a fleet, nearest first (read only:
// the caller must not change it).
func (n *Node) SharedTrees() []string { return n.ids }

// Event is part of the run's seam; the node's work on an event is done in
// Enter, Exit and Settle.
func (n *Node) Event(*termination.Event) {}

// Warning is part of the run's seam.
func (n *Node) Warning(termination.Cause) {}

// Error is part of the run's seam.
func (n *Node) Error(error) {}

// End sets res.Tree: what the run and its descendants spent, as the tree
// limits it holds counted it (what other processes spent under a shared
// tree included), when it holds any.
func (n *Node) End(res *termination.Result) { res.Tree = n.totals() }

// Ended stops the run's tree timers.
func (n *Node) Ended(*termination.Result) {
	n.mu.Lock()
	if n.timer != nil {
		n.timer.Stop()
	}
	if n.holdTimer != nil {
		n.holdTimer.Stop()
	}
	n.mu.Unlock()
}

// Stopping is told, once the run's cause c is decided and before its
// descendants end, that the run has stopped: what its subtree spent since
// the last event is charged, and it leaves the trees it shares with the
// cascade's cause (Cancelled{reason: parent} naming the run, or the
// cascade that reached it).
func (n *Node) Stopping(c termination.Cause) {
	n.mu.Lock()
	if n.ended {
		n.mu.Unlock()
		return
	}
	n.ended = true
	shares, spent := n.shares, n.pending
	n.shares, n.pending = nil, Usage{}
	n.mu.Unlock()
	if len(shares) == 0 {
		return
	}
	if !spent.IsZero() {
		// The event that ended the run (its own condition fired) is the
		// trees' too: charge it before leaving them.
		for _, s := range shares {
			s.Spend(spent)
		}
	}
	cause, ok := c.(termination.Cancelled)
	if !ok || cause.Reason != termination.CancelParent {
		cause = cascade.ParentEnded(n.stage.name, n.stage.tag(c))
	}
	for _, s := range shares {
		s.Leave(cause)
	}
}

// Enter is called with the run's lock held before one of its events is
// evaluated: it locks the root-most holder of the run's trees, so that
// the events of a tree are evaluated in one order, the order they are
// recorded in (an event log replays them in that order), and none is
// evaluated after a tree limit fired. It returns nil then, and Exit must
// follow. When a holder's limits have fired already (the cascade has not
// reached the run yet) it locks nothing and returns what the run ends
// with, without evaluating the event: for the holder, what its limits
// fired; for a descendant, Cancelled{reason: parent} naming the holder.
func (n *Node) Enter() []termination.Cause {
	root := n.holders[len(n.holders)-1]
	root.mu.Lock()
	for _, h := range n.holders {
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
			root.mu.Unlock()
			if h == n {
				return slices.Clone(fired)
			}
			return []termination.Cause{cascade.ParentEnded(h.stage.name, h.stage.tag(fired[0]))}
		}
	}
	n.entered = root
	return nil
}

// Exit is called with the run's lock held once the event ev that Enter
// let in was evaluated (counted: it counts, being valid) and the run's
// parts were told: the holders' tree limits evaluate it, nearest first,
// and the root Enter locked is unlocked. It reports whether Settle must
// follow (a holder warned, fired, or has usage to spend through a fleet).
func (n *Node) Exit(ev *termination.Event, counted bool) bool {
	root := n.entered
	n.entered = nil
	acted := counted && n.rollUp(ev, root)
	root.mu.Unlock()
	return acted
}

// rollUp evaluates ev with the holders' tree limits, nearest first, with
// root's lock held. It reports whether any of them warned or fired, or
// has usage to spend.
func (n *Node) rollUp(ev *termination.Event, root *Node) bool {
	acted := false
	for _, h := range n.holders {
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
			h.pending = h.pending.Add(UsageOf(ev))
			acted = true
		}
		if h != root {
			h.mu.Unlock()
		}
	}
	return acted
}

// Charge evaluates ev, usage spent on the run's behalf outside its own
// events, with the holders' tree limits, with the run's lock held, as an
// event of the run would be (Exit). It reports whether Settle must
// follow.
func (n *Node) Charge(ev *termination.Event) bool {
	root := n.holders[len(n.holders)-1]
	root.mu.Lock()
	acted := n.rollUp(ev, root)
	root.mu.Unlock()
	return acted
}

// Settle acts, without the run's lock, on what the run's last event did
// to its holders' tree limits: their warnings go to each holder and its
// live descendants, and a holder whose limits fired ends with their cause
// (its descendants, this run included, with Cancelled{reason: parent}).
// It reports whether anything but spending through a holder's own fleet
// holding happened (a warning, a stop, a spend through a joined tree):
// only then may the run have a new warning or cause.
func (n *Node) Settle() bool {
	acted := false
	for _, h := range n.holders {
		if h.act(h == n) {
			acted = true
		}
	}
	if acted {
		n.run.DeliverWarnings()
	}
	return acted
}

// act acts on what the holder's tree limits did since it last acted: their
// warnings go to the holder and its live descendants (and, when the limits
// are shared through a fleet, to their descendants elsewhere), and limits
// that fired end the holder (onEvent: the holder's own last event crossed
// them). The subtree's usage since the last event is spent through the
// holder's fleet memberships (shared.go). Called without locks. It
// reports what Settle does.
func (h *Node) act(onEvent bool) bool {
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
	h.pending = Usage{}
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
		h.run.StopFired(fired, onEvent)
	}
	return len(w) > 0 || limited || stopped || joined && !spent.IsZero()
}

// warnSubtree records the holder's tree warnings on the holder and every
// live descendant. A run hands them to its hook and recorder with its next
// event, or at its end (the run whose event raised them, at once).
func (h *Node) warnSubtree(w []termination.Cause) {
	h.run.EachLive(func(r Run) {
		for _, c := range w {
			r.Warn(c)
		}
	})
}

// timeout is the tree timeout's timer: the holder's tree has lasted its
// shortest tree timeout.
func (n *Node) timeout() {
	n.mu.Lock()
	if n.limits == nil {
		n.mu.Unlock()
		return
	}
	_, stop := n.limits.Tick(time.Now())
	var fired []termination.Cause
	if stop && !n.fired {
		n.fired, fired = true, n.limits.Fired()
	}
	n.mu.Unlock()
	if fired != nil {
		n.run.StopFired(fired, false)
	}
}

// totals is what the run and its descendants spent, as the tree limits
// the run holds counted it (what other processes spent under a shared
// tree included), for Result.Tree; nil when it holds none.
func (n *Node) totals() *termination.Totals {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.limits == nil {
		return nil
	}
	tot := n.limits.Progress()
	tot.Events = 0 // a subtree's totals count no events (§8 "tree")
	u := n.uncounted
	tot.Iterations += u.Iterations
	tot.ToolCalls += u.ToolCalls
	tot.Tokens.InputTokens += u.Tokens.InputTokens
	tot.Tokens.OutputTokens += u.Tokens.OutputTokens
	tot.Cost += u.Cost
	return &tot
}

// Remaining is what is left of the tree limits that count the run's events
// (its own tree limits and its ancestors', those a remote caller
// propagated included), the smallest for each resource.
func (n *Node) Remaining() termination.Limits {
	var left termination.Limits
	for _, h := range n.holders {
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
