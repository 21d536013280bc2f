package middleware_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

var (
	toolCall = termination.Event{Kind: termination.KindToolCall, Tool: "search", Args: []byte(`{"q":"x"}`)}
	message  = termination.Event{Kind: termination.KindMessage, Text: "working"}
)

// endless sends ev forever, until ctx ends: a runaway loop that honours its
// context.
func endless(ctx context.Context, ev termination.Event) <-chan item {
	ch := make(chan item)
	go func() {
		defer close(ch)
		for i := 0; ; i++ {
			select {
			case ch <- item{i: i, evs: []termination.Event{ev}}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// stubborn sends ev forever and ignores the run's context: only quit (test
// cleanup) ends it.
func stubborn(t *testing.T, ev termination.Event) <-chan item {
	ch := make(chan item)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case ch <- item{i: i, evs: []termination.Event{ev}}:
			case <-quit:
				return
			}
		}
	}()
	t.Cleanup(func() { close(quit); <-done })
	return ch
}

// waitResult fails the test if the run does not finish within d.
func waitResult(t *testing.T, run *middleware.Run, d time.Duration) termination.Result {
	t.Helper()
	select {
	case <-waitChan(run):
	case <-time.After(d):
		t.Fatalf("run did not finish within %s", d)
	}
	return run.Wait()
}

func waitChan(run *middleware.Run) <-chan struct{} {
	ch := make(chan struct{})
	go func() { run.Wait(); close(ch) }()
	return ch
}

// causeOf recovers the run context's typed cause with errors.As.
func causeOf[C termination.Cause](t *testing.T, ctx context.Context) C {
	t.Helper()
	var c C
	require.Error(t, ctx.Err(), "the run's context is cancelled")
	require.True(t, errors.As(context.Cause(ctx), &c), "errors.As(context.Cause(ctx), %T) on %v", c, context.Cause(ctx))
	return c
}

// A consumer that stops reading says so with Stop: the run ends promptly,
// with the default (long) drain timeout, whether or not a condition had
// fired on the item it left behind.
func TestConsumerStopsReadingAndStops(t *testing.T) {
	for _, fires := range []bool{false, true} {
		name := map[bool]string{false: "nothing fired", true: "condition fired"}[fires]
		t.Run(name, func(t *testing.T) {
			src := "max_tool_calls: 100"
			if fires {
				src = "max_tool_calls: 3"
			}
			stage := mustStage(t, "consumer_leaves", policy(t, src))
			ctx, run := stage.Start(context.Background())
			out := middleware.Forward(run, endless(ctx, toolCall), decodeItem)
			<-out
			<-out
			<-out // now stop reading; with max_tool_calls: 3 the 4th item fires
			if fires {
				require.Eventually(t, func() bool { _, ok := run.Cause(); return ok }, time.Second, time.Millisecond)
			}
			run.Leave("consumer left")
			res := waitResult(t, run, time.Second)
			if fires {
				assert.Equal(t, termination.MaxToolCallsReached{Limit: 3, Count: 4}, res.Cause)
				causeOf[termination.MaxToolCallsReached](t, ctx)
			} else {
				want := termination.Cancelled{Reason: termination.CancelExternal, Detail: "consumer left"}
				assert.Equal(t, want, causeOf[termination.Cancelled](t, ctx))
				assert.Equal(t, want, res.Cause)
			}
		})
	}
}

// A consumer that stops reading without Leave cannot be told from a slow
// one: the evaluated item waits for it, and is given up (and reported)
// only once the caller's context has ended and the drain timeout has
// passed since the stop.
func TestConsumerStopsReadingAndCancels(t *testing.T) {
	rec := &fakeRecorder{}
	const drain = 200 * time.Millisecond
	stage := mustStage(t, "consumer_vanishes", middleware.WithDrainTimeout(drain), middleware.WithParticipant(rec))
	caller, cancel := context.WithCancel(context.Background())
	ctx, run := stage.Start(caller)
	out := middleware.Forward(run, endless(ctx, toolCall), decodeItem)
	<-out
	<-out
	// The third item is evaluated and waits for the consumer.
	require.Eventually(t, func() bool { return len(rec.only(t).snapshot().events) == 3 }, time.Second, time.Millisecond)
	start := time.Now()
	cancel()
	res := waitResult(t, run, 5*time.Second)
	assert.GreaterOrEqual(t, time.Since(start), drain/2, "the evaluated item waited for the consumer")
	assert.Equal(t, termination.CancelContext, res.Cause.(termination.Cancelled).Reason)
	assert.Equal(t, 3, res.Events, "two items taken, a third evaluated and given up")
	errs := rec.only(t).snapshot().errs
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "the consumer did not take the last item within 200ms of the stop and the caller's context has ended: item given up")
	assert.Contains(t, errs[0].Error(), "run "+run.ID())
}

