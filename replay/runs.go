package replay

import (
	"errors"
	"io"
	"reflect"
	"slices"
	"time"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/termination"
)

// WithStage names the stage of the runs [Runs] replays: each Result's
// Stage, and the STAGE of a cascade's Cancelled{reason: parent, detail:
// "STAGE ended: TAG"}. Default: "replay", as the replay command's. [Log],
// which returns a Result without a stage, ignores it.
func WithStage(name string) Option { return stageOption(name) }

type stageOption string

func (o stageOption) apply(c *config) {
	if o != "" {
		c.stage = string(o)
	}
}

// Runs evaluates p over a log of many runs (events carry Run, and a
// run's first event may carry Parent) as replay does (docs/spec.md §8):
// each run with p's condition, each holder's tree: limits over its
// subtree, in the order of the lines. It returns one Result per run, in
// the order the runs ended, with Run and Parent set and
// Events/StoppedAt/Evidence counting that run's own events.
//
// The lines are taken in order, as the live middleware takes events:
//
//   - A run starts at its first line. Its Parent, when it names a run of
//     the log, makes it that run's child; a parent that has already ended
//     makes it end at once as Skipped{reason: parent_ended, detail: "STAGE
//     ended: TAG"} (its lines are not evaluated). A parent whose first
//     line comes later (a planner that delegated before its first event
//     was recorded) starts here, before its child, as it had started
//     live: its first line's parent and stage place it, and its tree
//     limits count the child's events. A parent not in the log (a caller
//     in another service) is only recorded.
//   - Each line is evaluated by its run's condition first; then, unless
//     the run had already stopped (its later lines are not evaluated) or
//     the event was invalid, by the tree limits of the run itself and of
//     its ancestors, nearest first. A tree limit that fires ends its holder
//     with the cause (StoppedAt names the line when it is the holder's
//     own, 0 otherwise) and its live descendants with Cancelled{reason:
//     parent}, the run whose line crossed the limit included; a tree
//     pressure warning goes to the holder and to every live descendant.
//   - A run ends at its stopping line, at its last line, or when an
//     ancestor ends; when it ends, its live descendants end with
//     Cancelled{reason: parent, detail: "STAGE ended: TAG"} naming it, in
//     the order they started (depth first).
//
// Events without Run belong to the run "". The clock is the events' time
// (the events' clock): a tree timeout counts from the holder's first timed line
// and fires before the first line of its subtree at or past the deadline,
// as the holder's timer would have (that line is not evaluated; the
// holder's StoppedAt is 0, its Duration reaches the deadline). A nil p is
// the empty policy.
func Runs(p *termination.Policy, events []termination.Event, opts ...Option) []termination.Result {
	last := map[string]int{}
	for i := range events {
		last[events[i].Logged().Run] = i
	}
	rp := NewRunner(p, opts...)
	if rp.rp.lateParent == nil {
		rp.rp.lateParent = lateParents(events)
	}
	var out []termination.Result
	for i := range events {
		out = append(out, rp.Line(&events[i], last[events[i].Logged().Run] == i)...)
	}
	return append(out, rp.End()...)
}

// Runner is [Runs] one line at a time, for a log too large to hold: the
// caller decodes each line and hands its event to Line (a record to
// Record), saying whether it is its run's last line (codec.IndexRuns finds
// them in a first pass over the log), then calls End at the end of the
// log. Line, Record and End return the results of the runs that ended, in
// the order they ended; Runs returns the same results for the same lines.
// [Runner.Log] is that loop over a log.
//
// A parent whose first line comes after its child's starts at the
// child's first line, as in Runs, when the Runner has the first pass's
// index ([WithIndex]: codec.Index.LateParent); without it, nothing can
// tell that the parent comes later, and the child is replayed as the
// child of a parent not in the log.
//
// It keeps the state of the live runs only (their evaluators, and the
// last event each evaluated; with [WithEvidence], the notes of the
// events their conditions still hold for evidence), and a few words for each run that has
// ended (so that its later lines are skipped and a child that starts
// after it is Skipped): memory grows with the runs live at one point of
// the log, not with the log.
type Runner struct {
	rp      replayer
	lenient bool // WithLenient, for Log
}

