package middleware

import (
	"context"
	"errors"
	"time"

	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/termination"
)

// The run's one seam. Everything that watches or limits a run besides its
// own evaluator takes part in it as a Participant: package telemetry
// (spans and metrics), package eventlog (the event log), package fleet
// (fleet membership and shared budgets), the stage's shadow policies
// (shadow.go). A new kind of observer or limit is a new participant, not
// a new branch in Run.

// Participant takes part in every run of the stages it is given to
// ([WithParticipant]). Implementations must be safe for concurrent use.
type Participant interface {
	// Join is called once per run when it starts, before any event, with
	// the context the run is being started with and the run (its ID,
	// Info, Labels and Stage are set; its own context is not made yet).
	// The returned context becomes the parent of the run's context (it may
	// carry a span, so the loop's own spans nest under it); nil keeps
	// ctx. The Part takes part in the run; nil for none.
	Join(ctx context.Context, run *Run) (context.Context, Part)
}

// Part is a participant's share of one run. Its methods are called with
// the run's lock held, one at a time, in the order the run's events,
// warnings and end happen, and must not block or call back into the Run.
// A Part may also implement [Starter], [Spender], [StopRecorder],
// [HoldRecorder] and [Ender]; the run looks once, when the part joins.
type Part interface {
	// Event is called for every evaluated event, on the hot path: it must
	// not allocate. ev is valid only during the call.
	Event(ev *termination.Event)
	// Warning is called for every warning (BudgetPressure, StallDetected),
	// in the order of Result.Warnings.
	Warning(c termination.Cause)
	// Error reports a failure that did not stop the loop, or that the loop
	// should know about: a panicking hook, a decode panic.
	Error(err error)
	// End is called once, with the final result. Parts are told in the
	// order their participants were given, after the stage's own (its
	// shadow policies, whose part fills res.Shadow).
	End(res *termination.Result)
}

// Starter is a Part that acts once the run has its context and its place
// in a tree of runs: a fleet registers the run then, and may refuse it.
// Start is called without the run's lock; it may call the Run's methods.
// An error ends the run at once: a [termination.Cause] (errors.As) as
// itself (Skipped{reason: blocked}), any other as Failed{invalid_input}.
type Starter interface {
	Start() error
}

// Spender is a Part that is given every evaluated event's usage without
// the run's lock, after the parts were told of the event: a fleet charges
// it to a shared budget. It is on the per-event path: it must not
// allocate or wait on the network. warning is a warning the spend raised
// (BudgetPressure{scope: fleet}); stop is the cause the run must end with
// (BudgetExhausted{scope: fleet}), as if it had fired on the event. Either
// is nil otherwise.
type Spender interface {
	Spend(usage termination.Usage, cost float64) (warning, stop termination.Cause)
}

// StopRecorder is a Part that is also told the moment its run's cause is
// decided — an event or a timer that fired, Stop, a fleet stop, a
// parent's cascade — before the run's descendants are ended and before
// the loop returns and calls Finish (End). An event log writes the run's
// end record then (package eventlog), so that in the log a run ends where
// it really ended, before the lines of its descendants' cascade. Stopped
// is called at most once per run, with the run's lock held. For a run
// whose cause Finish decides (the stream's end) End is the first to know,
// but for one case: when the run's parent ends while Finish is deciding
// (between the stream's end and End), Stopped is called first, so that the
// child's end record comes before its parent's. res is valid only during
// the call; its Outcome is the cause's default (a WithTreatAsSuccess
// override is applied at Finish, and is missing from that early record).
type StopRecorder interface {
	Stopped(res *termination.Result)
}

// HoldRecorder is a Part that records holds (package telemetry counts held
// runs and their waits). Its methods are called with the run's lock held.
type HoldRecorder interface {
	// Held is called when the run is held at the limit whose cause is c.
	Held(c termination.Cause)
	// Released is called when a held run goes on (raised), or ends.
	Released()
	// Raised is called for every raise that released the run, with its
	// amounts (what an event log records as a raise record, §1).
	Raised(l termination.Limits)
}

// Ender is a Part that is told, without the run's lock, once the run's
// result is final and every part's End was called: a fleet member leaves
// its fleet then. It may call the Run's methods.
type Ender interface {
	Ended(res *termination.Result)
}

// WithParticipant makes p take part in every run of the stage (package
// telemetry's Recorder, package eventlog's Writer, package fleet's
// Membership). Given several times, every participant takes part, in the
// order given. Default: none (the run is evaluated, and nothing else
// watches it). nil is an error.
func WithParticipant(p Participant) Option {
	return optionFunc(func(c *config) {
		if isNil(p) {
			c.errs = append(c.errs, errors.New("WithParticipant: nil participant (to add nothing, leave WithParticipant out)"))
			return
		}
		c.participants = append(c.participants, p)
	})
}

// Info returns what the run is known by: its stage, ids and parent.
func (r *Run) Info() RunInfo {
	// Built on demand from the stage's and the run's own fields rather
	// than kept in the Run: parts call it once, when they join, and a live
	// run is smaller without a copy.
	info := r.stage.info
	o := r.from()
	info.AgentID, info.ConversationID = o.info.agentID, o.info.conversationID
	info.RunID, info.ParentRunID = r.id, o.parentID
	return info
}

// The seam's capabilities that only package internal/tree's parts have: a run in
// a tree of runs (lineage.go) has a *tree.Node among its parts, which
// evaluates its events under its ancestors' tree limits in one order
// across the tree (sequencer), may hold it at a tree's limit (holder), is
// told when it stops (stopper), and knows what is left of those limits
// (limiter) and which of them a fleet shares (treeSharer). They are
// unexported: a participant of one's own has no use for them.