func TestCallerCancelledMidRun(t *testing.T) {
	stage := mustStage(t, "cancelled", shortDrain)
	caller, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ctx, run := stage.Start(caller)
	n := 0
	for range middleware.Forward(run, endless(ctx, message), decodeItem) {
		if n++; n == 5 {
			cancel(errors.New("user went away"))
		}
	}
	res := run.Wait()
	want := termination.Cancelled{Reason: termination.CancelContext, Detail: "user went away"}
	assert.Equal(t, want, res.Cause)
	assert.Equal(t, want, causeOf[termination.Cancelled](t, ctx))
	assert.Equal(t, termination.OutcomeFailed, res.Outcome)
	assert.GreaterOrEqual(t, res.Events, 5)
	// Every evaluated item was forwarded, the one evaluated as the caller
	// left included.
	assert.Equal(t, n, res.Events, "evaluated items vs forwarded")
}

func TestProducerIgnoresContext(t *testing.T) {
	rec := &fakeRecorder{}
	stage := mustStage(t, "stubborn", policy(t, "max_tool_calls: 2"), shortDrain, middleware.WithParticipant(rec))
	ctx, run := stage.Start(context.Background())
	n := 0
	for range middleware.Forward(run, stubborn(t, toolCall), decodeItem) {
		n++
	}
	res := waitResult(t, run, 2*time.Second)
	assert.Equal(t, 3, n)
	assert.Equal(t, termination.MaxToolCallsReached{Limit: 2, Count: 3}, res.Cause)
	causeOf[termination.MaxToolCallsReached](t, ctx)
	assert.Positive(t, res.Drained, "the items sent during the drain are counted")
	fr := rec.only(t).snapshot()
	require.NotEmpty(t, fr.errs)
	assert.Contains(t, fr.errs[0].Error(), "producer still sending")
	// goleak (TestMain) shows the forwarding goroutine has exited.
}

func TestLoopHangs(t *testing.T) {
	t.Run("Forward", func(t *testing.T) {
		stage := mustStage(t, "hung", policy(t, "timeout: 20ms"), shortDrain)
		ctx, run := stage.Start(context.Background())
		in := make(chan item)
		go func() { <-ctx.Done(); close(in) }() // sends nothing, honours ctx
		for range middleware.Forward(run, in, decodeItem) {
			t.Fatal("nothing was sent")
		}
		res := waitResult(t, run, time.Second)
		assert.Equal(t, 20*time.Millisecond, res.Cause.(termination.Timeout).Limit)
		to := causeOf[termination.Timeout](t, ctx)
		assert.Equal(t, 20*time.Millisecond, to.Elapsed, "elapsed is the limit, as in replay")
		assert.GreaterOrEqual(t, res.Duration, 20*time.Millisecond, "the timer fired at the limit, not before")
		assert.Equal(t, 0, res.Events)
	})
	t.Run("Forward ignoring ctx", func(t *testing.T) {
		stage := mustStage(t, "hung", policy(t, "timeout: 20ms"), shortDrain)
		ctx, run := stage.Start(context.Background())
		in := make(chan item) // never sent on, never closed
		start := time.Now()
		for range middleware.Forward(run, in, decodeItem) {
		}
		released := time.Since(start)
		res := waitResult(t, run, time.Second)
		causeOf[termination.Timeout](t, ctx)
		assert.IsType(t, termination.Timeout{}, res.Cause)
		assert.Less(t, released, 500*time.Millisecond, "the consumer is released by the timer")
	})
	t.Run("ForwardSeq", func(t *testing.T) {
		stage := mustStage(t, "hung", policy(t, "timeout: 20ms"))
		ctx, run := stage.Start(context.Background())
		seq := func(yield func(item, error) bool) {
			if !yield(item{i: 0, evs: []termination.Event{message}}, nil) {
				return
			}
			<-ctx.Done() // hangs until the timer cancels it
		}
		n := 0
		for range middleware.ForwardSeq(run, seq, decodeItem) {
			n++
		}
		res := run.Wait()
		assert.Equal(t, 1, n)
		assert.IsType(t, termination.Timeout{}, res.Cause)
		causeOf[termination.Timeout](t, ctx)
	})
	t.Run("ForwardSeq yields after the stop", func(t *testing.T) {
		stage := mustStage(t, "late", policy(t, "timeout: 20ms"))
		ctx, run := stage.Start(context.Background())
		seq := func(yield func(item, error) bool) {
			<-ctx.Done()
			// A loop that notices the cancellation late and yields once more.
			yield(item{i: 0, evs: []termination.Event{message}}, nil)
		}
		for range middleware.ForwardSeq(run, seq, decodeItem) {
			t.Fatal("an item yielded after the stop must not be forwarded")
		}
		res := run.Wait()
		assert.IsType(t, termination.Timeout{}, res.Cause)
		assert.Equal(t, 0, res.Events)
		assert.Equal(t, 1, res.Drained)
	})
}

