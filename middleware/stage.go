package middleware

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentstop/agentstop/internal/deadline"
	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/termination"
)

// Stage is a named, configured guard for an agent loop. It is safe for
// concurrent use and serves any number of runs, each with fresh state.
type Stage struct {
	name     string
	cond     termination.Condition
	timeouts []time.Duration
	timed    bool // the condition has timeouts or idle limits: each run arms a timer
	cfg      config
	allowed  func(string) bool
	info     RunInfo // what the recorder is told about every run; ids added per run
	// trees are the tree limits every run holds (WithTreeLimits, a
	// policy's tree:) and the participant that shares trees across
	// processes (a fleet's Membership): package internal/tree's (lineage.go).
	trees *tree.Stage
	// participants take part in every run, in order: the stage's own
	// (shadow policies), then those given with WithParticipant.
	participants []Participant
}

// New returns a Stage named stage. The name is a label value that is
// always a safe file name (1 to 128 of
// A-Z a-z 0-9 . _ -, starting with a letter or digit); any other name, an
// invalid option or an invalid condition is an error naming it.
func New(stage string, opts ...Option) (*Stage, error) {
	cfg, err := newConfig(stage, opts)
	if err != nil {
		return nil, err
	}
	var cond termination.Condition
	switch len(cfg.conds) {
	case 0:
		cond = termination.AnyOf()
	case 1:
		cond = cfg.conds[0]
	default:
		cond = termination.AnyOf(cfg.conds...)
	}
	s := &Stage{name: stage, cond: cond, timeouts: termination.NewEvaluator(cond, time.Time{}).Timeouts(), cfg: cfg}
	s.timed = len(s.timeouts) > 0 || len(termination.NewEvaluator(cond, time.Time{}).Idles()) > 0
	if len(cfg.shadows) > 0 {
		s.participants = append(s.participants, shadowParticipant{cfg.shadows}) // shadow.go
	}
	s.participants = append(s.participants, cfg.participants...)
	if reasons := slices.Clone(cfg.customReasons); len(reasons) > 0 {
		s.allowed = func(r string) bool { return slices.Contains(reasons, r) }
	}
	var treeLimits termination.Condition
	if len(cfg.trees) > 0 {
		treeLimits = termination.TreeLimits(cfg.trees...)
	}
	var sharer tree.Sharer
	for _, p := range cfg.participants {
		if t, ok := p.(tree.Sharer); ok {
			sharer = t // the first participant that shares trees
			break
		}
	}
	s.trees = tree.NewStage(stage, s.tag, treeLimits, cfg.hold, sharer)
	// The recorder's copy of the allow-list is its own: the stage's tags do
	// not depend on what a recorder does with it.
	s.info = RunInfo{Stage: stage, Provider: cfg.providerName, CustomReasons: slices.Clone(cfg.customReasons), Policy: cfg.policyHash()}
	return s, nil
}

// tag is a cause's termination_cause tag for the stage's runs.
func (s *Stage) tag(c termination.Cause) string { return termination.Tag(c, s.allowed) }

// Name returns the stage's name.
func (s *Stage) Name() string { return s.name }

// Condition returns the stage's combined condition.
func (s *Stage) Condition() termination.Condition { return s.cond }

// Start begins a run. The returned context is the one the loop must run
// under: it keeps ctx's values, reports the earliest of ctx's deadline,
// the stage's shortest timeout and the run's tree timeouts (§8) as its
// Deadline, and is cancelled when the
// run stops (a
// condition fires, the timeout timer fires, Stop is called, or ctx ends),
// with the typed cause as its context.Cause. The caller must end the run:
// Forward and ForwardSeq do it when the stream ends; with Observe, call
// Finish.
func (s *Stage) Start(ctx context.Context, opts ...RunOption) (context.Context, *Run) {
	return s.start(ctx, true, opts)
}

