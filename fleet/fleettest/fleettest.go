// Package fleettest is the behavioural suite that every implementation of
// package fleet passes: the in-process [fleet.Local] and fleet/redisfleet
// run it, and so can a third-party fleet (which shares no tree limits
// across processes: that contract is internal in v0.x, so the TreesOf
// subtest skips it).
//
//	func TestSuite(t *testing.T) {
//		fleettest.Run(t, func(t *testing.T) (fleet.Fleet, fleet.Control) {
//			f := NewMyFleet(t)
//			return f, f
//		})
//	}
//
// Each subtest calls newFleet once and drives real middleware runs through
// the Fleet it returns and operator commands through the Control: registry
// visibility and figures, stop by run, stage, label and all with counts,
// the parents of a tree of runs and a stop that ends a run's descendants,
// the holders of shared trees a run lists (TreesOf), a tree: limit with
// hold: that holds the tree, is raised through a descendant and ends at
// its hold timeout,
// block, unblock and expiry, a shared budget's pressure warning and
// exhaustion across runs, its next window, and the invalid_input of a
// mismatched budget or a missing keyed label. Effects that a networked fleet delivers
// asynchronously are awaited (up to [Timeout]) rather than expected at
// once. newFleet must return a fleet that no other subtest shares (a fresh
// key prefix for a shared store), and clean it up with t.Cleanup.
package fleettest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/internal/account"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Timeout is how long the suite waits for an effect a fleet may deliver
// asynchronously (the contract allows 1 s for registry changes and blocks).
var Timeout = 5 * time.Second

// By is who the suite's stops and blocks are issued by.
const By = "fleettest@suite"

// Run runs the suite against the fleets newFleet returns, one per subtest.
func Run(t *testing.T, newFleet func(t *testing.T) (fleet.Fleet, fleet.Control)) {
	t.Helper()
	for _, tc := range []struct {
		name string
		f    func(t *testing.T, f fleet.Fleet, c fleet.Control)
	}{
		{"Registry", testRegistry},
		{"StopByRun", testStopByRun},
		{"StopByStageLabelAll", testStopBySelectors},
		{"StopLeavesLaterRuns", testStopLeavesLaterRuns},
		{"StopTree", testStopTree},
		{"TreesOf", testTreesOf},
		{"InvalidRequests", testInvalidRequests},
		{"BlockUnblock", testBlockUnblock},
		{"BlockExpiry", testBlockExpiry},
		{"BlockByLabel", testBlockByLabel},
		{"SharedBudget", testSharedBudget},
		{"BudgetMismatch", testBudgetMismatch},
		{"BudgetWindow", testBudgetWindow},
		{"Raise", testRaise},       // raise.go
		{"TreeHold", testTreeHold}, // treehold.go
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFleet(t)
			tc.f(t, f, c)
		})
	}
}

