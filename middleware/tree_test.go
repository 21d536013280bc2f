package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

var (
	msg  = termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 100, OutputTokens: 10}, Cost: 0.01}
	call = termination.Event{Kind: termination.KindToolCall, Tool: "search", Args: []byte(`{"q":1}`)}
	fin  = termination.Event{Kind: termination.KindFinal, Usage: termination.Usage{InputTokens: 100, OutputTokens: 10}, Cost: 0.01}
)

func parentCancel(stage, tag string) termination.Cause {
	return termination.Cancelled{Reason: termination.CancelParent, Detail: stage + " ended: " + tag}
}

// TestTreeRules: each rule of §8 in one process, as a table: a planner (P)
// with a researcher (R) under it and a worker (W) under the researcher;
// steps drive them; the causes are checked.
func TestTreeRules(t *testing.T) {
	type runs struct{ p, r, w *middleware.Run }
	cases := []struct {
		name    string
		planner string // the planner stage's policy
		steps   func(t *testing.T, x runs)
		want    [3]termination.Cause // P, R, W
	}{
		{
			name:    "a planner's end cancels its descendants, naming the planner",
			planner: "max_iterations: 1",
			steps: func(t *testing.T, x runs) {
				x.p.Observe(msg)
				_, stop := x.p.Observe(msg)
				require.True(t, stop)
			},
			want: [3]termination.Cause{termination.MaxIterationsReached{Limit: 1, Count: 2},
				parentCancel("planner", "max_iterations"), parentCancel("planner", "max_iterations")},
		},
		{
			name:    "a natural end cascades too",
			planner: "{}",
			steps:   func(t *testing.T, x runs) { x.p.Finish(nil) },
			want: [3]termination.Cause{termination.NaturalCompletion{},
				parentCancel("planner", "natural_completion"), parentCancel("planner", "natural_completion")},
		},
		{
			name:    "an external stop cascades as cancelled",
			planner: "{}",
			steps:   func(t *testing.T, x runs) { x.p.Stop("operator") },
			want: [3]termination.Cause{termination.Cancelled{Reason: termination.CancelExternal, Detail: "operator"},
				parentCancel("planner", "cancelled"), parentCancel("planner", "cancelled")},
		},
		{
			name:    "a researcher's failure never ends its planner",
			planner: "{}",
			steps: func(t *testing.T, x runs) {
				x.r.Finish(errors.New("boom"))
				x.p.Observe(msg)
			},
			want: [3]termination.Cause{termination.NaturalCompletion{},
				termination.Failed{Reason: termination.FailStreamError, Err: "boom"}, parentCancel("researcher", "failed")},
		},
		{
			name:    "tree max_tool_calls rolls up from depth 2 and cancels the crossing run",
			planner: "tree: {max_tool_calls: 3}",
			steps: func(t *testing.T, x runs) {
				x.p.Observe(call)
				x.r.Observe(call)
				x.w.Observe(call)
				c, stop := x.w.Observe(call)
				require.True(t, stop, "the crossing event stops the run that made it")
				assert.Equal(t, parentCancel("planner", "max_tool_calls"), c)
			},
			want: [3]termination.Cause{termination.MaxToolCallsReached{Limit: 3, Count: 4, Scope: termination.ScopeTree},
				parentCancel("planner", "max_tool_calls"), parentCancel("planner", "max_tool_calls")},
		},
		{
			name:    "tree token budget",
			planner: "tree: {token_budget: {total: 300}}",
			steps: func(t *testing.T, x runs) {
				x.w.Observe(msg)
				x.r.Observe(msg)
				_, stop := x.w.Observe(msg)
				require.True(t, stop)
			},
			want: [3]termination.Cause{termination.BudgetExhausted{Resource: termination.ResourceTotalTokens, Used: 330, Limit: 300, Scope: termination.ScopeTree},
				parentCancel("planner", "budget_exhausted"), parentCancel("planner", "budget_exhausted")},
		},
		{
			name:    "a final event never fires a tree limit; the next event does",
			planner: "tree: {cost_budget: {limit: 0.02}}",
			steps: func(t *testing.T, x runs) {
				x.r.Observe(msg)
				_, stop := x.w.Observe(fin)
				require.False(t, stop, "final")
				_, stop = x.p.Observe(termination.Event{Kind: termination.KindToolResult, Tool: "search"})
				require.True(t, stop)
			},
			want: [3]termination.Cause{termination.BudgetExhausted{Resource: termination.ResourceCost, Used: 0.02, Limit: 0.02, Scope: termination.ScopeTree},
				parentCancel("planner", "budget_exhausted"), parentCancel("planner", "budget_exhausted")},
		},
		{
			name:    "the run's own policy first: its own limit is its cause",
			planner: "tree: {max_iterations: 2}",
			steps: func(t *testing.T, x runs) {
				x.w.Observe(msg)
				x.w.Observe(msg)
				c, stop := x.w.Observe(msg) // the worker's own max_iterations: 2 and the tree's fire
				require.True(t, stop)
				assert.Equal(t, termination.MaxIterationsReached{Limit: 2, Count: 3}, c)
			},
			want: [3]termination.Cause{termination.MaxIterationsReached{Limit: 2, Count: 3, Scope: termination.ScopeTree},
				parentCancel("planner", "max_iterations"), termination.MaxIterationsReached{Limit: 2, Count: 3}},
		},
		{
			name:    "a tree timeout fires from a timer",
			planner: "tree: {timeout: 30ms}",
			steps: func(t *testing.T, x runs) {
				select {
				case <-x.w.Done():
				case <-time.After(5 * time.Second):
					t.Fatal("tree timeout did not fire")
				}
			},
			want: [3]termination.Cause{termination.Timeout{Limit: 30 * time.Millisecond, Elapsed: 30 * time.Millisecond, Scope: termination.ScopeTree},
				parentCancel("planner", "timeout"), parentCancel("planner", "timeout")},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			planner := mustStage(t, "planner", policy(t, c.planner))
			researcher := mustStage(t, "researcher")
			worker := mustStage(t, "worker", policy(t, "max_iterations: 2"))
			pctx, p := planner.Start(context.Background())
			rctx, r := researcher.Start(pctx)
			wctx, w := worker.Start(rctx)
			assert.Equal(t, p.ID(), r.Parent())
			assert.Equal(t, r.ID(), w.Parent())
			assert.Equal(t, "", p.Parent())
			c.steps(t, runs{p, r, w})
			got := [3]termination.Result{p.Finish(nil), r.Finish(nil), w.Finish(nil)}
			for i, res := range got {
				want := c.want[i]
				assert.Equal(t, want, res.Cause, "run %d", i)
				if to, ok := want.(termination.Timeout); ok {
					assert.GreaterOrEqual(t, res.Duration, to.Limit, "run %d: the timer fired at the limit, not before", i)
				}
			}
			assert.Equal(t, p.ID(), got[1].Parent)
			assert.Equal(t, r.ID(), got[2].Parent)
			for i, ctx := range []context.Context{pctx, rctx, wctx} {
				assert.Error(t, ctx.Err(), "run %d's context", i)
				assert.Equal(t, got[i].Cause, context.Cause(ctx), "run %d's context cause", i)
			}
		})
	}
}