func TestPredicatePanics(t *testing.T) {
	boom := termination.CauseFunc("boom", func(ev termination.Event, _ termination.Totals) termination.Cause {
		if ev.Text == "bad" {
			panic("predicate exploded")
		}
		return nil
	})
	stage := mustStage(t, "panicky", middleware.WithCondition(boom), shortDrain)
	evs := []termination.Event{message, {Kind: termination.KindMessage, Text: "bad"}, message}
	for name, fwd := range forwardings {
		t.Run(name, func(t *testing.T) {
			out, res := fwd(t, stage, itemsOf(evs))
			assert.Equal(t, []int{0, 1}, indices(out), "the item that fired is delivered, then the output ends")
			f, ok := res.Cause.(termination.Failed)
			require.True(t, ok, "cause %#v", res.Cause)
			assert.Equal(t, termination.FailPanic, f.Reason)
			assert.Contains(t, f.Err, "predicate exploded")
			assert.Equal(t, 2, res.StoppedAt)
		})
	}
}

func TestDecodePanics(t *testing.T) {
	decode := func(it item) termination.Event {
		if it.i == 1 {
			panic("decode exploded")
		}
		return message
	}
	items := itemsOf([]termination.Event{message, message, message})
	check := func(t *testing.T, out []item, run *middleware.Run, rec *fakeRecorder) {
		res := run.Wait()
		assert.Equal(t, []int{0, 1}, indices(out))
		f, ok := res.Cause.(termination.Failed)
		require.True(t, ok, "cause %#v", res.Cause)
		assert.Equal(t, termination.FailPanic, f.Reason)
		assert.Contains(t, f.Err, "decode exploded")
		assert.Equal(t, f, causeOf[termination.Failed](t, run.Context()))
		fr := rec.only(t).snapshot()
		require.Len(t, fr.errs, 1, "the panic is reported to the recorder")
		assert.Contains(t, fr.errs[0].Error(), "decode panicked")
	}
	t.Run("Forward", func(t *testing.T) {
		rec := &fakeRecorder{}
		ctx, run := mustStage(t, "decode", middleware.WithParticipant(rec), shortDrain).Start(context.Background())
		var out []item
		for it := range middleware.Forward(run, produce(ctx, items), decode) {
			out = append(out, it)
		}
		check(t, out, run, rec)
	})
	t.Run("ForwardSeq", func(t *testing.T) {
		rec := &fakeRecorder{}
		_, run := mustStage(t, "decode", middleware.WithParticipant(rec)).Start(context.Background())
		var out []item
		for it := range middleware.ForwardSeq(run, seqOf(items), decode) {
			out = append(out, it)
		}
		check(t, out, run, rec)
	})
}

func TestOnWarningPanics(t *testing.T) {
	rec := &fakeRecorder{}
	calls := 0
	stage := mustStage(t, "hook", policy(t, "token_budget: {total: 1000, pressure: 0.5}"), middleware.WithParticipant(rec),
		middleware.WithOnWarning(func(ctx context.Context, _ *middleware.Run, c termination.Cause) {
			calls++
			assert.NoError(t, ctx.Err(), "the hook gets the live run context")
			panic("hook exploded")
		}))
	spend := termination.Event{Kind: termination.KindMessage, Text: "x", Usage: termination.Usage{InputTokens: 300}}
	_, run := stage.Start(context.Background())
	var out []item
	for it := range middleware.ForwardSeq(run, seqOf(itemsOf([]termination.Event{spend, spend, spend, spend, spend})), decodeItem) {
		out = append(out, it)
	}
	res := run.Wait()
	assert.Len(t, out, 4, "the run goes on after the hook panics, until the budget is exhausted")
	assert.Equal(t, termination.BudgetExhausted{Resource: termination.ResourceTotalTokens, Used: 1200, Limit: 1000}, res.Cause)
	assert.Equal(t, 1, calls)
	assert.Len(t, res.Warnings, 1)
	fr := rec.only(t).snapshot()
	require.Len(t, fr.errs, 1)
	assert.Contains(t, fr.errs[0].Error(), "OnWarning hook panicked: hook exploded")
}

func TestInputEndsImmediately(t *testing.T) {
	stage := mustStage(t, "empty", policy(t, "max_iterations: 1"))
	for name, fwd := range forwardings {
		t.Run(name, func(t *testing.T) {
			out, res := fwd(t, stage, nil)
			assert.Empty(t, out)
			assert.Equal(t, termination.NaturalCompletion{}, res.Cause)
			assert.Equal(t, termination.OutcomeSucceeded, res.Outcome)
			assert.Zero(t, res.Events)
		})
	}
}

