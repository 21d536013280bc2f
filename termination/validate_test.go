package termination

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// badEvents are events that no loop can produce, with the text that names
// the problem.
var badEvents = []struct {
	name string
	ev   Event
	want string
}{
	{"missing kind", Event{Text: "hi"}, "kind: missing (want one of input, message, tool_call, tool_result, handoff, stop, error, final)"},
	{"unknown kind", Event{Kind: 99}, "kind: 99 is not one of input, message, tool_call, tool_result, handoff, stop, error, final"},
	{"negative input tokens", Event{Kind: KindMessage, Usage: Usage{InputTokens: -5}}, "usage.input_tokens: must be >= 0, got -5"},
	{"negative output tokens", Event{Kind: KindMessage, Usage: Usage{OutputTokens: -1}}, "usage.output_tokens: must be >= 0, got -1"},
	{"negative cost", Event{Kind: KindMessage, Cost: -0.5}, "cost: must be a finite amount >= 0, got -0.5"},
	{"NaN cost", Event{Kind: KindMessage, Cost: math.NaN()}, "cost: must be a finite amount >= 0, got NaN"},
	{"infinite cost", Event{Kind: KindFinal, Cost: math.Inf(1)}, "cost: must be a finite amount >= 0, got +Inf"},
}

func TestEventValidate(t *testing.T) {
	for _, tc := range badEvents {
		t.Run(tc.name, func(t *testing.T) {
			assert.EqualError(t, tc.ev.Validate(), tc.want)
			assert.False(t, tc.ev.valid())
		})
	}
	for _, ev := range []Event{msg("a", "b"), call("search", `{}`), final("a", "done").used(10, 5).costs(0.25),
		{Kind: KindMessage, Cost: math.MaxFloat64}, {Kind: KindMessage, Usage: Usage{InputTokens: math.MaxInt64}}} {
		assert.NoError(t, ev.Validate(), "%+v", ev)
		assert.True(t, ev.valid(), "%+v", ev)
	}
}

// An invalid event ends the run with Failed{invalid_input} naming the event
// and the problem; it adds nothing to the counts or budgets.
func TestObserveInvalidEvent(t *testing.T) {
	for _, tc := range badEvents {
		t.Run(tc.name, func(t *testing.T) {
			for _, start := range []time.Time{time.Now(), {}} { // the wall clock, the events' clock
				e := NewEvaluator(AnyOf(TokenLimits{Total: 100}, IterationLimits{Limit: 5}), start)
				_, stop := e.Observe(msg("a", "one").used(90, 0))
				require.False(t, stop)
				cause, stop := e.Observe(tc.ev)
				require.True(t, stop)
				want := Failed{Reason: FailInvalidInput, Err: "event 2: " + tc.want}
				assert.Equal(t, want, cause)
				_, stop = e.Observe(msg("a", "three"))
				assert.True(t, stop, "a stopped run evaluates nothing more")
				res := e.Result()
				assert.Equal(t, want, res.Cause)
				assert.Equal(t, []Cause{want}, res.Fired)
				assert.Equal(t, 2, res.StoppedAt)
				assert.Equal(t, 2, res.Events)
				assert.Equal(t, 1, res.Iterations)
				assert.Equal(t, Usage{InputTokens: 90}, res.Tokens, "the bad event's usage is not counted")
				assert.Zero(t, res.Cost)
				assert.Equal(t, OutcomeFailed, res.Outcome)
			}
		})
	}
}

// A typed nil (a nil pointer of a Cause type) is no cause anywhere a user's
// cause enters: it never fires, never stops a run, never crashes.
func TestTypedNilCause(t *testing.T) {
	nils := map[string]Cause{
		"*Custom":            (*Custom)(nil),
		"registered *parked": (*parked)(nil),
	}
	for name, typedNil := range nils {
		t.Run(name, func(t *testing.T) {
			require.True(t, typedNil != nil, "a typed nil is a non-nil interface")
			assert.True(t, nilCause(typedNil))
			assert.Equal(t, "", Tag(typedNil, func(string) bool { return true }))
			assert.Equal(t, Outcome(0), defaultOutcome(typedNil))
			_, err := marshalCause(typedNil)
			assert.Error(t, err, "a typed nil has no JSON form")

			fn := CauseFunc("typed_nil", func(Event, Totals) Cause { return typedNil })
			for _, c := range []Condition{fn, AnyOf(fn), AllOf(fn, IterationLimits{Limit: 100})} {
				e := NewEvaluator(c, time.Now())
				for range 3 {
					cause, stop := e.Observe(msg("a", "b"))
					require.False(t, stop, "%v", c)
					require.Nil(t, cause)
				}
				res := e.Result()
				assert.Equal(t, NaturalCompletion{}, res.Cause)
				assert.Equal(t, OutcomeSucceeded, res.Outcome)
			}

			e := NewEvaluator(nil, time.Now())
			assert.False(t, e.Stop(typedNil))
			assert.False(t, e.EndStream(typedNil))
			_, stopped := e.Stopped()
			assert.False(t, stopped)
			assert.Equal(t, NaturalCompletion{}, e.Result().Cause)

			all := All{Causes: []Cause{MaxIterationsReached{Limit: 1, Count: 2}, typedNil}}
			assert.Equal(t, TagCustom, all.TagValue())
			assert.Equal(t, TagCustom, Tag(all, nil))
			assert.Equal(t, OutcomeFailed, all.DefaultOutcome())
			assert.True(t, strings.HasSuffix(all.Error(), "; <nil>]"), all.Error())
		})
	}
	assert.False(t, nilCause(Custom{}))
	assert.False(t, nilCause(&parked{}))
}
