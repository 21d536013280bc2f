package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Property: a consumer that reads until the output closes receives every
// item whose events were evaluated, in order, however the run stops — the
// caller's context cancelled at a random moment (from the consumer or from
// elsewhere), a stage timeout, or a condition — with a consumer that
// dawdles at random. Run under -race.
func TestForwardNeverLosesAnEvaluatedItem(t *testing.T) {
	const cases = 400
	r := rand.New(rand.NewPCG(seed(t), 3))
	stops := map[string]int{}
	for c := range cases {
		each := r.IntN(2) == 0
		src := randomPolicy(r, 0)
		opts := []middleware.Option{middleware.WithDrainTimeout(10 * time.Second)}
		timeout := r.IntN(4) == 0
		if timeout {
			opts = append(opts, middleware.WithCondition(termination.TimeLimits{Timeout: time.Duration(100+r.IntN(900)) * time.Microsecond}))
		}
		opts = append(opts, policy(t, src))
		stage := mustStage(t, "never_loses", opts...)
		items := group(r, randomEvents(r, 5+r.IntN(60)), each)
		for i := range items {
			// Every item carries at least one event, so that a delivered
			// item always has an evaluated event.
			if items[i].evs[0].Kind == termination.KindFinal {
				items[i].evs[0].Kind = termination.KindMessage
			}
		}
		caller, cancel := context.WithCancel(context.Background())
		ctx, run := stage.Start(caller)
		var out <-chan item
		if each {
			out = middleware.ForwardEach(run, produce(ctx, items), decodeItemEach)
		} else {
			out = middleware.Forward(run, produce(ctx, items), decodeItem)
		}
		cancelAt := r.IntN(len(items) + 1)
		var wg sync.WaitGroup
		if r.IntN(2) == 0 { // from elsewhere, after a random delay
			d := time.Duration(r.IntN(400)) * time.Microsecond
			wg.Go(func() { time.Sleep(d); cancel() })
			cancelAt = -1
		}
		delays := make([]time.Duration, len(items))
		for i := range delays {
			if r.IntN(3) == 0 {
				delays[i] = time.Duration(r.IntN(50)) * time.Microsecond
			}
		}
		var got []item
		for it := range out {
			got = append(got, it)
			if len(got) == cancelAt {
				cancel()
			}
			time.Sleep(delays[len(got)-1])
		}
		res := waitResult(t, run, 5*time.Second)
		wg.Wait()
		cancel()
		stops[res.Tag()]++

		require.Equal(t, indices(items[:len(got)]), indices(got), "case %d: items in order, none skipped", c)
		evs := 0
		for _, it := range got {
			evs += len(it.evs)
		}
		last := 0
		if len(got) > 0 {
			last = len(got[len(got)-1].evs)
		}
		// Each delivered item had at least one event evaluated (a stop in
		// the middle of an item leaves the rest of it unevaluated), and no
		// evaluated event is missing from the delivered items.
		require.LessOrEqual(t, res.Events, evs, "case %d (%s): evaluated events vs delivered items' events", c, res.Tag())
		if len(got) > 0 {
			require.Greater(t, res.Events, evs-last, "case %d (%s, policy %s): an evaluated item was not delivered", c, res.Tag(), src)
		} else {
			require.Zero(t, res.Events, "case %d (%s): nothing delivered, nothing evaluated", c, res.Tag())
		}
		if !each {
			require.Equal(t, len(got), res.Events, "case %d (%s): delivered == Result.Events", c, res.Tag())
		}
	}
	t.Logf("causes: %v", stops)
	assert.Positive(t, stops[termination.TagCancelled], "the caller's cancel should stop some runs")
}

// Live and replay agree on a bad event: Failed{invalid_input} naming the
// event and the problem, by every way in.
func TestInvalidEventsLive(t *testing.T) {
	bad := []struct {
		name string
		ev   termination.Event
		want string
	}{
		{"unknown kind", termination.Event{Kind: 99, Text: "?"}, "event 2: kind: 99 is not one of input, message, tool_call, tool_result, handoff, stop, error, final"},
		{"negative input tokens", termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: -500}}, "event 2: usage.input_tokens: must be >= 0, got -500"},
		{"negative output tokens", termination.Event{Kind: termination.KindFinal, Usage: termination.Usage{OutputTokens: -1}}, "event 2: usage.output_tokens: must be >= 0, got -1"},
		{"negative cost", termination.Event{Kind: termination.KindMessage, Cost: -2}, "event 2: cost: must be a finite amount >= 0, got -2"},
		{"NaN cost", termination.Event{Kind: termination.KindMessage, Cost: math.NaN()}, "event 2: cost: must be a finite amount >= 0, got NaN"},
		{"infinite cost", termination.Event{Kind: termination.KindToolCall, Tool: "x", Cost: math.Inf(1)}, "event 2: cost: must be a finite amount >= 0, got +Inf"},
	}
	const src = "{token_budget: {total: 1000}, cost_budget: {limit: 1}}"
	cond := termination.MustParsePolicy(src).Condition()
	for _, b := range bad {
		evs := []termination.Event{
			{Kind: termination.KindMessage, Text: "one", Usage: termination.Usage{InputTokens: 900}, Cost: 0.5},
			b.ev,
			{Kind: termination.KindMessage, Text: "three", Usage: termination.Usage{InputTokens: 900}},
		}
		want := replay(cond, evs)
		require.Equal(t, termination.Failed{Reason: termination.FailInvalidInput, Err: b.want}, want.Cause, b.name)
		require.Equal(t, 2, want.StoppedAt)
		require.Equal(t, termination.Usage{InputTokens: 900}, want.Tokens, "the bad usage is not summed")
		for way, name := range []string{"Forward", "ForwardEach", "ForwardSeq", "Observe"} {
			t.Run(b.name+"/"+name, func(t *testing.T) {
				stage := mustStage(t, "bad_events", policy(t, src), shortDrain)
				run, out := runWay(stage, way, itemsOf(evs))
				res := run.Wait()
				assert.Empty(t, sameCounts(res, want))
				assert.Equal(t, []int{0, 1}, indices(out), "the bad event's item is delivered, like any firing item")
				assert.Equal(t, termination.OutcomeFailed, res.Outcome)
			})
		}
	}
	t.Run("Observe missing kind", func(t *testing.T) {
		// Forward's decode may return Kind 0 for "no event"; Observe has no
		// such convention: a missing kind is invalid.
		_, run := mustStage(t, "bad_events").Start(context.Background())
		cause, stop := run.Observe(termination.Event{Text: "no kind"})
		assert.True(t, stop)
		assert.Equal(t, termination.Failed{Reason: termination.FailInvalidInput,
			Err: "event 1: kind: missing (want one of input, message, tool_call, tool_result, handoff, stop, error, final)"}, cause)
		assert.Equal(t, cause, run.Finish(nil).Cause)
	})
}