func TestInvalidInput(t *testing.T) {
	stage := mustStage(t, "misuse")
	cases := map[string]struct {
		run  func(run *middleware.Run) int // returns items received
		want string
	}{
		"nil channel": {func(run *middleware.Run) int { return count(middleware.Forward[item](run, nil, decodeItem)) }, "nil input channel"},
		"nil decode": {func(run *middleware.Run) int {
			return count(middleware.Forward[item](run, make(chan item), nil))
		}, "nil decode function"},
		"nil each decode": {func(run *middleware.Run) int {
			return count(middleware.ForwardEach[item](run, make(chan item), nil))
		}, "nil decode function"},
		"nil seq": {func(run *middleware.Run) int { return countSeq(middleware.ForwardSeq[item](run, nil, decodeItem)) }, "nil input iterator"},
		"nil seq decode": {func(run *middleware.Run) int {
			return countSeq(middleware.ForwardSeq[item](run, seqOf(itemsOf([]termination.Event{message})), nil))
		}, "nil decode function"},
		"nil seq each decode": {func(run *middleware.Run) int {
			return countSeq(middleware.ForwardSeqEach[item](run, seqOf(nil), nil))
		}, "nil decode function"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, run := stage.Start(context.Background())
			assert.Zero(t, c.run(run))
			select {
			case <-run.Done():
			default:
				t.Fatal("the run ends at once")
			}
			res := waitResult(t, run, time.Second)
			f, ok := res.Cause.(termination.Failed)
			require.True(t, ok, "cause %#v", res.Cause)
			assert.Equal(t, termination.FailInvalidInput, f.Reason)
			assert.Contains(t, f.Err, c.want, "the cause says what was wrong")
			assert.Equal(t, f, causeOf[termination.Failed](t, ctx))
		})
	}
	t.Run("nil run", func(t *testing.T) {
		assert.Zero(t, count(middleware.Forward[item](nil, make(chan item), decodeItem)))
		assert.Zero(t, countSeq(middleware.ForwardSeq[item](nil, seqOf(nil), decodeItem)))
	})
}

func count(ch <-chan item) int {
	n := 0
	for range ch {
		n++
	}
	return n
}

func countSeq(seq iter.Seq2[item, error]) int {
	n := 0
	for range seq {
		n++
	}
	return n
}