// NewRunner starts a replay of a log of many runs with p, as [Runs] does
// (the same options). A nil p is the empty policy.
func NewRunner(p *termination.Policy, opts ...Option) *Runner {
	cfg := configOf(opts)
	var pol termination.Policy
	if p != nil {
		pol = *p
	}
	rp := replayer{stage: cfg.stage, describe: cfg.describe, runs: map[string]*replayRun{}, index: cfg.index, stages: cfg.stages, code: cfg.code, leftOut: map[string]int{}}
	if cfg.index != nil {
		rp.lateParent = cfg.index.LateParent
	}
	switch {
	case p == nil && cfg.cond != nil:
		rp.fallbackCond = &stageLimits{cond: cfg.cond}
	case p != nil || cfg.stages == nil && cfg.code == nil:
		rp.fallback = &pol
	}
	return &Runner{rp: rp, lenient: cfg.lenient}
}

// WithCondition gives the runs of a log of many runs a condition written in
// Go, as a stage built with middleware.WithCondition evaluated them live
// (their end records name policy "code"): the runs that [Runs] or
// [NewRunner] would give its policy, which must then be nil (a policy
// given is used instead), or, with [WithPolicies] or [WithStages], the
// runs whose stage has none. Such runs have no tree limits and no hold:
// [WithStages] gives a stage those. c must be valid
// ([termination.Condition.Validate]); an invalid one evaluates as
// written. The default is none.
func WithCondition(c termination.Condition) Option { return conditionOption{c} }

type conditionOption struct{ c termination.Condition }

func (o conditionOption) apply(c *config) { c.cond = o.c }

// Stage is a stage built in Go, as it evaluated its runs live
// (middleware.WithCondition, WithTreeLimits and WithHold; its runs' end
// records name policy "code"): its condition (nil: none), its tree limits
// (§8: over each run and its descendants in the log; nil: none) and its
// hold (§3 hold: a run held at a limit, its own or its tree's, waits for a
// raise record of the log, or ends with the limit's cause once Hold has
// passed on the events' clock; 0 or less: none). Invalid conditions
// evaluate as written. Every stage in Go records policy "code", so replay
// cannot check that a Stage is the one that ran live: a run it holds keeps
// its recorded end only when a held run can end so (the limit's cause, a
// timeout, a Cancelled from outside its loop) before the Stage's Hold.
type Stage struct {
	Condition  termination.Condition
	TreeLimits termination.Condition
	Hold       time.Duration
}

// WithStages gives each stage built in Go what it evaluated its runs with
// live: stageOf returns the Stage of the runs of a stage (named as for
// [WithPolicies]), false when it is not one. A stage that [WithPolicies]
// gives a policy takes the policy; one that stageOf knows takes its
// Stage; the others take the policy given to [Runs] or [NewRunner], or
// [WithCondition]'s condition, or, with neither, are left out as
// [WithPolicies] leaves them ([Runner.LeftOut]).
func WithStages(stageOf func(stage string) (Stage, bool)) Option { return stagesOption(stageOf) }

type stagesOption func(string) (Stage, bool)

func (o stagesOption) apply(c *config) { c.code = o }

// stageLimits are what a run of a stage is evaluated with: its condition
// (nil: never fires), its tree limits (nil for none) and its hold.
type stageLimits struct {
	cond, tree termination.Condition
	hold       termination.Hold
	held       bool
	policy     *termination.Policy // the policy they come from; nil for a stage in Go
}

// limitsOf returns what the runs of stage are evaluated with, false when
// nothing gives them a policy or a condition: WithPolicies' policy, else
// WithStages' stage in Go, else the policy given to NewRunner, else
// WithCondition's condition.
func (rp *replayer) limitsOf(stage string) (stageLimits, bool) {
	if rp.stages != nil {
		if p, ok := rp.stages(stage); ok {
			return policyLimits(p), true
		}
	}
	if rp.code != nil {
		if g, ok := rp.code(stage); ok {
			s := stageLimits{cond: g.Condition, held: g.Hold > 0, hold: termination.Hold{Timeout: g.Hold}}
			if g.TreeLimits != nil {
				s.tree = termination.TreeLimits(g.TreeLimits)
			}
			return s, true
		}
	}
	switch {
	case rp.fallback != nil:
		return policyLimits(rp.fallback), true
	case rp.fallbackCond != nil:
		return *rp.fallbackCond, true
	}
	return stageLimits{}, false
}

