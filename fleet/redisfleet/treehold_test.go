package redisfleet

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestTreeHoldAcrossFleets (§3 hold with §8 tree: limits, across
// processes): a planner holding tree: {max_iterations: 2} with hold: runs
// on one Fleet, its child on another (two processes' worth of fleets in
// one; started from a request's propagated context: WithParent would find
// the parent live in this process and link them directly). The event that
// reaches the limit holds the tree in both fleets — no run ends, both are
// listed as held; a Control raise naming the child and the child's own
// Run.Raise each raise the holder's tree limits and release both; the
// hold timeout then ends the planner with MaxIterationsReached{scope:
// tree} and the child with Cancelled{parent} naming it (from the tree's
// record, before the planner's loop finishes it).
func TestTreeHoldAcrossFleets(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Redis) {
		prefix := testPrefix(t)
		fa := newTestFleet(t, srv, WithPrefix(prefix))
		fb := newTestFleet(t, srv, WithPrefix(prefix))
		testTreeHoldAcross(t, fa, fb)
	})
}

func testTreeHoldAcross(t *testing.T, fa, fb *Fleet) {
	const hold = 2 * time.Second
	planner, err := middleware.New("planner", middleware.WithFleet(fa),
		middleware.WithPolicy(termination.MustParsePolicy("tree: {max_iterations: 2}\nhold: {timeout: 2s}")))
	if err != nil {
		t.Fatal(err)
	}
	kid, err := middleware.New("kid", middleware.WithFleet(fb))
	if err != nil {
		t.Fatal(err)
	}
	pctx, p := planner.Start(t.Context())
	t.Cleanup(func() { p.Finish(nil) })
	if err := fa.Flush(t.Context()); err != nil { // the tree's record
		t.Fatal(err)
	}
	carrier := propagation.MapCarrier{}
	middleware.Propagator().Inject(pctx, carrier)
	kctx, k := kid.Start(middleware.Propagator().Extract(t.Context(), carrier))
	t.Cleanup(func() { k.Finish(nil) })
	if k.Parent() != p.ID() {
		t.Fatalf("the child's parent is %q, want the planner %s", k.Parent(), p.ID())
	}

	observe := func(n int) {
		t.Helper()
		for range n {
			if c, stop := k.Observe(termination.Event{Kind: termination.KindMessage}); stop {
				t.Fatalf("the child stopped: %v (planner: %v)", c, context.Cause(pctx))
			}
		}
	}
	observe(3) // 3 of 2: the tree is held
	checkHeldAcross(t, fa, p, k)
	rep, err := fa.Raise(t.Context(), fleet.RaiseRequest{RunID: k.ID(), By: "test", Wait: 5 * time.Second,
		Limits: termination.Limits{Iterations: 2, Has: termination.LimitIterations}})
	if err != nil || rep.Outcome != fleet.RaiseRaised {
		t.Fatalf("Raise(the held child, in another process) = %+v, %v; want raised", rep, err)
	}
	checkReleased(t, p, k)
	observe(2) // 5 of 4: held again
	checkHeldAcross(t, fb, p, k)
	if err := k.Raise(termination.Limits{Iterations: 1, Has: termination.LimitIterations}); err != nil {
		t.Fatalf("Run.Raise of the held child = %v", err)
	}
	checkReleased(t, p, k)
	observe(1) // 6 of 5: held again, and nobody raises it
	checkHeldAcross(t, fa, p, k)

	select {
	case <-p.Done():
	case <-time.After(hold + 5*time.Second):
		t.Fatal("the held planner did not end at its hold timeout")
	}
	// The planner's loop has not finished it: its tree's record tells the
	// child's process how it ended.
	var mi termination.MaxIterationsReached
	if !errors.As(context.Cause(pctx), &mi) || mi.Scope != termination.ScopeTree || mi.Limit != 5 {
		t.Errorf("the planner's cause = %v, want MaxIterationsReached{limit: 5, scope: tree}", context.Cause(pctx))
	}
	eventually(t, 5*time.Second, "the child ends after its holder", func() bool {
		_, done := k.Cause()
		return done
	})
	var cc termination.Cancelled
	if !errors.As(context.Cause(kctx), &cc) || cc.Reason != termination.CancelParent || cc.Detail != "planner ended: max_iterations" {
		t.Errorf("the child's cause = %v, want Cancelled{parent, planner ended: max_iterations}", context.Cause(kctx))
	}
}