// start begins a run. A live run arms the timeout timer and watches the
// caller's context; a skipped one does neither.
func (s *Stage) start(ctx context.Context, live bool, opts []RunOption) (context.Context, *Run) {
	var rc runConfig
	for _, o := range opts {
		if o != nil {
			o.applyRun(&rc)
		}
	}
	runID := s.runID()
	if ctx == nil {
		ctx = context.Background()
	}
	parent := ctx
	var up parentRef
	if live {
		up = findParent(ctx, &rc, s.trees.Sharer()) // lineage.go
	}
	r := &Run{
		stage: s,
		eval:  termination.NewEvaluator(s.cond, time.Now()),
		id:    runID,
		parts: &noParts,
	}
	if ri := rc.runIdentity; ri.agentID != "" || ri.conversationID != "" || len(ri.labels) > 0 || up.id != "" || parent.Done() != nil {
		r.origin = &runOrigin{info: ri, parentID: up.id}
		if parent.Done() != nil {
			r.origin.parent = parent
		}
	}
	if s.cfg.hold != nil {
		r.eval.SetHold(*s.cfg.hold) // hold.go
	}
	ctx, own := s.joinTree(ctx, r, up)                    // lineage.go: the run's tree node, if any
	ctx, r.parts = joinParts(ctx, own, s.participants, r) // participant.go
	// The run's context does not inherit the parent's cancellation directly,
	// so that its cause is always the run's typed cause: the parent's end is
	// turned into Cancelled{reason: context} below. The layer that carries
	// the run drops the cancellation (lineage.go); it reports ctx's
	// deadline, or when there is a sooner one, the earliest of the
	// caller's, the stage's, and what the parts report (a tree node: the
	// run's tree timeouts, its own tree limits' and those a remote parent
	// propagated; a local parent's are in the caller's deadline already):
	// loops size their own timeouts from it.
	base := ctx
	if d, ok := deadline.Earliest(ctx, s.timeouts...); ok {
		if cd, cok := ctx.Deadline(); !cok || !cd.Equal(d) {
			base = deadline.Report(context.WithoutCancel(ctx), d)
		}
	}
	// The run's context carries the run, so that a run started under it
	// is its child (lineage.go).
	r.value = runValue{Context: base, run: r}
	r.ctx, r.cancel = context.WithCancelCause(&r.value)
	runCtx := r.ctx
	r.ended.Add(1)
	if !live {
		return runCtx, r
	}
	if c := r.link(up); c != nil { // its parent had ended (lineage.go)
		r.stopWith(c)
		return runCtx, r
	}
	refused := r.begin() // bad labels, or a participant refused the run
	registerRun(r)       // WithParent finds it from now on (lineage.go)
	if refused {
		return runCtx, r
	}
	if s.timed {
		// Under the lock: a very short limit's callback may already be
		// re-arming r.timer for the next one.
		r.mu.Lock()
		r.armTimer()
		r.mu.Unlock()
	}
	if parent.Err() != nil {
		// Already cancelled: stop now rather than in AfterFunc's goroutine,
		// so that the first Observe already sees the stop.
		r.stopWith(termination.Cancelled{Reason: termination.CancelContext, Detail: causeText(parent)})
	} else if parent.Done() != nil { // a parent that can never end needs no watch
		r.origin.stopParent = context.AfterFunc(parent, func() {
			r.stopWith(termination.Cancelled{Reason: termination.CancelContext, Detail: causeText(parent)})
		})
	}
	return runCtx, r
}

// Skip records that the stage did not run, with Skipped{reason}, and returns
// the result. The cause is Skipped even when ctx has already ended.
func (s *Stage) Skip(ctx context.Context, reason termination.Reason) termination.Result {
	_, r := s.start(ctx, false, nil)
	r.stopWith(termination.Skipped{Reason: reason})
	return r.Finish(nil)
}

