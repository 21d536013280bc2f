package redisfleet

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/internal/tree"
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

// TestTreeHoldMembers drives a held tree's members directly, across two
// Fleets: a tree that holds is never exhausted — the joined run whose
// spend reaches the limit is held (HoldTree), not stopped, and so is an
// idle joined run of another process once it reserves; a raise of the
// holding releases them (ReleaseTree) once they learn it, and a later
// spend past the raised limit holds them again; the holding's end ends
// the held runs with the detail it left with. The script never records
// an exhaustion (ex) for it.
func TestTreeHoldMembers(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		fs := treeFleets(t, r, 3)
		a, b, c := fs[0], fs[1], fs[2]
		holder := runid.New()
		var planner, worker, idle treeRun
		hm := a.HoldTree(tree.Spec{Holder: holder, Stage: "planner", Hold: time.Minute,
			Limits: termination.Limits{Has: termination.LimitIterations, Iterations: 3}}, tree.Usage{}, &planner)
		flushAll(t, a)
		jm := b.JoinTree(t.Context(), holder, &worker)
		im := c.JoinTree(t.Context(), holder, &idle)
		if jm == nil || im == nil {
			t.Fatal("a joined process did not find the tree")
		}
		defer jm.Leave(joinEnded)
		defer im.Leave(joinEnded)
		flushAll(t, b, c)
		iter := tree.Usage{Totals: termination.Totals{Iterations: 1}}
		for i := range 4 { // the 4th of 3 reaches the limit
			if stop := jm.Spend(iter); stop != nil {
				t.Fatalf("spend %d of a held tree stopped: %v", i+1, stop)
			}
		}
		eventually(t, 5*time.Second, "both joined runs are held at the tree's max_iterations", func() bool {
			return isTreeIterations(worker.heldAt()) && isTreeIterations(idle.heldAt())
		})
		if planner.heldAt() != nil || planner.stopped() != nil || worker.stopped() != nil || idle.stopped() != nil {
			t.Fatalf("a member was stopped or the holding was held by the fleet: planner %v/%v, worker %v, idle %v",
				planner.heldAt(), planner.stopped(), worker.stopped(), idle.stopped())
		}
		if h := treeRecord(t, r, a, holder); h["ex"] != "" || h["hold"] != "60000" {
			t.Errorf("record of a held tree: %v, want no ex and hold 60000", h)
		}
		eventually(t, 5*time.Second, "the holder is charged the joined spends", func() bool {
			return planner.chargedUsage().Iterations == 4
		})

		if err := hm.(tree.Raiser).RaiseTree(termination.Limits{Has: termination.LimitIterations, Iterations: 2}); err != nil {
			t.Fatalf("RaiseTree(holding) = %v", err)
		}
		eventually(t, 5*time.Second, "the joined runs are released (5 of 5 left, 4 spent)", func() bool {
			return worker.heldAt() == nil && idle.heldAt() == nil
		})
		if h := treeRecord(t, r, a, holder); h["l1"] != "5" {
			t.Errorf("the record's iterations limit after the raise = %q, want 5", h["l1"])
		}
		for range 2 { // 6 of 5: held again
			if stop := jm.Spend(iter); stop != nil {
				t.Fatalf("spend past the raised limit stopped: %v", stop)
			}
		}
		eventually(t, 5*time.Second, "held again past the raised limit", func() bool {
			return worker.heldAt() != nil && idle.heldAt() != nil
		})
		worker.mu.Lock()
		holds := worker.holds
		worker.mu.Unlock()
		if holds != 2 {
			t.Errorf("the worker was held %d times, want 2", holds)
		}

		end := cascade.ParentEnded("planner", termination.TagMaxIterations)
		hm.Leave(end)
		eventually(t, 5*time.Second, "the held runs end with the holder's end", func() bool {
			return worker.stopped() != nil && idle.stopped() != nil
		})
		for what, run := range map[string]*treeRun{"worker": &worker, "idle": &idle} {
			parentCancelled(t, what, run.stopped(), "planner ended: max_iterations")
		}
	})
}

func isTreeIterations(c termination.Cause) bool {
	mi, ok := c.(termination.MaxIterationsReached)
	return ok && mi.Scope == termination.ScopeTree
}

// TestTreeHoldLetGo: a process whose runs are held longer than the
// tree's hold timeout plus two lease periods, with no word of the
// holder's end or a raise (here the holding never ends: its process is as
// good as gone), lets them go on and does not hold them again at the
// same limits (fail-open); once the holder's limits are raised, the next
// spend past them holds them again.
func TestTreeHoldLetGo(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		const lease = 300 * time.Millisecond
		fs := treeFleets(t, r, 2, WithLease(lease), WithSyncInterval(50*time.Millisecond))
		a, b := fs[0], fs[1]
		holder := runid.New()
		var planner, worker treeRun
		hm := a.HoldTree(tree.Spec{Holder: holder, Stage: "planner", Hold: 200 * time.Millisecond,
			Limits: termination.Limits{Has: termination.LimitIterations, Iterations: 1}}, tree.Usage{}, &planner)
		defer hm.Leave(plannerEnded)
		flushAll(t, a)
		jm := b.JoinTree(t.Context(), holder, &worker)
		if jm == nil {
			t.Fatal("the joined process did not find the tree")
		}
		defer jm.Leave(joinEnded)
		iter := tree.Usage{Totals: termination.Totals{Iterations: 1}}
		spend := func(n int) {
			t.Helper()
			for range n {
				if stop := jm.Spend(iter); stop != nil {
					t.Fatalf("a spend of a held tree stopped: %v", stop)
				}
			}
		}
		spend(2) // 2 of 1
		heldAt := time.Now()
		if worker.heldAt() == nil {
			t.Fatal("the spend past the limit did not hold the joined run")
		}
		eventually(t, 5*time.Second, "the held run is let go", func() bool { return worker.heldAt() == nil })
		// heldAt is a little after the fleet's own clock of the hold: 50ms of slack.
		if waited := time.Since(heldAt); waited < 200*time.Millisecond+2*lease-50*time.Millisecond {
			t.Errorf("let go after %s, before the hold timeout and two leases", waited)
		}
		spend(1) // 3 of 1: not held again
		if worker.heldAt() != nil {
			t.Fatal("a run let go was held again at the same limits")
		}
		if err := hm.(tree.Raiser).RaiseTree(termination.Limits{Has: termination.LimitIterations, Iterations: 3}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "the joined process learns the raised limit", func() bool {
			jm.(*treeMember).sh.mu.Lock()
			defer jm.(*treeMember).sh.mu.Unlock()
			return jm.(*treeMember).sh.limits[0] == 4
		})
		spend(2) // 5 of 4: held again
		if worker.heldAt() == nil {
			t.Fatal("a spend past the raised limit did not hold the run again")
		}
		if worker.stopped() != nil {
			t.Fatalf("the joined run was stopped: %v", worker.stopped())
		}
	})
}
