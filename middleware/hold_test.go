package middleware_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

func holdStage(t *testing.T, policy string) *middleware.Stage {
	t.Helper()
	return mustStage(t, "held", middleware.WithPolicy(termination.MustParsePolicy(policy)))
}

func messages(n int) []termination.Event {
	evs := make([]termination.Event, n)
	for i := range evs {
		evs[i] = termination.Event{Kind: termination.KindMessage, Text: "turn"}
	}
	return evs
}

// holdPaths deliver evs through one consumer path each, counting the
// items the loop got, and return the run's result.
var holdPaths = []struct {
	name    string
	deliver func(run *middleware.Run, evs []termination.Event, got *atomic.Int32) termination.Result
}{
	{"Observe", func(run *middleware.Run, evs []termination.Event, got *atomic.Int32) termination.Result {
		for _, ev := range evs {
			if _, stop := run.Observe(ev); stop {
				break
			}
			got.Add(1)
		}
		return run.Finish(nil)
	}},
	{"Forward", func(run *middleware.Run, evs []termination.Event, got *atomic.Int32) termination.Result {
		in := make(chan termination.Event)
		go func() {
			defer close(in)
			for _, ev := range evs {
				select {
				case in <- ev:
				case <-run.Done():
					return
				}
			}
		}()
		for range middleware.Forward(run, in, identity) {
			got.Add(1)
		}
		return run.Wait()
	}},
	{"ForwardSeq", func(run *middleware.Run, evs []termination.Event, got *atomic.Int32) termination.Result {
		seq := func(yield func(termination.Event, error) bool) {
			for _, ev := range evs {
				if !yield(ev, nil) {
					return
				}
			}
		}
		for range middleware.ForwardSeq(run, seq, identity) {
			got.Add(1)
		}
		return run.Wait()
	}},
	{"Range", func(run *middleware.Run, evs []termination.Event, got *atomic.Int32) termination.Result {
		in := make(chan termination.Event)
		go func() {
			defer close(in)
			for _, ev := range evs {
				select {
				case in <- ev:
				case <-run.Done():
					return
				}
			}
		}()
		for range middleware.Range(run, in, identity) {
			got.Add(1)
		}
		return run.Wait()
	}},
}

// startHeld runs evs on path in a goroutine and waits until the run is
// held with want items delivered.
func startHeld(t *testing.T, run *middleware.Run, path func(*middleware.Run, []termination.Event, *atomic.Int32) termination.Result, evs []termination.Event, want int32) (*atomic.Int32, <-chan termination.Result) {
	t.Helper()
	got := new(atomic.Int32)
	done := make(chan termination.Result, 1)
	go func() { done <- path(run, evs, got) }()
	require.Eventually(t, func() bool {
		_, _, held := run.Held()
		return held && got.Load() == want
	}, 5*time.Second, time.Millisecond, "the run is not held with %d items delivered", want)
	time.Sleep(30 * time.Millisecond) // room for a wrong step past the hold
	require.Equal(t, want, got.Load(), "the loop got an item past the hold")
	return got, done
}

// TestHoldBlocksEveryPathUntilRaise: each consumer path delivers the event
// that reached the limit, takes no next one while held, and goes on once
// raised; the limit is a warning of the run, which ends as its stream does.
func TestHoldBlocksEveryPathUntilRaise(t *testing.T) {
	for _, p := range holdPaths {
		t.Run(p.name, func(t *testing.T) {
			var warned atomic.Int32
			stage := mustStage(t, "held", middleware.WithPolicy(termination.MustParsePolicy("max_iterations: 2\nhold: {timeout: 1m}")),
				middleware.WithOnWarning(func(_ context.Context, _ *middleware.Run, c termination.Cause) {
					if _, ok := c.(termination.MaxIterationsReached); ok {
						warned.Add(1)
					}
				}))
			_, run := stage.Start(context.Background())
			got, done := startHeld(t, run, p.deliver, messages(5), 3)
			c, since, _ := run.Held()
			assert.Equal(t, termination.MaxIterationsReached{Limit: 2, Count: 3}, c)
			assert.WithinDuration(t, time.Now(), since, 5*time.Second)
			assert.EqualValues(t, 1, warned.Load(), "the hook got the limit's cause")
			require.NoError(t, run.Raise(termination.Limits{Iterations: 5, Has: termination.LimitIterations}))
			res := <-done
			assert.EqualValues(t, 5, got.Load())
			assert.Equal(t, termination.NaturalCompletion{}, res.Cause)
			assert.Equal(t, 5, res.Events)
			assert.Contains(t, res.Warnings, termination.Cause(termination.MaxIterationsReached{Limit: 2, Count: 3}))
		})
	}
}

