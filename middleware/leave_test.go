package middleware_test

import (
	"context"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// leavingScript is a loop's output: two steps, the final answer, then more
// messages for as long as the loop's context lets it (a loop that keeps
// going after its answer, or whose consumer leaves before it ends).
var leavingScript = []termination.Event{
	{Kind: termination.KindMessage, Text: "thinking"},
	{Kind: termination.KindToolCall, Tool: "search", Args: []byte(`{"q":"x"}`)},
	{Kind: termination.KindFinal, Text: "done"},
}

func leavingEvent(i int) termination.Event {
	if i < len(leavingScript) {
		return leavingScript[i]
	}
	return termination.Event{Kind: termination.KindMessage, Text: "more"}
}

// leavingChan sends the script, then messages until ctx ends.
func leavingChan(ctx context.Context) <-chan item {
	ch := make(chan item)
	go func() {
		defer close(ch)
		for i := 0; ; i++ {
			select {
			case ch <- item{i: i, evs: []termination.Event{leavingEvent(i)}}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// leavingSeq yields the script, then messages until ctx ends or the
// consumer stops.
func leavingSeq(ctx context.Context) iter.Seq2[item, error] {
	return func(yield func(item, error) bool) {
		for i := 0; ctx.Err() == nil; i++ {
			if !yield(item{i: i, evs: []termination.Event{leavingEvent(i)}}, nil) {
				return
			}
		}
	}
}

// A consumer that leaves early calls Leave, and that is all it takes, with
// every wrapper: the run ends promptly (well within the default 5s drain
// timeout) as NaturalCompletion when the consumer left right after the
// final answer, Cancelled{external} otherwise; the loop's context is
// cancelled and no goroutine is left (goleak, TestMain).
func TestLeavingEarly(t *testing.T) {
	// consume reads until leave says so, then stops the run; it returns the
	// run's context and how many items the consumer took.
	type consume func(t *testing.T, stage *middleware.Stage, leave func(item) bool) (context.Context, *middleware.Run, int)
	// leaving makes a consume of a wrapper: the consumer ranges over the
	// wrapper's output until leave says so, then stops the run.
	leaving := func(output func(ctx context.Context, run *middleware.Run) iter.Seq2[item, error]) consume {
		return func(t *testing.T, stage *middleware.Stage, leave func(item) bool) (context.Context, *middleware.Run, int) {
			ctx, run := stage.Start(context.Background())
			n := 0
			for it := range output(ctx, run) {
				n++
				if leave(it) {
					break
				}
			}
			run.Leave("consumer left")
			return ctx, run, n
		}
	}
	// fromChan ranges over a channel wrapper's output; breaking stops
	// reading it, as a consumer that leaves a range over the channel does.
	fromChan := func(out <-chan item) iter.Seq2[item, error] {
		return func(yield func(item, error) bool) {
			for it := range out {
				if !yield(it, nil) {
					return
				}
			}
		}
	}
	wrappers := []struct {
		name    string
		run     consume
		detail  string // Cancelled's detail when the consumer leaves before the end
		inSteps bool   // Result.Events may exceed the items taken by the one handed over
	}{
		{"Forward", leaving(func(ctx context.Context, run *middleware.Run) iter.Seq2[item, error] {
			return fromChan(middleware.Forward(run, leavingChan(ctx), decodeItem))
		}), "consumer left", true},
		{"ForwardEach", leaving(func(ctx context.Context, run *middleware.Run) iter.Seq2[item, error] {
			return fromChan(middleware.ForwardEach(run, leavingChan(ctx), decodeItemEach))
		}), "consumer left", true},
		{"ForwardSeq", leaving(func(ctx context.Context, run *middleware.Run) iter.Seq2[item, error] {
			return middleware.ForwardSeq(run, leavingSeq(ctx), decodeItem)
		}), "consumer stopped iterating", false},
		{"ForwardSeqEach", leaving(func(ctx context.Context, run *middleware.Run) iter.Seq2[item, error] {
			return middleware.ForwardSeqEach(run, leavingSeq(ctx), decodeItemEach)
		}), "consumer stopped iterating", false},
		{"Observe", func(t *testing.T, stage *middleware.Stage, leave func(item) bool) (context.Context, *middleware.Run, int) {
			// A callback loop: the callback observes each event; the
			// application decides to leave, stops the run, and finishes
			// it once the loop has returned.
			ctx, run := stage.Start(context.Background())
			n := 0
			for i := 0; ctx.Err() == nil; i++ {
				it := item{i: i, evs: []termination.Event{leavingEvent(i)}}
				run.Observe(it.evs[0])
				n++
				if leave(it) {
					run.Leave("consumer left")
				}
			}
			run.Finish(ctx.Err())
			return ctx, run, n
		}, "consumer left", false},
	}
	leaves := []struct {
		name  string
		leave func(item) bool
		taken int
		want  func(detail string) termination.Cause
	}{
		{"before the final answer", func(it item) bool { return it.i == 1 }, 2,
			func(detail string) termination.Cause {
				return termination.Cancelled{Reason: termination.CancelExternal, Detail: detail}
			}},
		{"right after the final answer", func(it item) bool { return it.evs[0].Kind == termination.KindFinal }, 3,
			func(string) termination.Cause { return termination.NaturalCompletion{} }},
	}
	for _, w := range wrappers {
		for _, l := range leaves {
			t.Run(w.name+"/"+l.name, func(t *testing.T) {
				stage := mustStage(t, "leaver") // the default drain timeout: 5s
				start := time.Now()
				ctx, run, n := w.run(t, stage, l.leave)
				res := waitResult(t, run, time.Second)
				assert.Less(t, time.Since(start), time.Second)
				assert.Equal(t, l.taken, n)
				assert.Equal(t, l.want(w.detail), res.Cause)
				require.Error(t, ctx.Err(), "the loop's context is cancelled")
				if w.inSteps {
					assert.Contains(t, []int{n, n + 1}, res.Events, "the items taken, and perhaps the one being handed over")
				} else {
					assert.Equal(t, n, res.Events)
				}
			})
		}
	}
}

// Leave from the consumer after a condition fired on the item it left
// behind: the cause stands, and the run is released at once.
func TestLeavingAfterFiring(t *testing.T) {
	stage := mustStage(t, "leaver", policy(t, "max_iterations: 1"))
	ctx, run := stage.Start(context.Background())
	out := middleware.Forward(run, leavingChan(ctx), decodeItem)
	<-out
	<-out
	<-out // the final answer fires nothing (a final never fires max_iterations); "more" does
	require.Eventually(t, func() bool { _, ok := run.Cause(); return ok }, time.Second, time.Millisecond)
	run.Leave("consumer left")
	res := waitResult(t, run, time.Second)
	assert.Equal(t, termination.MaxIterationsReached{Limit: 1, Count: 3}, res.Cause)
	assert.Equal(t, 4, res.Events)
}

// A producer that ignores its context: after Leave, Wait returns once the
// drain timeout has passed, and the forwarding goroutine is gone.
func TestLeavingWithAStubbornProducer(t *testing.T) {
	rec := &fakeRecorder{}
	const drain = 100 * time.Millisecond
	stage := mustStage(t, "leaver", middleware.WithDrainTimeout(drain), middleware.WithParticipant(rec))
	_, run := stage.Start(context.Background())
	out := middleware.Forward(run, stubborn(t, message), decodeItem)
	<-out
	<-out
	start := time.Now()
	run.Leave("consumer left")
	res := waitResult(t, run, 2*time.Second)
	assert.GreaterOrEqual(t, time.Since(start), drain/2)
	assert.Equal(t, termination.Cancelled{Reason: termination.CancelExternal, Detail: "consumer left"}, res.Cause)
	assert.Positive(t, res.Drained)
	errs := rec.only(t).snapshot().errs
	require.Len(t, errs, 1, "the item left behind is not an error after Leave")
	assert.Contains(t, errs[0].Error(), "producer still sending")
}

// A supervisor's Stop is not the consumer leaving (issue 21): a supervisor
// calls Stop while the consumer is busy with item 0 and the forwarder
// holds the evaluated item 1; the consumer then keeps reading until the
// output closes. It gets item 1 too, Result.Events agrees, and Wait
// returns once it has taken it — not after the drain timeout, and whether
// the producer closes its channel before or after the consumer comes back.
func TestSupervisorStopKeepsTheEvaluatedItem(t *testing.T) {
	wrappers := []struct {
		name    string
		forward func(run *middleware.Run, in <-chan item) <-chan item
	}{
		{"Forward", func(run *middleware.Run, in <-chan item) <-chan item { return middleware.Forward(run, in, decodeItem) }},
		{"ForwardEach", func(run *middleware.Run, in <-chan item) <-chan item {
			return middleware.ForwardEach(run, in, decodeItemEach)
		}},
	}
	for _, w := range wrappers {
		for _, closesFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/producer closes first %v", w.name, closesFirst), func(t *testing.T) {
				rec := &fakeRecorder{}
				const drain = 3 * time.Second
				stage := mustStage(t, "supervised", middleware.WithParticipant(rec), middleware.WithDrainTimeout(drain))
				ctx, run := stage.Start(context.Background())
				out := w.forward(run, leavingChan(ctx))

				first := <-out // the consumer is now busy with item 0
				assert.Equal(t, 0, first.i)
				// The forwarder takes item 1, evaluates it and waits for
				// the consumer to take it.
				require.Eventually(t, func() bool { return len(rec.only(t).snapshot().events) == 2 }, time.Second, time.Millisecond)
				start := time.Now()
				run.Stop("supervisor")
				require.Error(t, ctx.Err(), "the loop's context is cancelled at once")
				if closesFirst {
					time.Sleep(50 * time.Millisecond) // the producer sees its context and closes
				}
				got := []int{first.i}
				for it := range out {
					got = append(got, it.i)
				}
				res := waitResult(t, run, time.Second)
				assert.Less(t, time.Since(start), drain/2, "released when the consumer took the item, not by the drain timeout")
				assert.Equal(t, []int{0, 1}, got, "the evaluated item 1 is not given up")
				assert.Equal(t, len(got), res.Events)
				assert.Equal(t, termination.Cancelled{Reason: termination.CancelExternal, Detail: "supervisor"}, res.Cause)
				assert.Empty(t, rec.only(t).snapshot().errs, "nothing was given up")
			})
		}
	}
}

// A consumer that leaves after a supervisor's Stop, without taking the item
// that waits for it, releases the run at once: Leave after Stop keeps the
// cause and gives the item up.
func TestLeaveAfterSupervisorStop(t *testing.T) {
	rec := &fakeRecorder{}
	stage := mustStage(t, "supervised", middleware.WithParticipant(rec)) // the default drain timeout: 5s
	ctx, run := stage.Start(context.Background())
	out := middleware.Forward(run, leavingChan(ctx), decodeItem)
	<-out
	require.Eventually(t, func() bool { return len(rec.only(t).snapshot().events) == 2 }, time.Second, time.Millisecond)
	run.Stop("supervisor")
	time.Sleep(20 * time.Millisecond) // the producer closes
	start := time.Now()
	run.Leave("consumer left")
	res := waitResult(t, run, time.Second)
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, termination.Cancelled{Reason: termination.CancelExternal, Detail: "supervisor"}, res.Cause)
	assert.Equal(t, 2, res.Events)
	assert.Empty(t, rec.only(t).snapshot().errs, "an item given up after Leave is not an error")
}

// A supervisor's Stop right after the final answer was evaluated ends the
// run as the stream would have: NaturalCompletion, and the consumer still
// gets the answer.
func TestSupervisorStopAfterTheFinalAnswer(t *testing.T) {
	rec := &fakeRecorder{}
	stage := mustStage(t, "supervised", middleware.WithParticipant(rec))
	in := make(chan item)
	_, run := stage.Start(context.Background())
	out := middleware.Forward(run, in, decodeItem)
	go func() {
		defer close(in)
		for i := range leavingScript {
			in <- item{i: i, evs: []termination.Event{leavingScript[i]}}
		}
	}()
	<-out
	<-out
	require.Eventually(t, func() bool { return len(rec.only(t).snapshot().events) == 3 }, time.Second, time.Millisecond)
	run.Stop("supervisor")
	var got []int
	for it := range out {
		got = append(got, it.i)
	}
	res := waitResult(t, run, time.Second)
	assert.Equal(t, []int{2}, got, "the final answer is handed over")
	assert.Equal(t, termination.NaturalCompletion{}, res.Cause)
	assert.Equal(t, 3, res.Events)
}