func TestTreeLateChildIsSkipped(t *testing.T) {
	planner := mustStage(t, "planner", policy(t, "max_iterations: 1"))
	child := mustStage(t, "child")
	pctx, p := planner.Start(context.Background())
	p.Observe(msg)
	p.Observe(msg) // stops the planner
	cctx, c := child.Start(pctx)
	assert.Error(t, cctx.Err())
	res := c.Finish(nil)
	assert.Equal(t, termination.Skipped{Reason: termination.SkipParentEnded, Detail: "planner ended: max_iterations"}, res.Cause)
	assert.Equal(t, termination.OutcomeSkipped, res.Outcome)
	assert.Equal(t, p.ID(), res.Parent)
	p.Finish(nil)
	// A finished planner refuses children too.
	_, c = child.Start(pctx)
	assert.Equal(t, termination.Skipped{Reason: termination.SkipParentEnded, Detail: "planner ended: max_iterations"}, c.Finish(nil).Cause)
}

func TestTreeWithParent(t *testing.T) {
	planner := mustStage(t, "planner")
	child := mustStage(t, "child")
	_, p := planner.Start(context.Background())
	// By id, from a context that carries no run: a child all the same.
	_, c := child.Start(context.Background(), middleware.WithParent(p.ID()))
	assert.Equal(t, p.ID(), c.Parent())
	p.Stop("done")
	assert.Equal(t, parentCancel("planner", "cancelled"), c.Finish(nil).Cause)
	p.Finish(nil)

	// By id, after the parent finished: a late child.
	_, late := child.Start(context.Background(), middleware.WithParent(p.ID()))
	assert.Equal(t, termination.Skipped{Reason: termination.SkipParentEnded, Detail: "planner ended: cancelled"}, late.Finish(nil).Cause)

	// A parent in another process: recorded, nothing more.
	const remote = "0123456789abcdef0123456789abcdef"
	rec := &fakeRecorder{}
	child = mustStage(t, "child", middleware.WithParticipant(rec))
	_, c = child.Start(context.Background(), middleware.WithParent(remote))
	assert.Equal(t, remote, c.Parent())
	res := c.Finish(nil)
	assert.Equal(t, termination.NaturalCompletion{}, res.Cause)
	assert.Equal(t, remote, res.Parent)
	assert.Equal(t, remote, rec.only(t).info.ParentRunID)
	assert.Equal(t, c.ID(), rec.only(t).info.RunID)
}