// policyLimits is what the runs of policy p are evaluated with.
func policyLimits(p *termination.Policy) stageLimits {
	s := stageLimits{cond: p.Condition(), tree: p.Tree(), policy: p}
	s.hold, s.held = p.Hold()
	return s
}

// WithPolicies gives each stage its own policy (§4 "Recorded runs"):
// policyOf returns the policy of the runs of a stage (the stage of their
// first line, or [WithStage]'s for a run whose log gives none), false
// when the stage has none. The policy given to [NewRunner], when not
// nil, is then the policy of the stages policyOf has none for. Runs left
// without a policy are evaluated by no condition, still end at their end
// record (or last line) for their descendants' sake, and are left out of
// the results; [Runner.LeftOut] counts them by stage.
func WithPolicies(policyOf func(stage string) (*termination.Policy, bool)) Option {
	return policiesOption(policyOf)
}

type policiesOption func(string) (*termination.Policy, bool)

func (o policiesOption) apply(c *config) { c.stages = o }

// WithIndex gives the replay what the first pass over the log learned
// (codec.IndexRuns): each run's recorded cause, so that every result of a run
// with an end record carries Live, whether the recorder dropped lines
// of the run (Incomplete), and the parents whose first line comes after a
// child's (they start at the child's first line); [Runner.Log] also ends
// each run at its last line. Without it (the default; a nil x is
// ignored), Live is empty, Incomplete comes from the lines replayed, a
// child whose parent comes later is replayed as one whose parent is not
// in the log, and Runner.Log ends the runs still live at the end of the
// log.
func WithIndex(x *codec.Index) Option {
	if x == nil {
		return nil
	}
	return indexOption{x}
}

type indexOption struct{ x *codec.Index }

func (o indexOption) apply(c *config) { c.index = o.x }

// LeftOut returns how many runs, by stage, were left out of the results
// because nothing gave their stage a policy or a condition ([WithPolicies],
// [WithStages]).
func (r *Runner) LeftOut() map[string]int { return r.rp.leftOut }

// Record takes a record of the log's next line (an end or raise record,
// §1); last says that it is its run's last line. An end record ends its
// run, if the policy has not ended it before: the result is then the
// recorded end, with FromRecord set; so does a run the policy holds at a
// limit, when the end record names that policy and counts the events
// replay evaluated (it was held there live: a stop, the hold timeout, a
// timeout or an ancestor's end ended the hold), and otherwise it ends
// with the limit's cause. A raise record changes nothing under a policy
// without hold. A raise record's time is the events' clock: a hold
// of the run (or of its tree) whose timeout passed before it has ended
// there with the limit's cause, and the raise finds no held run, as
// live; otherwise the idle limits the hold paused resume at it. Like
// Line, it returns the results of the runs that ended, valid until the
// next call.
func (r *Runner) Record(rec *codec.Record, last bool) []termination.Result {
	rp := &r.rp
	rp.results = rp.results[:0]
	rp.record(rec, last)
	rp.release()
	return rp.results
}

// Line evaluates the event of the log's next line; last says that it is
// its run's last line, so the run ends after it. It returns the results
// of the runs that ended on this line, in the order they ended; the slice
// is valid until the next call. ev is not kept.
func (r *Runner) Line(ev *termination.Event, last bool) []termination.Result {
	rp := &r.rp
	rp.results = rp.results[:0]
	rp.line(ev, last)
	rp.release()
	return rp.results
}

// End ends the runs still live at the end of the log, in the order they
// started (their descendants with them), and returns their results. With
// every run's last line marked, none is left.
func (r *Runner) End() []termination.Result {
	rp := &r.rp
	rp.results = rp.results[:0]
	for _, run := range rp.order {
		rp.end(run, nil)
	}
	rp.order = nil
	rp.release()
	return rp.results
}