// eventually polls cond until it holds or Timeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", Timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newStage(t *testing.T, f fleet.Fleet, name string, opts ...middleware.Option) *middleware.Stage {
	t.Helper()
	s, err := middleware.New(name, append([]middleware.Option{middleware.WithFleet(f)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// start starts a run that the test drives with Observe; it is finished at
// the end of the test.
func start(t *testing.T, s *middleware.Stage, labels map[string]string) (context.Context, *middleware.Run) {
	t.Helper()
	ctx, run := s.Start(t.Context(), middleware.WithLabels(labels))
	t.Cleanup(func() { run.Finish(nil) })
	return ctx, run
}

func message(in, out int64) termination.Event {
	return termination.Event{Kind: termination.KindMessage, Source: "agent", Text: "working",
		Usage: termination.Usage{InputTokens: in, OutputTokens: out}}
}

func runs(t *testing.T, c fleet.Control, sel fleet.Selector) []fleet.RunInfo {
	t.Helper()
	rs, err := c.Runs(t.Context(), sel)
	if err != nil {
		t.Fatalf("Runs(%v): %v", sel, err)
	}
	return rs
}

func hasRun(rs []fleet.RunInfo, id string) (fleet.RunInfo, bool) {
	for _, r := range rs {
		if r.ID == id {
			return r, true
		}
	}
	return fleet.RunInfo{}, false
}

func ids(rs []fleet.RunInfo) map[string]bool {
	out := map[string]bool{}
	for _, r := range rs {
		out[r.ID] = true
	}
	return out
}

func stopped(run *middleware.Run) bool {
	select {
	case <-run.Done():
		return true
	default:
		return false
	}
}

func testRegistry(t *testing.T, f fleet.Fleet, c fleet.Control) {
	s := newStage(t, f, "fleettest_registry")
	before := time.Now().Add(-time.Minute)
	_, a := start(t, s, map[string]string{"tenant": "acme", "tier": "gold"})
	_, b := start(t, s, map[string]string{"tenant": "globex"})
	if !runid.Valid(a.ID()) || !runid.Valid(b.ID()) || a.ID() == b.ID() {
		t.Fatalf("run ids %q, %q: want two different 32-hex-digit ids", a.ID(), b.ID())
	}
	a.Observe(message(100, 20))
	a.Observe(termination.Event{Kind: termination.KindToolCall, Tool: "search"})
	a.Observe(termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 50, OutputTokens: 5}, Cost: 0.25})

	eventually(t, "both runs are listed with a's figures", func() bool {
		rs := runs(t, c, fleet.Selector{})
		ra, okA := hasRun(rs, a.ID())
		_, okB := hasRun(rs, b.ID())
		return okA && okB && ra.Iterations == 2 && ra.ToolCalls == 1 && ra.InputTokens == 150 && ra.OutputTokens == 25 && ra.Cost == 0.25
	})
	ra, _ := hasRun(runs(t, c, fleet.Selector{}), a.ID())
	if ra.Stage != "fleettest_registry" || ra.Labels["tenant"] != "acme" || ra.Labels["tier"] != "gold" {
		t.Errorf("run a listed as %+v", ra)
	}
	if ra.Host == "" || ra.PID <= 0 || ra.Started.Before(before) || ra.Started.After(time.Now().Add(time.Minute)) || ra.Updated.IsZero() {
		t.Errorf("run a: host %q, pid %d, started %v, updated %v", ra.Host, ra.PID, ra.Started, ra.Updated)
	}

	got := ids(runs(t, c, fleet.Selector{Labels: map[string]string{"tenant": "acme"}}))
	if !got[a.ID()] || got[b.ID()] {
		t.Errorf("Runs(tenant=acme) = %v, want a only", got)
	}
	got = ids(runs(t, c, fleet.Selector{RunID: b.ID()}))
	if len(got) != 1 || !got[b.ID()] {
		t.Errorf("Runs(run b) = %v, want b only", got)
	}
	if rs := runs(t, c, fleet.Selector{Stage: "fleettest_no_such_stage"}); len(rs) != 0 {
		t.Errorf("Runs(other stage) = %d runs", len(rs))
	}

	a.Finish(nil)
	eventually(t, "a finished run leaves the registry", func() bool {
		rs := runs(t, c, fleet.Selector{})
		_, okA := hasRun(rs, a.ID())
		_, okB := hasRun(rs, b.ID())
		return !okA && okB
	})
}

func checkStopCause(t *testing.T, ctx context.Context, run *middleware.Run, reason string) {
	t.Helper()
	eventually(t, "the stopped run's context is cancelled", func() bool { return stopped(run) })
	var c termination.Cancelled
	if !errors.As(context.Cause(ctx), &c) || c.Reason != termination.CancelExternal || c != (fleet.StopRequest{Reason: reason, By: By}).Cause() {
		t.Errorf("cause = %v, want Cancelled{external, %q}", context.Cause(ctx), fleet.StopRequest{Reason: reason, By: By}.Cause().Detail)
	}
}

func stop(t *testing.T, c fleet.Control, sel fleet.Selector, reason string) fleet.StopReport {
	t.Helper()
	rep, err := c.Stop(t.Context(), fleet.StopRequest{Selector: sel, Reason: reason, By: By, Wait: Timeout})
	if err != nil {
		t.Fatalf("Stop(%v): %v", sel, err)
	}
	if rep.Matched != rep.Stopped+rep.AlreadyEnded+rep.Unconfirmed {
		t.Errorf("Stop(%v) = %+v: matched is not the sum of the others", sel, rep)
	}
	return rep
}

// waitListed waits until every run is in the registry, so that a stop
// issued next can match them.
func waitListed(t *testing.T, c fleet.Control, rs ...*middleware.Run) {
	t.Helper()
	eventually(t, "the runs are listed", func() bool {
		got := ids(runs(t, c, fleet.Selector{}))
		for _, r := range rs {
			if !got[r.ID()] {
				return false
			}
		}
		return true
	})
}

func testStopByRun(t *testing.T, f fleet.Fleet, c fleet.Control) {
	s := newStage(t, f, "fleettest_stop_run")
	ctxA, a := start(t, s, nil)
	_, b := start(t, s, nil)
	waitListed(t, c, a, b)
	a.Observe(message(1, 1))

	rep := stop(t, c, fleet.Selector{RunID: a.ID()}, "runaway loop")
	if rep != (fleet.StopReport{Matched: 1, Stopped: 1}) {
		t.Errorf("Stop(run a) = %+v, want 1 matched and stopped", rep)
	}
	checkStopCause(t, ctxA, a, "runaway loop")
	if stopped(b) {
		t.Error("run b stopped too")
	}
	res := a.Finish(nil)
	if res.TerminationCause != termination.TagCancelled || res.Outcome != termination.OutcomeFailed || res.Events != 1 {
		t.Errorf("result = %s/%s after %d events", res.TerminationCause, res.Outcome, res.Events)
	}
	eventually(t, "the stopped run leaves the registry", func() bool {
		_, ok := hasRun(runs(t, c, fleet.Selector{}), a.ID())
		return !ok
	})
	// A run that has stopped but not ended still matches, and counts as
	// already ended.
	b.Stop("by hand")
	rep = stop(t, c, fleet.Selector{RunID: b.ID()}, "again")
	if rep.Matched > 1 || rep.Stopped != 0 || rep.Unconfirmed != 0 {
		t.Errorf("Stop(stopped run) = %+v, want nothing stopped", rep)
	}
	var cb termination.Cancelled
	if c, _ := b.Cause(); !errors.As(c, &cb) || cb.Detail != "by hand" {
		t.Errorf("run b's cause became %v", c)
	}
}

func testStopBySelectors(t *testing.T, f fleet.Fleet, c fleet.Control) {
	s1 := newStage(t, f, "fleettest_stop_one")
	s2 := newStage(t, f, "fleettest_stop_two")
	ctx1, r1 := start(t, s1, map[string]string{"tenant": "acme", "tier": "gold"})
	ctx2, r2 := start(t, s1, map[string]string{"tenant": "acme", "tier": "free"})
	ctx3, r3 := start(t, s2, map[string]string{"tenant": "acme", "tier": "gold"})
	ctx4, r4 := start(t, s2, map[string]string{"tenant": "globex"})
	waitListed(t, c, r1, r2, r3, r4)

	// Labels: all must match.
	rep := stop(t, c, fleet.Selector{Labels: map[string]string{"tenant": "acme", "tier": "gold"}}, "gold acme")
	if rep != (fleet.StopReport{Matched: 2, Stopped: 2}) {
		t.Errorf("Stop(tenant=acme,tier=gold) = %+v, want 2 stopped", rep)
	}
	checkStopCause(t, ctx1, r1, "gold acme")
	checkStopCause(t, ctx3, r3, "gold acme")
	if stopped(r2) || stopped(r4) {
		t.Fatal("a run outside the selector stopped")
	}
	r1.Finish(nil)
	r3.Finish(nil)
	eventually(t, "finished runs leave", func() bool { return len(runs(t, c, fleet.Selector{Labels: map[string]string{"tier": "gold"}})) == 0 })

	// Stage.
	rep = stop(t, c, fleet.Selector{Stage: "fleettest_stop_one"}, "stage one")
	if rep != (fleet.StopReport{Matched: 1, Stopped: 1}) {
		t.Errorf("Stop(stage one) = %+v, want 1 stopped", rep)
	}
	checkStopCause(t, ctx2, r2, "stage one")
	if stopped(r4) {
		t.Fatal("run 4 stopped by a stop of another stage")
	}
	r2.Finish(nil)

	// Nothing matches: not an error.
	rep = stop(t, c, fleet.Selector{Labels: map[string]string{"tenant": "nobody"}}, "none")
	if rep.Matched != 0 || rep.Stopped != 0 {
		t.Errorf("Stop(no match) = %+v", rep)
	}

	// All.
	eventually(t, "finished runs leave", func() bool { return len(runs(t, c, fleet.Selector{})) == 1 })
	rep = stop(t, c, fleet.Selector{All: true}, "everything")
	if rep != (fleet.StopReport{Matched: 1, Stopped: 1}) {
		t.Errorf("Stop(all) = %+v, want 1 stopped", rep)
	}
	checkStopCause(t, ctx4, r4, "everything")
}

// testStopTree: the registry shows each run's parent (§8), and a stop of
// a run ends its descendants with Cancelled{reason: parent} naming it and
// reports them, while a run outside the tree goes on.
func testStopTree(t *testing.T, f fleet.Fleet, c fleet.Control) {
	planner := newStage(t, f, "fleettest_planner")
	worker := newStage(t, f, "fleettest_worker")
	pctx, p := start(t, planner, nil)
	child := func(ctx context.Context) (context.Context, *middleware.Run) {
		cctx, run := worker.Start(ctx)
		t.Cleanup(func() { run.Finish(nil) })
		return cctx, run
	}
	rctx, r := child(pctx)
	gctx, g := child(rctx)
	_, other := start(t, worker, nil)
	waitListed(t, c, p, r, g, other)
	rs := runs(t, c, fleet.Selector{})
	for _, want := range []struct {
		run    *middleware.Run
		parent string
	}{{p, ""}, {r, p.ID()}, {g, r.ID()}, {other, ""}} {
		if got, _ := hasRun(rs, want.run.ID()); got.Parent != want.parent {
			t.Errorf("run %s: parent %q, want %q", want.run.ID(), got.Parent, want.parent)
		}
	}

	rep := stop(t, c, fleet.Selector{RunID: p.ID()}, "runaway tree")
	if rep != (fleet.StopReport{Matched: 1, Stopped: 1, Descendants: 2}) {
		t.Errorf("Stop(planner) = %+v, want 1 matched and stopped, 2 descendants", rep)
	}
	checkStopCause(t, pctx, p, "runaway tree")
	for _, ctx := range []context.Context{rctx, gctx} {
		var cc termination.Cancelled
		if !errors.As(context.Cause(ctx), &cc) || cc.Reason != termination.CancelParent || cc.Detail != "fleettest_planner ended: cancelled" {
			t.Errorf("a descendant's cause = %v, want Cancelled{parent, fleettest_planner ended: cancelled}", context.Cause(ctx))
		}
	}
	if stopped(other) {
		t.Error("a run outside the tree stopped")
	}
}

// testTreesOf: a fleet that shares trees (tree.Sharer) shares a holder's
// tree: limits from its start (§8, clarified 2026-11-28): the registry
// lists, with the holder and every run under it, the holders of the shared
// trees that count its events (RunInfo.Trees), and TreesOf finds them by a
// run's id, as a child started elsewhere with only that id needs; a run
// in no shared tree, an unknown run and an ended one have none.
func testTreesOf(t *testing.T, f fleet.Fleet, c fleet.Control) {
	trees, ok := f.(tree.Sharer)
	if !ok {
		t.Skip("the fleet does not share trees")
	}
	holder := newStage(t, f, "fleettest_holder", middleware.WithPolicy(termination.MustParsePolicy("tree: {max_iterations: 100}")))
	worker := newStage(t, f, "fleettest_worker")
	pctx, p := start(t, holder, nil)
	cctx, w := worker.Start(pctx)
	_, g := worker.Start(cctx)
	_, other := start(t, worker, nil)
	waitListed(t, c, p, w, g, other)
	rs := runs(t, c, fleet.Selector{})
	for _, r := range []*middleware.Run{p, w, g} {
		if got, _ := hasRun(rs, r.ID()); !slices.Equal(got.Trees, []string{p.ID()}) {
			t.Errorf("run %s lists trees %q, want the holder's [%s]", r.ID(), got.Trees, p.ID())
		}
		if got := trees.TreesOf(t.Context(), r.ID()); !slices.Equal(got, []string{p.ID()}) {
			t.Errorf("TreesOf(%s) = %q, want [%s]", r.ID(), got, p.ID())
		}
	}
	if got, _ := hasRun(rs, other.ID()); len(got.Trees) != 0 {
		t.Errorf("a run in no tree lists trees %q", got.Trees)
	}
	for what, id := range map[string]string{"a run in no tree": other.ID(), "an unknown run": runid.New()} {
		if got := trees.TreesOf(t.Context(), id); got != nil {
			t.Errorf("TreesOf(%s) = %q, want none", what, got)
		}
	}
	g.Finish(nil)
	eventually(t, "an ended run has no trees", func() bool { return trees.TreesOf(t.Context(), g.ID()) == nil })
	w.Finish(nil)
}

func testStopLeavesLaterRuns(t *testing.T, f fleet.Fleet, c fleet.Control) {
	s := newStage(t, f, "fleettest_stop_later")
	ctxA, a := start(t, s, nil)
	waitListed(t, c, a)
	stop(t, c, fleet.Selector{Stage: "fleettest_stop_later"}, "once")
	checkStopCause(t, ctxA, a, "once")
	_, b := start(t, s, nil)
	waitListed(t, c, b)
	if _, s := b.Observe(message(1, 1)); s || stopped(b) {
		t.Errorf("a run started after the stop was stopped: %v", context.Cause(b.Context()))
	}
}

func testInvalidRequests(t *testing.T, _ fleet.Fleet, c fleet.Control) {
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"stop without selector", func() error {
			_, err := c.Stop(ctx, fleet.StopRequest{Reason: "x", By: By})
			return err
		}()},
		{"stop without reason", func() error {
			_, err := c.Stop(ctx, fleet.StopRequest{Selector: fleet.Selector{Stage: "s"}, By: By})
			return err
		}()},
		{"stop with a bad label", func() error {
			_, err := c.Stop(ctx, fleet.StopRequest{Selector: fleet.Selector{Labels: map[string]string{"Bad-Name": "x"}}, Reason: "x", By: By})
			return err
		}()},
		{"stop with a bad run id", func() error {
			_, err := c.Stop(ctx, fleet.StopRequest{Selector: fleet.Selector{RunID: "nope"}, Reason: "x", By: By})
			return err
		}()},
		{"stop all and a stage", func() error {
			_, err := c.Stop(ctx, fleet.StopRequest{Selector: fleet.Selector{All: true, Stage: "s"}, Reason: "x", By: By})
			return err
		}()},
		{"block a run id", func() error {
			_, err := c.Block(ctx, fleet.BlockRequest{Selector: fleet.Selector{RunID: runid.New()}, Reason: "x", By: By})
			return err
		}()},
		{"block without selector", func() error {
			_, err := c.Block(ctx, fleet.BlockRequest{Reason: "x", By: By})
			return err
		}()},
		{"block without reason", func() error {
			_, err := c.Block(ctx, fleet.BlockRequest{Selector: fleet.Selector{Stage: "s"}, By: By})
			return err
		}()},
		{"unblock without selector", func() error {
			_, err := c.Unblock(ctx, fleet.Selector{})
			return err
		}()},
		{"stop a stage no run can have", func() error {
			_, err := c.Stop(ctx, fleet.StopRequest{Selector: fleet.Selector{Stage: "*"}, Reason: "x", By: By})
			return err
		}()},
		{"block a stage no run can have", func() error {
			_, err := c.Block(ctx, fleet.BlockRequest{Selector: fleet.Selector{Stage: "bad name!"}, Reason: "x", By: By})
			return err
		}()},
		{"list a stage no run can have", func() error {
			_, err := c.Runs(ctx, fleet.Selector{Stage: "*"})
			return err
		}()},
		{"list with a bad run id", func() error {
			_, err := c.Runs(ctx, fleet.Selector{RunID: "nope"})
			return err
		}()},
	} {
		if !errors.Is(tc.err, fleet.ErrInvalid) {
			t.Errorf("%s: err = %v, want fleet.ErrInvalid", tc.name, tc.err)
		}
	}
}

