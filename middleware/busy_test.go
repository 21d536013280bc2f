package middleware_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Issue 29, "never lose": a consumer busy far longer than the drain
// timeout (a tool call that runs a test suite) still gets every evaluated
// item, in order, and Result.Events counts exactly what it got — whether
// the policy fired on the item it has not taken yet, or a supervisor
// stopped the run while it was busy. The drain timeout is short here and
// the consumer busy ten times as long: the property is the same as 5s
// against minutes, without the wait.
func TestBusyConsumerGetsEveryEvaluatedItem(t *testing.T) {
	const (
		drain = 100 * time.Millisecond
		busy  = 10 * drain
	)
	ways := []struct {
		name string
		// consume runs the loop, calling work after the consumer took its
		// first item, and returns the indices it received.
		consume func(run *middleware.Run, ctx context.Context, work func()) []int
	}{
		{"Forward", func(run *middleware.Run, ctx context.Context, work func()) []int {
			return readAll(middleware.Forward(run, endless(ctx, toolCall), decodeItem), work)
		}},
		{"ForwardEach", func(run *middleware.Run, ctx context.Context, work func()) []int {
			return readAll(middleware.ForwardEach(run, endless(ctx, toolCall), decodeItemEach), work)
		}},
		{"ForwardSeq", func(run *middleware.Run, ctx context.Context, work func()) []int {
			var got []int
			for it, err := range middleware.ForwardSeq(run, endlessSeq(ctx, toolCall), decodeItem) {
				require.NoError(t, err)
				if got = append(got, it.i); len(got) == 1 {
					work()
				}
			}
			return got
		}},
	}
	for _, w := range ways {
		for _, stopBy := range []string{"policy", "supervisor"} {
			t.Run(w.name+"/"+stopBy, func(t *testing.T) {
				t.Parallel()
				rec := &fakeRecorder{}
				opts := []middleware.Option{middleware.WithDrainTimeout(drain), middleware.WithParticipant(rec)}
				if stopBy == "policy" {
					// The second tool call fires while the consumer is busy
					// with the first.
					opts = append(opts, policy(t, "max_tool_calls: 1"))
				}
				stage := mustStage(t, "busy_"+stopBy, opts...)
				ctx, run := stage.Start(context.Background())
				work := func() {
					if stopBy == "supervisor" {
						if w.name != "ForwardSeq" {
							// The forwarder takes and evaluates item 1
							// while the consumer is busy.
							require.Eventually(t, func() bool { return len(rec.only(t).snapshot().events) == 2 }, 5*time.Second, time.Millisecond)
						}
						run.Stop("supervisor")
					}
					time.Sleep(busy)
				}
				got := w.consume(run, ctx, work)
				res := waitResult(t, run, 5*time.Second)
				if stopBy == "policy" {
					assert.Equal(t, termination.MaxToolCallsReached{Limit: 1, Count: 2}, res.Cause)
					assert.Equal(t, []int{0, 1}, got, "the item that fired reaches the consumer")
				} else if w.name != "ForwardSeq" {
					assert.Equal(t, termination.Cancelled{Reason: termination.CancelExternal, Detail: "supervisor"}, res.Cause)
					assert.Equal(t, []int{0, 1}, got, "the item evaluated before the stop reaches the consumer")
				}
				assert.Equal(t, len(got), res.Events, "Result.Events counts exactly what the consumer got")
				for _, err := range rec.only(t).snapshot().errs {
					assert.NotContains(t, err.Error(), "given up", "no item is given up")
				}
			})
		}
	}
}

// readAll reads out until it is closed, calling work after the first item.
func readAll(out <-chan item, work func()) []int {
	var got []int
	for it := range out {
		if got = append(got, it.i); len(got) == 1 {
			work()
		}
	}
	return got
}

// endlessSeq yields ev forever, until ctx ends or the consumer stops.
func endlessSeq(ctx context.Context, ev termination.Event) func(func(item, error) bool) {
	return func(yield func(item, error) bool) {
		for i := 0; ctx.Err() == nil; i++ {
			if !yield(item{i: i, evs: []termination.Event{ev}}, nil) {
				return
			}
		}
	}
}

