package middleware_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// consumerPath is one way a run's stream is consumed (doc.go "Four ways
// in"): consume ranges over items through the path, calling during with
// the first item, and returns what the consumer received.
type consumerPath struct {
	name    string
	consume func(ctx context.Context, run *middleware.Run, items []item, during func()) []item
	// second takes a second stream, in, through the path on a run that
	// already has one (for the iterators: it ranges; the call alone takes
	// nothing).
	second func(run *middleware.Run, in <-chan item)
}

// onFirst calls during once, at the first item.
func onFirst(during func()) func() {
	done := false
	return func() {
		if !done {
			done = true
			during()
		}
	}
}

func seqFromChan(in <-chan item) func(func(item, error) bool) {
	return func(yield func(item, error) bool) {
		for it := range in {
			if !yield(it, nil) {
				return
			}
		}
	}
}

var consumerPaths = []consumerPath{
	{
		name: "Forward",
		consume: func(ctx context.Context, run *middleware.Run, items []item, during func()) (got []item) {
			first := onFirst(during)
			for it := range middleware.Forward(run, produce(ctx, items), decodeItem) {
				got = append(got, it)
				first()
			}
			return got
		},
		second: func(run *middleware.Run, in <-chan item) { middleware.Forward(run, in, decodeItem) },
	},
	{
		name: "ForwardEach",
		consume: func(ctx context.Context, run *middleware.Run, items []item, during func()) (got []item) {
			first := onFirst(during)
			for it := range middleware.ForwardEach(run, produce(ctx, items), decodeItemEach) {
				got = append(got, it)
				first()
			}
			return got
		},
		second: func(run *middleware.Run, in <-chan item) { middleware.ForwardEach(run, in, decodeItemEach) },
	},
	{
		name: "ForwardSeq",
		consume: func(_ context.Context, run *middleware.Run, items []item, during func()) (got []item) {
			first := onFirst(during)
			for it := range middleware.ForwardSeq(run, seqOf(items), decodeItem) {
				got = append(got, it)
				first()
			}
			return got
		},
		second: func(run *middleware.Run, in <-chan item) {
			for range middleware.ForwardSeq(run, seqFromChan(in), decodeItem) {
			}
		},
	},
	{
		name: "ForwardSeqEach",
		consume: func(_ context.Context, run *middleware.Run, items []item, during func()) (got []item) {
			first := onFirst(during)
			for it := range middleware.ForwardSeqEach(run, seqOf(items), decodeItemEach) {
				got = append(got, it)
				first()
			}
			return got
		},
		second: func(run *middleware.Run, in <-chan item) {
			for range middleware.ForwardSeqEach(run, seqFromChan(in), decodeItemEach) {
			}
		},
	},
	{
		name: "Range",
		consume: func(ctx context.Context, run *middleware.Run, items []item, during func()) (got []item) {
			first := onFirst(during)
			for it := range middleware.Range(run, produce(ctx, items), decodeItem) {
				got = append(got, it)
				first()
			}
			return got
		},
		second: func(run *middleware.Run, in <-chan item) {
			for range middleware.Range(run, in, decodeItem) {
			}
		},
	},
	{
		name: "RangeEach",
		consume: func(ctx context.Context, run *middleware.Run, items []item, during func()) (got []item) {
			first := onFirst(during)
			for it := range middleware.RangeEach(run, produce(ctx, items), decodeItemEach) {
				got = append(got, it)
				first()
			}
			return got
		},
		second: func(run *middleware.Run, in <-chan item) {
			for range middleware.RangeEach(run, in, decodeItemEach) {
			}
		},
	},
}

// misuse returns the message of the panic of f, "" if it did not panic.
func misuse(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
		}
	}()
	f()
	return ""
}

// waitingItem is a second stream with one item in it: after a second
// path panicked, the item is still there (nothing took it).
func waitingItem() chan item {
	in := make(chan item, 1)
	in <- item{i: 99, evs: []termination.Event{message}}
	close(in)
	return in
}

// TestSecondConsumerPath: for every pair of consumer paths, a second path
// on a run that one already consumes — while it does, or after it has
// finished the run — panics at once with a message that names the run and
// both paths, and takes nothing from its own stream; the first path goes
// on with nothing lost: its consumer gets every item, and the result
// counts them all, none drained. (Before, the second path took items the
// first never saw and the first to end finished the run under the other,
// whose items were drained.)
func TestSecondConsumerPath(t *testing.T) {
	items := itemsOf([]termination.Event{message, message, message, message, message})
	for _, first := range consumerPaths {
		for _, second := range consumerPaths {
			for _, after := range []bool{false, true} {
				name := first.name + "/" + second.name + "/during"
				if after {
					name = first.name + "/" + second.name + "/after"
				}
				t.Run(name, func(t *testing.T) {
					stage := mustStage(t, "paths", shortDrain)
					ctx, run := stage.Start(context.Background())
					in := waitingItem()
					var msg string
					got := first.consume(ctx, run, items, func() {
						if !after {
							msg = misuse(func() { second.second(run, in) })
						}
					})
					if after {
						msg = misuse(func() { second.second(run, in) })
					}
					require.NotEmpty(t, msg, "the second path did not panic")
					assert.Contains(t, msg, "middleware: "+second.name+": run "+run.ID())
					assert.Contains(t, msg, "already consumed by "+first.name)
					assert.Len(t, in, 1, "the second path took nothing from its stream")
					assert.Equal(t, indices(items), indices(got), "the first path's consumer got every item")
					res := run.Wait()
					assert.Equal(t, termination.NaturalCompletion{}, res.Cause)
					assert.Equal(t, len(items), res.Events)
					assert.Zero(t, res.Drained)
				})
			}
		}
	}
}