// TestHoldTimeoutEndsWithTheLimit: nobody raises the run; the hold timeout
// ends it with the limit's cause, on every path, as it would have ended
// without hold (stopped at the event that reached the limit).
func TestHoldTimeoutEndsWithTheLimit(t *testing.T) {
	for _, p := range holdPaths {
		t.Run(p.name, func(t *testing.T) {
			stage := holdStage(t, "max_iterations: 2\nhold: {timeout: 100ms}")
			ctx, run := stage.Start(context.Background())
			got, done := startHeld(t, run, p.deliver, messages(5), 3)
			res := <-done
			assert.EqualValues(t, 3, got.Load())
			want := termination.MaxIterationsReached{Limit: 2, Count: 3}
			assert.Equal(t, want, res.Cause)
			assert.Equal(t, 3, res.StoppedAt)
			assert.Equal(t, 3, res.Events)
			assert.Equal(t, []int{3}, res.Evidence)
			var cause termination.MaxIterationsReached
			require.ErrorAs(t, context.Cause(ctx), &cause)
			assert.ErrorIs(t, run.Raise(termination.Limits{Iterations: 1, Has: termination.LimitIterations}), termination.ErrNotHeld)
		})
	}
}

// TestHoldStopEndsWithTheLimit: Stop of a held run ends it with the
// limit's cause, not Cancelled{external}.
func TestHoldStopEndsWithTheLimit(t *testing.T) {
	stage := holdStage(t, "token_budget: {total: 10}\nhold: {timeout: 1m}")
	_, run := stage.Start(context.Background())
	evs := []termination.Event{{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 6, OutputTokens: 6}}, {Kind: termination.KindMessage}}
	_, done := startHeld(t, run, holdPaths[0].deliver, evs, 1)
	run.Stop("operator")
	res := <-done
	assert.Equal(t, termination.BudgetExhausted{Resource: termination.ResourceTotalTokens, Used: 12, Limit: 10}, res.Cause)
	assert.Equal(t, 1, res.StoppedAt)
}

// TestHoldRaiseNotHeld: a raise for a run that is not held, or that has
// ended, changes nothing and says so; invalid amounts are refused.
func TestHoldRaiseNotHeld(t *testing.T) {
	stage := holdStage(t, "max_iterations: 2\nhold: {timeout: 1m}")
	_, run := stage.Start(context.Background())
	raise := termination.Limits{Iterations: 1, Has: termination.LimitIterations}
	err := run.Raise(raise)
	require.ErrorIs(t, err, termination.ErrNotHeld)
	assert.Contains(t, err.Error(), run.ID())
	err = run.Raise(termination.Limits{Iterations: -1, Has: termination.LimitIterations})
	require.Error(t, err)
	assert.False(t, errors.Is(err, termination.ErrNotHeld))
	run.Finish(nil)
	assert.ErrorIs(t, run.Raise(raise), termination.ErrNotHeld)

	// A stage without hold never holds: the limit stops the run.
	plain := holdStage(t, "max_iterations: 1")
	_, run = plain.Start(context.Background())
	run.Observe(termination.Event{Kind: termination.KindMessage})
	_, stop := run.Observe(termination.Event{Kind: termination.KindMessage})
	assert.True(t, stop)
	assert.ErrorIs(t, run.Raise(raise), termination.ErrNotHeld)
	run.Finish(nil)
}

