package middleware_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

var finalEv = termination.Event{Kind: termination.KindFinal, Usage: termination.Usage{InputTokens: 100, OutputTokens: 10}, Cost: 0.01}

// §3: a final never fires a limit, whether the tree is in one process or
// shared through a fleet.
func TestTreeSharedFinalNeverFires(t *testing.T) {
	for _, shared := range []bool{false, true} {
		f := fleet.NewLocal()
		planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {max_iterations: 2}"))
		worker := mustStage(t, "worker", otherProcess(f))
		pctx, p := planner.Start(context.Background())
		cctx := pctx
		if shared {
			cctx, _ = crossCall(pctx)
		}
		_, w := worker.Start(cctx)
		w.Observe(msg)
		w.Observe(msg)
		c, stop := w.Observe(finalEv)
		assert.False(t, stop, "shared=%v: the final fired a tree limit: %v", shared, c)
		pc, pstop := p.Cause()
		assert.False(t, pstop, "shared=%v: holder stopped by a final: %v", shared, pc)
		w.Finish(nil)
		p.Finish(nil)
	}
}

// The event that ends a joined run by its own limit is charged to the
// holder, as in one process.
func TestTreeSharedStoppingEventCharged(t *testing.T) {
	for _, shared := range []bool{false, true} {
		f := fleet.NewLocal()
		planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {token_budget: {total: 100000}}"))
		worker := mustStage(t, "worker", otherProcess(f), policy(t, "max_iterations: 2"))
		pctx, p := planner.Start(context.Background())
		cctx := pctx
		if shared {
			cctx, _ = crossCall(pctx)
		}
		_, w := worker.Start(cctx)
		for range 3 {
			w.Observe(msg)
		}
		w.Finish(nil)
		assert.Equal(t, int64(100000-330), p.Remaining().TotalTokens, "shared=%v", shared)
		p.Finish(nil)
	}
}

// Callees join while their holder ends (-race).
func TestTreeSharedJoinRacesHolderEnd(t *testing.T) {
	for range 200 {
		f := fleet.NewLocal()
		planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {max_iterations: 100}"))
		worker := mustStage(t, "worker", otherProcess(f))
		pctx, p := planner.Start(context.Background())
		cctx, _ := crossCall(pctx)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, w := worker.Start(cctx)
				w.Finish(nil)
			}()
		}
		p.Finish(nil)
		wg.Wait()
	}
}

// A charge that comes after the holder ended does nothing: no warning, no
// hook.
func TestTreeSharedChargeAfterEnd(t *testing.T) {
	f := &holdingHooks{Local: fleet.NewLocal(), hooks: map[string]tree.SharedRun{}}
	var ended, after atomic.Bool
	planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {token_budget: {total: 1000, pressure: 0.5}}"),
		middleware.WithOnWarning(func(context.Context, *middleware.Run, termination.Cause) {
			if ended.Load() {
				after.Store(true)
			}
		}))
	pctx, p := planner.Start(context.Background())
	crossCall(pctx)
	f.mu.Lock()
	hooks := f.hooks[p.ID()]
	f.mu.Unlock()
	before := p.Finish(nil)
	ended.Store(true)
	hooks.ChargeTree(tree.Usage{Totals: termination.Totals{Tokens: termination.Usage{InputTokens: 900}}})
	assert.False(t, after.Load(), "OnWarning called after the run ended")
	assert.Equal(t, before.Warnings, p.Wait().Warnings)
}

// A joined run's Remaining is what its caller said was left, less what its
// subtree has spent since.
func TestTreeSharedJoinedRemaining(t *testing.T) {
	p, cctx, worker := sharedTree(t, "max_iterations: 10")
	_, w := worker.Start(cctx)
	for range 5 {
		w.Observe(msg)
	}
	assert.Equal(t, 5, p.Remaining().Iterations)
	assert.Equal(t, 5, w.Remaining().Iterations, "a joined run's Remaining: what was left at the call, less what it spent")
	w.Finish(nil)
	p.Finish(nil)
}

// Limits propagated to an ancestor (not its stage's own) are held and
// named too: a callee of its descendant joins them.
func TestTreeSharedPropagatedAncestorLimits(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef"
	f := fleet.NewLocal()
	gateway := mustStage(t, "gateway", middleware.WithParticipant(fleet.Membership(f)))
	planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {max_iterations: 100}"))
	worker := mustStage(t, "worker", otherProcess(f))
	gctx, g := gateway.Start(middleware.Propagator().Extract(context.Background(), propagation.MapCarrier{
		middleware.RunHeader: id, middleware.RemainingHeader: "iterations=3"}))
	pctx, p := planner.Start(gctx)
	cctx, carrier := crossCall(pctx)
	t.Logf("headers %v", carrier)
	_, w := worker.Start(cctx)
	stopped := false
	for range 10 {
		if _, stop := w.Observe(msg); stop {
			stopped = true
			break
		}
	}
	assert.True(t, stopped, "the gateway's 3 iterations bound the whole tree")
	w.Finish(nil)
	p.Finish(nil)
	g.Finish(nil)
}