// TestTreePressureWarnsEveryLiveDescendant: a tree pressure warning goes
// to the holder and every live descendant, at once in their results and
// through the warning hook with their next event.
func TestTreePressureWarnsEveryLiveDescendant(t *testing.T) {
	var mu sync.Mutex
	hooked := map[string]int{}
	hook := func(stage string) middleware.Option {
		return middleware.WithOnWarning(func(_ context.Context, _ *middleware.Run, c termination.Cause) {
			if bp, ok := c.(termination.BudgetPressure); ok && bp.Scope == termination.ScopeTree {
				mu.Lock()
				hooked[stage]++
				mu.Unlock()
			}
		})
	}
	planner := mustStage(t, "planner", policy(t, "tree: {token_budget: {total: 1000, pressure: 0.5}}"), hook("planner"))
	researcher := mustStage(t, "researcher", hook("researcher"))
	pctx, p := planner.Start(context.Background())
	r1ctx, r1 := researcher.Start(pctx)
	_, r2 := researcher.Start(pctx)
	_, w := researcher.Start(r1ctx)
	done := researcher.Skip(pctx, "not needed") // ended: gets nothing
	require.Equal(t, termination.OutcomeSkipped, done.Outcome)
	for range 4 {
		r2.Observe(msg) // 440 tokens
	}
	_, stop := w.Observe(msg) // 550: crosses 0.5
	require.False(t, stop)
	want := termination.BudgetPressure{Resource: termination.ResourceTotalTokens, Threshold: 0.5, Used: 550, Limit: 1000, Scope: termination.ScopeTree}
	for _, run := range []*middleware.Run{p, r1, r2} {
		run.Observe(termination.Event{Kind: termination.KindToolResult}) // delivers to the hook
	}
	for i, run := range []*middleware.Run{p, r1, r2, w} {
		res := run.Finish(nil)
		assert.Contains(t, res.Warnings, termination.Cause(want), "run %d", i)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{"planner": 1, "researcher": 3}, hooked)
}