// nilCause is a registered user cause type whose value methods panic on a
// nil pointer.
type nilCause struct{ Why string }

func (c nilCause) TagValue() string                    { return "nil_cause" }
func (c nilCause) Error() string                       { return "nil cause: " + c.Why }
func (c nilCause) DefaultOutcome() termination.Outcome { return termination.OutcomeFailed }

var registerNilCause = sync.OnceValue(func() error {
	return codec.RegisterCause[*nilCause]("middleware_test.NilCause")
})

// A typed nil Cause never crashes or wedges a run: from a CauseFunc condition
// it is "nothing fired"; wrapped in Finish's error it is a plain stream
// error; hooks never see it.
func TestTypedNilCauseLive(t *testing.T) {
	require.NoError(t, registerNilCause())
	typedNils := map[string]termination.Cause{
		"*Custom":             (*termination.Custom)(nil),
		"registered nilCause": (*nilCause)(nil),
	}
	for name, typedNil := range typedNils {
		t.Run(name, func(t *testing.T) {
			var hooked []termination.Cause
			var mu sync.Mutex
			stage := mustStage(t, "typed_nil", shortDrain,
				middleware.WithCondition(termination.CauseFunc("returns_typed_nil", func(termination.Event, termination.Totals) termination.Cause {
					return typedNil
				})),
				middleware.WithTreatAsSuccess(func(c termination.Cause) bool {
					mu.Lock()
					hooked = append(hooked, c)
					mu.Unlock()
					_ = c.Error() // a typed nil would panic here
					return false
				}))
			evs := []termination.Event{message, toolCall, {Kind: termination.KindFinal, Text: "done"}}
			for way, wayName := range []string{"Forward", "ForwardEach", "ForwardSeq", "Observe"} {
				run, out := runWay(stage, way, itemsOf(evs))
				res := waitResult(t, run, 2*time.Second)
				assert.Equal(t, termination.NaturalCompletion{}, res.Cause, wayName)
				assert.Len(t, out, 3, wayName)
				assert.Equal(t, 3, res.Events, wayName)
			}

			finishes := []struct {
				name string
				err  error
				want string
			}{
				{"the typed nil itself", typedNil, fmt.Sprintf("nil %T", typedNil)},
				{"wrapped", fmt.Errorf("framework limit: %w", typedNil), "framework limit: <nil>"},
			}
			for _, f := range finishes {
				ctx, run := stage.Start(context.Background())
				run.Observe(message)
				res := run.Finish(f.err)
				assert.Equal(t, termination.Failed{Reason: termination.FailStreamError, Err: f.want}, res.Cause, f.name)
				assert.Equal(t, res.Cause, context.Cause(ctx), f.name)
				var c termination.Cause
				assert.True(t, errors.As(f.err, &c), "the error does wrap a (typed nil) cause")
			}
			// Stop, then the hook, with a typed nil around: the run ends.
			_, run := stage.Start(context.Background())
			run.Observe(message)
			run.Stop("operator")
			assert.Equal(t, termination.CancelExternal, run.Finish(nil).Cause.(termination.Cancelled).Reason)

			mu.Lock()
			defer mu.Unlock()
			require.NotEmpty(t, hooked)
			for _, c := range hooked {
				assert.False(t, termination.Tag(c, nil) == "", "TreatAsSuccess saw %#v", c)
			}
		})
	}
}

// A live timeout fires once elapsed >= limit (the timer fires at the limit,
// never before it); its elapsed is the limit, as in replay.
func TestTimeoutFiresAtTheLimit(t *testing.T) {
	const limit = 5 * time.Millisecond
	stage := mustStage(t, "timed", middleware.WithCondition(termination.TimeLimits{Timeout: limit}))
	ctx, run := stage.Start(context.Background())
	<-ctx.Done() // a loop that hangs
	res := run.Finish(nil)
	to, ok := res.Cause.(termination.Timeout)
	require.True(t, ok, "cause %v", res.Cause)
	assert.Equal(t, limit, to.Limit)
	assert.Equal(t, to.Limit, to.Elapsed, "elapsed is the limit, as in replay")
	assert.GreaterOrEqual(t, res.Duration, limit, "the timer fired at the limit, not before")
}
