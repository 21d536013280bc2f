package termination

import (
	"errors"
	"testing"
	"time"
)

// TestIdlePauseOnTheEventsClock: on the events' clock a hold lasts from
// the held event's time to the time Advance brings (a raise record's):
// the idle limits resume there, a hold timeout (or a timeout) due by then
// fires there; a hold outside the evaluator (a tree's) pauses them through
// PauseIdle and ResumeIdle, and a run held at both resumes when the last
// hold ends.
func TestIdlePauseOnTheEventsClock(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	sec := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	at := func(s int) Event { ev := msg("a", "x"); ev.Time = sec(s); return ev }
	raise := Limits{Iterations: 5, Has: LimitIterations}
	idle := Timeout{Limit: 5 * time.Second, Elapsed: 5 * time.Second, Idle: true}
	limit := MaxIterationsReached{Limit: 1, Count: 2}
	tests := []struct {
		name      string
		policy    string
		steps     func(e *Evaluator)
		last      int // the time of the last event (s)
		want      Cause
		stoppedAt int
		duration  time.Duration
	}{
		{"raised at 20s: idle resumes there", "max_iterations: 1\nidle: 5s\nhold: {timeout: 1m}", func(e *Evaluator) {
			e.Advance(sec(20))
			mustRaise(t, e, raise)
		}, 24, nil, 0, 24 * time.Second},
		{"raised at 20s: idle fires 5s on", "max_iterations: 1\nidle: 5s\nhold: {timeout: 1m}", func(e *Evaluator) {
			e.Advance(sec(20))
			mustRaise(t, e, raise)
		}, 26, idle, 2, 25 * time.Second},
		{"a raise with no time: idle counts the hold", "max_iterations: 1\nidle: 5s\nhold: {timeout: 1m}", func(e *Evaluator) {
			mustRaise(t, e, raise)
		}, 21, idle, 2, 6 * time.Second},
		{"the hold timeout passed: the limit, not raised", "max_iterations: 1\nhold: {timeout: 10s}", func(e *Evaluator) {
			if c, stop := e.Advance(sec(30)); !stop || !causeEqual(c, limit) {
				t.Fatalf("Advance past the hold timeout: %v %v", c, stop)
			}
			if err := e.Raise(raise); !errors.Is(err, ErrNotHeld) {
				t.Fatalf("raise after the hold timeout: %v, want ErrNotHeld", err)
			}
		}, 31, limit, 2, time.Second},
		{"a tree's hold: PauseIdle and ResumeIdle", "idle: 5s", func(e *Evaluator) {
			e.PauseIdle(sec(2))
			if c, stop := e.Advance(sec(30)); stop {
				t.Fatalf("Advance of a run not held: %v", c)
			}
			e.ResumeIdle(sec(20)) // idle 1s before the pause, 3s after: 4s
		}, 23, nil, 0, 23 * time.Second},
		{"a tree's hold: 1s before it and 4s after make 5s idle", "idle: 5s", func(e *Evaluator) {
			e.PauseIdle(sec(2))
			e.ResumeIdle(sec(20))
		}, 24, idle, 2, 24 * time.Second},
		{"held at its own limit and its tree's: resumes when both end", "max_iterations: 1\nidle: 5s\nhold: {timeout: 1m}", func(e *Evaluator) {
			e.PauseIdle(sec(5))
			e.Advance(sec(10))
			mustRaise(t, e, raise)
			e.ResumeIdle(sec(20))
		}, 26, idle, 2, 25 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := MustParsePolicy(tt.policy)
			e := NewEvaluator(p.Condition(), time.Time{})
			if h, ok := p.Hold(); ok {
				e.SetHold(h)
			}
			e.Observe(at(0))
			e.Observe(at(1)) // held at max_iterations: 1, when the policy has it
			tt.steps(e)
			e.Observe(at(tt.last))
			res := e.Result()
			want := tt.want
			if want == nil {
				want = NaturalCompletion{}
			}
			if !causeEqual(res.Cause, want) || res.StoppedAt != tt.stoppedAt {
				t.Fatalf("cause %v at %d, want %v at %d", res.Cause, res.StoppedAt, want, tt.stoppedAt)
			}
			if res.Duration != tt.duration {
				t.Fatalf("duration %s, want %s", res.Duration, tt.duration)
			}
		})
	}
}

// TestAdvanceChangesNothingLive: Advance is for the events' clock; a live
// evaluator's time is its timer's (Tick).
func TestAdvanceChangesNothingLive(t *testing.T) {
	e := heldEvaluator(t, "max_iterations: 1\nhold: {timeout: 10ms}")
	e.Observe(msg("a", "x"))
	e.Observe(msg("a", "x"))
	if c, stop := e.Advance(time.Now().Add(time.Hour)); stop {
		t.Fatalf("Advance stopped a live run: %v", c)
	}
	if _, held := e.Held(); !held {
		t.Fatal("Advance ended a live hold")
	}
}

func mustRaise(t *testing.T, e *Evaluator, l Limits) {
	t.Helper()
	if err := e.Raise(l); err != nil {
		t.Fatalf("raise: %v", err)
	}
}

// TestRaiseAfterTheHoldTimeout: live, a raise that comes after the hold
// timeout, before its timer has fired, finds the run ended with the
// limit's cause (StoppedAt the event that reached it), as replay finds a
// raise record past the hold timeout; so does one after a timeout, which
// keeps counting while held.
func TestRaiseAfterTheHoldTimeout(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   string
	}{
		{"max_iterations: 1\nhold: {timeout: 10ms}", "max_iterations"},
		{"max_iterations: 1\ntimeout: 10ms\nhold: {timeout: 1h}", "timeout"},
	} {
		e := heldEvaluator(t, tc.policy)
		e.Observe(msg("a", "x"))
		e.Observe(msg("a", "x"))
		if _, held := e.Held(); !held {
			t.Fatalf("%s: not held", tc.policy)
		}
		time.Sleep(20 * time.Millisecond) // no timer: nothing ticks the evaluator
		if err := e.Raise(Limits{Iterations: 5, Has: LimitIterations}); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("%s: raise after the deadline: %v, want ErrNotHeld", tc.policy, err)
		}
		c, stopped := e.Stopped()
		if !stopped || Tag(c, nil) != tc.want || e.Result().StoppedAt != 2 {
			t.Fatalf("%s: %v %v at %d, want %s at 2", tc.policy, c, stopped, e.Result().StoppedAt, tc.want)
		}
	}
}
