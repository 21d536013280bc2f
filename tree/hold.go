package tree

import (
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

// Raise raises the tree limits of the first of the run's holders whose
// tree is held, by l: every held run of that tree goes on. It returns
// termination.ErrNotHeld when none is held.
func (n *Node) Raise(l termination.Limits) error {
	for _, h := range n.holders {
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
		h.run.Raised(l)
		h.run.EachLive(func(r Run) { r.Release(ch) })
		return nil
	}
	return termination.ErrNotHeld
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