func TestNewErrors(t *testing.T) {
	cases := map[string]struct {
		stage string
		opts  []middleware.Option
		want  string
	}{
		"empty name":            {"", nil, `New(""): stage name is empty: a stage name is 1 to 128 of the characters A-Z a-z 0-9 . _ -`},
		"blank name":            {"  ", nil, `New("  "): stage name "  " starts with ' '`},
		"not a file name":       {"my stage!", nil, `New("my stage!"): stage name "my stage!" has ' ' at byte 2: a stage name is 1 to 128 of the characters A-Z a-z 0-9 . _ - (a safe file name), starting with a letter or digit`},
		"a path":                {"../planner", nil, `stage name "../planner" starts with '.'`},
		"nil participant":       {"s", []middleware.Option{middleware.WithParticipant(nil)}, `New("s"): WithParticipant: nil participant`},
		"typed nil participant": {"s", []middleware.Option{middleware.WithParticipant((*fakeRecorder)(nil))}, "WithParticipant: nil participant"},
		"zero drain timeout":    {"s", []middleware.Option{middleware.WithDrainTimeout(0)}, "WithDrainTimeout"},
		"negative drain":        {"s", []middleware.Option{middleware.WithDrainTimeout(-time.Second)}, "WithDrainTimeout: must be > 0, got -1s"},
		"bad custom reason":     {"s", []middleware.Option{middleware.WithCustomReasons("Not-Snake")}, `WithCustomReasons: "Not-Snake"`},
		"builtin custom reason": {"s", []middleware.Option{middleware.WithCustomReasons("timeout")}, `"timeout" is a built-in`},
		"invalid condition":     {"s", []middleware.Option{middleware.WithCondition(termination.IterationLimits{Limit: -2})}, "max_iterations: must be a positive int, got -2"},
		"invalid nested":        {"s", []middleware.Option{middleware.WithCondition(termination.AnyOf(termination.StallLimits{Repeats: 1}))}, "stall.repeats"},
		"empty predicate name":  {"s", []middleware.Option{middleware.WithCondition(termination.CauseFunc("", func(termination.Event, termination.Totals) termination.Cause { return nil }))}, "predicate: empty name"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := middleware.New(c.stage, c.opts...)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	t.Run("nil options are ignored", func(t *testing.T) {
		s, err := middleware.New("s", nil, middleware.WithCondition(nil),
			middleware.WithTreatAsSuccess(nil), middleware.WithOnWarning(nil))
		require.NoError(t, err)
		assert.Equal(t, "s", s.Name())
	})
}

func TestStopConcurrentWithFiring(t *testing.T) {
	stage := mustStage(t, "racing", policy(t, "stop_message: true"))
	stopEv := termination.Event{Kind: termination.KindStop, Text: "bye"}
	seen := map[string]int{}
	for range 300 {
		ctx, run := stage.Start(context.Background())
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { <-start; run.Observe(stopEv) })
		wg.Go(func() { <-start; run.Stop("a") })
		wg.Go(func() { <-start; run.Stop("b") })
		close(start)
		wg.Wait()
		res := run.Finish(nil)
		require.Len(t, res.Fired, 1, "exactly one cause")
		assert.Equal(t, res.Cause, res.Fired[0])
		assert.Equal(t, res.Cause, context.Cause(ctx), "the context's cause is the result's")
		switch c := res.Cause.(type) {
		case termination.Completed:
			seen["completed"]++
			assert.Equal(t, 1, res.Events)
			assert.Equal(t, 1, res.StoppedAt)
		case termination.Cancelled:
			seen["cancelled"]++
			assert.Equal(t, termination.CancelExternal, c.Reason)
			assert.Contains(t, []string{"a", "b"}, c.Detail)
			assert.Equal(t, 0, res.Events)
			assert.Equal(t, 1, res.Drained, "the stop event came after the stop")
		default:
			t.Fatalf("cause %#v", c)
		}
	}
	t.Logf("outcomes: %v", seen)
}

func TestStopTwice(t *testing.T) {
	stage := mustStage(t, "stopped", shortDrain)
	ctx, run := stage.Start(context.Background())
	out := middleware.Forward(run, endless(ctx, message), decodeItem)
	<-out
	run.Stop("first")
	run.Stop("second")
	for range out {
	}
	res := run.Wait()
	want := termination.Cancelled{Reason: termination.CancelExternal, Detail: "first"}
	assert.Equal(t, want, res.Cause)
	assert.Equal(t, []termination.Cause{want}, res.Fired)
	assert.Equal(t, want, causeOf[termination.Cancelled](t, ctx))
	run.Stop("after the end")
	assert.Equal(t, want, run.Wait().Cause)
}

func TestCancelledAtStart(t *testing.T) {
	caller, cancel := context.WithCancel(context.Background())
	cancel()
	stage := mustStage(t, "early", shortDrain)
	t.Run("Observe", func(t *testing.T) {
		ctx, run := stage.Start(caller)
		require.Error(t, ctx.Err(), "the run context is cancelled before Start returns")
		c, stop := run.Observe(message)
		assert.True(t, stop)
		assert.Equal(t, termination.CancelContext, c.(termination.Cancelled).Reason)
		res := run.Finish(nil)
		assert.Equal(t, 0, res.Events)
		assert.Equal(t, 1, res.Drained)
	})
	t.Run("Forward", func(t *testing.T) {
		ctx, run := stage.Start(caller)
		assert.Zero(t, count(middleware.Forward(run, endless(ctx, message), decodeItem)))
		res := run.Wait()
		assert.Equal(t, 0, res.Events)
		assert.Equal(t, termination.CancelContext, causeOf[termination.Cancelled](t, ctx).Reason)
	})
	t.Run("ForwardSeq", func(t *testing.T) {
		_, run := stage.Start(caller)
		assert.Zero(t, countSeq(middleware.ForwardSeq(run, seqOf(itemsOf([]termination.Event{message})), decodeItem)))
		assert.Equal(t, termination.CancelContext, run.Wait().Cause.(termination.Cancelled).Reason)
	})
}

func TestCancelledMidToolCall(t *testing.T) {
	stage := mustStage(t, "tool", shortDrain)
	caller, cancel := context.WithCancel(context.Background())
	ctx, run := stage.Start(caller)
	toolErr := make(chan error, 1)
	in := make(chan item)
	go func() {
		defer close(in)
		in <- item{i: 0, evs: []termination.Event{toolCall}}
		// The tool runs until the context ends.
		<-ctx.Done()
		toolErr <- ctx.Err()
		select {
		case in <- item{i: 1, evs: []termination.Event{{Kind: termination.KindToolResult, Tool: "search", Err: "cancelled"}}}:
		case <-time.After(time.Second):
		}
	}()
	out := middleware.Forward(run, in, decodeItem)
	first := <-out
	assert.Equal(t, 0, first.i)
	cancel()
	assert.Zero(t, count(out), "the output ends at the cancellation")
	res := run.Wait()
	assert.ErrorIs(t, <-toolErr, context.Canceled)
	assert.Equal(t, termination.CancelContext, res.Cause.(termination.Cancelled).Reason)
	assert.Equal(t, 1, res.ToolCalls)
	assert.Equal(t, 1, res.Drained, "the failed tool result came after the stop")
}

func TestCancelledDuringDrain(t *testing.T) {
	stage := mustStage(t, "drain", policy(t, "max_tool_calls: 1"), middleware.WithDrainTimeout(10*time.Second))
	caller, cancel := context.WithCancel(context.Background())
	_, run := stage.Start(caller)
	in := make(chan item)
	go func() { // ignores the run's context, honours the caller's
		defer close(in)
		for i := 0; ; i++ {
			select {
			case in <- item{i: i, evs: []termination.Event{toolCall}}:
			case <-caller.Done():
				return
			}
		}
	}()
	assert.Equal(t, 2, count(middleware.Forward(run, in, decodeItem)))
	// The output is closed: the forwarder is draining.
	cancel()
	res := waitResult(t, run, 5*time.Second)
	assert.Equal(t, termination.MaxToolCallsReached{Limit: 1, Count: 2}, res.Cause, "a cancellation after the stop does not change the cause")
	assert.Equal(t, 2, res.Events)
}

func TestConsumerBreaksForwardSeq(t *testing.T) {
	stage := mustStage(t, "breaker")
	ctx, run := stage.Start(context.Background())
	seqEnded := false
	seq := func(yield func(item, error) bool) {
		defer func() { seqEnded = true }()
		for i := 0; ; i++ {
			if !yield(item{i: i, evs: []termination.Event{message}}, nil) {
				return
			}
		}
	}
	n := 0
	for range middleware.ForwardSeq(run, seq, decodeItem) {
		if n++; n == 3 {
			break
		}
	}
	assert.True(t, seqEnded)
	res := run.Wait()
	assert.Equal(t, termination.Cancelled{Reason: termination.CancelExternal, Detail: "consumer stopped iterating"}, res.Cause)
	assert.Equal(t, 3, res.Events)
	causeOf[termination.Cancelled](t, ctx)
}

func TestStreamErrors(t *testing.T) {
	errBoom := errors.New("model unavailable")
	stage := mustStage(t, "errs", shortDrain)
	want := termination.Failed{Reason: termination.FailStreamError, Err: "model unavailable"}
	t.Run("iterator error", func(t *testing.T) {
		ctx, run := stage.Start(context.Background())
		seq := func(yield func(item, error) bool) {
			if yield(item{i: 0, evs: []termination.Event{message}}, nil) {
				yield(item{}, errBoom)
			}
		}
		var errs []error
		for _, err := range middleware.ForwardSeq(run, seq, decodeItem) {
			errs = append(errs, err)
		}
		assert.Equal(t, []error{nil, errBoom}, errs, "the error pair is forwarded")
		res := run.Wait()
		assert.Equal(t, want, res.Cause)
		assert.Equal(t, want, causeOf[termination.Failed](t, ctx))
		assert.Equal(t, 2, res.Events)
	})
	t.Run("error event last", func(t *testing.T) {
		ctx, run := stage.Start(context.Background())
		evs := []termination.Event{message, {Kind: termination.KindError, Err: "model unavailable"}}
		assert.Equal(t, 2, count(middleware.Forward(run, produce(ctx, itemsOf(evs)), decodeItem)))
		res := run.Wait()
		assert.Equal(t, want, res.Cause)
		assert.Equal(t, want, causeOf[termination.Failed](t, ctx))
	})
	t.Run("error event then recovery", func(t *testing.T) {
		ctx, run := stage.Start(context.Background())
		evs := []termination.Event{{Kind: termination.KindError, Err: "transient"}, message}
		assert.Equal(t, 2, count(middleware.Forward(run, produce(ctx, itemsOf(evs)), decodeItem)))
		assert.Equal(t, termination.NaturalCompletion{}, run.Wait().Cause)
	})
	t.Run("Finish with an error", func(t *testing.T) {
		ctx, run := stage.Start(context.Background())
		run.Observe(message)
		res := run.Finish(errBoom)
		assert.Equal(t, want, res.Cause)
		assert.Equal(t, want, causeOf[termination.Failed](t, ctx))
	})
}

func TestContextCauseEveryPath(t *testing.T) {
	// Each stop path, and the cause errors.As recovers from the run context.
	type path struct {
		name string
		run  func(t *testing.T) (context.Context, termination.Result)
		want termination.Cause
	}
	stage := func(t *testing.T, src string) *middleware.Stage {
		return mustStage(t, "paths", policy(t, src), shortDrain)
	}
	paths := []path{
		{"condition", func(t *testing.T) (context.Context, termination.Result) {
			ctx, run := stage(t, "max_tool_calls: 1").Start(context.Background())
			count(middleware.Forward(run, endless(ctx, toolCall), decodeItem))
			return ctx, run.Wait()
		}, termination.MaxToolCallsReached{Limit: 1, Count: 2}},
		{"timeout", func(t *testing.T) (context.Context, termination.Result) {
			ctx, run := stage(t, "timeout: 10ms").Start(context.Background())
			in := make(chan item)
			go func() { <-ctx.Done(); close(in) }()
			count(middleware.Forward(run, in, decodeItem))
			res := run.Wait()
			res.Cause = termination.Timeout{Limit: res.Cause.(termination.Timeout).Limit} // elapsed varies
			return ctx, res
		}, termination.Timeout{Limit: 10 * time.Millisecond}},
		{"stop", func(t *testing.T) (context.Context, termination.Result) {
			ctx, run := stage(t, "{}").Start(context.Background())
			run.Stop("button")
			return ctx, run.Finish(nil)
		}, termination.Cancelled{Reason: termination.CancelExternal, Detail: "button"}},
		{"caller context", func(t *testing.T) (context.Context, termination.Result) {
			caller, cancel := context.WithCancel(context.Background())
			ctx, run := stage(t, "{}").Start(caller)
			cancel()
			count(middleware.Forward(run, endless(ctx, message), decodeItem))
			return ctx, run.Wait()
		}, termination.Cancelled{Reason: termination.CancelContext, Detail: "context canceled"}},
		{"invalid input", func(t *testing.T) (context.Context, termination.Result) {
			ctx, run := stage(t, "{}").Start(context.Background())
			count(middleware.Forward[item](run, nil, decodeItem))
			return ctx, run.Wait()
		}, termination.Failed{Reason: termination.FailInvalidInput, Err: "middleware: Forward: nil input channel"}},
		{"stream error", func(t *testing.T) (context.Context, termination.Result) {
			ctx, run := stage(t, "{}").Start(context.Background())
			return ctx, run.Finish(errors.New("eof"))
		}, termination.Failed{Reason: termination.FailStreamError, Err: "eof"}},
		{"natural", func(t *testing.T) (context.Context, termination.Result) {
			ctx, run := stage(t, "{}").Start(context.Background())
			count(middleware.Forward(run, produce(ctx, itemsOf([]termination.Event{message})), decodeItem))
			return ctx, run.Wait()
		}, termination.NaturalCompletion{}},
		{"all", func(t *testing.T) (context.Context, termination.Result) {
			ctx, run := stage(t, "all: [{max_iterations: 1}, {stop_message: true}]").Start(context.Background())
			evs := []termination.Event{message, message, {Kind: termination.KindStop}, message}
			count(middleware.Forward(run, produce(ctx, itemsOf(evs)), decodeItem))
			return ctx, run.Wait()
		}, termination.All{Causes: []termination.Cause{termination.MaxIterationsReached{Limit: 1, Count: 2},
			termination.Completed{Condition: "stop_message"}}}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			ctx, res := p.run(t)
			assert.Equal(t, p.want, res.Cause)
			require.Error(t, ctx.Err())
			cause := context.Cause(ctx)
			var tc termination.Cause
			require.True(t, errors.As(cause, &tc), "errors.As(context.Cause(ctx), *termination.Cause)")
			if to, ok := tc.(termination.Timeout); ok {
				tc = termination.Timeout{Limit: to.Limit}
			}
			assert.Equal(t, p.want, tc)
			assert.True(t, strings.HasPrefix(cause.Error(), "agentstop: "), cause.Error())
		})
	}
}