// A child started from a request after its parent, a run of this process,
// ended is refused (§8).
func TestTreeSharedChildOfEndedHolder(t *testing.T) {
	p, cctx, worker := sharedTree(t, "max_iterations: 100")
	p.Finish(nil)
	_, w := worker.Start(cctx)
	c, stop := w.Cause()
	assert.True(t, stop, "child of an ended parent refused: %v", c)
	w.Finish(nil)
}

// A header that names a holder twice joins it once.
func TestTreeSharedDuplicateHolders(t *testing.T) {
	f := fleet.NewLocal()
	planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {max_iterations: 10}"))
	other := mustStage(t, "other", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {max_iterations: 10}"))
	worker := mustStage(t, "worker", otherProcess(f))
	pctx, p := planner.Start(context.Background())
	octx, o := other.Start(context.Background())
	_, c1 := crossCall(pctx)
	_, c2 := crossCall(octx)
	ctx := middleware.Propagator().Extract(context.Background(), propagation.MapCarrier{
		middleware.RunHeader: p.ID(), middleware.TreeHeader: c1[middleware.TreeHeader] + " " + c2[middleware.TreeHeader] + " " + c1[middleware.TreeHeader]})
	_, w := worker.Start(ctx)
	w.Observe(msg)
	assert.Equal(t, 9, p.Remaining().Iterations, "a holder named twice is charged once")
	w.Finish(nil)
	p.Finish(nil)
	o.Finish(nil)
}

// stopOnJoin is a fleet whose holder has just ended: the Stop hook of a
// joining run arrives (from the fleet's goroutine) as JoinTree returns.
type stopOnJoin struct {
	*fleet.Local
	wg sync.WaitGroup
}

func (s *stopOnJoin) HoldTree(tree.Spec, tree.Usage, tree.SharedRun) tree.Member {
	return nopMember{}
}

func (s *stopOnJoin) JoinTree(_ context.Context, holder string, run tree.SharedRun) tree.Member {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		run.StopTree(cascade.ParentEnded("planner", "cancelled"))
	}()
	return nopMember{}
}

type nopMember struct{}

func (nopMember) Spend(tree.Usage) termination.Cause { return nil }
func (nopMember) Warn(termination.Cause)             {}
func (nopMember) Leave(termination.Cancelled)        {}

func TestTreeSharedStopWhileJoining(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef"
	f := &stopOnJoin{Local: fleet.NewLocal()}
	worker := mustStage(t, "worker", middleware.WithParticipant(fleet.Membership(f)))
	for range 50 {
		ctx := middleware.Propagator().Extract(context.Background(), propagation.MapCarrier{
			middleware.RunHeader: id, middleware.TreeHeader: id})
		_, w := worker.Start(ctx)
		f.wg.Wait()
		w.Finish(nil)
	}
}

// BenchmarkTreeHeld: an event of a holder's child, the holder's tree not
// shared (its stage has no fleet) and shared through the in-process fleet
// (held from the holder's start, §8): what sharing a tree eagerly costs
// per event of its subtree when no other process joins it.
func BenchmarkTreeHeld(b *testing.B) {
	for _, held := range []bool{false, true} {
		b.Run(map[bool]string{false: "unheld", true: "held"}[held], func(b *testing.B) {
			f := fleet.NewLocal()
			opts := []middleware.Option{policy(b, "tree: {token_budget: {total: 1e15}, max_iterations: 2000000000}")}
			if held {
				opts = append(opts, middleware.WithParticipant(fleet.Membership(f)))
			}
			planner := mustStage(b, "planner", opts...)
			child := mustStage(b, "child", middleware.WithParticipant(fleet.Membership(f)))
			pctx, p := planner.Start(context.Background())
			_, c := child.Start(pctx)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c.Observe(msg)
			}
			b.StopTimer()
			c.Finish(nil)
			p.Finish(nil)
		})
	}
}

// Stress: many joined runs (each with in-process children, each injecting
// onward), the holder's pressure warnings and limit, the holder finishing
// mid-way.
func TestTreeSharedStress(t *testing.T) {
	f := fleet.NewLocal()
	planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {max_iterations: 3000, token_budget: {total: 100000000, pressure: 0.001}}"))
	worker := mustStage(t, "worker", otherProcess(f), policy(t, "tree: {max_iterations: 100000}"))
	leaf := mustStage(t, "leaf", otherProcess(f))
	pctx, p := planner.Start(context.Background())
	cctx, _ := crossCall(pctx)
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, w := worker.Start(cctx)
			lctx, _ := crossCall(wctx)
			_, l := leaf.Start(lctx)
			_, k := leaf.Start(wctx)
			for range 10 {
				w.Observe(msg)
				l.Observe(call)
				k.Observe(msg)
				_ = w.Remaining()
				crossCall(wctx)
			}
			k.Finish(nil)
			l.Finish(nil)
			w.Finish(nil)
		}()
		if i == 150 {
			wg.Add(1)
			go func() { defer wg.Done(); p.Finish(nil) }()
		}
	}
	wg.Wait()
	p.Finish(nil)
}