func TestTreeRemainingAndCharge(t *testing.T) {
	planner := mustStage(t, "planner", policy(t, `{max_iterations: 10, tree: {max_iterations: 5, token_budget: {total: 1000}, cost_budget: {limit: 1}, timeout: 1h}}`))
	child := mustStage(t, "child", policy(t, "token_budget: {total: 200}"))
	pctx, p := planner.Start(context.Background())
	_, c := child.Start(pctx)
	p.Observe(msg)
	c.Observe(msg)
	left := c.Remaining()
	assert.Equal(t, termination.LimitIterations|termination.LimitTotalTokens|termination.LimitCost|termination.LimitTime, left.Has)
	assert.Equal(t, 3, left.Iterations, "the tree's 5 less 2")
	assert.Equal(t, int64(90), left.TotalTokens, "the child's own 200 less 110 is less than the tree's 780")
	assert.InDelta(t, 0.98, left.Cost, 1e-9)
	assert.True(t, left.Time > 59*time.Minute && left.Time <= time.Hour, "%s", left.Time)
	pl := p.Remaining()
	assert.Equal(t, 3, pl.Iterations, "the planner's own 9 left is more than the tree's 3")
	assert.Equal(t, int64(780), pl.TotalTokens)

	// A remote callee's usage, charged when the call returns: counted by
	// the tree limits, not by the child's own.
	c.Charge(termination.Usage{InputTokens: 500}, 0.5)
	assert.Equal(t, int64(280), p.Remaining().TotalTokens)
	assert.Equal(t, int64(90), c.Remaining().TotalTokens)
	c.Charge(termination.Usage{InputTokens: -1}, 0) // ignored
	c.Charge(termination.Usage{}, 0.6)              // exhausts the tree's cost
	assert.Equal(t, termination.BudgetExhausted{Resource: termination.ResourceCost, Used: 1.12, Limit: 1, Scope: termination.ScopeTree}, roundCost(p.Finish(nil).Cause))
	assert.Equal(t, parentCancel("planner", "budget_exhausted"), c.Finish(nil).Cause)

	// Without limits anywhere, nothing is limited.
	_, lone := child.Start(context.Background())
	assert.Equal(t, termination.LimitTotalTokens, lone.Remaining().Has)
	lone.Charge(termination.Usage{InputTokens: 10}, 0) // nothing to charge: no tree
	assert.Equal(t, termination.NaturalCompletion{}, lone.Finish(nil).Cause)
}

func roundCost(c termination.Cause) termination.Cause {
	if b, ok := c.(termination.BudgetExhausted); ok {
		b.Used = float64(int(b.Used*100+0.5)) / 100
		return b
	}
	return c
}

// TestTreeFinishedChildrenHoldNoMemory: a parent with 10,000 finished
// children holds nothing for them: every child is garbage once finished.
func TestTreeFinishedChildrenHoldNoMemory(t *testing.T) {
	planner := mustStage(t, "planner", policy(t, "tree: {max_tool_calls: 1000000}"))
	child := mustStage(t, "child")
	pctx, p := planner.Start(context.Background())
	refs := make([]weak.Pointer[middleware.Run], 0, 10000)
	for range 10000 {
		_, c := child.Start(pctx)
		c.Observe(call)
		c.Finish(nil)
		refs = append(refs, weak.Make(c))
	}
	runtime.GC()
	runtime.GC()
	alive := 0
	for _, ref := range refs {
		if ref.Value() != nil {
			alive++
		}
	}
	assert.Zero(t, alive, "finished children still reachable")
	_, c := child.Start(pctx)
	assert.Equal(t, 1000000-10000, c.Remaining().ToolCalls, "the children's calls were counted")
	c.Finish(nil)
	p.Finish(nil)
}

// TestTreeConcurrentChildren: thousands of children on their own
// goroutines spend one tree budget; the tree stops once, every child ends
// with the planner's cause or its own, and nothing races or deadlocks
// (run with -race).
func TestTreeConcurrentChildren(t *testing.T) {
	planner := mustStage(t, "planner", policy(t, "tree: {max_tool_calls: 3000, token_budget: {total: 100000000, pressure: 0.5}}"))
	child := mustStage(t, "child")
	pctx, p := planner.Start(context.Background())
	const n = 2000
	var wg sync.WaitGroup
	results := make([]termination.Result, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, c := child.Start(pctx)
			gctx, g := child.Start(ctx) // a grandchild too
			for range 3 {
				c.Observe(call)
				g.Observe(msg)
			}
			_ = gctx
			g.Finish(nil)
			results[i] = c.Finish(nil)
		}()
	}
	wg.Wait()
	pres := p.Finish(nil)
	assert.Equal(t, termination.MaxToolCallsReached{Limit: 3000, Count: 3001, Scope: termination.ScopeTree}, pres.Cause)
	cancelled := 0
	for _, r := range results {
		switch r.Cause {
		case parentCancel("planner", "max_tool_calls"), termination.Cause(termination.Skipped{Reason: termination.SkipParentEnded, Detail: "planner ended: max_tool_calls"}):
			cancelled++
		case termination.NaturalCompletion{}:
		default:
			t.Fatalf("child cause %v", r.Cause)
		}
	}
	assert.Positive(t, cancelled)
}