func TestTreatAsSuccess(t *testing.T) {
	rec := &fakeRecorder{}
	stage := mustStage(t, "lenient", policy(t, "max_tool_calls: 1"), shortDrain, middleware.WithParticipant(rec),
		middleware.WithTreatAsSuccess(func(c termination.Cause) bool {
			_, ok := c.(termination.MaxToolCallsReached)
			return ok
		}))
	ctx, run := stage.Start(context.Background())
	count(middleware.Forward(run, endless(ctx, toolCall), decodeItem))
	res := run.Wait()
	assert.Equal(t, termination.MaxToolCallsReached{Limit: 1, Count: 2}, res.Cause, "the cause is never rewritten")
	assert.Equal(t, termination.OutcomeSucceeded, res.Outcome)
	assert.Equal(t, "max_tool_calls", res.Tag())
	assert.Equal(t, termination.OutcomeSucceeded, rec.only(t).snapshot().ends[0].Outcome, "the recorder sees the overridden outcome")

	t.Run("not matching", func(t *testing.T) {
		_, run := stage.Start(context.Background())
		run.Stop("x")
		assert.Equal(t, termination.OutcomeFailed, run.Finish(nil).Outcome)
	})
	t.Run("panics", func(t *testing.T) {
		rec := &fakeRecorder{}
		stage := mustStage(t, "lenient", middleware.WithParticipant(rec),
			middleware.WithTreatAsSuccess(func(termination.Cause) bool { panic("oops") }))
		_, run := stage.Start(context.Background())
		run.Stop("x")
		res := run.Finish(nil)
		assert.Equal(t, termination.OutcomeFailed, res.Outcome, "a panicking override keeps the default outcome")
		fr := rec.only(t).snapshot()
		require.Len(t, fr.errs, 1)
		assert.Contains(t, fr.errs[0].Error(), "TreatAsSuccess panicked: oops")
	})
}