// Run is one execution of a stage's loop. Its methods are safe for
// concurrent use.
//
// A live run's memory is most of what a forwarded loop adds (§6), so the
// fields that most runs never need sit behind pointers, made only by the
// runs that do (origin, rare, lin; parts is shared by the runs
// without participants), and the small fields are packed: a live run is
// 192 bytes, a size class.
type Run struct {
	stage  *Stage
	origin *runOrigin // what the run was started with and under; nil for nothing to keep
	ctx    context.Context
	cancel context.CancelCauseFunc
	id     string   // 128 random bits, hex
	value  runValue // the layer of ctx that carries the run (lineage.go)
	lin    *lineage // under mu: its parent and children in this process (lineage.go); nil for none

	mu    sync.Mutex
	parts *parts // the participants' parts (participant.go): set before the run is visible
	eval  *termination.Evaluator
	cur   *termination.Event // Observe's copy of the event being evaluated (allocated on first use): evaluator and recorder read it in place
	timer *time.Timer

	// Under mu: finishing is set by the first Finish (the others wait for
	// ended); stopTold once the recorders have been told of the stop
	// (recordStop), or of the end; lastFinal: the last evaluated event was
	// a final answer; left: Leave was called; woken: wake (below) is
	// closed; consumer: the path that consumes the run's stream
	// (consumer.go), in the padding after the flags (a live Run stays
	// 192 bytes).
	finishing, stopTold, lastFinal, left, woken bool
	consumer                                    consumerPath
	leftFlag                                    atomic.Bool // left, for the channel forwarder's per-item check
	// The channel forwarder's hand-over, read by Leave: sentFinal is whether
	// the last item the consumer took ended with a final answer; inFlight is
	// set while an item that would change sentFinal is being handed over.
	sentFinal, inFlight atomic.Bool
	// nwarn is how many of the evaluator's warnings the parts have been
	// told of (under mu; an int32 beside the flags keeps a live Run in
	// its size class).
	nwarn int32

	ended  sync.WaitGroup      // done when the result is final (a channel would be one more allocation)
	result *termination.Result // set when ended is closed

	// The channel forwarder's wake-up, set under mu before it starts: wake
	// is closed (woken) by Leave and when the run stops, so that a
	// forwarder waiting for the producer or the consumer watches one
	// channel for both.
	wake chan struct{}
	// rare is what few runs need (under mu), made when one does: what
	// Leave said, the hold, the count of what was drained.
	rare *runRare
}

// runOrigin is what a run was started with and under, kept only when there
// is something to keep: set before the run is visible, never changed.
type runOrigin struct {
	info     runIdentity // what the run was started with
	parentID string      // the id of the run's parent, "" for none (Info)
	// parent is the caller's context, nil when it can never end (its Done
	// is nil): only its end and its cause are needed.
	parent context.Context
	// stopParent stops the watch of parent (set by a live run whose
	// parent can end, before anything can finish it).
	stopParent func() bool
}

// runRare is what few runs need: what Leave said (the reason, and the
// channel it closes, made by the forwarder once the run has stopped and an
// item waits for the consumer), the hold, and the count of what was
// drained.
type runRare struct {
	reason string
	leave  chan struct{}
	held   *heldState // non-nil while the run is held at a limit (hold.go)
	// drained counts the events and items discarded after the stop.
	drained int
}

// rareLocked returns r.rare, making it on first use (with r.mu held).
func (r *Run) rareLocked() *runRare {
	if r.rare == nil {
		r.rare = new(runRare)
	}
	return r.rare
}

// heldNow is how the run is held, nil while it is not (with r.mu held).
func (r *Run) heldNow() *heldState {
	if r.rare == nil {
		return nil
	}
	return r.rare.held
}

// drainedLocked is how many events and items were discarded after the
// stop (with r.mu held).
func (r *Run) drainedLocked() int {
	if r.rare == nil {
		return 0
	}
	return r.rare.drained
}

// noOrigin stands for the origin of a run that keeps none.
var noOrigin runOrigin

// from returns what the run was started with and under.
func (r *Run) from() *runOrigin {
	if r.origin == nil {
		return &noOrigin
	}
	return r.origin
}

// parentErr is the caller's context's Err: nil while it goes on, and
// always for one that can never end.
func (r *Run) parentErr() error {
	if p := r.from().parent; p != nil {
		return p.Err()
	}
	return nil
}

// parentDone is the caller's context's Done: nil for one that can never
// end.
func (r *Run) parentDone() <-chan struct{} {
	if p := r.from().parent; p != nil {
		return p.Done()
	}
	return nil
}

// parentCause is the text of the caller's context's cause.
func (r *Run) parentCause() string {
	if p := r.from().parent; p != nil {
		return causeText(p)
	}
	return ""
}

// Context returns the run's context (the one Start returned).
func (r *Run) Context() context.Context { return r.ctx }

// Stage returns the run's stage.
func (r *Run) Stage() *Stage { return r.stage }

// Done is closed once the run has stopped: a condition fired, or it was
// stopped, cancelled or finished.
func (r *Run) Done() <-chan struct{} { return r.ctx.Done() }

