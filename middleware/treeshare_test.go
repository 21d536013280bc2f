package middleware_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// call crosses a "process" boundary the way an HTTP client and server do:
// the caller's context is injected into headers, the callee's extracted.
func crossCall(ctx context.Context) (context.Context, propagation.MapCarrier) {
	carrier := propagation.MapCarrier{}
	middleware.Propagator().Inject(ctx, carrier)
	return middleware.Propagator().Extract(context.Background(), carrier), carrier
}

// elsewhere is an in-process fleet as another process's stage sees it:
// the same fleet.Local (its trees are shared, charged exactly), but not
// the same fleet value, so that a run started from a request a run on the
// Local made counts as one from another process: it joins the caller's
// trees through the fleet (tree.Sharer) instead of being linked to its
// parent directly, as a child of a run on the same fleet is.
type elsewhere struct{ *fleet.Local }

// otherProcess makes a stage use f as another process would (elsewhere).
func otherProcess(f *fleet.Local) middleware.Option {
	return middleware.WithParticipant(fleet.Membership(&elsewhere{f}))
}

// sharedTree starts a planner run that holds tree: {tree} on an in-process
// fleet, and returns it, the context of a request it makes (as a callee's
// server extracts it) and a worker stage on the same fleet.
func sharedTree(t testing.TB, tree string, workerOpts ...middleware.Option) (*middleware.Run, context.Context, *middleware.Stage) {
	t.Helper()
	f := fleet.NewLocal()
	planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {"+tree+"}"))
	worker := mustStage(t, "worker", append([]middleware.Option{otherProcess(f)}, workerOpts...)...)
	pctx, p := planner.Start(context.Background())
	cctx, _ := crossCall(pctx)
	return p, cctx, worker
}

// Tree limits shared through a fleet (§8 "Across processes"), with the
// in-process fleet: the callee's usage reaches the holder's limits at the
// event that spends it, the limit fires in the holder with its usual
// cause, and the callee — whose event crossed it — ends with
// Cancelled{reason: parent} naming the holder.
func TestTreeSharedThroughFleet(t *testing.T) {
	cases := []struct {
		name   string
		tree   string
		spend  termination.Event // what the callee's events spend
		before int               // the holder's own events before the call
		want   termination.Cause // the holder's cause
		events int               // the callee's events up to and including the one that crossed
	}{
		{"tokens", "token_budget: {total: 1000}", msg, 2, termination.BudgetExhausted{Resource: termination.ResourceTotalTokens, Used: 1100, Limit: 1000, Scope: termination.ScopeTree}, 8},
		{"iterations", "max_iterations: 5", msg, 2, termination.MaxIterationsReached{Limit: 5, Count: 6, Scope: termination.ScopeTree}, 4},
		{"tool calls", "max_tool_calls: 3", call, 0, termination.MaxToolCallsReached{Limit: 3, Count: 4, Scope: termination.ScopeTree}, 4},
		{"cost", "cost_budget: {limit: 0.05}", msg, 1, termination.BudgetExhausted{Resource: termination.ResourceCost, Used: 0.05, Limit: 0.05, Scope: termination.ScopeTree}, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := fleet.NewLocal()
			planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {"+c.tree+"}"))
			worker := mustStage(t, "worker", otherProcess(f))
			pctx, p := planner.Start(context.Background())
			for range c.before {
				_, stop := p.Observe(msg)
				require.False(t, stop)
			}
			cctx, carrier := crossCall(pctx)
			assert.Equal(t, p.ID(), carrier[middleware.TreeHeader], "the holder is named to the callee")
			_, w := worker.Start(cctx)
			require.Equal(t, p.ID(), w.Parent())
			var n int
			var cause termination.Cause
			for n = 1; n <= 20; n++ {
				var stop bool
				if cause, stop = w.Observe(c.spend); stop {
					break
				}
			}
			assert.Equal(t, c.events, n, "the callee's event that crossed the tree's limit")
			assert.Equal(t, cascade.ParentEnded("planner", termination.Tag(c.want, nil)), cause)
			pc, stopped := p.Cause()
			require.True(t, stopped)
			if want, ok := c.want.(termination.BudgetExhausted); ok && want.Resource == termination.ResourceCost {
				got, ok := pc.(termination.BudgetExhausted)
				require.True(t, ok, "%#v", pc)
				assert.InDelta(t, want.Used, got.Used, 1e-9)
				want.Used = got.Used
				c.want = want
			}
			assert.Equal(t, c.want, pc)
			assert.Equal(t, termination.TagCancelled, w.Finish(nil).TerminationCause)
			// The holder's result shows the tree's totals, which its
			// cause's figures come from (issue 29).
			tree := p.Finish(nil).Tree
			require.NotNil(t, tree)
			switch want := c.want.(type) {
			case termination.BudgetExhausted:
				if want.Resource == termination.ResourceCost {
					assert.InDelta(t, want.Used, tree.Cost, 1e-9)
				} else {
					assert.Equal(t, want.Used, float64(tree.Tokens.Total()))
				}
			case termination.MaxIterationsReached:
				assert.Equal(t, want.Count, tree.Iterations)
			case termination.MaxToolCallsReached:
				assert.Equal(t, want.Count, tree.ToolCalls)
			}
		})
	}
}