func TestCustomReasons(t *testing.T) {
	custom := func(reason string) termination.Condition {
		return termination.CauseFunc("custom", func(ev termination.Event, _ termination.Totals) termination.Cause {
			if ev.Kind == termination.KindStop {
				return termination.Custom{Reason: reason}
			}
			return nil
		})
	}
	cases := []struct {
		name    string
		reason  string
		allowed []string
		want    string
	}{
		{"allowed", "approved_by_human", []string{"approved_by_human", "quota"}, "approved_by_human"},
		{"not allowed", "something_else", []string{"approved_by_human"}, "custom"},
		{"no allow-list", "approved_by_human", nil, "custom"},
		{"free text never a tag", "Approved By Human", nil, "custom"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stage := mustStage(t, "custom", middleware.WithCondition(custom(c.reason)), middleware.WithCustomReasons(c.allowed...))
			ctx, run := stage.Start(context.Background())
			_, stop := run.Observe(termination.Event{Kind: termination.KindStop})
			require.True(t, stop)
			res := run.Finish(nil)
			assert.Equal(t, c.want, res.TerminationCause)
			assert.Equal(t, c.want, res.Tag())
			assert.Equal(t, termination.Custom{Reason: c.reason}, res.Cause)
			assert.Equal(t, termination.OutcomeFailed, res.Outcome)
			assert.Equal(t, c.reason, causeOf[termination.Custom](t, ctx).Reason)
		})
	}
}