// startSkipped starts runs of s with labels until one is skipped (a block
// takes effect within a second, asynchronously in a networked fleet) and
// returns its result.
func startSkipped(t *testing.T, s *middleware.Stage, labels map[string]string) termination.Result {
	t.Helper()
	var res termination.Result
	eventually(t, "a new run is skipped", func() bool {
		_, run := s.Start(t.Context(), middleware.WithLabels(labels))
		if !stopped(run) {
			run.Finish(nil)
			return false
		}
		res = run.Finish(nil)
		return true
	})
	return res
}

// startLive starts runs of s until one is not skipped, and returns it.
func startLive(t *testing.T, s *middleware.Stage, labels map[string]string) *middleware.Run {
	t.Helper()
	var live *middleware.Run
	eventually(t, "a new run starts", func() bool {
		_, run := s.Start(t.Context(), middleware.WithLabels(labels))
		if stopped(run) {
			run.Finish(nil)
			return false
		}
		live = run
		return true
	})
	t.Cleanup(func() { live.Finish(nil) })
	return live
}

func checkBlocked(t *testing.T, res termination.Result, reason string) {
	t.Helper()
	sk, ok := res.Cause.(termination.Skipped)
	if !ok || sk.Reason != termination.SkipBlocked || !strings.Contains(sk.Detail, reason) || !strings.Contains(sk.Detail, By) {
		t.Errorf("cause = %#v, want Skipped{blocked} with %q and %q in the detail", res.Cause, reason, By)
	}
	if res.Outcome != termination.OutcomeSkipped || res.TerminationCause != termination.TagSkipped || res.Events != 0 {
		t.Errorf("result %s/%s with %d events", res.TerminationCause, res.Outcome, res.Events)
	}
}