func TestTreeLimitsOption(t *testing.T) {
	_, err := middleware.New("s", middleware.WithTreeLimits(termination.StallLimits{Repeats: 3}))
	require.Error(t, err)
	assert.ErrorContains(t, err, "WithTreeLimits")
	assert.ErrorContains(t, err, "not a tree limit")

	_, err = middleware.New("s", middleware.WithTreeLimits(termination.TokenLimits{Total: -1}))
	assert.ErrorContains(t, err, "tree.token_budget.total")

	s := mustStage(t, "s", middleware.WithTreeLimits(termination.ToolCallLimits{Limit: 1}), middleware.WithTreeLimits(nil))
	_, r := s.Start(context.Background())
	r.Observe(call)
	_, stop := r.Observe(call)
	require.True(t, stop)
	res := r.Finish(nil)
	assert.Equal(t, termination.MaxToolCallsReached{Limit: 1, Count: 2, Scope: termination.ScopeTree}, res.Cause)
	assert.Equal(t, 2, res.StoppedAt, "the holder's own event crossed it")
}

// TestTreeCascadeEndsForwardedChildren: children fed by Forward (a
// goroutine each, owned by the run) end when their planner is stopped,
// their producers see their contexts cancelled, and every goroutine exits
// (goleak, TestMain).
func TestTreeCascadeEndsForwardedChildren(t *testing.T) {
	planner := mustStage(t, "planner")
	child := mustStage(t, "child", shortDrain)
	pctx, p := planner.Start(context.Background())
	const n = 100
	var wg sync.WaitGroup
	results := make([]termination.Result, n)
	started := make(chan struct{}, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, run := child.Start(pctx)
			in := make(chan termination.Event)
			go func() { // the loop: produces until its context ends
				defer close(in)
				for {
					select {
					case in <- msg:
					case <-ctx.Done():
						return
					}
				}
			}()
			first := true
			for range middleware.Forward(run, in, identity) {
				if first {
					started <- struct{}{}
					first = false
				}
			}
			results[i] = run.Wait()
		}()
	}
	for range n {
		<-started
	}
	p.Stop("enough")
	wg.Wait()
	for i, r := range results {
		require.Equal(t, parentCancel("planner", "cancelled"), r.Cause, "child %d", i)
	}
	p.Finish(nil)
}

// TestTreeDeadline: a run's context reports the earliest of its own
// timeout, its tree timeout and its ancestors' (through the caller's
// deadline), and a remote parent's propagated time.
func TestTreeDeadline(t *testing.T) {
	planner := mustStage(t, "planner", policy(t, "{timeout: 1h, tree: {timeout: 1m}}"))
	child := mustStage(t, "child", policy(t, "timeout: 2h"))
	start := time.Now()
	pctx, p := planner.Start(context.Background())
	d, ok := pctx.Deadline()
	require.True(t, ok)
	assert.WithinDuration(t, start.Add(time.Minute), d, 5*time.Second, "the tree's timeout")
	cctx, c := child.Start(pctx)
	cd, ok := cctx.Deadline()
	require.True(t, ok)
	assert.WithinDuration(t, d, cd, 5*time.Second, "the planner's tree timeout holds for the child")
	c.Finish(nil)
	p.Finish(nil)

	remote := middleware.Propagator().Extract(context.Background(),
		propagation.MapCarrier{"agentstop-run": "0123456789abcdef0123456789abcdef", "agentstop-remaining": "time=30s"})
	rctx, r := child.Start(remote)
	rd, ok := rctx.Deadline()
	require.True(t, ok)
	assert.WithinDuration(t, time.Now().Add(30*time.Second), rd, 5*time.Second, "the propagated time")
	r.Finish(nil)
}

