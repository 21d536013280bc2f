package middleware_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

func idleCause(d time.Duration) termination.Timeout {
	return termination.Timeout{Limit: d, Elapsed: d, Idle: true}
}

// TestLiveIdleFiresFromTheTimer: with no event for D, the run's timer
// stops it with Timeout{idle: true} after the last event evaluated, though
// no event arrives; the run's context carries the cause.
func TestLiveIdleFiresFromTheTimer(t *testing.T) {
	const d = 100 * time.Millisecond
	stage := mustStage(t, "idle", middleware.WithPolicy(termination.MustParsePolicy(`idle: 100ms`)))
	ctx, run := stage.Start(context.Background())
	_, hasDeadline := ctx.Deadline()
	assert.False(t, hasDeadline, "an idle limit is no deadline of the run: an active run may go on")
	start := time.Now()
	_, stop := run.Observe(termination.Event{Kind: termination.KindMessage, Text: "calling a tool"})
	require.False(t, stop)
	select {
	case <-run.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the idle timer did not stop the run")
	}
	assert.GreaterOrEqual(t, time.Since(start), d)
	var cause termination.Timeout
	require.ErrorAs(t, context.Cause(ctx), &cause)
	assert.Equal(t, idleCause(d), cause)
	res := run.Finish(nil)
	assert.Equal(t, idleCause(d), res.Cause)
	assert.Equal(t, termination.TagTimeout, res.Tag())
	assert.Equal(t, 1, res.StoppedAt)
	assert.Equal(t, 1, res.Events)
	assert.Empty(t, res.Evidence)
}

// TestLiveIdleRestartsAtEveryEvent: a run whose events keep coming, each
// within D of the one before, is never idle, however long it lasts. The
// test sleeps D/5 between events; a stop is a failure unless the machine
// really left D between two events (a loaded machine's sleep overshot):
// that attempt proves nothing, and the test tries again, up to 5 times.
func TestLiveIdleRestartsAtEveryEvent(t *testing.T) {
	const d = 150 * time.Millisecond
	stage := mustStage(t, "idle", middleware.WithCondition(termination.TimeLimits{Idle: d}))
	for attempt := range 5 {
		if idleAttempt(t, stage, d) {
			return
		}
		t.Logf("attempt %d: the machine left %s or more between two events; trying again", attempt+1, d)
	}
	t.Fatalf("the machine left %s or more between two events in every attempt", d)
}

// idleAttempt feeds a run an event every d/5 for 4d. It reports whether
// the run went on to the end; a stop where no gap between two events
// reached d fails the test.
func idleAttempt(t *testing.T, stage *middleware.Stage, d time.Duration) bool {
	t.Helper()
	_, run := stage.Start(context.Background())
	start := time.Now()
	var prev time.Time // when the previous Observe was called: its event is evaluated after
	for time.Since(start) < 4*d {
		before := time.Now()
		_, stop := run.Observe(termination.Event{Kind: termination.KindMessage, Text: "working"})
		if stop {
			gap := time.Since(prev)
			run.Finish(nil)
			require.False(t, prev.IsZero(), "stopped at the first event")
			require.GreaterOrEqual(t, gap, d, "stopped after %s though at most %s passed since the last event", time.Since(start), gap)
			return false
		}
		prev = before
		time.Sleep(d / 5)
	}
	res := run.Finish(nil)
	assert.Equal(t, termination.NaturalCompletion{}, res.Cause)
	return true
}

// TestLiveIdleStartsWithTheRun: a run that never gets its first event is
// idle from its start.
func TestLiveIdleStartsWithTheRun(t *testing.T) {
	stage := mustStage(t, "idle", middleware.WithPolicy(termination.MustParsePolicy(`{idle: 50ms, timeout: 1h}`)))
	_, run := stage.Start(context.Background())
	select {
	case <-run.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the idle timer did not stop the run")
	}
	res := run.Finish(nil)
	assert.Equal(t, idleCause(50*time.Millisecond), res.Cause)
	assert.Equal(t, 0, res.StoppedAt)
}

// TestForwardIdleProducerHangs: a loop whose producer hangs (a model call
// that never returns) is stopped by the idle timer; Forward's output
// closes and the result is the idle stop.
func TestForwardIdleProducerHangs(t *testing.T) {
	stage := mustStage(t, "idle", middleware.WithPolicy(termination.MustParsePolicy(`idle: 80ms`)),
		middleware.WithDrainTimeout(time.Second))
	ctx, run := stage.Start(context.Background())
	in := make(chan termination.Event)
	go func() {
		defer close(in)
		in <- termination.Event{Kind: termination.KindMessage, Text: "one"}
		<-ctx.Done() // hangs until the run stops
	}()
	n := 0
	for range middleware.Forward(run, in, identity) {
		n++
	}
	res := run.Wait()
	assert.Equal(t, 1, n)
	assert.Equal(t, idleCause(80*time.Millisecond), res.Cause)
	assert.Equal(t, 1, res.StoppedAt)
}

// TestIdleObserveAllocatesNothing: the idle clock costs an event no
// allocation (the timer is not touched per event).
func TestIdleObserveAllocatesNothing(t *testing.T) {
	stage := mustStage(t, "idle", middleware.WithPolicy(termination.MustParsePolicy(`{idle: 1h, timeout: 2h, max_iterations: 1000000000}`)))
	_, run := stage.Start(context.Background())
	defer run.Finish(nil)
	ev := termination.Event{Kind: termination.KindMessage, Text: "x"}
	run.Observe(ev)
	if n := testing.AllocsPerRun(1000, func() { run.Observe(ev) }); n != 0 {
		t.Errorf("Observe with an idle limit: %v allocs per event, want 0", n)
	}
}

// TestIdleLiveMatchesReplay: random policies with an idle limit over
// random streams with random pauses, observed live; the replay of the same
// events stamped with the times they were observed at stops them at the
// same event with the same result. Pauses are either none or well past the
// limit, so that a loaded machine's scheduling cannot tip a gap over it.
func TestIdleLiveMatchesReplay(t *testing.T) {
	const d = 60 * time.Millisecond
	r := rand.New(rand.NewPCG(seed(t), 4))
	idled := 0
	for c := range 12 {
		src := "{idle: 60ms, any: [" + nonEmpty(r, 1) + "]}"
		p := termination.MustParsePolicy(src)
		stage := mustStage(t, "idle-prop", middleware.WithPolicy(p))
		evs := loopy(r, randomEvents(r, 5+r.IntN(20)))
		pauseAt := -1
		if r.IntN(3) > 0 {
			pauseAt = 1 + r.IntN(len(evs)-1)
		}
		_, run := stage.Start(context.Background())
		stamped := make([]termination.Event, 0, len(evs))
		for i, ev := range evs {
			if i == pauseAt {
				time.Sleep(3 * d)
			}
			ev.Time = time.Now()
			stamped = append(stamped, ev)
			if _, stop := run.Observe(ev); stop {
				break
			}
		}
		got := run.Finish(nil)
		want := replay(p.Condition(), stamped)
		require.Empty(t, sameCounts(got, want), "case %d: policy %s, pause before event %d", c, src, pauseAt+1)
		if _, ok := got.Cause.(termination.Timeout); ok {
			idled++
		}
	}
	t.Logf("%d of 12 runs stopped idle", idled)
	assert.Positive(t, idled, "the generator should make the idle limit fire")
}
