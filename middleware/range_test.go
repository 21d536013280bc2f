package middleware_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// A condition fires: the firing item is yielded, the loop ends, the
// producer is drained (it honours the run's context, so it stops at once)
// and the run is finished when the range statement returns.
func TestRangeFires(t *testing.T) {
	for _, each := range []bool{false, true} {
		stage := mustStage(t, "range", policy(t, "max_tool_calls: 2"))
		ctx, run := stage.Start(context.Background())
		in := endless(ctx, toolCall)
		var got []int
		seq := middleware.Range(run, in, decodeItem)
		if each {
			seq = middleware.RangeEach(run, in, decodeItemEach)
		}
		for it := range seq {
			got = append(got, it.i)
		}
		res := waitResult(t, run, time.Second) // finished when the range statement returns
		assert.Equal(t, []int{0, 1, 2}, got)
		assert.Equal(t, termination.MaxToolCallsReached{Limit: 2, Count: 3}, res.Cause)
		assert.Equal(t, 3, res.Events)
		assert.Equal(t, 3, res.StoppedAt)
		causeOf[termination.MaxToolCallsReached](t, ctx)
		_, open := <-in
		assert.False(t, open, "the producer's channel was drained to its end")
	}
}

// The stream ends by itself: NaturalCompletion, nothing drained.
func TestRangeStreamEnds(t *testing.T) {
	ctx, run := mustStage(t, "range").Start(context.Background())
	items := itemsOf([]termination.Event{message, toolCall, {Kind: termination.KindFinal, Text: "done"}})
	var got []int
	for it := range middleware.Range(run, produce(ctx, items), decodeItem) {
		got = append(got, it.i)
	}
	res := run.Wait()
	assert.Equal(t, []int{0, 1, 2}, got)
	assert.Equal(t, termination.NaturalCompletion{}, res.Cause)
	assert.Equal(t, 3, res.Events)
	assert.Zero(t, res.Drained)
}

// A stop from outside while the loop waits for the producer ends the loop
// at once, and an item received after a stop is neither evaluated nor
// yielded.
func TestRangeStoppedFromOutside(t *testing.T) {
	t.Run("waiting", func(t *testing.T) {
		ctx, run := mustStage(t, "range").Start(context.Background())
		in := make(chan item)
		go func() { // a producer that has nothing to send yet and honours its context
			defer close(in)
			<-ctx.Done()
		}()
		go func() {
			time.Sleep(20 * time.Millisecond)
			run.Stop("operator")
		}()
		n := 0
		for range middleware.Range(run, in, decodeItem) {
			n++
		}
		res := waitResult(t, run, time.Second)
		assert.Zero(t, n)
		assert.Equal(t, termination.Cancelled{Reason: termination.CancelExternal, Detail: "operator"}, res.Cause)
		assert.Zero(t, res.Events)
	})
	t.Run("timeout", func(t *testing.T) {
		stage := mustStage(t, "range", policy(t, "timeout: 30ms"))
		ctx, run := stage.Start(context.Background())
		in := make(chan item)
		go func() { // a slow loop that honours its context
			defer close(in)
			select {
			case in <- item{i: 0, evs: []termination.Event{message}}:
			case <-ctx.Done():
				return
			}
			<-ctx.Done()
		}()
		var got []int
		for it := range middleware.Range(run, in, decodeItem) {
			got = append(got, it.i)
		}
		res := run.Wait()
		assert.Equal(t, []int{0}, got)
		assert.Equal(t, termination.TagTimeout, res.Tag())
		assert.Equal(t, 1, res.Events)
	})
	t.Run("item after the stop", func(t *testing.T) {
		// A producer that ignores its context: the loop ends at its next
		// item, which is drained with the rest.
		ctx, run := mustStage(t, "range").Start(context.Background())
		in := make(chan item, 3)
		in <- item{i: 0, evs: []termination.Event{message}}
		in <- item{i: 1, evs: []termination.Event{message}}
		in <- item{i: 2, evs: []termination.Event{message}}
		close(in)
		var got []int
		for it := range middleware.Range(run, in, decodeItem) {
			got = append(got, it.i)
			if it.i == 0 {
				run.Stop("enough") // from the loop body, which goes on ranging
			}
		}
		res := run.Wait()
		assert.Equal(t, []int{0}, got, "items received after the stop are not yielded")
		assert.Equal(t, 1, res.Events)
		assert.Equal(t, 2, res.Drained)
		assert.Equal(t, termination.Cancelled{Reason: termination.CancelExternal, Detail: "enough"}, res.Cause)
		causeOf[termination.Cancelled](t, ctx)
	})
}

// A loop body that breaks out: Cancelled{external} mid-stream, the end of
// the stream right after the final answer; the producer is drained either
// way.
func TestRangeConsumerBreaks(t *testing.T) {
	final := termination.Event{Kind: termination.KindFinal, Text: "42"}
	for _, tc := range []struct {
		name    string
		breakAt int
		want    termination.Cause
	}{
		{"mid-stream", 1, termination.Cancelled{Reason: termination.CancelExternal, Detail: "consumer stopped iterating"}},
		{"after the final answer", 2, termination.NaturalCompletion{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, run := mustStage(t, "range").Start(context.Background())
			evs := []termination.Event{message, toolCall, final, message, message}
			in := produce(ctx, itemsOf(evs))
			for it := range middleware.Range(run, in, decodeItem) {
				if it.i == tc.breakAt {
					break
				}
			}
			res := run.Wait()
			assert.Equal(t, tc.want, res.Cause)
			assert.Equal(t, tc.breakAt+1, res.Events)
			_, open := <-in
			assert.False(t, open, "the producer was drained to its end")
		})
	}
}