// Observe evaluates one event. It returns the cause and true when the run
// must stop, on this event or earlier; the run's context is then already
// cancelled. Events observed after the stop are not evaluated; they count as
// drained. An event that arrives past the timeout's deadline, before the
// timer has fired, is such an event: the timeout fires before it, as replay
// fires it (StoppedAt is the last event evaluated). An event that fails [termination.Event.Validate] (a missing or
// unknown Kind, negative usage, a negative or non-finite cost) ends the run
// with Failed{reason: invalid_input} naming the problem, as replay does.
// Observe blocks on nothing but the run's lock, except while the run is
// held at a limit (a policy's hold:, hold.go): it then waits until the run
// is raised ([Run.Raise]) or ends, and evaluates ev only if it was raised.
//
// Observe takes no stream of its own: it may report events beside the path
// that consumes the run's stream (Forward, Range, ...: an error the loop
// survives), evaluated in the order they arrive; that path, or Finish for
// a loop that only calls Observe, ends the run. On a stopped or finished
// run it evaluates nothing and reports the stop.
func (r *Run) Observe(ev termination.Event) (termination.Cause, bool) {
	c, stop, _ := r.observe(&ev) // by reference: one copy of the event less
	return c, stop
}

// observe is Observe that also reports whether the run had already stopped
// before ev (late: ev was not evaluated, and counts as drained). ev is
// copied into the run's own event before it is evaluated: the caller's
// copy does not escape.
func (r *Run) observe(ev *termination.Event) (_ termination.Cause, _ bool, late bool) {
	r.mu.Lock()
	if r.heldNow() != nil {
		// Held: wait before ev takes r.cur, which a concurrent Observe
		// waiting too would overwrite (hold.go).
		r.waitHold()
	}
	if r.cur == nil {
		// Allocated once, on first use: a run that Forward feeds evaluates
		// the forwarder's own copy of each event and never needs it.
		r.cur = new(termination.Event)
	}
	*r.cur = *ev
	return r.observeLocked(r.cur)
}

// observeLocked evaluates ev, with r.mu held; it unlocks it. The evaluator
// and the recorder read ev in place: the caller owns it and leaves it
// unchanged during the call. ev may be r.cur, which another Observe may
// overwrite once the lock is released.
func (r *Run) observeLocked(ev *termination.Event) (_ termination.Cause, _ bool, late bool) {
	if r.heldNow() != nil {
		r.waitHold() // held at a limit: no next event until released (hold.go)
	}
	if c, stopped := r.eval.Stopped(); stopped {
		r.rareLocked().drained++
		r.mu.Unlock()
		return c, true, true
	}
	seq := r.parts.seq // its trees' order and limits (package internal/tree), nil for none
	if seq != nil {
		if fired := seq.Enter(); fired != nil {
			// A tree limit over the run fired before ev: ev is not
			// evaluated, as replay ends the tree at the event that
			// crossed the limit.
			r.rareLocked().drained++
			r.mu.Unlock()
			r.stopFired(fired, false)
			c, _ := r.Cause()
			return c, true, true
		}
	}
	evaluated := r.eval.Events()
	cause, stop := r.eval.ObserveRef(ev)
	if !stop && len(r.parts.spenders) == 0 && len(r.eval.WarningsSince(int(r.nwarn))) == 0 {
		// The common case, an event that neither stopped nor warned, in a
		// run without Spenders: all that observed would do. (The parts'
		// Event cannot warn: the run's evaluator warns.)
		r.lastFinal = ev.Kind == termination.KindFinal
		if len(r.parts.events) > 0 {
			r.parts.event(ev)
		}
		if seq != nil && seq.Exit(ev, true) {
			r.mu.Unlock()
			return r.afterObserve(cause, false, nil, false, termination.Usage{}, 0, true)
		}
		r.mu.Unlock()
		return cause, false, false
	}
	return r.observed(ev, seq, evaluated, cause, stop)
}