// TestWarningHookNamesTheRun (issue 29): one stage's hook serves many runs,
// and a tree's pressure warning reaches every live run of the tree: the
// hook is given the run that warned, so two runs of one stage are told
// apart.
func TestWarningHookNamesTheRun(t *testing.T) {
	var mu sync.Mutex
	hooked := map[string][]string{} // run id -> the warnings' tags
	hook := middleware.WithOnWarning(func(ctx context.Context, run *middleware.Run, c termination.Cause) {
		assert.Same(t, run, middleware.RunFromContext(ctx), "ctx is the run's context")
		mu.Lock()
		hooked[run.ID()] = append(hooked[run.ID()], termination.Tag(c, nil))
		mu.Unlock()
	})
	planner := mustStage(t, "planner", policy(t, "tree: {token_budget: {total: 1000, pressure: 0.5}}"), hook)
	researcher := mustStage(t, "researcher", hook)
	pctx, p := planner.Start(context.Background())
	_, a := researcher.Start(pctx)
	_, b := researcher.Start(pctx)
	a.Observe(termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 600}})
	// The warning is recorded on the planner and b at once; each one's
	// hook runs with its next event.
	b.Observe(termination.Event{Kind: termination.KindMessage})
	p.Observe(termination.Event{Kind: termination.KindMessage})
	for _, r := range []*middleware.Run{a, b, p} {
		r.Finish(nil)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string][]string{a.ID(): {"budget_pressure"}, b.ID(): {"budget_pressure"}, p.ID(): {"budget_pressure"}}
	assert.Equal(t, want, hooked, "each run's warning is told by its run")
	assert.NotEqual(t, a.ID(), b.ID())
}

// TestHolderResultShowsTheTreesTotals (issue 29): a holder's Result shows
// what its tree spent beside its own totals — the figures its tree cause
// names — in Go and in JSON; a run that holds no tree limits has none.
func TestHolderResultShowsTheTreesTotals(t *testing.T) {
	planner := mustStage(t, "planner", policy(t, "tree: {token_budget: {total: 15000}, max_tool_calls: 100}"))
	researcher := mustStage(t, "researcher")
	pctx, p := planner.Start(context.Background())
	spend := func(r *middleware.Run, kind termination.Kind, in, out int64, cost float64) bool {
		_, stop := r.Observe(termination.Event{Kind: kind, Tool: "search", Usage: termination.Usage{InputTokens: in, OutputTokens: out}, Cost: cost})
		return stop
	}
	require.False(t, spend(p, termination.KindMessage, 1000, 200, 0.01))
	_, a := researcher.Start(pctx)
	_, b := researcher.Start(pctx)
	require.False(t, spend(a, termination.KindToolCall, 0, 0, 0))
	require.False(t, spend(a, termination.KindMessage, 6000, 500, 0.1))
	require.False(t, spend(b, termination.KindToolCall, 0, 0, 0))
	require.True(t, spend(b, termination.KindMessage, 7000, 630, 0.2), "15330 of 15000: the tree budget fires")
	res := p.Finish(nil)
	want := termination.BudgetExhausted{Resource: termination.ResourceTotalTokens, Used: 15330, Limit: 15000, Scope: termination.ScopeTree}
	require.Equal(t, want, res.Cause)
	assert.Equal(t, termination.Usage{InputTokens: 1000, OutputTokens: 200}, res.Tokens, "the run's own")
	require.NotNil(t, res.Tree)
	assert.Equal(t, 3, res.Tree.Iterations)
	assert.Equal(t, 2, res.Tree.ToolCalls)
	assert.Equal(t, termination.Usage{InputTokens: 14000, OutputTokens: 1330}, res.Tree.Tokens)
	assert.Equal(t, want.Used, float64(res.Tree.Tokens.Total()), "the tree's totals are what the cause says was used")
	assert.InDelta(t, 0.31, res.Tree.Cost, 1e-9)

	js, err := json.Marshal(res)
	require.NoError(t, err)
	assert.Contains(t, string(js), `"tokens":{"input":1000,"output":200},"cost":0.01,`)
	assert.Contains(t, string(js), `"tree":{"iterations":3,"tool_calls":2,"tokens":{"input":14000,"output":1330},"cost":0.31`)
	var back termination.Result
	require.NoError(t, json.Unmarshal(js, &back))
	assert.Equal(t, res.Tree, back.Tree)

	for _, r := range []*middleware.Run{a, b} {
		res := r.Finish(nil)
		assert.Nil(t, res.Tree, "a run that holds no tree limits")
		js, err := json.Marshal(res)
		require.NoError(t, err)
		assert.NotContains(t, string(js), `"tree"`)
	}
}

