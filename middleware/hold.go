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
// amounts — the run's own limits, or its tree holder's when a tree limit
// holds it, which releases every held run of the tree — and the run goes
// on. Amounts are positive (termination.Limits.ValidateRaise); a tool_calls
// amount also raises per-tool limits. A raise for a run that is not held
// (never was, was raised already, or has ended) changes nothing and
// returns an error wrapping termination.ErrNotHeld.
func (r *Run) Raise(l termination.Limits) error {
	if r == nil {
		return errNilRun
	}
	if err := l.ValidateRaise(); err != nil {
		return fmt.Errorf("middleware: run %s: %w", r.id, err)
	}
	r.mu.Lock()
	err := r.eval.Raise(l)
	if err == nil {
		r.recordRaised(l)
		r.unholdLocked()
		if r.timer != nil {
			r.armTimer() // the idle deadline moved on past the wait
		}
		r.holdNow() // its tree may still hold it
	}
	t := r.tree
	r.mu.Unlock()
	if err != nil && t != nil {
		err = t.raiseHolders(l)
	}
	if err != nil {
		return fmt.Errorf("middleware: run %s: %w", r.id, err)
	}
	return nil
}

// Held returns the cause of the limit the run waits at (its own, or its
// tree's), and since when; ok is false when it is not held.
func (r *Run) Held() (c termination.Cause, since time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.heldCh == nil {
		return nil, time.Time{}, false
	}
	return r.heldCause, r.heldAt, true
}

// holdNow is called with r.mu held after each release: it holds the run
// when its own evaluator holds, or else when one of its trees' holders
// does (a run released from one hold may still be due to another).
func (r *Run) holdNow() { r.holdNowLocked(nil) }

// holdNowLocked is holdNow with the tree locked already held by the
// caller (observeLocked holds its root while an event is evaluated, and
// calls it after an event that recorded warnings), nil for none: locking
// it again would deadlock.
func (r *Run) holdNowLocked(locked *node) {
	if r.heldCh != nil {
		return
	}
	if _, stopped := r.eval.Stopped(); stopped {
		return
	}
	if c, held := r.eval.Held(); held {
		since, _ := r.eval.HeldSince()
		r.holdLocked(make(chan struct{}), c, since)
		r.armTimer() // the hold timeout, on the run's one timer
		return
	}
	if r.tree == nil {
		return
	}
	for _, h := range r.tree.holders {
		if h != locked {
			h.mu.Lock() // a run's lock comes before a tree's
		}
		ch := h.release
		var (
			c     termination.Cause
			since time.Time
		)
		if ch != nil {
			c, _ = h.limits.Held()
			since, _ = h.limits.HeldSince()
		}
		if h != locked {
			h.mu.Unlock()
		}
		if ch != nil && c != nil {
			r.holdLocked(ch, c, since)
			r.heldTree = h
			return
		}
	}
}

// holdLocked marks the run held until ch is closed (or the run ends).
func (r *Run) holdLocked(ch chan struct{}, c termination.Cause, since time.Time) {
	r.heldCh, r.heldCause, r.heldAt = ch, c, since
	r.parts.held(c)
}

// unholdLocked releases the run's wait, with r.mu held.
func (r *Run) unholdLocked() {
	if r.heldCh == nil {
		return
	}
	if r.heldTree == nil {
		close(r.heldCh) // a tree's channel is the holder's to close
	}
	r.heldCh, r.heldCause, r.heldTree = nil, nil, nil
	r.parts.released()
}

func (r *Run) recordRaised(l termination.Limits) {
	r.parts.raised(l)
}

// waitHold waits, with r.mu held (released while waiting), until the run
// is no longer held or has stopped.
func (r *Run) waitHold() {
	for r.heldCh != nil {
		if _, stopped := r.eval.Stopped(); stopped {
			return
		}
		ch := r.heldCh
		r.mu.Unlock()
		select {
		case <-ch:
		case <-r.ctx.Done():
		}
		r.mu.Lock()
		if r.heldCh == ch {
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
	r.mu.Unlock()
	if ok {
		r.stopped(c)
	}
	return ok
}

// holdTree holds every live run of the holder's tree at c: called by act
// when the holder's tree limits hold.
func (t *node) holdTree(c termination.Cause) {
	t.mu.Lock()
	if t.release != nil || t.limits == nil {
		t.mu.Unlock()
		return
	}
	since, _ := t.limits.HeldSince()
	ch := make(chan struct{})
	t.release = ch
	if h, ok := t.run.stage.cfg.holdOf(); ok {
		t.holdTimer = time.AfterFunc(h.Timeout, t.holdExpired)
	}
	t.mu.Unlock()
	t.eachLive(func(r *Run) {
		r.mu.Lock()
		if _, stopped := r.eval.Stopped(); !stopped && r.heldCh == nil {
			r.holdLocked(ch, c, since)
			r.heldTree = t
		}
		r.mu.Unlock()
	})
}

// raiseHolders raises the tree limits of the first holder of the run's
// trees that holds: it releases every held run of that tree.
func (t *node) raiseHolders(l termination.Limits) error {
	for _, h := range t.holders {
		h.mu.Lock()
		if h.release == nil || h.limits == nil {
			h.mu.Unlock()
			continue
		}
		if err := h.limits.Raise(l); err != nil {
			h.mu.Unlock()
			return err
		}
		ch := h.release
		h.release = nil
		if h.holdTimer != nil {
			h.holdTimer.Stop()
			h.holdTimer = nil
		}
		close(ch)
		h.mu.Unlock()
		h.run.mu.Lock()
		h.run.recordRaised(l)
		h.run.mu.Unlock()
		h.eachLive(func(r *Run) {
			r.mu.Lock()
			if r.heldCh == ch {
				r.unholdLocked()
				r.holdNow() // its own limit, or another tree's, may hold it still
			}
			r.mu.Unlock()
		})
		return nil
	}
	return termination.ErrNotHeld
}

// holdExpired is a held tree's hold timeout: the holder ends with the tree
// limit's cause, its descendants with Cancelled{reason: parent}.
func (t *node) holdExpired() {
	t.mu.Lock()
	var fired []termination.Cause
	if _, ok := t.limits.EndHold(); ok && !t.fired {
		t.fired, fired = true, t.limits.Fired()
	}
	t.holdTimer = nil
	t.mu.Unlock()
	if fired != nil {
		t.run.stopTree(fired, false)
	}
}

// endTreeHold ends a held tree with its limit's cause when its holder is
// stopped from outside (Stop, agentstop stop); it reports whether it did.
func (r *Run) endTreeHold() bool {
	r.mu.Lock()
	t := r.tree
	r.mu.Unlock()
	if t == nil || t.limits == nil {
		return false
	}
	t.mu.Lock()
	var fired []termination.Cause
	if _, ok := t.limits.EndHold(); ok && !t.fired {
		t.fired, fired = true, t.limits.Fired()
	}
	if t.holdTimer != nil {
		t.holdTimer.Stop()
		t.holdTimer = nil
	}
	t.mu.Unlock()
	return fired != nil && r.stopTree(fired, false)
}

// eachLive calls f with the holder's run and every live descendant.
func (t *node) eachLive(f func(*Run)) {
	f(t.run)
	for _, k := range t.children() {
		k.eachLive(f)
	}
}

// holdOf returns the stage's hold, if any.
func (c *config) holdOf() (termination.Hold, bool) {
	if c.hold == nil {
		return termination.Hold{}, false
	}
	return *c.hold, true
}