// observed is what follows the evaluation of ev in observeLocked (with
// r.mu held, and seq entered if it is not nil): it unlocks them. A
// function of its own, so that the frame under the evaluation is small:
// a live run's goroutine evaluates on a small stack.
func (r *Run) observed(ev *termination.Event, seq sequencer, evaluated int, cause termination.Cause, stop bool) (termination.Cause, bool, bool) {
	if stop && r.eval.Events() == evaluated {
		// The timeout's deadline had passed before ev arrived (the timer
		// was about to fire): the run stopped on that clock tick, before
		// ev, and ev was not evaluated, as replay does (§3).
		if seq != nil {
			seq.Exit(ev, false)
		}
		r.rareLocked().drained++
		r.decidedLocked()
		r.mu.Unlock()
		r.stopped(cause)
		return cause, true, true
	}
	r.lastFinal = ev.Kind == termination.KindFinal
	r.parts.event(ev)
	var warnings []termination.Cause
	if len(r.eval.WarningsSince(int(r.nwarn))) > 0 {
		warnings = r.takeWarnings()
		if r.stage.cfg.hold != nil {
			r.holdNow() // the warning may be a limit the run is held at (hold.go)
		}
	}
	// An invalid event (it stopped the run with Failed{invalid_input}) adds
	// nothing to the run's budgets, nor to a fleet's or a tree's: negative
	// usage would give a shared budget back.
	valid := !stop || ev.Validate() == nil
	// The tree limits of the run and its ancestors, nearest first, after
	// the run's own (package internal/tree).
	settle := false
	if seq != nil {
		settle = seq.Exit(ev, valid)
	}
	if stop {
		r.decidedLocked() // after the event that stopped it, as in replay
	}
	if len(r.parts.spenders) > 0 && valid {
		return r.observedSpend(ev, cause, stop, warnings, settle)
	}
	r.mu.Unlock()
	if warnings != nil || stop || settle {
		return r.afterObserve(cause, stop, warnings, false, termination.Usage{}, 0, settle)
	}
	return cause, stop, false
}

// observedSpend ends observeLocked for a run with Spenders (a fleet): they
// are given the event's usage without the lock. (A function of its own
// keeps observeLocked's frame small.)
func (r *Run) observedSpend(ev *termination.Event, cause termination.Cause, stop bool, warnings []termination.Cause, settle bool) (termination.Cause, bool, bool) {
	usage, cost := ev.Usage, ev.Cost
	r.mu.Unlock()
	return r.afterObserve(cause, stop, warnings, true, usage, cost, settle)
}

// takeWarnings hands the warnings recorded since the last event to the
// recorder, with r.mu held, and returns them for the hook.
func (r *Run) takeWarnings() []termination.Cause {
	w := r.eval.WarningsSince(int(r.nwarn))
	r.nwarn += int32(len(w))
	for _, c := range w {
		r.parts.warning(c)
	}
	return w
}

// afterObserve is what follows an evaluated event without the lock: the
// warning hook, the stop, the Spenders' share (charge: with Spenders), what
// the event did to the limits shared with other runs (settle).
func (r *Run) afterObserve(cause termination.Cause, stop bool, warnings []termination.Cause, charge bool, usage termination.Usage, cost float64, settle bool) (termination.Cause, bool, bool) {
	for _, w := range warnings {
		r.warn(w)
	}
	if stop {
		r.stopped(cause)
	}
	if charge {
		if c, spendStop := r.spend(usage, cost); spendStop && !stop {
			cause, stop = c, true
		}
	}
	if settle && r.parts.seq.Settle() && !stop {
		cause, stop = r.Cause()
	}
	return cause, stop, false
}

// warn calls the OnWarning hook, turning a panic into a report.
func (r *Run) warn(c termination.Cause) {
	hook := r.stage.cfg.onWarning
	if hook == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			r.report(fmt.Errorf("middleware: stage %q: OnWarning hook panicked: %v", r.stage.name, p))
		}
	}()
	hook(r.ctx, r, c)
}

func (r *Run) report(err error) {
	r.mu.Lock()
	r.parts.error(err)
	r.mu.Unlock()
}

// Stop stops the run from outside the loop — a Stop button, a supervisor,
// AutoGen's ExternalTermination — with Cancelled{reason: external, detail:
// reason}, unless it has already stopped; when the last event evaluated
// was a final answer, the run ends as NaturalCompletion instead, as if the
// stream had ended there; a run held at a limit (hold:) ends with the
// limit's cause, as it would have without hold. The run's context is cancelled; the stream's end
// still has to be reached: Forward drains the producer and finishes the run
// once it has closed its channel (at the latest after the drain timeout);
// with Observe, call Finish once the loop has returned.
//
// Stop does not mean that the consumer has gone: Forward still hands over
// the item that was evaluated before the stop, waiting for the consumer as
// long as it takes (until Leave, or the caller's context ends), so a
// consumer that reads until the output closes gets every item whose events
// were evaluated (Result.Events counts exactly them). A consumer that
// leaves without reading on says so with [Run.Leave].
func (r *Run) Stop(reason string) {
	r.mu.Lock()
	final := r.lastFinal
	r.mu.Unlock()
	r.stopLeaving(final, reason)
}