// A decode panic ends the run with Failed{panic}; the item is yielded, as
// a firing item is. A panic in the loop body ends the run the same way and
// goes on up, after the producer has been drained.
func TestRangePanics(t *testing.T) {
	t.Run("decode", func(t *testing.T) {
		rec := &fakeRecorder{}
		ctx, run := mustStage(t, "range", middleware.WithParticipant(rec)).Start(context.Background())
		decode := func(it item) termination.Event {
			if it.i == 1 {
				panic("decode exploded")
			}
			return message
		}
		var got []int
		for it := range middleware.Range(run, endless(ctx, message), decode) {
			got = append(got, it.i)
		}
		res := run.Wait()
		assert.Equal(t, []int{0, 1}, got)
		f := causeOf[termination.Failed](t, ctx)
		assert.Equal(t, termination.FailPanic, f.Reason)
		assert.Contains(t, f.Err, "decode exploded")
		assert.Equal(t, f, res.Cause)
		fr := rec.only(t).snapshot()
		require.Len(t, fr.errs, 1)
		assert.Contains(t, fr.errs[0].Error(), "decode panicked")
	})
	t.Run("body", func(t *testing.T) {
		ctx, run := mustStage(t, "range").Start(context.Background())
		in := endless(ctx, message)
		func() {
			defer func() {
				assert.Equal(t, "body exploded", recover(), "the body's panic goes on up")
			}()
			for it := range middleware.Range(run, in, decodeItem) {
				if it.i == 2 {
					panic("body exploded")
				}
			}
		}()
		res := run.Wait()
		f, ok := res.Cause.(termination.Failed)
		require.True(t, ok, "cause %#v", res.Cause)
		assert.Equal(t, termination.FailPanic, f.Reason)
		assert.Contains(t, f.Err, "body exploded")
		_, open := <-in
		assert.False(t, open, "the producer was drained to its end")
	})
}

// A producer that ignores the run's context: the drain gives up after the
// drain timeout and says so; the range statement returns then.
func TestRangeProducerIgnoresContext(t *testing.T) {
	rec := &fakeRecorder{}
	stage := mustStage(t, "stubborn", policy(t, "max_tool_calls: 2"), shortDrain, middleware.WithParticipant(rec))
	_, run := stage.Start(context.Background())
	n := 0
	start := time.Now()
	for range middleware.Range(run, stubborn(t, toolCall), decodeItem) {
		n++
	}
	assert.Less(t, time.Since(start), 2*time.Second)
	res := run.Wait()
	assert.Equal(t, 3, n)
	assert.Equal(t, termination.MaxToolCallsReached{Limit: 2, Count: 3}, res.Cause)
	assert.Positive(t, res.Drained, "the items sent during the drain are counted")
	fr := rec.only(t).snapshot()
	require.NotEmpty(t, fr.errs)
	assert.Contains(t, fr.errs[0].Error(), "did not close its channel")
}

// Misuse ends the run with Failed{invalid_input} and yields nothing.
func TestRangeInvalidInput(t *testing.T) {
	stage := mustStage(t, "range")
	for name, seq := range map[string]func(*middleware.Run) func(func(item) bool){
		"nil channel": func(run *middleware.Run) func(func(item) bool) { return middleware.Range(run, nil, decodeItem) },
		"nil decode": func(run *middleware.Run) func(func(item) bool) {
			return middleware.Range[item](run, make(chan item), nil)
		},
		"nil decode each": func(run *middleware.Run) func(func(item) bool) {
			return middleware.RangeEach[item](run, make(chan item), nil)
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, run := stage.Start(context.Background())
			n := 0
			for range seq(run) {
				n++
			}
			res := run.Wait()
			assert.Zero(t, n)
			f, ok := res.Cause.(termination.Failed)
			require.True(t, ok, "cause %#v", res.Cause)
			assert.Equal(t, termination.FailInvalidInput, f.Reason)
			assert.Contains(t, f.Err, "Range")
		})
	}
	n := 0
	for range middleware.Range(nil, make(chan item), decodeItem) {
		n++
	}
	assert.Zero(t, n, "a nil run yields nothing")
}

// Range starts no goroutine of its own.
func TestRangeNoGoroutine(t *testing.T) {
	stage := mustStage(t, "range", benchLikePolicy(t))
	in := filled(10)
	before := runtime.NumGoroutine()
	_, run := stage.Start(context.Background())
	for range middleware.Range(run, in, identity) {
		// At most as many as before: Range starts none (a goroutine left by
		// an earlier test may end meanwhile; none may start).
		assert.LessOrEqual(t, runtime.NumGoroutine(), before, "no goroutine of its own while ranging")
	}
	require.Equal(t, termination.TagNaturalCompletion, run.Wait().Tag())
}

// filled returns a closed channel holding n events of the benchmark
// stream, without its failed tool results (the errors condition keeps the
// index of every failure as evidence, which grows with the run).
func filled(n int) chan termination.Event {
	var evs []termination.Event
	for _, ev := range benchEvents() {
		if ev.Err == "" {
			evs = append(evs, ev)
		}
	}
	in := make(chan termination.Event, n)
	for i := range n {
		in <- evs[i%len(evs)]
	}
	close(in)
	return in
}

// benchLikePolicy is the full policy of the benchmarks.
func benchLikePolicy(t testing.TB) middleware.Option {
	t.Helper()
	p, err := termination.ParsePolicy([]byte(benchPolicy))
	require.NoError(t, err)
	return middleware.WithPolicy(p)
}