// The holder's tree pressure warning reaches the callee's run through the
// fleet, and the holder's Remaining counts what the callee spent.
func TestTreeSharedWarningsAndRemaining(t *testing.T) {
	f := fleet.NewLocal()
	planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {token_budget: {total: 1000, pressure: 0.5}}"))
	var mu sync.Mutex
	var warned []string
	worker := mustStage(t, "worker", otherProcess(f), middleware.WithOnWarning(func(_ context.Context, _ *middleware.Run, c termination.Cause) {
		mu.Lock()
		warned = append(warned, c.TagValue())
		mu.Unlock()
	}))
	pctx, p := planner.Start(context.Background())
	cctx, _ := crossCall(pctx)
	_, w := worker.Start(cctx)
	for range 4 {
		_, stop := w.Observe(msg) // 440 tokens
		require.False(t, stop)
	}
	assert.Equal(t, int64(560), p.Remaining().TotalTokens, "the callee's tokens are the tree's")
	_, stop := w.Observe(msg) // 550: past the pressure threshold
	require.False(t, stop)
	res := w.Finish(nil)
	require.Len(t, res.Warnings, 1, "the holder's tree pressure reached the callee")
	assert.Equal(t, termination.BudgetPressure{Resource: termination.ResourceTotalTokens, Threshold: 0.5, Used: 550, Limit: 1000, Scope: termination.ScopeTree}, res.Warnings[0])
	mu.Lock()
	assert.Equal(t, []string{termination.TagBudgetPressure}, warned)
	mu.Unlock()
	pres := p.Finish(nil)
	require.Len(t, pres.Warnings, 1)
	assert.Equal(t, res.Warnings[0], pres.Warnings[0])
}

// A callee of a callee is charged to the first caller's tree too: the
// holders a run joined are passed on with its own requests.
func TestTreeSharedTwoHops(t *testing.T) {
	f := fleet.NewLocal()
	planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {max_iterations: 6}"))
	middle := mustStage(t, "middle", otherProcess(f), policy(t, "tree: {max_iterations: 100}"))
	leaf := mustStage(t, "leaf", otherProcess(f))
	pctx, p := planner.Start(context.Background())
	mctx, _ := crossCall(pctx)
	mctx, m := middle.Start(mctx)
	lctx, carrier := crossCall(mctx)
	assert.Equal(t, m.ID()+" "+p.ID(), carrier[middleware.TreeHeader], "nearest holder first")
	_, l := leaf.Start(lctx)
	for range 3 {
		_, stop := m.Observe(msg)
		require.False(t, stop)
	}
	for i := 1; ; i++ {
		require.LessOrEqual(t, i, 4, "the leaf's 4th iteration is the tree's 7th")
		if _, stop := l.Observe(msg); stop {
			break
		}
	}
	pc, _ := p.Cause()
	assert.Equal(t, termination.MaxIterationsReached{Limit: 6, Count: 7, Scope: termination.ScopeTree}, pc)
	mc, _ := m.Cause()
	assert.Equal(t, cascade.ParentEnded("planner", termination.TagMaxIterations), mc)
	lc, _ := l.Cause()
	assert.Equal(t, cascade.ParentEnded("planner", termination.TagMaxIterations), lc, "the leaf names the holder whose end started it")
	l.Finish(nil)
	m.Finish(nil)
	p.Finish(nil)
}