// checkHeldAcross checks that the runs of a tree are held at its
// max_iterations, live, and listed as held through the fleet c.
func checkHeldAcross(t *testing.T, c *Fleet, rs ...*middleware.Run) {
	t.Helper()
	for _, r := range rs {
		eventually(t, 5*time.Second, "a run of the tree is held", func() bool {
			_, _, held := r.Held()
			return held
		})
		if cause, done := r.Cause(); done {
			t.Fatalf("run %s of the held tree ended: %v", r.ID(), cause)
		}
		var mi termination.MaxIterationsReached
		if hc, _, _ := r.Held(); !errors.As(hc, &mi) || mi.Scope != termination.ScopeTree {
			t.Errorf("run %s is held at %v, want the tree's max_iterations", r.ID(), hc)
		}
		eventually(t, 5*time.Second, "a run of the tree is listed as held", func() bool {
			rs, err := c.Runs(t.Context(), fleet.Selector{RunID: r.ID()})
			return err == nil && len(rs) == 1 && rs[0].Held != nil && rs[0].Held.Limit == termination.TagMaxIterations
		})
	}
}

// checkReleased checks that the runs of a raised tree go on.
func checkReleased(t *testing.T, rs ...*middleware.Run) {
	t.Helper()
	for _, r := range rs {
		eventually(t, 5*time.Second, "a run of the raised tree goes on", func() bool {
			_, _, held := r.Held()
			return !held
		})
	}
}

// TestTreeHoldWithParentAcrossProcesses: as TestTreeHoldAcrossFleets, with
// the child in another OS process, started with WithParent and only the
// planner's id (a job queue): the child's process holds it at the tree
// limit, the operator's raise naming the child and the child's own
// Run.Raise (in its process) each raise the planner's tree limits, and the
// planner's hold timeout ends the child with Cancelled{parent} naming it.
func TestTreeHoldWithParentAcrossProcesses(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		a := newTestFleet(t, r)
		c := startChild(t, r.URL(), a.cfg.prefix, 2*time.Second)
		planner, err := middleware.New("planner", middleware.WithFleet(a),
			middleware.WithPolicy(termination.MustParsePolicy("tree: {max_iterations: 2}\nhold: {timeout: 2s}")))
		if err != nil {
			t.Fatal(err)
		}
		pctx, p := planner.Start(t.Context())
		defer p.Finish(nil)
		flushAll(t, a) // the job is queued once the planner is registered
		w := c.child("w", "worker", p.ID())

		held := func(want bool) {
			t.Helper()
			eventually(t, 5*time.Second, fmt.Sprintf("the planner and the remote child held: %v", want), func() bool {
				_, _, ph := p.Held()
				rs, err := a.Runs(t.Context(), fleet.Selector{RunID: w})
				return ph == want && err == nil && len(rs) == 1 && (rs[0].Held != nil) == want
			})
			c.notEnded("w")
			if _, done := p.Cause(); done {
				t.Fatalf("the planner ended: %v", context.Cause(pctx))
			}
		}
		if n := c.burn("w", 3, 0, 0); n != 3 { // 3 of 2: held
			t.Fatalf("the child spent %d of 3 events", n)
		}
		held(true)
		rep, err := a.Raise(t.Context(), fleet.RaiseRequest{RunID: w, By: "test", Wait: 5 * time.Second,
			Limits: termination.Limits{Iterations: 2, Has: termination.LimitIterations}})
		if err != nil || rep.Outcome != fleet.RaiseRaised {
			t.Fatalf("Raise(the remote child) = %+v, %v; want raised", rep, err)
		}
		held(false)
		if n := c.burn("w", 2, 0, 0); n != 2 { // 5 of 4: held
			t.Fatalf("the child spent %d of 2 events", n)
		}
		held(true)
		c.send("raise w 1")
		if l := c.expect("raised w ", 5*time.Second); l != "raised w ok" {
			t.Fatalf("the child's Run.Raise: %s", l)
		}
		held(false)
		if n := c.burn("w", 1, 0, 0); n != 1 { // 6 of 5: held, and nobody raises it
			t.Fatalf("the child spent %d of 1 event", n)
		}
		held(true)

		select {
		case <-p.Done():
		case <-time.After(7 * time.Second):
			t.Fatal("the held planner did not end at its hold timeout")
		}
		var mi termination.MaxIterationsReached
		if !errors.As(context.Cause(pctx), &mi) || mi.Scope != termination.ScopeTree || mi.Limit != 5 {
			t.Errorf("the planner's cause = %v, want MaxIterationsReached{limit: 5, scope: tree}", context.Cause(pctx))
		}
		p.Finish(nil)
		cc, ok := c.ended("w", 5*time.Second).(termination.Cancelled)
		if !ok || cc.Reason != termination.CancelParent || cc.Detail != "planner ended: max_iterations" {
			t.Errorf("the child's cause = %#v, want Cancelled{parent, planner ended: max_iterations}", cc)
		}
	})
}