// TestFinishDuringConsumerPath: Finish on a run that a path consumes, from
// the loop body or from another goroutine while the path still owns the
// stream, panics naming the run and the path and what to call instead;
// the path goes on and delivers every item. Once the path has finished
// the run, Finish returns its result. (Before, Finish ended the run at
// once: the items the path had not handed over yet were drained, and the
// result did not even count them.)
func TestFinishDuringConsumerPath(t *testing.T) {
	items := itemsOf([]termination.Event{message, message, message, message, message})
	for _, p := range consumerPaths {
		t.Run(p.name, func(t *testing.T) {
			stage := mustStage(t, "finish", shortDrain)
			ctx, run := stage.Start(context.Background())
			var msg string
			got := p.consume(ctx, run, items, func() {
				msg = misuse(func() { run.Finish(nil) })
			})
			require.NotEmpty(t, msg, "Finish during %s did not panic", p.name)
			assert.Contains(t, msg, "middleware: Finish: run "+run.ID())
			assert.Contains(t, msg, "is consumed by "+p.name)
			assert.Contains(t, msg, "Run.Stop")
			assert.Equal(t, indices(items), indices(got), "the consumer got every item")
			res := run.Finish(nil) // the path has finished the run: its result
			assert.Equal(t, termination.NaturalCompletion{}, res.Cause)
			assert.Equal(t, len(items), res.Events)
			assert.Zero(t, res.Drained)
			assert.Equal(t, res, run.Wait())
		})
	}
}

// TestFinishAfterLeave: a consumer of Forward that leaves (Leave) and
// then calls Finish, as a deferred Finish does, gets the result once the
// forwarder has ended: no panic, no wait for a reader.
func TestFinishAfterLeave(t *testing.T) {
	for _, each := range []bool{false, true} {
		stage := mustStage(t, "leave", shortDrain)
		ctx, run := stage.Start(context.Background())
		var out <-chan item
		if each {
			out = middleware.ForwardEach(run, endless(ctx, message), decodeItemEach)
		} else {
			out = middleware.Forward(run, endless(ctx, message), decodeItem)
		}
		<-out
		run.Leave("done reading")
		res := run.Finish(nil)
		assert.Equal(t, termination.Cancelled{Reason: termination.CancelExternal, Detail: "done reading"}, res.Cause)
		assert.Equal(t, res, run.Wait())
	}
}

// TestConsumerPathOnFinishedRun: a path on a run that Finish has already
// finished (a loop that called Observe) panics: the stream it was given
// would never be evaluated.
func TestConsumerPathOnFinishedRun(t *testing.T) {
	for _, p := range consumerPaths {
		t.Run(p.name, func(t *testing.T) {
			stage := mustStage(t, "finished", shortDrain)
			_, run := stage.Start(context.Background())
			run.Observe(message)
			run.Finish(nil)
			in := waitingItem()
			msg := misuse(func() { p.second(run, in) })
			assert.Contains(t, msg, "middleware: "+p.name+": run "+run.ID())
			assert.Contains(t, msg, "already finished")
			assert.Len(t, in, 1)
		})
	}
}

// TestIteratorRangedTwice: ranging one Range or ForwardSeq iterator a
// second time is a second path.
func TestIteratorRangedTwice(t *testing.T) {
	items := itemsOf([]termination.Event{message, message})
	stage := mustStage(t, "twice", shortDrain)
	ctx, run := stage.Start(context.Background())
	it := middleware.Range(run, produce(ctx, items), decodeItem)
	for range it {
	}
	msg := misuse(func() {
		for range it {
		}
	})
	assert.Contains(t, msg, "already consumed by Range")
	_, run = stage.Start(context.Background())
	seq := middleware.ForwardSeq(run, seqOf(items), decodeItem)
	for range seq {
	}
	msg = misuse(func() {
		for range seq {
		}
	})
	assert.Contains(t, msg, "already consumed by ForwardSeq")
}

// TestObserveBesideConsumerPath: Observe takes no stream: an event it
// reports beside a path (an error the loop survives) is evaluated among
// the path's, and once the path has finished the run Observe reports the
// stop instead of evaluating (stop is true): nothing is skipped
// silently.
func TestObserveBesideConsumerPath(t *testing.T) {
	items := itemsOf([]termination.Event{message, message, message})
	for _, p := range consumerPaths {
		t.Run(p.name, func(t *testing.T) {
			stage := mustStage(t, "beside", shortDrain)
			ctx, run := stage.Start(context.Background())
			got := p.consume(ctx, run, items, func() {
				_, stop := run.ObserveError(fmt.Errorf("429, retried"))
				assert.False(t, stop)
			})
			assert.Len(t, got, len(items))
			res := run.Wait()
			assert.Equal(t, len(items)+1, res.Events, "the path's events and the one Observe reported")
			c, stop := run.Observe(message)
			assert.True(t, stop, "Observe on a finished run reports the stop")
			assert.Equal(t, res.Cause, c)
			assert.True(t, strings.HasPrefix(res.Tag(), "natural"), res.Tag())
		})
	}
}