// Log hands every line of the log r to the runner (events to Line,
// records to Record) and ends it (End): it returns the results of all the
// runs, in the order they ended. With [WithIndex] (the first pass over the
// same log, codec.IndexRuns), each run ends at its last line; without,
// the runs still live end at the end of the log. A bad line is an error
// naming it (a *codec.DecodeError), with no results; with [WithLenient], a
// truncated last line ends the log instead, and truncated is true (the
// caller decides which results it concerns: those of the runs no cause
// stopped, whose evaluation reached it).
func (r *Runner) Log(log io.Reader) (results []termination.Result, truncated bool, err error) {
	dec := codec.NewDecoder(log)
	idx := r.rp.index
	last := func(run string) bool { return idx != nil && idx.IsLast(run, dec.Line()) }
	for {
		e, err := dec.NextEntry()
		if errors.Is(err, io.EOF) {
			break
		}
		if r.lenient && errors.Is(err, codec.ErrTruncated) {
			truncated = true
			break
		}
		if err != nil {
			return nil, false, err
		}
		if rec := e.Record; rec != nil {
			results = append(results, r.Record(rec, last(rec.Run))...)
			continue
		}
		results = append(results, r.Line(&e.Event, last(e.Event.Logged().Run))...)
	}
	return append(results, r.End()...), truncated, nil
}

type replayer struct {
	// fallback is the policy of every run whose stage neither stages nor
	// code knows; nil when such runs are left out, or get fallbackCond.
	fallback *termination.Policy
	// fallbackCond is WithCondition's condition, in place of fallback.
	fallbackCond *stageLimits
	stages       func(string) (*termination.Policy, bool)
	code         func(string) (Stage, bool) // WithStages
	leftOut      map[string]int             // runs left without a policy, by stage
	index        *codec.Index               // nil without a first pass
	// lateParent returns the parent and stage of a run that a child names
	// as its parent before the run's own first line (Index.LateParent,
	// or Runs' look at its lines); nil when nobody can tell.
	lateParent func(run string) (parent, stage string, ok bool)
	stage      string // the stage of runs whose log gives none
	// describe: each run notes its events to describe its evidence
	// (WithEvidence).
	describe func(termination.Result, []EvidenceEvent)
	runs     map[string]*replayRun
	results  []termination.Result
	due      []*replayRun // scratch: holders whose tree timeout is due
	// order is the runs not yet ended, in the order they started, for End;
	// ended runs are dropped from it now and then (release).
	order []*replayRun
	// done is the runs ended during the current line, whose evaluators
	// are released when the line is over (release).
	done      []*replayRun
	compactAt int // compact order when it grows past this
}

// replayRun is one run of the log.
type replayRun struct {
	id, parent string
	stage      string
	policy     bool      // false for a run left without a policy: its result is left out
	incomplete bool      // a line of the run said the recorder dropped events before it
	first      time.Time // the time of its first timed event
	eval       *termination.Evaluator
	limits     *termination.Evaluator // the run's tree limits, nil without
	holders    []*replayRun           // the run itself (when it holds limits) and its ancestors that do, nearest first
	children   []*replayRun
	ended      bool
	starting   bool           // while beginRun looks for its parent (a cycle of late parents ends at it)
	tag        string         // the termination_cause it ended with, once ended
	notes      *evidenceNotes // with WithEvidence, while live
	treeWarned int            // the warnings of limits passed on to the tree
	// timedOut is the deadline of the tree timeout that ended the run (a
	// holder): its Duration reaches it, as an own timeout's does (§4).
	timedOut time.Time
}

// release drops the state of the runs that ended during the line, once
// nothing of the line can read it any more: an ended run keeps only its
// id and tag.
func (rp *replayer) release() {
	for i, r := range rp.done {
		// A holder's tree totals are final once it has ended: the lines of
		// its subtree after that are not evaluated. (Its own stopping line
		// reaches its tree limits after its result was taken, so they are
		// read here, once the line is done.) rp.done and rp.results are
		// parallel: each end appends to both.
		if r.limits != nil {
			t := r.limits.Progress()
			t.Events = 0 // a subtree's totals count no events (§8 "tree")
			rp.results[i].Tree = &t
		}
		if r.policy && r.notes != nil { // its result is final: WithEvidence
			rp.describe(rp.results[i], r.notes.describe(rp.results[i].Evidence))
		}
		r.eval, r.limits, r.holders, r.children, r.notes = nil, nil, nil, nil, nil
	}
	kept := rp.results[:0]
	for i, r := range rp.done {
		if r.policy {
			kept = append(kept, rp.results[i])
		} else {
			rp.leftOut[r.stage]++
		}
	}
	rp.results = kept
	rp.done = rp.done[:0]
	if len(rp.order) > rp.compactAt {
		live := slices.DeleteFunc(rp.order, func(r *replayRun) bool { return r.ended })
		rp.order = live
		rp.compactAt = max(64, 2*len(live)) // amortized: a pass per as many starts as are live
	}
}