// TestHoldPausesIdleNotTimeout: idle does not fire while a run is held
// and resumes after the raise; timeout keeps counting while held.
func TestHoldPausesIdleNotTimeout(t *testing.T) {
	stage := holdStage(t, "max_iterations: 1\nidle: 100ms\nhold: {timeout: 1m}")
	_, run := stage.Start(context.Background())
	run.Observe(termination.Event{Kind: termination.KindMessage})
	_, stop := run.Observe(termination.Event{Kind: termination.KindMessage})
	require.False(t, stop)
	_, _, held := run.Held()
	require.True(t, held)
	select {
	case <-run.Done():
		t.Fatal("the idle limit fired while the run was held")
	case <-time.After(300 * time.Millisecond):
	}
	raised := time.Now()
	require.NoError(t, run.Raise(termination.Limits{Iterations: 10, Has: termination.LimitIterations}))
	select {
	case <-run.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the idle limit did not resume after the raise")
	}
	assert.GreaterOrEqual(t, time.Since(raised), 50*time.Millisecond, "idle resumed where it was, not past its deadline")
	res := run.Finish(nil)
	assert.Equal(t, idleCause(100*time.Millisecond), res.Cause)

	stage = holdStage(t, "max_iterations: 1\ntimeout: 150ms\nhold: {timeout: 1m}")
	_, run = stage.Start(context.Background())
	run.Observe(termination.Event{Kind: termination.KindMessage})
	run.Observe(termination.Event{Kind: termination.KindMessage})
	select {
	case <-run.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the timeout did not fire while held")
	}
	res = run.Finish(nil)
	assert.Equal(t, termination.TagTimeout, res.Tag())
}

// TestHoldTreeLimit: a tree limit holds every live run of the holder's
// tree; raising any of them raises the holder's tree limits and releases
// them all.
func TestHoldTreeLimit(t *testing.T) {
	planner := holdStage(t, "tree: {max_iterations: 3}\nhold: {timeout: 1m}")
	worker := mustStage(t, "worker")
	pctx, parent := planner.Start(context.Background())
	_, child := worker.Start(pctx)
	require.Equal(t, parent.ID(), child.Parent())
	msg := termination.Event{Kind: termination.KindMessage}
	parent.Observe(msg)
	child.Observe(msg)
	child.Observe(msg)
	_, stop := child.Observe(msg) // the fourth of the tree: held
	require.False(t, stop)
	for _, r := range []*middleware.Run{parent, child} {
		c, _, held := r.Held()
		require.True(t, held, "run %s not held", r.ID())
		assert.Equal(t, termination.MaxIterationsReached{Limit: 3, Count: 4, Scope: termination.ScopeTree}, c)
	}
	blocked := make(chan struct{})
	go func() {
		defer close(blocked)
		parent.Observe(msg)
	}()
	select {
	case <-blocked:
		t.Fatal("the holder took an event while its tree was held")
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, child.Raise(termination.Limits{Iterations: 10, Has: termination.LimitIterations}))
	<-blocked
	_, _, held := child.Held()
	assert.False(t, held)
	_, stop = child.Observe(msg)
	assert.False(t, stop)
	assert.Equal(t, termination.NaturalCompletion{}, child.Finish(nil).Cause)
	assert.Equal(t, termination.NaturalCompletion{}, parent.Finish(nil).Cause)
}