func testBlockUnblock(t *testing.T, f fleet.Fleet, c fleet.Control) {
	s := newStage(t, f, "fleettest_block")
	other := newStage(t, f, "fleettest_block_other")
	_, live := start(t, s, nil)
	waitListed(t, c, live)
	sel := fleet.Selector{Stage: "fleettest_block"}
	b, err := c.Block(t.Context(), fleet.BlockRequest{Selector: sel, Reason: "incident 42", By: By})
	if err != nil {
		t.Fatal(err)
	}
	if !b.Selector.Equal(sel) || b.Reason != "incident 42" || b.By != By || !b.Expires.IsZero() {
		t.Errorf("Block returned %+v", b)
	}
	checkBlocked(t, startSkipped(t, s, nil), "incident 42")
	// Every later run is skipped too, and a skipped run never joins.
	_, again := s.Start(t.Context())
	if res := again.Finish(nil); res.Cause.TagValue() != termination.TagSkipped {
		t.Errorf("second run after the block: %v", res.Cause)
	}
	if r := startLive(t, other, nil); stopped(r) {
		t.Error("another stage's run was blocked")
	}
	// A block does not stop live runs.
	if stopped(live) {
		t.Errorf("the live run stopped: %v", context.Cause(live.Context()))
	}
	if _, ok := hasRun(runs(t, c, fleet.Selector{}), again.ID()); ok && again.ID() != "" {
		t.Error("a blocked run is in the registry")
	}

	bs, err := c.Blocks(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 1 || !bs[0].Selector.Equal(sel) || bs[0].Reason != "incident 42" || bs[0].By != By || bs[0].Created.IsZero() {
		t.Errorf("Blocks() = %+v", bs)
	}
	n, err := c.Unblock(t.Context(), sel)
	if err != nil || n != 1 {
		t.Fatalf("Unblock = %d, %v; want 1", n, err)
	}
	startLive(t, s, nil)
	if bs, err := c.Blocks(t.Context()); err != nil || len(bs) != 0 {
		t.Errorf("Blocks() after unblock = %+v, %v", bs, err)
	}
	if n, err := c.Unblock(t.Context(), sel); err != nil || n != 0 {
		t.Errorf("second Unblock = %d, %v; want 0", n, err)
	}
}

func testBlockExpiry(t *testing.T, f fleet.Fleet, c fleet.Control) {
	s := newStage(t, f, "fleettest_block_expiry")
	b, err := c.Block(t.Context(), fleet.BlockRequest{Selector: fleet.Selector{Stage: "fleettest_block_expiry"},
		Reason: "short", By: By, Expire: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if b.Expires.Sub(b.Created) != 2*time.Second {
		t.Errorf("block created %v expires %v, want 2s later", b.Created, b.Expires)
	}
	checkBlocked(t, startSkipped(t, s, nil), "short")
	startLive(t, s, nil) // within Timeout, once the block has expired
	eventually(t, "the expired block is no longer listed", func() bool {
		bs, err := c.Blocks(t.Context())
		return err == nil && len(bs) == 0
	})
}

func testBlockByLabel(t *testing.T, f fleet.Fleet, c fleet.Control) {
	s := newStage(t, f, "fleettest_block_label")
	sel := fleet.Selector{Labels: map[string]string{"tenant": "acme"}}
	if _, err := c.Block(t.Context(), fleet.BlockRequest{Selector: sel, Reason: "acme is over quota", By: By}); err != nil {
		t.Fatal(err)
	}
	checkBlocked(t, startSkipped(t, s, map[string]string{"tenant": "acme", "tier": "gold"}), "acme is over quota")
	startLive(t, s, map[string]string{"tenant": "globex"})
	startLive(t, s, nil)
	if n, err := c.Unblock(t.Context(), fleet.Selector{Labels: map[string]string{"tenant": "globex"}}); err != nil || n != 0 {
		t.Errorf("Unblock(another selector) = %d, %v; want 0", n, err)
	}
}

func testSharedBudget(t *testing.T, f fleet.Fleet, c fleet.Control) {
	budget := termination.FleetBudget{Key: "label:tenant", Window: time.Hour, TotalTokens: 1000, Pressure: 0.5}
	warnings := make(chan termination.Cause, 16)
	s := newStage(t, f, "fleettest_budget", middleware.WithFleetBudget(budget),
		middleware.WithOnWarning(func(_ context.Context, _ *middleware.Run, w termination.Cause) { warnings <- w }))
	acme := map[string]string{"tenant": "acme"}
	ctxA, a := start(t, s, acme)
	ctxB, b := start(t, s, acme)
	_, g := start(t, s, map[string]string{"tenant": "globex"})

	if _, st := a.Observe(message(300, 0)); st {
		t.Fatalf("stopped at 300 of 1000: %v", context.Cause(ctxA))
	}
	// 600 of 1000: pressure (0.5) crossed by b's event.
	if _, st := b.Observe(message(200, 100)); st {
		t.Fatalf("stopped at 600 of 1000: %v", context.Cause(ctxB))
	}
	isFleetPressure := func(w termination.Cause) bool {
		p, ok := w.(termination.BudgetPressure)
		return ok && p.Scope == termination.ScopeFleet && p.Resource == termination.ResourceTotalTokens && p.Threshold == 0.5 && p.Limit == 1000
	}
	eventually(t, "a fleet pressure warning reaches the warning hook", func() bool {
		select {
		case w := <-warnings:
			if !isFleetPressure(w) {
				t.Errorf("warning = %#v, want BudgetPressure{total_tokens, scope: fleet}", w)
			}
			return true
		default:
			return false
		}
	})
	g.Observe(message(900, 0)) // another tenant: its own budget
	if stopped(g) {
		t.Fatalf("globex stopped: %v", context.Cause(g.Context()))
	}

	// 1100 of 1000: exhausted; every acme run stops, globex goes on.
	a.Observe(message(400, 100))
	for _, r := range []struct {
		name string
		ctx  context.Context
		run  *middleware.Run
	}{{"a", ctxA, a}, {"b", ctxB, b}} {
		eventually(t, "run "+r.name+" stops on the exhausted shared budget", func() bool { return stopped(r.run) })
		var x termination.BudgetExhausted
		if !errors.As(context.Cause(r.ctx), &x) || x.Scope != termination.ScopeFleet || x.Resource != termination.ResourceTotalTokens || x.Limit != 1000 || x.Used < 1000 {
			t.Errorf("run %s: cause = %#v, want BudgetExhausted{total_tokens, limit 1000, scope: fleet}", r.name, context.Cause(r.ctx))
		}
	}
	if stopped(g) {
		t.Errorf("globex stopped: %v", context.Cause(g.Context()))
	}
	resA, resB := a.Finish(nil), b.Finish(nil)
	if resA.TerminationCause != termination.TagBudgetExhausted || resA.Outcome != termination.OutcomeFailed {
		t.Errorf("run a: %s/%s", resA.TerminationCause, resA.Outcome)
	}
	for name, res := range map[string]termination.Result{"a": resA, "b": resB} {
		found := false
		for _, w := range res.Warnings {
			found = found || isFleetPressure(w)
		}
		if !found {
			t.Errorf("run %s's warnings %v lack the fleet pressure warning", name, res.Warnings)
		}
	}

	// New acme runs are skipped for the rest of the window.
	eventually(t, "a new run of the exhausted budget is skipped", func() bool {
		_, run := s.Start(t.Context(), middleware.WithLabels(acme))
		res := run.Finish(nil)
		sk, ok := res.Cause.(termination.Skipped)
		return ok && sk.Reason == termination.SkipFleetBudgetExhausted && res.Outcome == termination.OutcomeSkipped
	})
	startLive(t, s, map[string]string{"tenant": "globex"})

	bs, err := c.Budgets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, bu := range bs {
		if bu.Key == "label:tenant" && bu.Value == "acme" {
			found = true
			if bu.Exhausted != termination.ResourceTotalTokens || bu.Used.Total() < 1000 || bu.Policy != budget ||
				!bu.WindowEnd.Equal(bu.WindowStart.Add(time.Hour)) || bu.WindowStart.UnixNano()%int64(time.Hour) != 0 {
				t.Errorf("acme budget = %+v", bu)
			}
		}
	}
	if !found {
		t.Errorf("Budgets() = %+v: no label:tenant=acme", bs)
	}
}

func testBudgetMismatch(t *testing.T, f fleet.Fleet, _ fleet.Control) {
	budget := termination.FleetBudget{Key: "label:tenant", Window: time.Hour, TotalTokens: 1000}
	s := newStage(t, f, "fleettest_mismatch", middleware.WithFleetBudget(budget))
	_, a := start(t, s, map[string]string{"tenant": "acme"})
	a.Observe(message(1, 1))
	if stopped(a) {
		t.Fatalf("first run stopped: %v", context.Cause(a.Context()))
	}

	other := budget
	other.TotalTokens = 2000
	s2 := newStage(t, f, "fleettest_mismatch_two", middleware.WithFleetBudget(other))
	_, b := s2.Start(t.Context(), middleware.WithLabels(map[string]string{"tenant": "acme"}))
	res := b.Finish(nil)
	if fl, ok := res.Cause.(termination.Failed); !ok || fl.Reason != termination.FailInvalidInput || !strings.Contains(fl.Err, "total_tokens") {
		t.Errorf("mismatched budget: cause = %#v, want Failed{invalid_input} naming total_tokens", res.Cause)
	}
	// The same policy on another stage shares the budget.
	s3 := newStage(t, f, "fleettest_mismatch_three", middleware.WithFleetBudget(budget))
	startLive(t, s3, map[string]string{"tenant": "acme"})

	_, c := s.Start(t.Context())
	res = c.Finish(nil)
	if fl, ok := res.Cause.(termination.Failed); !ok || fl.Reason != termination.FailInvalidInput || !strings.Contains(fl.Err, "tenant") {
		t.Errorf("missing keyed label: cause = %#v, want Failed{invalid_input} naming the label", res.Cause)
	}
}

// ClockBounder is implemented by a fleet that follows another clock than
// the process's (a server's, estimated from round trips): ClockBound says
// how far its estimate may be from that clock, which the window test
// allows between a new window by the fleet and by this process's clock,
// and nothing more. A fleet that does not implement it must follow the
// process's clock exactly.
type ClockBounder interface {
	ClockBound() time.Duration
}

func clockBound(f fleet.Fleet) time.Duration {
	if b, ok := f.(ClockBounder); ok {
		return b.ClockBound()
	}
	return 0
}

// testBudgetWindow: an exhausted budget opens again in the next window
// (fixed windows aligned to the Unix epoch).
func testBudgetWindow(t *testing.T, f fleet.Fleet, _ fleet.Control) {
	const window = 3 * time.Second
	budget := termination.FleetBudget{Key: "stage", Window: window, TotalTokens: 100}
	s := newStage(t, f, "fleettest_window", middleware.WithFleetBudget(budget))
	// Start early in a window, so that the checks below happen in it.
	for time.Now().Sub(account.WindowStart(time.Now(), window)) > window/4 {
		time.Sleep(20 * time.Millisecond)
	}
	first := account.WindowStart(time.Now(), window)
	_, a := start(t, s, nil)
	if _, st := a.Observe(message(100, 0)); !st {
		t.Fatalf("100 of 100 did not stop the run")
	}
	a.Finish(nil)
	eventually(t, "a new run in the exhausted window is skipped", func() bool {
		if !account.WindowStart(time.Now(), window).Equal(first) {
			t.Fatal("the window ended before a new run was skipped")
		}
		_, run := s.Start(t.Context())
		return skipReason(run.Finish(nil)) == termination.SkipFleetBudgetExhausted
	})
	// Windows follow the fleet's clock (a networked fleet's is its server's,
	// which it knows to within the bound it reports): allow that bound, as
	// it was before and after the run started, and nothing for load.
	bound := clockBound(f)
	r := startLive(t, s, nil) // once the next window has begun
	bound = max(bound, clockBound(f))
	if got := account.WindowStart(time.Now().Add(bound), window); !got.After(first) {
		t.Errorf("a run started in the exhausted window %v, more than the fleet's clock bound %v before its end", first, bound)
	}
	if _, st := r.Observe(message(50, 0)); st {
		t.Errorf("the new window did not start afresh: %v", context.Cause(r.Context()))
	}
}

func skipReason(res termination.Result) termination.Reason {
	if s, ok := res.Cause.(termination.Skipped); ok {
		return s.Reason
	}
	return ""
}