func (rp *replayer) line(ev *termination.Event, lastLine bool) {
	r := rp.runs[ev.Logged().Run]
	if r == nil {
		r = rp.begin(ev)
	}
	if r.ended {
		return
	}
	if _, held := r.eval.Held(); held {
		// Held at a limit, and this line is no raise: under this policy
		// nobody raised the run (live, the run took no next event until
		// then), so it ends with the limit's cause (§3 hold).
		rp.end(r, nil)
		return
	}
	for _, h := range r.holders {
		// A tree held at a limit takes no event live until its holder is
		// raised: this line is no raise, so under this policy nobody
		// raised it, and the holder ends with the limit's cause (its
		// descendants, r among them, with Cancelled{parent}).
		rp.endTreeHold(h)
	}
	if r.ended {
		return
	}
	if !ev.Time.IsZero() && ev.Validate() == nil {
		// The tree timeouts whose deadline this line is at or past fired
		// before it, as the holders' timers would have live: a holder that
		// timed out has ended, with its descendants, before the line.
		// In the order of their deadlines, as the timers fire.
		due := rp.due[:0]
		for _, h := range r.holders {
			if d, ok := h.limits.NextDeadline(); ok && !d.After(ev.Time) {
				due = append(due, h)
			}
		}
		slices.SortStableFunc(due, func(a, b *replayRun) int {
			da, _ := a.limits.NextDeadline()
			db, _ := b.limits.NextDeadline()
			return da.Compare(db)
		})
		for _, h := range due {
			d, _ := h.limits.NextDeadline()
			if h.limits.TickEvent(ev) && h.eval.StopFired(h.limits.Fired(), false) {
				rp.endTimedOut(h, d)
			}
		}
		rp.due = due
		if r.ended {
			return
		}
	}
	if ev.Logged().Dropped > 0 {
		r.incomplete = true
	}
	if r.first.IsZero() && !ev.Time.IsZero() {
		r.first = ev.Time
	}
	before := r.eval.Progress().Events
	_, stop := r.eval.Observe(*ev)
	if r.notes != nil {
		r.notes.note(r.eval, ev) // before the run can end on it
	}
	evaluated := r.eval.Progress().Events > before && ev.Validate() == nil
	if stop {
		rp.end(r, nil)
	}
	if evaluated {
		for _, h := range r.holders {
			rp.rollUp(h, r, ev)
		}
	}
	if lastLine && !r.ended {
		rp.end(r, nil)
	}
}

// begin starts the run of ev's first line.
func (rp *replayer) begin(ev *termination.Event) *replayRun {
	return rp.beginRun(ev.Logged().Run, ev.Logged().Parent, ev.Logged().Stage, false)
}

// beginRun starts the run id of the stage stage ("" for the default),
// the child of parent. With recorded, the run's first line is its end
// record: it started live before its parent ended, whatever its parent
// did in this replay (a run that started after would have been recorded
// Skipped{parent_ended}), so its recorded end stands.
func (rp *replayer) beginRun(id, parent, stage string, recorded bool) *replayRun {
	if stage == "" {
		stage = rp.stage
	}
	lim, ok := rp.limitsOf(stage)
	r := &replayRun{id: id, parent: parent, stage: stage, policy: ok, eval: termination.NewEvaluator(lim.cond, time.Time{})}
	if lim.held {
		r.eval.SetHold(lim.hold)
	}
	if rp.describe != nil {
		r.notes = new(evidenceNotes)
	}
	rp.runs[id] = r
	rp.order = append(rp.order, r)
	r.starting = true
	up := rp.runs[parent]
	if up == nil && parent != "" {
		up = rp.beginLate(parent)
	}
	r.starting = false
	if parent == "" || up == r || up != nil && up.starting {
		// A parent that is the run itself, or that starts late for this
		// run's sake (a cycle of parents, which no live log has): none.
		up = nil
	}
	if lim.tree != nil {
		// Before a late child's end, as live: a run holds its tree limits
		// (and has tree totals, Result.Tree) from its start.
		r.limits = termination.NewEvaluator(lim.tree, time.Time{})
		if lim.held {
			r.limits.SetHold(lim.hold) // a tree limit holds the whole tree (§3 hold)
		}
		r.holders = append(r.holders, r)
	}
	if up != nil && up.ended && !recorded {
		r.eval.Stop(termination.Skipped{Reason: termination.SkipParentEnded, Detail: cascade.ParentEnded(up.stage, up.tag).Detail})
		rp.end(r, nil)
		return r
	}
	if up != nil && !up.ended {
		up.children = append(up.children, r)
		r.holders = append(r.holders, up.holders...)
	}
	return r
}