// No header without a fleet that shares trees, or without tree limits; a
// malformed header is dropped, the remaining limits still apply.
func TestTreeHeaderOnlyWhenShared(t *testing.T) {
	noFleet := mustStage(t, "planner", policy(t, "tree: {max_iterations: 6}"))
	ctx, r := noFleet.Start(context.Background())
	_, carrier := crossCall(ctx)
	assert.NotContains(t, carrier, middleware.TreeHeader)
	r.Finish(nil)

	noLimits := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(fleet.NewLocal())))
	ctx, r = noLimits.Start(context.Background())
	_, carrier = crossCall(ctx)
	assert.NotContains(t, carrier, middleware.TreeHeader)
	r.Finish(nil)

	const id = "0123456789abcdef0123456789abcdef"
	worker := mustStage(t, "worker", middleware.WithParticipant(fleet.Membership(fleet.NewLocal())))
	for _, bad := range []string{"nope", id + " x", strings.Repeat(id+" ", 33)} {
		ctx := middleware.Propagator().Extract(context.Background(), propagation.MapCarrier{
			middleware.RunHeader: id, middleware.RemainingHeader: "iterations=1", middleware.TreeHeader: bad})
		_, w := worker.Start(ctx)
		_, stop := w.Observe(msg)
		require.False(t, stop)
		cause, stop := w.Observe(msg)
		require.True(t, stop, "the remaining limits apply: %q", bad)
		assert.Equal(t, termination.MaxIterationsReached{Limit: 1, Count: 2, Scope: termination.ScopeTree}, cause)
		w.Finish(nil)
	}
	// A holder the fleet does not know (it runs elsewhere): the
	// propagated limits are the run's own, as without a fleet.
	_, w := worker.Start(middleware.Propagator().Extract(context.Background(), propagation.MapCarrier{
		middleware.RunHeader: id, middleware.RemainingHeader: "iterations=3", middleware.TreeHeader: id}))
	for range 3 {
		_, stop := w.Observe(msg)
		require.False(t, stop)
	}
	cause, stop := w.Observe(msg)
	require.True(t, stop)
	assert.Equal(t, termination.MaxIterationsReached{Limit: 3, Count: 4, Scope: termination.ScopeTree}, cause)
	w.Finish(nil)
}

// Thousands of callees charge one holder concurrently: the tree stops at
// its limit exactly (the in-process fleet charges at the event), every
// callee ends, and -race finds nothing.
func TestTreeSharedConcurrentCallees(t *testing.T) {
	p, cctx, worker := sharedTree(t, "max_iterations: 1000")
	var wg sync.WaitGroup
	var mu sync.Mutex
	counted := 0
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, w := worker.Start(cctx)
			for range 20 {
				if _, stop := w.Observe(msg); stop {
					break
				}
			}
			res := w.Finish(nil)
			mu.Lock()
			counted += res.Iterations
			mu.Unlock()
		}()
	}
	wg.Wait()
	pc, stopped := p.Cause()
	require.True(t, stopped)
	assert.Equal(t, termination.MaxIterationsReached{Limit: 1000, Count: 1001, Scope: termination.ScopeTree}, pc)
	assert.GreaterOrEqual(t, counted, 1001)
	p.Finish(nil)
}

// A joined run's event, charged to the holder through the in-process
// fleet, allocates nothing.
func TestTreeSharedEventAllocatesNothing(t *testing.T) {
	f := fleet.NewLocal()
	planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {token_budget: {total: 1e12}, max_iterations: 1000000000, cost_budget: {limit: 1e9}}"))
	worker := mustStage(t, "worker", otherProcess(f))
	pctx, p := planner.Start(context.Background())
	defer p.Finish(nil)
	cctx, _ := crossCall(pctx)
	_, w := worker.Start(cctx)
	defer w.Finish(nil)
	w.Observe(msg)
	if n := testing.AllocsPerRun(1000, func() { w.Observe(msg) }); n != 0 {
		t.Errorf("a joined run's event allocates %v times", n)
	}
	_, stopped := p.Cause()
	require.False(t, stopped)
	// AllocsPerRun runs the function once more than asked, to warm up.
	assert.Equal(t, 1002*int(msg.Usage.InputTokens+msg.Usage.OutputTokens), int(1e12-p.Remaining().TotalTokens))
}