// TestHoldTreeTimeout: nobody raises a held tree: the holder ends with
// the tree limit's cause, its descendants with Cancelled{reason: parent}.
func TestHoldTreeTimeout(t *testing.T) {
	planner := holdStage(t, "tree: {max_iterations: 1}\nhold: {timeout: 100ms}")
	worker := mustStage(t, "worker")
	pctx, parent := planner.Start(context.Background())
	_, child := worker.Start(pctx)
	msg := termination.Event{Kind: termination.KindMessage}
	child.Observe(msg)
	child.Observe(msg)
	select {
	case <-parent.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the hold timeout did not end the held tree")
	}
	res := parent.Finish(nil)
	assert.Equal(t, termination.MaxIterationsReached{Limit: 1, Count: 2, Scope: termination.ScopeTree}, res.Cause)
	cres := child.Finish(nil)
	assert.Equal(t, termination.CancelParent, cres.Cause.(termination.Cancelled).Reason)
}

// TestHoldFleetStopAndLeave: a fleet stop (agentstop stop) of a held run,
// and a consumer that leaves it, end it with the limit's cause; a fleet
// stop of a run that is not held is Cancelled{external} as before.
func TestHoldFleetStopAndLeave(t *testing.T) {
	l := fleet.NewLocal()
	stage := mustStage(t, "held", middleware.WithPolicy(termination.MustParsePolicy("max_iterations: 1\nhold: {timeout: 1m}")), middleware.WithParticipant(fleet.Membership(l)))
	msg := termination.Event{Kind: termination.KindMessage}
	_, run := stage.Start(context.Background())
	run.Observe(msg)
	run.Observe(msg)
	rep, err := l.Stop(context.Background(), fleet.StopRequest{Selector: fleet.Selector{RunID: run.ID()}, Reason: "enough", By: "ops"})
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Stopped)
	assert.Equal(t, termination.MaxIterationsReached{Limit: 1, Count: 2}, run.Finish(nil).Cause)

	_, run = stage.Start(context.Background())
	run.Observe(msg)
	_, err = l.Stop(context.Background(), fleet.StopRequest{Selector: fleet.Selector{RunID: run.ID()}, Reason: "enough", By: "ops"})
	require.NoError(t, err)
	var c termination.Cancelled
	require.ErrorAs(t, run.Finish(nil).Cause, &c)
	assert.Equal(t, termination.CancelExternal, c.Reason)

	_, run = stage.Start(context.Background())
	run.Observe(msg)
	run.Observe(msg)
	run.Leave("consumer gone")
	assert.Equal(t, termination.MaxIterationsReached{Limit: 1, Count: 2}, run.Finish(nil).Cause)
}

// TestHoldRaiseReleasesOwnAndTree: a run held at its own limit and its
// tree's at once (both reached on one event) goes on after one raise,
// which raises both (§3: a raise raises the run's limits and the run
// goes on); the next limit it reaches holds it again.
func TestHoldRaiseReleasesOwnAndTree(t *testing.T) {
	planner := holdStage(t, "tree: {max_iterations: 2}\nmax_iterations: 2\nhold: {timeout: 1m}")
	_, run := planner.Start(context.Background())
	msg := termination.Event{Kind: termination.KindMessage}
	run.Observe(msg)
	run.Observe(msg)
	run.Observe(msg) // 3 of 2, both its own and its tree's
	c, _, held := run.Held()
	require.True(t, held)
	assert.Equal(t, termination.MaxIterationsReached{Limit: 2, Count: 3}, c, "its own limit first")
	require.NoError(t, run.Raise(termination.Limits{Iterations: 2, Has: termination.LimitIterations}))
	_, _, held = run.Held()
	require.False(t, held, "one raise releases both limits")
	_, stop := run.Observe(msg) // 4 of 4
	assert.False(t, stop)
	run.Observe(msg) // 5 of 4: held again, at both
	c, _, held = run.Held()
	require.True(t, held)
	assert.Equal(t, termination.MaxIterationsReached{Limit: 4, Count: 5}, c)
	require.NoError(t, run.Raise(termination.Limits{Iterations: 5, Has: termination.LimitIterations}))
	_, stop = run.Observe(msg)
	assert.False(t, stop)
	assert.Equal(t, termination.NaturalCompletion{}, run.Finish(nil).Cause)
}