// beginLate starts the run id whose first line comes after a child's
// first line, if the log holds one (lateParent knows it): live, it had
// started before its child, and its tree limits count its child's
// events from the child's start. It returns nil for a parent not in the
// log.
func (rp *replayer) beginLate(id string) *replayRun {
	if rp.lateParent == nil {
		return nil
	}
	parent, stage, ok := rp.lateParent(id)
	if !ok {
		return nil
	}
	return rp.beginRun(id, parent, stage, false)
}

// rollUp evaluates r's event ev with holder h's tree limits.
func (rp *replayer) rollUp(h, r *replayRun, ev *termination.Event) {
	if _, stopped := h.limits.Stopped(); stopped {
		return
	}
	// Only the warnings this event adds go to the tree: any recorded since
	// the last event (none, as things are) are passed over.
	h.treeWarned += len(h.limits.WarningsSince(h.treeWarned))
	wasHeld := held(h.limits)
	_, stop := h.limits.ObserveRef(ev)
	for _, w := range h.limits.WarningsSince(h.treeWarned) {
		h.each(func(d *replayRun) { d.eval.AddWarning(w) })
	}
	if !wasHeld && held(h.limits) {
		// Every live run of the tree is held: their idle limits pause
		// until a raise record raises the tree (§3 hold).
		since, _ := h.limits.HeldSince()
		h.each(func(d *replayRun) { d.eval.PauseIdle(since) })
	}
	if stop && h.eval.StopFired(h.limits.Fired(), h == r) {
		rp.end(h, nil)
	}
}

// each calls f with r and its live descendants, depth first.
func (r *replayRun) each(f func(*replayRun)) {
	if r.ended {
		return
	}
	f(r)
	for _, c := range r.children {
		c.each(f)
	}
}

// end reports r's result and ends its live descendants: with cause (the
// cascade that reached r), or with one naming r.
func (rp *replayer) end(r *replayRun, cause termination.Cause) {
	if r.ended {
		return
	}
	// A run held at a limit that ends (its log ends, or it is not raised
	// before its next line or its end record) ends with the limit's cause,
	// as live when nobody raises it; a cascade's Stop came first and wins.
	if r.limits != nil && held(r.limits) && !stopped(r.limits) {
		r.limits.EndHold()
		r.eval.StopFired(r.limits.Fired(), false)
	}
	r.eval.EndHold()
	res := r.eval.Result()
	if !r.timedOut.IsZero() && !r.first.IsZero() && r.timedOut.After(r.first) {
		res.Duration = max(res.Duration, r.timedOut.Sub(r.first))
	}
	rp.endWith(r, res, cause)
}

// endTimedOut ends holder h, stopped by its tree timeout due at deadline
// (zero: not a timeout): its Duration reaches the deadline.
func (rp *replayer) endTimedOut(h *replayRun, deadline time.Time) {
	if t, ok := h.eval.Fired()[0].(termination.Timeout); ok && t.Scope == termination.ScopeTree {
		h.timedOut = deadline
	}
	rp.end(h, nil)
}

// endWith ends r with the result res, and its live descendants with cause
// (or one naming r).
func (rp *replayer) endWith(r *replayRun, res termination.Result, cause termination.Cause) {
	r.ended = true
	res.Stage, res.Run, res.Parent = r.stage, r.id, r.parent
	res.TerminationCause = termination.Tag(res.Cause, nil)
	res.Incomplete = r.incomplete
	if rp.index != nil {
		res.Live = rp.index.Live(r.id)
		res.Incomplete = res.Incomplete || rp.index.Incomplete(r.id)
	}
	r.tag = res.TerminationCause
	rp.results = append(rp.results, res)
	rp.done = append(rp.done, r)
	if cause == nil {
		cause = cascade.ParentEnded(r.stage, res.TerminationCause)
	}
	for _, c := range r.children {
		if !c.ended {
			c.eval.Stop(cause)
			rp.end(c, cause)
		}
	}
	r.children = nil // ended runs are never cascaded again
}