// Leave says that the consumer of Forward has left: it will take no more
// items (it broke out of its range loop). The run ends as Stop ends it,
// except that the answer is judged by what the consumer took:
// NaturalCompletion when the last item it took carried the final answer,
// Cancelled{reason: external, detail: reason} otherwise. An item that was
// evaluated but not taken is given up as soon as the producer has closed
// its channel, at the latest after the drain timeout, so Run.Wait returns
// promptly; without Leave it would wait for the consumer. Leave after the run has stopped (a condition fired, or
// Stop) keeps the cause and only releases the item left behind. With
// ForwardSeq, Observe or an adapter's loop, Leave is Stop: breaking out of
// an iterator already tells the run.
func (r *Run) Leave(reason string) {
	r.mu.Lock()
	if r.left {
		r.mu.Unlock()
		return
	}
	r.left = true
	if r.rare == nil {
		r.rare = new(runRare)
	}
	r.rare.reason = reason
	r.leftFlag.Store(true)
	channel := r.wake != nil
	if channel && !r.woken {
		close(r.wake)
		r.woken = true
	}
	if r.rare.leave != nil {
		close(r.rare.leave)
	}
	final := r.lastFinal
	r.mu.Unlock()
	if channel {
		if r.inFlight.Load() {
			// An item that changes the answer is being handed over: the
			// consumer may just have taken it (and be the caller), or may
			// never take it. The forwarder knows which; it ends the run
			// at its next step (it is not running user code now; a decode
			// of the next item that waits for the caller is cut short by
			// the drain timeout).
			t := time.NewTimer(r.stage.cfg.drainTimeout)
			defer t.Stop()
			select {
			case <-r.ctx.Done(): // closed before the run is finished
				return
			case <-t.C:
			}
		}
		final = r.sentFinal.Load()
	}
	r.stopLeaving(final, reason)
}

// leaveReason returns Leave's reason.
func (r *Run) leaveReason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rare == nil {
		return ""
	}
	return r.rare.reason
}

// stopLeaving ends the run as Stop and Leave do: NaturalCompletion when
// final (the answer has been given), Cancelled{external, reason} otherwise.
func (r *Run) stopLeaving(final bool, reason string) {
	if r.stage.cfg.hold != nil && (r.stopHeld() || r.parts.hold != nil && r.parts.hold.EndHold()) {
		return // a held run ends with its limit's cause (hold.go)
	}
	r.mu.Lock()
	var (
		c  termination.Cause = termination.Cancelled{Reason: termination.CancelExternal, Detail: reason}
		ok bool
	)
	if final {
		c = termination.NaturalCompletion{}
		ok = r.eval.EndStream(c)
	} else {
		ok = r.eval.Stop(c)
	}
	if ok {
		r.decidedLocked()
	}
	r.mu.Unlock()
	if ok {
		r.stopped(c)
	}
}

// stopWith ends the run with c unless it has already stopped, and reports
// whether c became the run's cause.
func (r *Run) stopWith(c termination.Cause) bool {
	r.mu.Lock()
	ok := r.eval.Stop(c)
	if ok {
		r.decidedLocked()
	}
	r.mu.Unlock()
	if ok {
		r.stopped(c)
	}
	return ok
}

// stopped tells the parts, ends the run's live descendants (lineage.go),
// cancels the run's context with the cause and closes Done. The
// descendants end first, so that a child's watch of this run's context
// does not end it as Cancelled{reason: context} before the cascade
// reaches it.
func (r *Run) stopped(c termination.Cause) {
	if h := testHookStopped.Load(); h != nil {
		(*h)(r, c)
	}
	r.mu.Lock()
	r.recordStop()
	r.mu.Unlock()
	r.parts.stopping(c)
	r.endChildren(c)
	r.cancel(c) // the first cancel's cause stands; later calls do nothing
	r.mu.Lock()
	if r.wake != nil && !r.woken {
		close(r.wake)
		r.woken = true
	}
	r.unholdLocked() // hold.go
	r.mu.Unlock()
}

// leaveChan returns the channel Leave closes, made on first use, or true if
// Leave has been called.
func (r *Run) leaveChan() (<-chan struct{}, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.left {
		return nil, true
	}
	if r.rare == nil {
		r.rare = new(runRare)
	}
	if r.rare.leave == nil {
		r.rare.leave = make(chan struct{})
	}
	return r.rare.leave, false
}

