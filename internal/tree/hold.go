package tree

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// Held trees (§3 hold: with tree: limits). When a holder's tree limits
// reach a limit and the stage holds instead of stopping, every live run of
// the tree is held at it (Run.HoldOn) until the holder's limits are raised
// (Raise, from any run of the tree), the holder is stopped from outside
// (EndHold), or the hold timeout ends the holder with the limit's cause.

// HeldAt is called with the run's lock held when the run is not held: it
// returns the first of its holders whose tree is held, as the channel
// closed when the tree is released, the limit's cause and since when; a
// nil channel when none is.
func (n *Node) HeldAt() (release <-chan struct{}, c termination.Cause, since time.Time) {
	for _, h := range n.holders {
		if h != n.entered {
			h.mu.Lock() // a run's lock comes before a tree's
		}
		ch := h.release
		var hc termination.Cause
		var hs time.Time
		if ch != nil {
			hc, _ = h.limits.Held()
			hs, _ = h.limits.HeldSince()
		} else if h.fleetRelease != nil {
			ch, hc, hs = h.fleetRelease, h.fleetCause, h.fleetSince
		}
		if h != n.entered {
			h.mu.Unlock()
		}
		if ch != nil && hc != nil {
			return ch, hc, hs
		}
	}
	return nil, nil, time.Time{}
}

// holdTimeout is the stage's hold timeout, 0 when it does not hold.
func (s *Stage) holdTimeout() time.Duration {
	if s.hold == nil {
		return 0
	}
	return s.hold.Timeout
}

// holdTree holds every live run of the holder's tree at c: called by act
// when the holder's tree limits hold.
func (h *Node) holdTree(c termination.Cause) {
	h.mu.Lock()
	if h.release != nil || h.limits == nil {
		h.mu.Unlock()
		return
	}
	since, _ := h.limits.HeldSince()
	ch := make(chan struct{})
	h.release = ch
	if hold := h.stage.hold; hold != nil {
		h.holdTimer = time.AfterFunc(hold.Timeout, h.holdExpired)
	}
	h.mu.Unlock()
	h.run.EachLive(func(r Run) { r.HoldOn(ch, c, since) })
}