// held reports whether e is held at a limit.
func held(e *termination.Evaluator) bool {
	_, ok := e.Held()
	return ok
}

// stopped reports whether e has stopped.
func stopped(e *termination.Evaluator) bool {
	_, ok := e.Stopped()
	return ok
}

// record takes an end or raise record of the log.
func (rp *replayer) record(rec *codec.Record, lastLine bool) {
	r := rp.runs[rec.Run]
	if r == nil && rec.Kind == codec.RecordRaise {
		// A raise record names no stage or parent: it places no run. A
		// holder raised through its tree before its first line starts
		// late (its child's first line started it, with the index);
		// otherwise nothing of the run is known, and a raise of it changes
		// nothing.
		if r = rp.beginLate(rec.Run); r == nil {
			return
		}
	}
	if r == nil {
		// A run whose only line is its end record: one that ended before
		// its first event (blocked, skipped, a parent that had ended).
		r = rp.beginRun(rec.Run, rec.Parent, rec.Stage, rec.Kind == codec.RecordEnd)
	}
	if r.ended {
		return
	}
	if rec.Dropped > 0 {
		r.incomplete = true
	}
	switch rec.Kind {
	case codec.RecordRaise:
		rp.advance(r, rec.Time)
		if r.ended {
			break // a hold timeout passed before the raise: it found no held run
		}
		treeHeld := r.limits != nil && held(r.limits)
		rp.raise(r, rec)
		if treeHeld && !held(r.limits) {
			// The tree goes on: its runs' idle limits resume at the raise.
			r.each(func(d *replayRun) { d.eval.ResumeIdle(rec.Time) })
		}
	case codec.RecordEnd:
		runHeld := held(r.eval)
		treeHeld := r.limits != nil && held(r.limits)
		switch {
		case runHeld && rp.heldLive(r, rec) && heldAt(r.eval, rec.Cause),
			treeHeld && rp.heldLive(r, rec) && heldAt(r.limits, rec.Cause):
			// Held live where replay holds it, and ended there with the
			// limit's cause (nobody raised it before its hold timeout): the
			// limit's own stop, as under any policy that holds there, with
			// its evidence, lasting until the recorded end.
			if !rec.Time.IsZero() {
				r.timedOut = rec.Time
			}
			if runHeld {
				rp.end(r, nil)
			} else {
				rp.endTreeHold(r)
			}
		case runHeld && !rp.heldLive(r, rec):
			rp.end(r, nil) // the policy's hold, not raised: its own stop
		case treeHeld && !rp.heldLive(r, rec):
			rp.endTreeHold(r)
		default:
			rp.endFromRecord(r, rec)
		}
	}
	if lastLine && !r.ended {
		rp.end(r, nil)
	}
}

// raise applies a raise record to r (§3 hold): a raise names a run and
// raises every limit that holds it, as live — its tree limits, when it
// holds a held tree, and its own limits, when they hold it (the record of
// a raise of a tree limit names the holder, which the same event may have
// held at its own limit too). Each limit goes on when the record names
// its resource. Under a policy without hold, or for a run that is not
// held, it changes nothing.
func (rp *replayer) raise(r *replayRun, rec *codec.Record) {
	if r.limits != nil && held(r.limits) {
		_ = r.limits.Raise(rec.Limits) // the holder's tree limits: the whole tree goes on
	}
	if held(r.eval) {
		_ = r.eval.Raise(rec.Limits) // bad amounts were the Decoder's error; a raise that misses the limit changes nothing
	}
}