// Issue 29, "never hang": a consumer that breaks out of a Forward range
// without Leave. Once the run has stopped (here a supervisor's Stop, as an
// idle: or timeout: limit would) and the drain timeout has passed with the
// last item not taken, the recorder is told once, naming the stage, the
// run and Run.Leave; the item is still kept (the consumer might come
// back), and Wait waits. Then Leave releases it within the drain timeout,
// or the caller's context ends and releases it at once.
func TestBrokenOutWithoutLeaveIsReported(t *testing.T) {
	const drain = 100 * time.Millisecond
	for _, release := range []string{"Leave", "caller's context"} {
		t.Run(release, func(t *testing.T) {
			t.Parallel()
			rec := &fakeRecorder{}
			stage := mustStage(t, "breaker", middleware.WithDrainTimeout(drain), middleware.WithParticipant(rec))
			caller, cancel := context.WithCancel(context.Background())
			defer cancel()
			ctx, run := stage.Start(caller)
			for range middleware.Forward(run, endless(ctx, message), decodeItem) {
				break // the mistake: no run.Leave
			}
			// The forwarder evaluates item 1 and waits for the consumer.
			require.Eventually(t, func() bool { return len(rec.only(t).snapshot().events) == 2 }, 5*time.Second, time.Millisecond)
			run.Stop("supervisor")
			require.Eventually(t, func() bool { return len(rec.only(t).snapshot().errs) > 0 }, 5*time.Second, time.Millisecond)
			time.Sleep(5 * drain) // more drain timeouts pass: still one report, still waiting
			errs := rec.only(t).snapshot().errs
			require.Len(t, errs, 1, "reported once")
			for _, want := range []string{`stage "breaker"`, "run " + run.ID(), "Run.Leave", "kept"} {
				assert.Contains(t, errs[0].Error(), want)
			}
			select {
			case <-waitChan(run):
				t.Fatal("the item was given up on a wall clock while the consumer may still read")
			default:
			}
			start := time.Now()
			if release == "Leave" {
				run.Leave("consumer left")
			} else {
				cancel()
			}
			res := waitResult(t, run, 5*time.Second)
			assert.Less(t, time.Since(start), 5*time.Second)
			assert.Equal(t, termination.Cancelled{Reason: termination.CancelExternal, Detail: "supervisor"}, res.Cause)
			assert.Equal(t, 2, res.Events)
			assert.Len(t, rec.only(t).snapshot().errs, 1, "the release adds no report")
		})
	}
}

// Leave stays prompt however late it comes: Wait returns within the drain
// timeout of Leave even when the producer ignores its context.
func TestLateLeaveIsPrompt(t *testing.T) {
	const drain = 200 * time.Millisecond
	rec := &fakeRecorder{}
	stage := mustStage(t, "late_leaver", policy(t, "max_iterations: 1"), middleware.WithDrainTimeout(drain), middleware.WithParticipant(rec))
	_, run := stage.Start(context.Background())
	out := middleware.Forward(run, stubborn(t, message), decodeItem)
	<-out // item 1 fires and waits; the producer goes on sending
	require.Eventually(t, func() bool { _, ok := run.Cause(); return ok }, 5*time.Second, time.Millisecond)
	// The drain timeout passes with the item waiting: reported, and kept.
	require.Eventually(t, func() bool { return len(rec.only(t).snapshot().errs) == 1 }, 5*time.Second, time.Millisecond)
	time.Sleep(2 * drain)
	start := time.Now()
	run.Leave("consumer left")
	res := waitResult(t, run, 10*drain)
	assert.Less(t, time.Since(start), 10*drain, "within the drain timeout of Leave, with margin")
	assert.Equal(t, termination.MaxIterationsReached{Limit: 1, Count: 2}, res.Cause)
	assert.Positive(t, res.Drained, "the producer was drained while the item waited")
	var msgs []string
	for _, err := range rec.only(t).snapshot().errs {
		msgs = append(msgs, err.Error())
	}
	joined := strings.Join(msgs, "\n")
	assert.Contains(t, joined, "Run.Leave", "the wait was reported before Leave")
	assert.Contains(t, joined, "producer still sending", "then draining gave up")
	assert.Len(t, msgs, 2, fmt.Sprint(msgs))
}
