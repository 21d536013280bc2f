package middleware

import (
	"fmt"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// Hold (§3 hold: {timeout: D}): a run that reaches a limit — max_iterations,
// max_tool_calls, a token or cost budget, its own or a tree's — is held
// instead of stopped. The event that reached the limit is delivered, the
// limit's cause is recorded as a warning, and the run takes no next event
// until Raise, Stop, or the hold timeout.
//
// Every consumer path (Observe, Forward, ForwardSeq, Range and their Each
// forms) evaluates through observeLocked: the one wait point is at its
// top, before the next event is evaluated. So Observe blocks; Range and
// ForwardSeq do not yield the next item; Forward's forwarder, which has
// received the next item, does not evaluate or forward it, and the
// producer's next send blocks. A run that is not held pays one nil check
// per event.

// WithHold makes the stage hold its runs at a limit instead of stopping
// them, for up to timeout (the policy key hold: {timeout: D}; a policy's
// hold comes with WithPolicy). Default: no hold. A timeout <= 0 is an
// error.
func WithHold(timeout time.Duration) Option {
	return optionFunc(func(c *config) {
		if timeout <= 0 {
			c.errs = append(c.errs, fmt.Errorf("WithHold: the timeout must be > 0, got %s", timeout))
			return
		}
		c.hold = &termination.Hold{Timeout: timeout}
	})
}

// Raise raises the limits of a run held at a limit (§3 hold) by l's
// amounts — every limit that holds it: the run's own, and its tree
// holder's when a tree limit holds it, which releases every held run of
// the tree — and the run goes on. Amounts are positive
// (termination.Limits.ValidateRaise); a tool_calls amount also raises
// per-tool limits. l must name the resource of every limit that holds the
// run. A raise that cannot release the run (it is not held — never was,
// was raised already, or has ended — or l misses a limit that holds it)
// changes nothing and returns an error wrapping termination.ErrNotHeld.
//
// A tree limit's raise is recorded naming the holder, and raises the
// holder's own limits too when they hold it (a raise names a run, and
// raises every limit that holds that run; replay applies a raise record
// so).
func (r *Run) Raise(l termination.Limits) error {
	if r == nil {
		return errNilRun
	}
	if err := r.raise(l); err != nil {
		return fmt.Errorf("middleware: run %s: %w", r.id, err)
	}
	return nil
}

// raise checks that l releases every limit that holds the run, then
// raises them: its tree's first (whose record names the holder, and
// raises the holder's own limits with it), then its own.
func (r *Run) raise(l termination.Limits) error {
	if err := l.ValidateRaise(); err != nil {
		return err
	}
	r.mu.Lock()
	own := r.eval.CheckRaise(l)
	r.mu.Unlock()
	tree := termination.ErrNotHeld
	if r.parts.hold != nil {
		tree = r.parts.hold.CheckRaise(l)
	}
	switch {
	case missed(own):
		return own
	case missed(tree):
		return tree
	case own != nil && tree != nil:
		return own
	}
	raised := tree == nil && r.parts.hold.Raise(l) == nil
	if own == nil {
		// Nothing to do when the tree's raise raised it (the run is its
		// holder).
		r.mu.Lock()
		raised = r.raiseOwnLocked(l) || raised
		r.mu.Unlock()
	}
	if !raised {
		return termination.ErrNotHeld // a hold timeout came first
	}
	return nil
}

// missed reports whether err, from a CheckRaise, says that the raise
// misses a limit that holds the run: the run is held, at a limit the
// raise does not name (a plain ErrNotHeld says that it is not held).
func missed(err error) bool {
	return err != nil && err != termination.ErrNotHeld //nolint:errorlint // CheckRaise returns the sentinel itself for "not held"
}

// raiseOwnLocked raises the run's own limits by l when they hold it, with
// r.mu held, records the raise and lets the run go on; it reports whether
// it did.
func (r *Run) raiseOwnLocked(l termination.Limits) bool {
	if r.eval.Raise(l) != nil {
		if _, stopped := r.eval.Stopped(); stopped {
			// The hold timeout had passed, its timer late: the limit's
			// cause stands, decided here (the timer does the rest).
			r.decidedLocked()
		}
		return false
	}
	r.parts.raised(l)
	r.unholdLocked()
	if r.timer != nil {
		r.armTimer() // the idle deadline moved on past the wait
	}
	r.holdNow() // its tree may still hold it
	return true
}

// Held returns the cause of the limit the run waits at (its own, or its
// tree's), and since when; ok is false when it is not held.
func (r *Run) Held() (c termination.Cause, since time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.heldNow() == nil {
		return nil, time.Time{}, false
	}
	return r.rare.held.cause, r.rare.held.since, true
}

// holdNow is called with r.mu held after each release, and after an event
// that recorded warnings: it holds the run when its own evaluator holds,
// or else when a limit it shares with other runs does (a tree's: a run
// released from one hold may still be due to another).
func (r *Run) holdNow() {
	if r.heldNow() != nil {
		return
	}
	if _, stopped := r.eval.Stopped(); stopped {
		return
	}
	if c, held := r.eval.Held(); held {
		since, _ := r.eval.HeldSince()
		own := make(chan struct{})
		r.holdLocked(own, c, since)
		r.rare.held.own = own
		r.armTimer() // the hold timeout, on the run's one timer
		return
	}
	if r.parts.hold == nil {
		return
	}
	if ch, c, since := r.parts.hold.HeldAt(); ch != nil {
		r.holdSharedLocked(ch, c, since)
	}
}

// heldState is how a held run waits: made when it is held, dropped when
// it goes on (a run that is never held carries one nil pointer for it).
type heldState struct {
	ch    <-chan struct{} // closed on release
	own   chan struct{}   // ch when it is the run's own to close (its own limit); nil for a part's (a tree's)
	cause termination.Cause
	since time.Time
}

// holdLocked marks the run held until ch is closed (or the run ends).
func (r *Run) holdLocked(ch <-chan struct{}, c termination.Cause, since time.Time) {
	r.rareLocked().held = &heldState{ch: ch, cause: c, since: since}
	r.parts.held(c)
}

// holdSharedLocked marks the run held at c, a limit it shares with other
// runs (a tree's), until ch is closed: its idle limits pause, as for a
// hold of its own (§3: "idle pauses while the run is held"), until
// unholdLocked resumes them.
func (r *Run) holdSharedLocked(ch <-chan struct{}, c termination.Cause, since time.Time) {
	r.holdLocked(ch, c, since)
	r.eval.PauseIdle(time.Now())
}

// unholdLocked releases the run's wait, with r.mu held. A shared hold's
// release resumes the idle limits it paused, their deadline moved on past
// the wait (the run's own hold is its evaluator's to resume: Raise).
func (r *Run) unholdLocked() {
	if r.heldNow() == nil {
		return
	}
	shared := r.rare.held.own == nil
	if !shared {
		close(r.rare.held.own) // a shared hold's channel is its part's to close
	}
	r.rare.held = nil
	r.parts.released()
	if shared {
		r.eval.ResumeIdle(time.Now())
		if r.timer != nil {
			r.armTimer()
		}
	}
}

// waitHold waits, with r.mu held (released while waiting), until the run
// is no longer held or has stopped.
func (r *Run) waitHold() {
	for r.heldNow() != nil {
		if _, stopped := r.eval.Stopped(); stopped {
			return
		}
		ch := r.rare.held.ch
		r.mu.Unlock()
		select {
		case <-ch:
		case <-r.ctx.Done():
		}
		r.mu.Lock()
		if r.heldNow() != nil && r.rare.held.ch == ch {
			select {
			case <-ch: // a tree's release that has not reached this run yet
				r.unholdLocked()
				r.holdNow()
			default:
			}
		}
	}
}

// stopHeld ends a held run with its limit's cause (Stop, Leave, a fleet
// stop): it reports whether the run was held at a limit of its own.
func (r *Run) stopHeld() bool {
	r.mu.Lock()
	c, ok := r.eval.EndHold()
	if ok {
		r.decidedLocked()
	}
	r.mu.Unlock()
	if ok {
		r.stopped(c)
	}
	return ok
}

// holdShared holds the run at c, a limit it shares with other runs (a
// tree's), until release is closed, unless it has stopped or is held.
func (r *Run) holdShared(release <-chan struct{}, c termination.Cause, since time.Time) {
	r.mu.Lock()
	if _, stopped := r.eval.Stopped(); !stopped && r.heldNow() == nil {
		r.holdSharedLocked(release, c, since)
	}
	r.mu.Unlock()
}

// releaseShared lets the run go on if release holds it; its own limit, or
// another tree's, may hold it still.
func (r *Run) releaseShared(release <-chan struct{}) {
	r.mu.Lock()
	if r.heldNow() != nil && r.rare.held.ch == release {
		r.unholdLocked()
		r.holdNow()
	}
	r.mu.Unlock()
}

// recordRaised tells the parts of a raise of the run's tree limits, as
// their holder: one raise record names the run. The raise also raises the
// run's own limits when they hold it (a raise names a run and raises
// every limit that holds it; replay applies the record so).
func (r *Run) recordRaised(l termination.Limits) {
	r.mu.Lock()
	if !r.raiseOwnLocked(l) {
		r.parts.raised(l)
	}
	r.mu.Unlock()
}