// CheckRaise reports what Raise would return, changing nothing: nil when
// l releases every tree that holds the run (each held holder's tree
// limits must be named: termination.Evaluator.CheckRaise; a tree its fleet
// holds it in, checkFleetRaise), the first refusal otherwise, and
// termination.ErrNotHeld itself when no tree holds it.
func (n *Node) CheckRaise(l termination.Limits) error {
	held := false
	for _, h := range n.holders {
		h.mu.Lock()
		var err error
		switch {
		case h.release != nil && h.limits != nil:
			held, err = true, h.limits.CheckRaise(l)
		case h.fleetCause != nil: // held by its fleet at a remote holder's limit
			held, err = true, checkFleetRaise(h.fleetCause, l)
		}
		h.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if !held {
		return termination.ErrNotHeld
	}
	return nil
}

// Raise raises by l the tree limits of every one of the run's holders
// whose tree holds it, nearest first: every held run of those trees goes
// on. Each holder's Run.Raised records its raise, naming the holder, before
// any held run goes on (§3: a raise is in the log before the run's next
// event), and raises the holder's own limits too when they hold it (a
// raise names a run, and raises every limit that holds it). It returns nil
// when it raised one, termination.ErrNotHeld when none holds the run.
func (n *Node) Raise(l termination.Limits) error {
	err := termination.ErrNotHeld
	raised := false
	for _, h := range n.holders {
		if e := h.raiseHeld(l); e == nil {
			raised = true
		} else if !errors.Is(e, errNotHolding) {
			err = e
		}
	}
	if raised {
		return nil
	}
	return err
}

// errNotHolding says that a holder's tree does not hold the run.
var errNotHolding = errors.New("the holder's tree is not held")

// raiseHeld raises h's held tree limits by l; errNotHolding when its tree
// is not held.
func (h *Node) raiseHeld(l termination.Limits) error {
	h.mu.Lock()
	if h.release == nil || h.limits == nil {
		// A run held by its fleet at a remote holder's tree limit (a
		// joined run and its descendants here) asks the holder's process
		// to raise it (Raiser); every held run of the tree goes on once
		// its fleet learns the raise.
		fc, shares := h.fleetCause, h.shares
		h.mu.Unlock()
		if fc == nil {
			return errNotHolding
		}
		if err := checkFleetRaise(fc, l); err != nil {
			return err
		}
		return raiseRemote(shares, l)
	}
	if err := h.limits.Raise(l); err != nil {
		h.mu.Unlock()
		return err
	}
	ch, holding := h.release, h.holdingM
	h.release = nil
	if h.holdTimer != nil {
		h.holdTimer.Stop()
		h.holdTimer = nil
	}
	h.mu.Unlock()
	if r, ok := holding.(Raiser); ok {
		r.RaiseTree(l) // the holding: the shared limits follow the evaluator's; it cannot fail
	}
	h.run.Raised(l) // recorded before the held runs go on
	close(ch)
	h.run.EachLive(func(r Run) { r.Release(ch) })
	return nil
}

// raiseRemote asks the holders of a joined run's trees, nearest first,
// through its fleet memberships, to raise their held tree limits by l,
// until one does.
func raiseRemote(shares []Member, l termination.Limits) error {
	err := termination.ErrNotHeld
	for _, s := range shares {
		if r, ok := s.(Raiser); ok {
			if err = r.RaiseTree(l); err == nil {
				return nil
			}
		}
	}
	return err
}

// checkFleetRaise checks a raise of a run held by its fleet at c, a
// remote holder's tree limit: it must name c's resource (the holder's
// process checks the rest). The error wraps termination.ErrNotHeld.
func checkFleetRaise(c termination.Cause, l termination.Limits) error {
	if !l.Raises(c) {
		return fmt.Errorf("%w the raise names: it is held at its tree's %s (%s), so a raise must name it",
			termination.ErrNotHeld, termination.Tag(c, nil), c.Error())
	}
	return nil
}

// holdByFleet holds a joined run and its live descendants at c, a remote
// holder's tree limit that its fleet found spent (SharedRun.HoldTree),
// until releaseByFleet.
func (n *Node) holdByFleet(c termination.Cause) {
	n.mu.Lock()
	if n.ended || n.fleetRelease != nil {
		n.mu.Unlock()
		return
	}
	ch, since := make(chan struct{}), time.Now()
	n.fleetRelease, n.fleetCause, n.fleetSince = ch, c, since
	n.mu.Unlock()
	n.run.EachLive(func(r Run) { r.HoldOn(ch, c, since) })
}

// releaseByFleet lets the runs holdByFleet held go on.
func (n *Node) releaseByFleet() {
	n.mu.Lock()
	ch := n.fleetRelease
	n.fleetRelease, n.fleetCause = nil, nil
	n.mu.Unlock()
	if ch == nil {
		return
	}
	close(ch)
	n.run.EachLive(func(r Run) { r.Release(ch) })
}

// holdExpired is a held tree's hold timeout: the holder ends with the tree
// limit's cause, its descendants with Cancelled{reason: parent}.
func (h *Node) holdExpired() {
	h.mu.Lock()
	var fired []termination.Cause
	h.limits.EndHold()
	if _, ended := h.limits.Stopped(); ended && !h.fired {
		// Ended here, or by a raise that came after the hold timeout
		// before this timer fired (termination.Evaluator.Raise).
		h.fired, fired = true, h.limits.Fired()
	}
	h.holdTimer = nil
	h.mu.Unlock()
	if fired != nil {
		h.run.StopFired(fired, false)
	}
}

// EndHold ends the run's own held tree with its limit's cause when the run
// is stopped from outside (Stop, agentstop stop), without the run's lock;
// it reports whether it did.
func (n *Node) EndHold() bool {
	n.mu.Lock()
	if n.limits == nil {
		n.mu.Unlock()
		return false
	}
	var fired []termination.Cause
	if _, ok := n.limits.EndHold(); ok && !n.fired {
		n.fired, fired = true, n.limits.Fired()
	}
	if n.holdTimer != nil {
		n.holdTimer.Stop()
		n.holdTimer = nil
	}
	n.mu.Unlock()
	return fired != nil && n.run.StopFired(fired, false)
}
