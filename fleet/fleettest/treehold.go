package fleettest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// testTreeHold: a tree: limit with hold: holds the tree (§3 hold, §8) —
// the holder and its descendant are held, not ended, and listed as held
// with the limit; a raise through the Control that names the descendant,
// and then one that names the holder, each raise the holder's tree limits
// and release both; at the limit again, the hold timeout ends the holder
// with the limit's cause (scope tree) and the descendant with
// Cancelled{reason: parent} naming it.
func testTreeHold(t *testing.T, f fleet.Fleet, c fleet.Control) {
	const hold = 2 * time.Second
	planner := newStage(t, f, "fleettest_holdplanner", middleware.WithPolicy(termination.MustParsePolicy(
		"tree: {max_iterations: 1}\nhold: {timeout: "+hold.String()+"}")))
	worker := newStage(t, f, "fleettest_holdworker")
	pctx, p := start(t, planner, nil)
	kctx, k := worker.Start(pctx)
	t.Cleanup(func() { k.Finish(nil) })
	waitListed(t, c, p, k)

	k.Observe(message(1, 1))
	if cause, stop := k.Observe(message(1, 1)); stop { // 2 of 1: the tree is held
		t.Fatalf("the event that reached the tree limit stopped the child: %v", cause)
	}
	checkTreeHeld(t, c, p, k)
	rep, err := c.Raise(t.Context(), fleet.RaiseRequest{RunID: k.ID(), By: By, Wait: 5 * time.Second,
		Limits: termination.Limits{Iterations: 1, Has: termination.LimitIterations}})
	if err != nil || rep.Outcome != fleet.RaiseRaised {
		t.Fatalf("Raise(the held child) = %+v, %v; want raised", rep, err)
	}
	for _, r := range []*middleware.Run{p, k} {
		if _, _, held := r.Held(); held {
			t.Errorf("run %s is still held after the raise", r.ID())
		}
	}
	if cause, stop := k.Observe(message(1, 1)); stop { // 3 of 2: held again
		t.Fatalf("the child stopped at the raised limit: %v", cause)
	}
	checkTreeHeld(t, c, p, k)
	rep, err = c.Raise(t.Context(), fleet.RaiseRequest{RunID: p.ID(), By: By, Wait: 5 * time.Second,
		Limits: termination.Limits{Iterations: 1, Has: termination.LimitIterations}})
	if err != nil || rep.Outcome != fleet.RaiseRaised {
		t.Fatalf("Raise(the held holder) = %+v, %v; want raised", rep, err)
	}
	if cause, stop := k.Observe(message(1, 1)); stop { // 4 of 3: held again
		t.Fatalf("the child stopped at the limit raised through its holder: %v", cause)
	}
	checkTreeHeld(t, c, p, k)

	// Nobody raises it again: the hold timeout ends the tree with the limit.
	select {
	case <-p.Done():
	case <-time.After(hold + Timeout):
		t.Fatal("the held holder did not end at its hold timeout")
	}
	var mi termination.MaxIterationsReached
	if !errors.As(context.Cause(pctx), &mi) || mi.Scope != termination.ScopeTree || mi.Limit != 3 {
		t.Errorf("the holder's cause = %v, want MaxIterationsReached{limit: 3, scope: tree}", context.Cause(pctx))
	}
	eventually(t, "the child ends with its holder", func() bool { return stopped(k) })
	var cc termination.Cancelled
	if !errors.As(context.Cause(kctx), &cc) || cc.Reason != termination.CancelParent ||
		cc.Detail != "fleettest_holdplanner ended: max_iterations" {
		t.Errorf("the child's cause = %v, want Cancelled{parent, fleettest_holdplanner ended: max_iterations}", context.Cause(kctx))
	}
}

// checkTreeHeld checks that every run is held at the tree limit, and
// listed so.
func checkTreeHeld(t *testing.T, c fleet.Control, rs ...*middleware.Run) {
	t.Helper()
	for _, r := range rs {
		eventually(t, "a run of the held tree is held", func() bool {
			_, _, held := r.Held()
			return held
		})
		if stopped(r) {
			t.Fatalf("run %s of the held tree ended: %v", r.ID(), context.Cause(r.Context()))
		}
		hc, _, _ := r.Held()
		var mi termination.MaxIterationsReached
		if !errors.As(hc, &mi) || mi.Scope != termination.ScopeTree {
			t.Errorf("run %s is held at %v, want the tree's max_iterations", r.ID(), hc)
		}
		eventually(t, "a run of the held tree is listed as held", func() bool {
			info, ok := hasRun(runs(t, c, fleet.Selector{RunID: r.ID()}), r.ID())
			return ok && info.Held != nil && info.Held.Limit == termination.TagMaxIterations
		})
	}
}
