package redisfleet

import (
	"context"
	"fmt"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/termination"
)

// Held trees (docs/spec.md §3 hold: with tree: limits). A tree whose
// holder's stage holds (tree.Spec.Hold) is never exhausted through the
// fleet: the holder's evaluator, charged with what every process spent,
// holds the holder and its descendants of its process, and its hold
// timeout ends the holder with the limit's cause (the cascade of §8 then
// ends the descendants everywhere, naming the holder's real end). Each
// process holds its own runs of the tree (tree.SharedRun.HoldTree) while
// the usage it knows of reaches a limit — its own spend, or the settled
// usage a reserve returns — and releases them when a raise of the holder's
// limits ("traise", then a reserve) leaves room again, or when the tree's
// record is gone. A descendant's raise is sent to the holder's process as
// an operator's raise of the holder (Control.Raise).

var _ tree.Raiser = (*treeMember)(nil)

// reachedLocked returns the cause of the first limit that the usage known
// to be spent (settled at the last reserve, plus this process's since)
// reaches, nil when none. s.mu is held.
func (s *treeShare) reachedLocked() termination.Cause {
	for i, l := range s.limits {
		if known := s.settled[i] + s.used[i]; l > 0 && reachedTree(i, known, l) {
			return tree.LimitCause(treeResources[i], known, l)
		}
	}
	return nil
}

// holdTree holds the runs of this process that joined sh at c.
func (f *Fleet) holdTree(sh *treeShare, c termination.Cause) {
	for _, m := range f.treeMembers(sh) {
		m.run.HoldTree(c)
	}
}

// releaseTree lets the runs of sh that this process holds go on.
func (f *Fleet) releaseTree(sh *treeShare) {
	sh.mu.Lock()
	held := sh.heldAt != nil
	sh.heldAt = nil
	sh.mu.Unlock()
	if !held {
		return
	}
	for _, m := range f.treeMembers(sh) {
		m.run.ReleaseTree()
	}
}

// letGo lets the runs of sh that this process holds go on without word
// from the holder's process (its tree's record is gone, or the holder's
// hold timeout has long passed): they are not held again until the
// tree's limits change.
func (f *Fleet) letGo(sh *treeShare) {
	sh.mu.Lock()
	sh.heldOut = sh.heldAt != nil
	sh.mu.Unlock()
	f.releaseTree(sh)
}

// checkHolds checks the holds of the trees that hold (checkHold): with
// every sync, so that a hold that outlives its holder's word ends even
// while the server cannot be reached.
func (f *Fleet) checkHolds() {
	f.mu.Lock()
	var held []*treeShare
	for _, sh := range f.trees {
		sh.mu.Lock()
		if sh.heldAt != nil {
			held = append(held, sh)
		}
		sh.mu.Unlock()
	}
	f.mu.Unlock()
	for _, sh := range held {
		f.checkHold(sh)
	}
}

// treeMembers returns sh's joined members that can be told something
// (the holding is not: the holder's evaluator holds its tree).
func (f *Fleet) treeMembers(sh *treeShare) []*treeMember {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*treeMember, 0, len(sh.members))
	for m := range sh.members {
		if m.run != nil && !m.holding {
			out = append(out, m)
		}
	}
	return out
}

// checkHold holds or releases this process's runs of a tree that holds,
// after a reserve's answer or a raise: held while the known usage reaches
// a limit, released once it does not (a raise). Held runs whose holder has
// ended (its hold timeout, a stop) end with what the holder's record says
// its descendants end with — Cancelled{reason: parent} naming the run whose
// end started the cascade, as the ended records (§8) would end them with
// its Finish. Held past the tree's hold timeout and two lease periods with
// no word from the holder's process (it died, or cannot reach the
// server), they go on: fail-open, as for the fleet's other faults.
func (f *Fleet) checkHold(sh *treeShare) {
	sh.mu.Lock()
	if sh.hold <= 0 || sh.exhausted != nil {
		sh.mu.Unlock()
		return
	}
	c := sh.reachedLocked()
	var end termination.Cause
	if sh.heldAt != nil && sh.ended && sh.endedWith != "" {
		end = termination.Cancelled{Reason: termination.CancelParent, Detail: sh.endedWith}
	}
	hold := c != nil && sh.heldAt == nil && !sh.ended && !sh.heldOut
	release := sh.heldAt != nil && !sh.ended && c == nil
	expired := sh.heldAt != nil && !sh.ended && time.Since(sh.heldSince) > sh.hold+2*f.cfg.lease
	if hold {
		sh.heldAt, sh.heldSince = c, time.Now()
	}
	sh.mu.Unlock()
	if expired && !release {
		f.letGo(sh)
		return
	}
	switch {
	case end != nil:
		for _, m := range f.treeMembers(sh) {
			m.run.StopTree(end)
		}
	case hold:
		f.holdTree(sh, c)
	case release:
		f.releaseTree(sh)
	}
}

// treeNews handles "traise HOLDER" (the holder's limits were raised),
// "thold HOLDER" (the tree's settled usage reached a limit of a tree that
// holds) and "tend HOLDER" (the holder of a tree that holds has ended):
// this process reserves at once to learn what changed. Only what the
// reserve reads counts, never the message.
func (f *Fleet) treeNews(esc string) {
	f.mu.Lock()
	sh := f.trees[esc]
	f.mu.Unlock()
	if sh == nil {
		return
	}
	sh.pending.Store(true)
	f.poke()
}

// RaiseTree implements tree.Raiser. On the holding, the holder's
// evaluator has raised its tree limits by l: the shared limits follow
// (the next reserve, at once, stores them and announces the raise) and
// this process's joined runs go on when the known usage is below them. On
// a joined member, the raise goes to the holder's process as an
// operator's raise of the holder (stored and published under {raises}, so
// the application's ACL user must be allowed to write raises), and waits
// for its confirmation (up to the operator's default wait, 2 s).
func (m *treeMember) RaiseTree(l termination.Limits) error {
	sh, f := m.sh, m.f
	if sh == nil {
		return termination.ErrNotHeld
	}
	if !m.holding {
		return f.raiseHolder(sh.holder, l)
	}
	add := limitsOf(l)
	sh.mu.Lock()
	limits := sh.limits
	for i := range limits {
		if limits[i] > 0 {
			limits[i] += add[i]
		}
	}
	sh.setLimits(limits, f.cfg.leaseFraction)
	sh.full, sh.heldOut = [nTree]bool{}, false
	sh.mu.Unlock()
	f.checkHold(sh)
	sh.pending.Store(true)
	f.poke()
	return nil
}

// raiseHolder asks the process of holder, a run held at its tree limits,
// to raise them by l.
func (f *Fleet) raiseHolder(holder string, l termination.Limits) error {
	if f.closed.Load() {
		return fmt.Errorf("raise of the tree holder %s: the fleet is closed: %w", holder, termination.ErrNotHeld)
	}
	rep, err := f.Raise(context.Background(), fleet.RaiseRequest{RunID: holder, Limits: l})
	switch {
	case err != nil:
		return fmt.Errorf("raise of the tree holder %s: %v: %w", holder, err, termination.ErrNotHeld)
	case rep.Outcome != fleet.RaiseRaised:
		return fmt.Errorf("raise of the tree holder %s: %s: %w", holder, rep.Outcome, termination.ErrNotHeld)
	}
	return nil
}