// armTimer arms the run's one timer, with r.mu held, for the next timeout
// or idle deadline as things stand. Events do not touch the timer: they
// move the evaluator's idle deadline on, and a timer that fires early for
// it finds nothing due and is re-armed for the new deadline (Reset, no
// allocation).
func (r *Run) armTimer() {
	at, ok := r.eval.NextTick()
	if !ok {
		return
	}
	if r.timer == nil {
		r.timer = time.AfterFunc(time.Until(at), r.onTimer)
		return
	}
	r.timer.Reset(time.Until(at))
}

// onTimer is the run's timer: it fires what is due (a timeout, an idle
// limit) and re-arms for the next deadline.
func (r *Run) onTimer() {
	r.mu.Lock()
	cause, stop := r.eval.Tick(time.Now())
	if stop {
		r.decidedLocked()
	} else {
		r.armTimer()
	}
	r.mu.Unlock()
	if stop {
		r.stopped(cause)
	}
}

// Finish ends the run at the end of its stream and returns the result. err
// is how the stream ended: nil for a normal end; an error for an iterator or
// loop error (Failed{reason: stream_error}), unless the caller's context had
// ended (Cancelled{reason: context}), the run had already stopped (its cause
// stands), or err wraps a termination.Cause (errors.As), which becomes the
// run's cause: an adapter maps a framework's own limit that way. A wrapped
// cause that is a typed nil (a nil *termination.Custom) is no cause: err is
// then a stream error like any other. Finish is idempotent: later calls
// return the same result.
//
// Finish ends a run whose events the loop reports itself (Observe). A run
// whose stream Forward, ForwardSeq or Range (or their Each forms) consumes
// is finished by that path when the stream ends: a Finish while the path
// still owns the stream panics, naming the run and the path (it would
// drain what the path has not handed over), except after Leave on a run
// that Forward or ForwardEach consumes, when it waits for the forwarder as
// Wait does. Once the path has finished the run, Finish returns its
// result.
func (r *Run) Finish(err error) termination.Result {
	r.mu.Lock()
	if p := r.consumer; p != noPath && !r.finishing {
		left := r.left
		r.mu.Unlock()
		if left && p.channel() {
			return r.Wait() // the consumer has left: the forwarder ends within the drain timeout
		}
		panic(r.finishMisuse(p))
	}
	return r.finishLocked(err)
}

// finishLocked is Finish once it has checked the consumer path, and the
// paths' own end (finishPath), with r.mu held; it unlocks it.
func (r *Run) finishLocked(err error) termination.Result {
	if !r.finishing && r.stage.cfg.onWarning != nil && r.result == nil {
		r.warnBeforeEnd()
	}
	first := !r.finishing
	r.finishing = true
	r.mu.Unlock()
	if first {
		r.finish(err)
	}
	r.ended.Wait()
	return *r.result
}

// warnBeforeEnd hands the warnings that no event delivered (a tree's or a
// fleet's, raised by another run while this one waited) to the
// participants and, without the lock, to the warning hook, before the run
// ends: Wait returns after the hook has had them, and a hook that calls
// Finish ends the run itself. It is called with r.mu held, and returns
// with it held.
func (r *Run) warnBeforeEnd() {
	w := r.takeWarnings()
	if len(w) == 0 {
		return
	}
	r.mu.Unlock()
	for _, c := range w {
		r.warn(c)
	}
	r.mu.Lock()
}

// finishPath is Finish for the path that consumes the run's stream, at the
// stream's end (and for a path's misuse that ends the run: checkInput).
func (r *Run) finishPath() termination.Result {
	r.mu.Lock()
	return r.finishLocked(nil)
}

