package termination

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// t0 is the start of every timed test stream.
var t0 = time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)

func input(text string) Event { return Event{Kind: KindInput, Source: "user", Text: text} }
func msg(source, text string) Event {
	return Event{Kind: KindMessage, Source: source, Text: text}
}
func final(source, text string) Event { return Event{Kind: KindFinal, Source: source, Text: text} }
func call(tool, args string) Event {
	return Event{Kind: KindToolCall, Source: "assistant", Tool: tool, Args: json.RawMessage(args)}
}
func result(tool, err string) Event {
	return Event{Kind: KindToolResult, Source: tool, Tool: tool, Err: err}
}
func errEv(text string) Event  { return Event{Kind: KindError, Text: text} }
func stopEv(text string) Event { return Event{Kind: KindStop, Source: "critic", Text: text} }
func handoffEv(source, target string) Event {
	return Event{Kind: KindHandoff, Source: source, Target: target}
}

// used returns e with token usage.
func (e Event) used(in, out int64) Event {
	e.Usage = Usage{InputTokens: in, OutputTokens: out}
	return e
}

// costs returns e with a cost.
func (e Event) costs(c float64) Event {
	e.Cost = c
	return e
}

// at returns e with Time t0+d.
func (e Event) at(d time.Duration) Event {
	e.Time = t0.Add(d)
	return e
}

// withText returns e with Text set.
func (e Event) withText(s string) Event {
	e.Text = s
	return e
}

// replayEvents evaluates c over events as replay does (event clock) and
// returns the result.
func replayEvents(t testing.TB, c Condition, events ...Event) Result {
	t.Helper()
	ev := NewEvaluator(c, time.Time{})
	for _, e := range events {
		if _, stop := ev.Observe(e); stop {
			break
		}
	}
	return ev.Result()
}

// condCase is one row of a condition table: the cause the run ends with
// (NaturalCompletion when nothing fires), the 1-based event it fired on (0
// when nothing did), the causes that fired on it (nil: just Cause, or none
// when the stream ended by itself) and the
// budget-pressure warnings recorded.
type condCase struct {
	name     string
	cond     Condition
	events   []Event
	want     Cause
	at       int
	fired    []Cause
	warnings []Cause
	// evidence, when not nil, is the result's Evidence ([]int{}: none).
	evidence []int
}

func runCondCases(t *testing.T, cases []condCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.cond.Validate(), "the test's condition must be valid")
			res := replayEvents(t, tc.cond, tc.events...)
			assert.Equal(t, tc.want, res.Cause, "cause")
			assert.Equal(t, tc.at, res.StoppedAt, "stopped_at")
			fired := tc.fired
			if fired == nil && tc.at > 0 {
				fired = []Cause{tc.want}
			}
			if len(fired) == 0 {
				assert.Empty(t, res.Fired, "fired: a stream that ends by itself fires nothing")
			} else {
				assert.Equal(t, fired, res.Fired, "fired")
			}
			if len(tc.warnings) == 0 {
				assert.Empty(t, res.Warnings, "warnings")
			} else {
				assert.Equal(t, tc.warnings, res.Warnings, "warnings")
			}
			wantEvents := len(tc.events)
			if tc.at > 0 {
				wantEvents = tc.at
			}
			assert.Equal(t, wantEvents, res.Events, "events evaluated")
			if tc.evidence != nil {
				if len(tc.evidence) == 0 {
					assert.Empty(t, res.Evidence, "evidence")
				} else {
					assert.Equal(t, tc.evidence, res.Evidence, "evidence")
				}
			}
		})
	}
}

func repeat(n int, e Event) []Event {
	out := make([]Event, n)
	for i := range out {
		out[i] = e
	}
	return out
}

func seq(parts ...[]Event) []Event {
	var out []Event
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func evs(e ...Event) []Event { return e }

// predicate is a CauseFunc that fires Completed{condition: predicate,
// detail: name} on an event for which fn returns true (a nil fn stays nil,
// for the validation tests).
func predicate(name string, fn func(Event) bool) Condition {
	if fn == nil {
		return CauseFunc(name, nil)
	}
	return CauseFunc(name, func(ev Event, _ Totals) Cause {
		if fn(ev) {
			return Completed{Condition: conditionPredicate, Detail: name}
		}
		return nil
	})
}
