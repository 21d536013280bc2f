package middleware_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// startPath is one of the three ways §8 makes a run another's child.
type startPath struct {
	name  string
	start func(s *middleware.Stage, parentCtx context.Context, parent *middleware.Run) (context.Context, *middleware.Run)
}

// startPaths: a context that descends from the parent's, WithParent(id)
// (a job queue that carries only the id), and a request's headers that
// the Propagator injected from the parent's context and extracted again.
var startPaths = []startPath{
	{"context", func(s *middleware.Stage, pctx context.Context, _ *middleware.Run) (context.Context, *middleware.Run) {
		return s.Start(pctx)
	}},
	{"with_parent", func(s *middleware.Stage, _ context.Context, p *middleware.Run) (context.Context, *middleware.Run) {
		return s.Start(context.Background(), middleware.WithParent(p.ID()))
	}},
	{"propagator", func(s *middleware.Stage, pctx context.Context, _ *middleware.Run) (context.Context, *middleware.Run) {
		carrier := propagation.MapCarrier{}
		middleware.Propagator().Inject(pctx, carrier)
		return s.Start(middleware.Propagator().Extract(context.Background(), carrier))
	}},
}

// TestChildOfEveryStartPathLocalFleet (§8, clarified 2026-11-28: a child
// is a child however it was started): in one process with fleet.Local,
// whichever way a child starts, a fleet stop of its parent ends it with
// Cancelled{reason: parent, detail: "planner ended: cancelled"} at once,
// with or without tree limits on the parent.
func TestChildOfEveryStartPathLocalFleet(t *testing.T) {
	for _, path := range startPaths {
		for _, tree := range []string{"", "tree: {token_budget: {total: 1000}}"} {
			name := path.name + "/no_tree"
			if tree != "" {
				name = path.name + "/tree"
			}
			t.Run(name, func(t *testing.T) {
				l := fleet.NewLocal()
				opts := []middleware.Option{middleware.WithParticipant(fleet.Membership(l))}
				if tree != "" {
					opts = append(opts, policy(t, tree))
				}
				planner := mustStage(t, "planner", opts...)
				worker := mustStage(t, "worker", middleware.WithParticipant(fleet.Membership(l)))
				pctx, p := planner.Start(context.Background())
				cctx, c := path.start(worker, pctx, p)
				require.Equal(t, p.ID(), c.Parent())
				rep, err := l.Stop(context.Background(), fleet.StopRequest{Selector: fleet.Selector{RunID: p.ID()}, Reason: "runaway", By: "ops"})
				require.NoError(t, err)
				assert.Equal(t, 1, rep.Stopped)
				select {
				case <-cctx.Done():
				case <-time.After(2 * time.Second):
					t.Fatal("the child is still running 2 s after its parent was stopped")
				}
				assert.Equal(t, parentCancel("planner", "cancelled"), c.Finish(nil).Cause)
				p.Finish(nil)
			})
		}
	}
}

// TestTreeLimitsEveryStartPathLocalFleet: in one process with fleet.Local,
// whichever way a child starts, its events count against its parent's
// tree: limits at the event that spends them (exactly): the holder ends
// with BudgetExhausted{scope: tree}, the child, whose event crossed the
// limit, with Cancelled{reason: parent} naming it.
func TestTreeLimitsEveryStartPathLocalFleet(t *testing.T) {
	for _, path := range startPaths {
		t.Run(path.name, func(t *testing.T) {
			l := fleet.NewLocal()
			planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(l)), policy(t, "tree: {token_budget: {total: 1000}}"))
			worker := mustStage(t, "worker", middleware.WithParticipant(fleet.Membership(l)))
			pctx, p := planner.Start(context.Background())
			_, c := path.start(worker, pctx, p)
			n := 0
			var cause termination.Cause
			for stop := false; !stop && n < 120; {
				n++
				cause, stop = c.Observe(msg) // 110 tokens
			}
			assert.Equal(t, 10, n, "the 10th event (1,100 tokens) crosses the tree's 1,000")
			assert.Equal(t, cascade.ParentEnded("planner", termination.TagBudgetExhausted), cause)
			pc, stopped := p.Cause()
			require.True(t, stopped)
			assert.Equal(t, termination.BudgetExhausted{Resource: termination.ResourceTotalTokens, Used: 1100, Limit: 1000, Scope: termination.ScopeTree}, pc)
			c.Finish(nil)
			p.Finish(nil)
		})
	}
}

// TestTreeSharedFromStart (§8, clarified 2026-11-28): a run that holds
// tree: limits in a stage whose fleet shares trees is held in the fleet
// when it starts, before any request names it; the registry lists the
// holder with every run of its tree (RunInfo.Trees), nearest first, and a
// run in no tree with limits, or whose stage has no fleet, holds nothing
// and lists none.
func TestTreeSharedFromStart(t *testing.T) {
	f := &holdingHooks{Local: fleet.NewLocal(), hooks: map[string]tree.SharedRun{}}
	planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {max_iterations: 100}"))
	middle := mustStage(t, "middle", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {max_tool_calls: 10}"))
	worker := mustStage(t, "worker", middleware.WithParticipant(fleet.Membership(f)))
	unshared := mustStage(t, "unshared", policy(t, "tree: {max_iterations: 100}"))
	pctx, p := planner.Start(context.Background())
	mctx, m := middle.Start(pctx)
	_, w := worker.Start(mctx)
	_, lone := worker.Start(context.Background())
	_, u := unshared.Start(context.Background())
	f.mu.Lock()
	held := make([]string, 0, len(f.hooks))
	for id := range f.hooks {
		held = append(held, id)
	}
	f.mu.Unlock()
	assert.ElementsMatch(t, []string{p.ID(), m.ID()}, held, "the holders, at their start")

	runs, err := f.Runs(context.Background(), fleet.Selector{})
	require.NoError(t, err)
	trees := map[string][]string{}
	for _, r := range runs {
		trees[r.ID] = r.Trees
	}
	assert.Equal(t, map[string][]string{
		p.ID(): {p.ID()}, m.ID(): {m.ID(), p.ID()}, w.ID(): {m.ID(), p.ID()}, lone.ID(): nil,
	}, trees)
	assert.Equal(t, []string{m.ID(), p.ID()}, f.TreesOf(context.Background(), w.ID()))
	for _, r := range []*middleware.Run{u, lone, w, m, p} {
		r.Finish(nil)
	}
}