func (r *Run) finish(err error) {
	if r.stage.cfg.hold != nil && err == nil && r.parts.hold != nil && r.parentErr() == nil {
		// The stream ended while the run's own tree was held: nobody
		// raised the tree's limit, whose cause stands, as a limit of its
		// own does below (hold.go). Without the run's lock: the tree's
		// lock comes after it.
		r.parts.hold.EndHold()
	}
	r.mu.Lock()
	var typed termination.Cause
	switch {
	case r.parentErr() != nil:
		r.eval.Stop(termination.Cancelled{Reason: termination.CancelContext, Detail: r.parentCause()})
	case err == nil:
	case errors.As(err, &typed) && r.eval.Stop(typed):
		// The loop ended on a cause it knows (a framework's own iteration
		// limit mapped by an adapter): that cause stands. Stop refuses a
		// typed nil, which leaves err a plain stream error.
	default:
		r.eval.EndStream(termination.Failed{Reason: termination.FailStreamError, Err: errorText(err)})
	}
	if r.stage.cfg.hold != nil {
		// The stream ended while the run was held: nobody raised the
		// limit, whose cause stands (hold.go).
		r.eval.EndHold()
	}
	res := r.eval.Result()
	res.Stage, res.Run, res.Parent = r.stage.name, r.id, r.from().parentID
	res.TerminationCause = termination.Tag(res.Cause, r.stage.allowed)
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
	// The cause is final: the user's callback runs without the lock, so it
	// may call the Run's methods.
	var treatPanic any
	if f := r.stage.cfg.treatAsSuccess; f != nil && res.Outcome != termination.OutcomeSucceeded {
		ok, p := treat(f, res.Cause)
		if ok {
			res.Outcome = termination.OutcomeSucceeded
		}
		treatPanic = p
	}
	r.mu.Lock()
	if treatPanic != nil {
		r.parts.error(fmt.Errorf("middleware: stage %q: TreatAsSuccess panicked: %v", r.stage.name, treatPanic))
	}
	res.Drained = r.drainedLocked()
	// A warning that no event delivered and that came after finishLocked
	// handed the others to the hook (another run's, as this one ended) goes
	// to the participants, and is in the result.
	r.takeWarnings()
	r.unholdLocked()  // hold.go
	r.stopTold = true // End tells them
	// Its descendants' ends come after its own, with their locks held
	// from before it, as when its cause is decided (lineage.go).
	locked := r.lockDescendants(nil)
	recordPending(locked)
	r.parts.end(&res) // the tree's part fills res.Tree (lineage.go), the shadow policies' res.Shadow (shadow.go)
	stopDescendants(locked)
	unlockAll(locked)
	r.result = &res
	r.mu.Unlock()
	r.parts.ended(&res)
	if stop := r.from().stopParent; stop != nil {
		stop()
	}
	r.stopped(res.Cause)
	r.unlink() // lineage.go
	unregisterRun(r, &res)
	r.ended.Done()
}

// treat calls f, recovering a panic (reported by the caller).
func treat(f func(termination.Cause) bool, c termination.Cause) (ok bool, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			ok, panicked = false, p
		}
	}()
	return f(c), nil
}

// Wait blocks until the run has finished (its stream ended, or Finish was
// called) and returns the result.
func (r *Run) Wait() termination.Result {
	r.ended.Wait()
	return *r.result
}

// Cause returns the run's cause once it has stopped.
func (r *Run) Cause() (termination.Cause, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.eval.Stopped()
}

// addDrained counts items discarded after the stop.
func (r *Run) addDrained(n int) {
	r.mu.Lock()
	if n > 0 {
		r.rareLocked().drained += n
	}
	r.mu.Unlock()
}

// fail ends the run at once with Failed{reason, err}.
func (r *Run) fail(reason termination.Reason, err error) {
	r.stopWith(termination.Failed{Reason: reason, Err: err.Error()})
}

// errorText is err's text, even for an error whose Error method panics (a
// typed nil): fmt recovers and describes it.
func errorText(err error) string {
	if s := fmt.Sprint(err); s != "<nil>" {
		return s
	}
	return fmt.Sprintf("nil %T", err)
}

func causeText(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil {
		return c.Error()
	}
	return ""
}

var errNilRun = errors.New("middleware: nil *Run")

// recordStop tells the run's StopRecorders, once, that its cause is
// decided (with r.mu held).
func (r *Run) recordStop() {
	if r.stopTold {
		return
	}
	r.stopTold = true
	if !r.parts.hasStopRecorder() {
		return
	}
	res := r.eval.Result()
	res.Stage, res.Run, res.Parent = r.stage.name, r.id, r.from().parentID
	res.TerminationCause = termination.Tag(res.Cause, r.stage.allowed)
	r.parts.stopped(&res) // the shadow policies' part fills res.Shadow first (shadow.go)
}

// testHookStopped, when set (by this package's tests), is called as
// stopped begins: a test makes another run act in the window between a
// run's cause and the rest of its stop.
var testHookStopped atomic.Pointer[func(*Run, termination.Cause)]