// sequencer evaluates the run's events under limits shared with other
// runs, in one order across them. Enter is called with the run's lock
// held before an event is evaluated; it returns nil and holds the order
// until Exit, or returns the causes the run ends with without evaluating
// the event (the shared limits fired already). Exit is called with the
// run's lock held once the event was evaluated and the parts told
// (counted: it counts); Settle follows without the lock when Exit says
// so, and reports whether the run may have a new warning or cause. Charge
// is Enter and Exit for usage spent outside the run's events.
type sequencer interface {
	Enter() []termination.Cause
	Exit(ev *termination.Event, counted bool) (settle bool)
	Settle() bool
	Charge(ev *termination.Event) (settle bool)
}

// holder may hold the run at a limit shared with other runs. HeldAt is
// called with the run's lock held; CheckRaise, Raise and EndHold without
// it.
type holder interface {
	HeldAt() (release <-chan struct{}, c termination.Cause, since time.Time)
	CheckRaise(l termination.Limits) error
	Raise(l termination.Limits) error
	EndHold() bool
}

// stopper is told, without the run's lock, once the run's cause is
// decided, before its descendants end and its context is cancelled.
type stopper interface{ Stopping(c termination.Cause) }

// limiter knows what is left of the limits it holds over the run.
type limiter interface{ Remaining() termination.Limits }

// treeSharer knows the ids of the holders of the shared trees that count
// the run's events.
type treeSharer interface{ SharedTrees() []string }

// parts are a run's parts, in order. The optional interfaces are looked up
// once, when the parts join. A run without parts shares noParts (most
// runs of a stage without participants: a live run is smaller without
// its own).
type parts struct {
	all []Part
	// events are the parts told of each event: all but a tree's node,
	// whose Event does nothing (its sequencer sees the event).
	events   []Part
	spenders []Spender
	seq      sequencer // the first part that is one; nil for none
	hold     holder    // the first part that is one; nil for none
}

// noParts are the parts of every run that has none; never changed.
var noParts parts

// joinParts joins the stage's own part own (nil for none), then its
// participants, to the run, in order, and returns the context they made and
// the run's parts (noParts for none). While they join, the run has none.
func joinParts(ctx context.Context, own Part, participants []Participant, r *Run) (context.Context, *parts) {
	ps := &noParts
	if own != nil {
		ps = ps.with(own)
	}
	for _, p := range participants {
		pctx, part := p.Join(ctx, r)
		if pctx != nil {
			ctx = pctx
		}
		if part != nil {
			ps = ps.with(part)
		}
	}
	return ctx, ps
}

// with adds part to ps, and returns ps, or new parts if ps is noParts.
func (ps *parts) with(part Part) *parts {
	if ps == &noParts {
		ps = new(parts)
	}
	ps.add(part)
	return ps
}

func (ps *parts) add(part Part) {
	ps.all = append(ps.all, part)
	if _, node := part.(*tree.Node); !node {
		ps.events = append(ps.events, part)
	}
	if s, ok := part.(Spender); ok {
		ps.spenders = append(ps.spenders, s)
	}
	if s, ok := part.(sequencer); ok && ps.seq == nil {
		ps.seq = s
	}
	if h, ok := part.(holder); ok && ps.hold == nil {
		ps.hold = h
	}
}

// stopping tells the stoppers that the run has stopped with c.
func (ps *parts) stopping(c termination.Cause) {
	for _, p := range ps.all {
		if s, ok := p.(stopper); ok {
			s.Stopping(c)
		}
	}
}

func (ps *parts) event(ev *termination.Event) {
	for _, p := range ps.events {
		p.Event(ev)
	}
}

func (ps *parts) warning(c termination.Cause) {
	for _, p := range ps.all {
		p.Warning(c)
	}
}

func (ps *parts) error(err error) {
	for _, p := range ps.all {
		p.Error(err)
	}
}

func (ps *parts) end(res *termination.Result) {
	for _, p := range ps.all {
		p.End(res)
	}
}

// stopped tells the StopRecorders; it reports whether there are any.
func (ps *parts) hasStopRecorder() bool {
	for _, p := range ps.all {
		if _, ok := p.(StopRecorder); ok {
			return true
		}
	}
	return false
}

func (ps *parts) stopped(res *termination.Result) {
	for _, p := range ps.all {
		if s, ok := p.(StopRecorder); ok {
			s.Stopped(res)
		}
	}
}

func (ps *parts) held(c termination.Cause) {
	for _, p := range ps.all {
		if h, ok := p.(HoldRecorder); ok {
			h.Held(c)
		}
	}
}

func (ps *parts) released() {
	for _, p := range ps.all {
		if h, ok := p.(HoldRecorder); ok {
			h.Released()
		}
	}
}

func (ps *parts) raised(l termination.Limits) {
	for _, p := range ps.all {
		if h, ok := p.(HoldRecorder); ok {
			h.Raised(l)
		}
	}
}

// start calls the Starters, without the run's lock; it returns the first
// error.
func (ps *parts) start() error {
	for _, p := range ps.all {
		if s, ok := p.(Starter); ok {
			if err := s.Start(); err != nil {
				return err
			}
		}
	}
	return nil
}

// ended calls the Enders, without the run's lock.
func (ps *parts) ended(res *termination.Result) {
	for _, p := range ps.all {
		if e, ok := p.(Ender); ok {
			e.Ended(res)
		}
	}
}