// holdingHooks is a tree.Sharer that keeps the holders of the trees held
// through it, so that a test can charge a holder as a networked fleet
// does: other processes' usage, settled in batches. (A stage needs a
// fleet.Fleet too: fleet.Local's.)
type holdingHooks struct {
	*fleet.Local
	mu    sync.Mutex
	hooks map[string]tree.SharedRun
	spent tree.Usage
}

func (h *holdingHooks) HoldTree(spec tree.Spec, used tree.Usage, holder tree.SharedRun) tree.Member {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hooks[spec.Holder] = holder
	h.spent = h.spent.Add(used)
	return holdingMember{h}
}

func (h *holdingHooks) JoinTree(context.Context, string, tree.SharedRun) tree.Member {
	return holdingMember{h}
}

type holdingMember struct{ h *holdingHooks }

func (m holdingMember) Spend(u tree.Usage) termination.Cause {
	m.h.mu.Lock()
	m.h.spent = m.h.spent.Add(u)
	m.h.mu.Unlock()
	return nil
}
func (holdingMember) Warn(termination.Cause)      {}
func (holdingMember) Leave(termination.Cancelled) {}

// Batches of other processes' usage fire the holder's limits exactly
// where events would: the (n+1)-th iteration, the token that reaches the
// budget.
func TestTreeChargedInBatches(t *testing.T) {
	cases := []struct {
		name  string
		tree  string
		batch []tree.Usage
		want  termination.Cause // nil: not stopped
	}{
		{"iterations at the limit", "max_iterations: 10", []tree.Usage{{Totals: termination.Totals{Iterations: 7}}, {Totals: termination.Totals{Iterations: 3}}}, nil},
		{"iterations past it", "max_iterations: 10", []tree.Usage{{Totals: termination.Totals{Iterations: 7}}, {Totals: termination.Totals{Iterations: 9}}}, termination.MaxIterationsReached{Limit: 10, Count: 11, Scope: termination.ScopeTree}},
		{"tool calls past it", "max_tool_calls: 4", []tree.Usage{{Totals: termination.Totals{ToolCalls: 100}}}, termination.MaxToolCallsReached{Limit: 4, Count: 5, Scope: termination.ScopeTree}},
		{"tokens", "token_budget: {input: 1000}", []tree.Usage{{Totals: termination.Totals{Iterations: 50, Tokens: termination.Usage{InputTokens: 999}}}, {Totals: termination.Totals{Tokens: termination.Usage{InputTokens: 1}}}}, termination.BudgetExhausted{Resource: termination.ResourceInputTokens, Used: 1000, Limit: 1000, Scope: termination.ScopeTree}},
		{"cost", "cost_budget: {limit: 2}", []tree.Usage{{Totals: termination.Totals{Cost: 1.5}}, {Totals: termination.Totals{Cost: 0.25}}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &holdingHooks{Local: fleet.NewLocal(), hooks: map[string]tree.SharedRun{}}
			planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(f)), policy(t, "tree: {"+c.tree+"}"))
			pctx, p := planner.Start(context.Background())
			_, carrier := crossCall(pctx)
			require.Equal(t, p.ID(), carrier[middleware.TreeHeader])
			f.mu.Lock()
			hooks := f.hooks[p.ID()]
			f.mu.Unlock()
			require.NotNil(t, hooks, "the holder was held when its id left")
			for _, u := range c.batch {
				hooks.ChargeTree(u)
			}
			got, _ := p.Cause()
			assert.Equal(t, c.want, got)
			// The holder's own events are spent through the fleet, until
			// it stops.
			p.Observe(msg)
			want := int64(110)
			if c.want != nil {
				want = 0
			}
			f.mu.Lock()
			assert.Equal(t, want, f.spent.Tokens.InputTokens+f.spent.Tokens.OutputTokens)
			f.mu.Unlock()
			p.Finish(nil)
		})
	}
}