func TestSkip(t *testing.T) {
	stage := mustStage(t, "optional", policy(t, "timeout: 1ms"))
	res := stage.Skip(context.Background(), "cached answer")
	assert.Equal(t, termination.Skipped{Reason: "cached answer"}, res.Cause)
	assert.Equal(t, termination.OutcomeSkipped, res.Outcome)
	assert.Equal(t, "skipped", res.Tag())
	assert.Equal(t, "optional", res.Stage)
	assert.Zero(t, res.Events)
	assert.Equal(t, []termination.Cause{res.Cause}, res.Fired)
}

func TestObserveAfterFinish(t *testing.T) {
	stage := mustStage(t, "late")
	_, run := stage.Start(context.Background())
	run.Observe(message)
	res := run.Finish(nil)
	c, stop := run.Observe(message)
	assert.True(t, stop)
	assert.Equal(t, res.Cause, c)
	cause, ok := run.Cause()
	assert.True(t, ok)
	assert.Equal(t, res.Cause, cause)
}

// A loop body that breaks out on an error pair ends the run with that
// stream error, not as a consumer that left.
func TestConsumerBreaksOnErrorPair(t *testing.T) {
	stage := mustStage(t, "breaks_on_error")
	_, run := stage.Start(context.Background())
	seq := func(yield func(item, error) bool) {
		if !yield(item{i: 0, evs: []termination.Event{{Kind: termination.KindMessage, Text: "hi"}}}, nil) {
			return
		}
		if !yield(item{}, errors.New("connection reset")) {
			return
		}
		yield(item{i: 2, evs: []termination.Event{{Kind: termination.KindMessage, Text: "never"}}}, nil)
	}
	for _, err := range middleware.ForwardSeq(run, seq, decodeItem) {
		if err != nil {
			break
		}
	}
	res := run.Wait()
	assert.Equal(t, termination.Failed{Reason: termination.FailStreamError, Err: "connection reset"}, res.Cause)
	assert.Equal(t, 2, res.Events)
}

// Breaking out right after the final answer is how loops end: the run ends
// as a natural completion, not as a consumer that left.
func TestConsumerBreaksAfterFinal(t *testing.T) {
	stage := mustStage(t, "breaks_after_final")
	_, run := stage.Start(context.Background())
	evs := []termination.Event{
		{Kind: termination.KindMessage, Text: "thinking"},
		{Kind: termination.KindFinal, Text: "done"},
		{Kind: termination.KindMessage, Text: "never"},
	}
	for it := range middleware.ForwardSeq(run, seqOf(itemsOf(evs)), decodeItem) {
		if it.evs[0].Kind == termination.KindFinal {
			break
		}
	}
	res := run.Wait()
	assert.Equal(t, termination.NaturalCompletion{}, res.Cause)
	assert.Equal(t, 2, res.Events)

	// Breaking out before the final answer is still the consumer leaving.
	_, run = stage.Start(context.Background())
	for range middleware.ForwardSeq(run, seqOf(itemsOf(evs)), decodeItem) {
		break
	}
	assert.Equal(t, termination.CancelExternal, run.Wait().Cause.(termination.Cancelled).Reason)
}

// The run's context reports the earlier of the caller's deadline and the
// stage's timeout, so loops can size their own timeouts from it.
func TestRunContextDeadline(t *testing.T) {
	caller, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	want, _ := caller.Deadline()
	ctx, run := mustStage(t, "deadline").Start(caller)
	got, ok := ctx.Deadline()
	assert.True(t, ok)
	assert.Equal(t, want, got)
	run.Finish(nil)

	before := time.Now()
	ctx, run = mustStage(t, "deadline_timeout", policy(t, "timeout: 1m")).Start(caller)
	got, ok = ctx.Deadline()
	assert.True(t, ok)
	assert.WithinRange(t, got, before.Add(time.Minute), time.Now().Add(time.Minute))
	run.Finish(nil)

	ctx, run = mustStage(t, "no_deadline").Start(context.Background())
	_, ok = ctx.Deadline()
	assert.False(t, ok)
	run.Finish(nil)
}