// TestWarningHookAtTheRunsEnd: a warning recorded on a run by another run's
// event (a tree's pressure) or from outside (a fleet's) reaches the run's
// warning hook with its next event, or at its end when none comes (Run.Warn;
// WithOnWarning: every warning of a run): a planner waiting on its
// sub-agents, a sub-agent blocked in a tool call, is told too.
func TestWarningHookAtTheRunsEnd(t *testing.T) {
	var mu sync.Mutex
	hooked := map[string][]termination.Cause{}
	hook := middleware.WithOnWarning(func(_ context.Context, run *middleware.Run, c termination.Cause) {
		mu.Lock()
		hooked[run.ID()] = append(hooked[run.ID()], c)
		mu.Unlock()
	})
	planner := mustStage(t, "planner", policy(t, "tree: {token_budget: {total: 1000, pressure: 0.5}}"), hook)
	researcher := mustStage(t, "researcher", hook)
	pctx, p := planner.Start(context.Background())
	_, a := researcher.Start(pctx)
	_, b := researcher.Start(pctx)
	b.Observe(termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 600}})
	want := []termination.Cause{termination.BudgetPressure{Resource: termination.ResourceTotalTokens, Threshold: 0.5, Used: 600, Limit: 1000, Scope: termination.ScopeTree}}
	for _, r := range []*middleware.Run{b, a, p} {
		res := r.Finish(nil)
		assert.Equal(t, want, res.Warnings)
		mu.Lock()
		assert.Equal(t, want, hooked[r.ID()], "%s: the hook has every warning of the run's result", r.Stage().Name())
		mu.Unlock()
	}
}

// TestWarningHookBeforeWaitReturns: a warning that no event delivered
// reaches the hook before the run ends, so that Wait (here after a Forward
// consumer's last item) returns once the hook has had it: the hook's
// writes are seen without a lock (the race detector checks). A hook that
// finishes the run itself, or stops it, does not deadlock: the run ends
// with what the hook did.
func TestWarningHookBeforeWaitReturns(t *testing.T) {
	pressure := termination.BudgetPressure{Resource: termination.ResourceTotalTokens, Threshold: 0.5, Used: 600, Limit: 1000, Scope: termination.ScopeFleet}
	t.Run("forward", func(t *testing.T) {
		var hooked []termination.Cause // written by the hook, read after Wait: no lock
		stage := mustStage(t, "coder", middleware.WithOnWarning(func(_ context.Context, _ *middleware.Run, c termination.Cause) {
			time.Sleep(20 * time.Millisecond) // a slow hook: Wait must still wait for it
			hooked = append(hooked, c)
		}))
		_, run := stage.Start(context.Background())
		in := make(chan termination.Event)
		out := middleware.Forward(run, in, identity)
		in <- termination.Event{Kind: termination.KindMessage, Text: "working"}
		<-out
		run.Warn(pressure) // another run crossed a shared budget's threshold
		close(in)
		for range out {
		}
		res := run.Wait()
		assert.Equal(t, []termination.Cause{pressure}, hooked)
		assert.Equal(t, []termination.Cause{pressure}, res.Warnings)
	})
	for _, tc := range []struct {
		name string
		act  func(*middleware.Run)
		want string
	}{
		{"hook finishes the run", func(r *middleware.Run) { r.Finish(nil) }, termination.TagNaturalCompletion},
		{"hook stops the run", func(r *middleware.Run) { r.Stop("over budget") }, termination.TagCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stage := mustStage(t, "coder", middleware.WithOnWarning(func(_ context.Context, r *middleware.Run, _ termination.Cause) { tc.act(r) }))
			_, run := stage.Start(context.Background())
			run.Observe(termination.Event{Kind: termination.KindMessage, Text: "working"})
			run.Warn(pressure)
			done := make(chan termination.Result, 1)
			go func() { done <- run.Finish(nil) }()
			select {
			case res := <-done:
				assert.Equal(t, tc.want, res.Tag())
				assert.Equal(t, []termination.Cause{pressure}, res.Warnings)
			case <-time.After(10 * time.Second):
				t.Fatal("Finish did not return: the hook deadlocked it")
			}
		})
	}
}