// advance brings the holds of r and of its tree holders to at, the time
// of a raise record of r (the events' clock, §3 hold): a hold whose timeout
// passed before at has ended, as its timer would have ended it live — the
// held run with its limit's cause (StoppedAt the event that reached it),
// a held tree's holder with the tree limit's cause and its descendants
// with Cancelled{parent} — and so has one whose timeout, which keeps
// counting while held, passed first. A raise then finds no held run, as
// live. A hold still on notes at as the raise's time: the idle limits
// resume there.
func (rp *replayer) advance(r *replayRun, at time.Time) {
	if at.IsZero() {
		return
	}
	for _, h := range r.holders {
		if h.ended || h.limits == nil || !held(h.limits) {
			continue
		}
		d, _ := h.limits.NextDeadline()
		if _, stop := h.limits.Advance(at); stop && h.eval.StopFired(h.limits.Fired(), false) {
			rp.endTimedOut(h, d)
		}
	}
	if r.ended || !held(r.eval) {
		return
	}
	if _, stop := r.eval.Advance(at); stop {
		rp.end(r, nil)
	}
}

// endTreeHold ends holder h when its tree limits hold the tree: nobody
// raised it, so it ends with the limit's cause, as live when its hold
// timeout passes (no event of its own named: StoppedAt 0), and its
// descendants with Cancelled{parent}. It reports whether it did.
func (rp *replayer) endTreeHold(h *replayRun) bool {
	if h.ended || h.limits == nil || !held(h.limits) {
		return false
	}
	h.limits.EndHold()
	h.eval.StopFired(h.limits.Fired(), false)
	rp.end(h, nil)
	return true
}

// heldAt reports whether e holds its run at the limit whose cause is c.
func heldAt(e *termination.Evaluator, c termination.Cause) bool {
	h, ok := e.Held()
	return ok && reflect.DeepEqual(h, c)
}

// heldLive reports whether the held run r was held live where replay
// holds it: its end record counts the events replay has evaluated, and
// names the policy r replays under (the same hash: the same hold). Its
// recorded end is then what ended the hold (a stop, the hold timeout, a
// timeout, which keeps counting while held, or an ancestor's end), as for
// a run the policy has not stopped. Under another policy the hold is the
// policy's own: the run ends with the limit's cause.
//
// Every stage in Go records "code", so for a run of a Stage the record
// cannot say that the stage held the run there as the Stage does: its end
// stands only when it is one a run held at a limit can have (it takes no
// next event: the limit's cause, a timeout, or a Cancelled from outside its
// loop) and it came before the Stage's hold timeout.
func (rp *replayer) heldLive(r *replayRun, rec *codec.Record) bool {
	if rec.Policy == "" || rec.Events != r.eval.Progress().Events {
		return false
	}
	lim, ok := rp.limitsOf(r.stage)
	switch {
	case !ok:
		return false
	case lim.policy == nil:
		return rec.Policy == codePolicy && heldEnd(rec.Cause) && withinHold(r, lim.hold, rec)
	}
	return lim.policy.Hash() == rec.Policy
}

// heldEnd reports whether c is an end a run held at a limit can have.
func heldEnd(c termination.Cause) bool {
	switch c := c.(type) {
	case termination.Timeout:
		return !c.Idle // an idle limit pauses while the run is held
	case termination.Cancelled:
		return true
	}
	return termination.Hold{}.Holds(c)
}

// withinHold reports whether rec, the end record of the held run r, comes
// before h's timeout has passed since the hold (on the events' clock; a
// record or hold without a time is taken as within).
func withinHold(r *replayRun, h termination.Hold, rec *codec.Record) bool {
	e := r.eval
	if !held(e) && r.limits != nil {
		e = r.limits // held by its tree's limits
	}
	since, ok := e.HeldSince()
	return !ok || since.IsZero() || rec.Time.IsZero() || !rec.Time.After(since.Add(h.Timeout))
}

// codePolicy is the policy an end record names for a stage in Go
// (middleware.WithCondition, WithTreeLimits, ...).
const codePolicy = "code"

// endFromRecord ends r, which the policy has not stopped before its end
// record, with the recorded end (§4 "Recorded runs"): what happened
// after the last line is not in the log. The totals are the events'.
func (rp *replayer) endFromRecord(r *replayRun, rec *codec.Record) {
	res := recordedEnd(r.eval.Result(), rec, r.first)
	res.Live = termination.Tag(rec.Cause, nil) // the index says it too, when there is one
	// A run that a cascade ended live passes that cascade on, naming the
	// run whose end started it, as live (§8).
	var cascade termination.Cause
	if c, ok := rec.Cause.(termination.Cancelled); ok && c.Reason == termination.CancelParent {
		cascade = c
	}
	rp.endWith(r, res, cascade)
}