// TestHoldConcurrentObserve: Observe calls that wait on a held run from
// several goroutines each evaluate their own event once released.
func TestHoldConcurrentObserve(t *testing.T) {
	stage := holdStage(t, "max_tool_calls: 1\nhold: {timeout: 1m}")
	_, run := stage.Start(context.Background())
	run.Observe(termination.Event{Kind: termination.KindToolCall, Tool: "a"})
	run.Observe(termination.Event{Kind: termination.KindToolCall, Tool: "a"}) // held
	const n = 8
	done := make(chan struct{})
	for i := range n {
		go func() {
			defer func() { done <- struct{}{} }()
			run.Observe(termination.Event{Kind: termination.KindMessage, Text: string(rune('a' + i)), Usage: termination.Usage{InputTokens: int64(1 + i)}})
		}()
	}
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, run.Raise(termination.Limits{ToolCalls: 1, Has: termination.LimitToolCalls}))
	for range n {
		<-done
	}
	res := run.Finish(nil)
	assert.Equal(t, 2+n, res.Events)
	assert.EqualValues(t, n*(n+1)/2, res.Tokens.InputTokens, "each waiting Observe evaluated its own event")
}

// TestHoldTreePausesIdle: at a tree limit every live run of the holder's
// tree is held, and the idle limits of every one of them — the holder's
// and its descendants' — pause while it is held (§3 hold): the hold
// timeout, not idle, ends a tree nobody raises, and after a raise idle
// resumes where it was rather than past its deadline.
func TestHoldTreePausesIdle(t *testing.T) {
	const idle = 100 * time.Millisecond
	msg := termination.Event{Kind: termination.KindMessage, Text: "x"}
	limit := termination.MaxIterationsReached{Limit: 1, Count: 2, Scope: termination.ScopeTree}
	tests := []struct {
		name, planner, kid string
		raise              bool
	}{
		{"the holder's idle, not raised", "idle: 100ms\ntree: {max_iterations: 1}\nhold: {timeout: 300ms}", "", false},
		{"a descendant's idle, not raised", "tree: {max_iterations: 1}\nhold: {timeout: 300ms}", "idle: 100ms", false},
		{"both, raised", "idle: 200ms\ntree: {max_iterations: 1}\nhold: {timeout: 1m}", "idle: 100ms", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			planner := holdStage(t, tt.planner)
			kid := mustStage(t, "kid", middleware.WithPolicy(termination.MustParsePolicy(tt.kid)))
			start := time.Now()
			pctx, p := planner.Start(context.Background())
			p.Observe(msg)
			_, k := kid.Start(pctx)
			_, stop := k.Observe(msg) // the tree's second iteration: held
			require.False(t, stop)
			for _, r := range []*middleware.Run{p, k} {
				_, _, held := r.Held()
				require.True(t, held, "run %s not held", r.ID())
			}
			if !tt.raise {
				<-p.Done()
				assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "the hold timeout ended the tree")
				assert.Equal(t, limit, p.Finish(nil).Cause)
				assert.Equal(t, cascade.ParentEnded("held", termination.TagMaxIterations), k.Finish(nil).Cause)
				return
			}
			select {
			case <-p.Done():
				t.Fatal("the holder's idle limit fired while its tree was held")
			case <-k.Done():
				t.Fatal("a descendant's idle limit fired while its tree was held")
			case <-time.After(4 * idle):
			}
			raised := time.Now()
			require.NoError(t, k.Raise(termination.Limits{Iterations: 10, Has: termination.LimitIterations}))
			<-k.Done()
			assert.GreaterOrEqual(t, time.Since(raised), idle/2, "the descendant's idle resumed where it was, not past its deadline")
			<-p.Done() // its idle limit is twice its kid's: the kid ends first, by its own
			assert.GreaterOrEqual(t, time.Since(raised), idle, "the holder's idle resumed where it was, not past its deadline")
			assert.Equal(t, idleCause(idle), k.Finish(nil).Cause)
			assert.Equal(t, idleCause(2*idle), p.Finish(nil).Cause)
		})
	}
}
