package termination

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/internal/canonical"
)

// TestObserveKeyed: an event observed with its args' canonical key, as a
// decoder computes it, is evaluated as Observe evaluates it; ComparesArgs
// says when the key is worth computing.
func TestObserveKeyed(t *testing.T) {
	stall := MustParsePolicy("stall: {repeats: 3}").Condition()
	assert.True(t, NewEvaluator(stall, time.Time{}).ComparesArgs())
	assert.False(t, NewEvaluator(ToolCallLimits{Limit: 5}, time.Time{}).ComparesArgs())

	calls := evs(call("grep", `{"q":"a","n":1}`), call("grep", `{"n":1.0,"q":"a"}`), call("grep", `{ "q" : "a", "n" : 1e0 }`))
	plain, keyed := NewEvaluator(stall, time.Time{}), NewEvaluator(stall, time.Time{})
	for _, e := range calls {
		plain.Observe(e)
		keyed.ObserveKeyed(e, canonical.ArgsKey(e.Args), true)
	}
	assert.Equal(t, plain.Result(), keyed.Result())
	assert.Equal(t, 3, keyed.Result().StoppedAt)

	// Unkeyed, it is Observe.
	unkeyed := NewEvaluator(stall, time.Time{})
	for _, e := range calls {
		unkeyed.ObserveKeyed(e, 0, false)
	}
	assert.Equal(t, plain.Result(), unkeyed.Result())
}

// TestNextDeadlineAndTickEvent: on the events' clock, the next timeout
// falls due from the first timed event; TickEvent fires it before an event
// past it, which is not evaluated. On the wall clock neither applies.
func TestNextDeadlineAndTickEvent(t *testing.T) {
	cond := AnyOf(TimeLimits{Timeout: 3 * time.Second}, TimeLimits{Timeout: 10 * time.Second})
	e := NewEvaluator(cond, time.Time{})
	_, ok := e.NextDeadline()
	assert.False(t, ok, "before the first timed event")
	e.Observe(msg("a", "x").at(0))
	at, ok := e.NextDeadline()
	require.True(t, ok)
	assert.Equal(t, t0.Add(3*time.Second), at)

	early := msg("a", "y").at(2 * time.Second)
	assert.False(t, e.TickEvent(&early))
	late := msg("a", "z").at(4 * time.Second)
	assert.True(t, e.TickEvent(&late))
	res := e.Result()
	assert.Equal(t, Timeout{Limit: 3 * time.Second, Elapsed: 3 * time.Second}, res.Cause)
	assert.Equal(t, 1, res.Events, "the late event is not evaluated")
	_, ok = e.NextDeadline()
	assert.False(t, ok, "once stopped")
	assert.False(t, e.TickEvent(&late))

	wall := NewEvaluator(cond, time.Now())
	_, ok = wall.NextDeadline()
	assert.False(t, ok)
	assert.False(t, wall.TickEvent(&late))
}

// TestHeldEvidence: the indices the conditions hold for their evidence
// are those a later Result's Evidence names.
func TestHeldEvidence(t *testing.T) {
	e := NewEvaluator(MustParsePolicy("stall: {repeats: 3, window: 4}").Condition(), time.Time{})
	for _, ev := range evs(call("a", "1"), msg("x", "m"), call("a", "1"), call("a", "1")) {
		e.Observe(ev)
	}
	res := e.Result()
	require.Equal(t, []int{1, 3, 4}, res.Evidence)
	held := e.HeldEvidence(nil)
	for _, at := range res.Evidence {
		assert.True(t, slices.Contains(held, at), "evidence %d is held (held %v)", at, held)
	}
	assert.Equal(t, held, e.HeldEvidence(held[:0]), "appends to dst")
}
