package termination

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestHoldPolicyKey(t *testing.T) {
	for _, tc := range []struct {
		src, err string
		want     time.Duration
	}{
		{src: "cost_budget: {limit: 1}\nhold: {timeout: 15m}", want: 15 * time.Minute},
		{src: "tree: {max_iterations: 3}\nhold: {timeout: 1m}", want: time.Minute},
		{src: "any: [{max_tool_calls: 3}, {stop_message: true}]\nhold: {timeout: 1m}", want: time.Minute},
		// No limit of its own to hold at: it holds the tree limits a remote
		// parent propagates (§8); HoldsNothingOfItsOwn says so.
		{src: "hold: {timeout: 15m}", want: 15 * time.Minute},
		{src: "timeout: 5m\nstall: {repeats: 3}\nerrors: {total: 3}\nhold: {timeout: 1m}", want: time.Minute},
		{src: "tree: {timeout: 5m}\nhold: {timeout: 1m}", want: time.Minute},
		{src: "fleet_budget: {key: stage, window: 1h, cost: 5}\nhold: {timeout: 1m}", want: time.Minute},
		{src: "max_iterations: 3\nhold: {timeout: 2s}", want: 2 * time.Second},
		{src: "hold: {timeout: 0s}", err: "policy.hold.timeout: must be a duration > 0"},
		{src: "hold: {timeout: -1s}", err: "policy.hold.timeout: must be a duration > 0"},
		{src: "hold: {timeout: soon}", err: "policy.hold.timeout: must be a Go duration"},
		{src: "hold: {}", err: "policy.hold: needs timeout"},
		{src: "hold: 15m", err: "policy.hold"},
		{src: "hold: {timeout: 1m, limit: 3}", err: "policy.hold"},
		{src: "any: [{hold: {timeout: 1m}}]", err: "allowed only at the top level"},
	} {
		p, err := ParsePolicy(tc.src)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one containing %q", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		h, ok := p.Hold()
		if !ok || h.Timeout != tc.want {
			t.Errorf("%q: Hold() = %v, %v; want %v", tc.src, h, ok, tc.want)
		}
	}
	if _, ok := MustParsePolicy("max_iterations: 3").Hold(); ok {
		t.Error("a policy without hold: reports one")
	}
	for src, want := range map[string]bool{
		"hold: {timeout: 1m}":                                   true,
		"stall: {repeats: 3}\nhold: {timeout: 1m}":              true,
		"tree: {timeout: 5m}\nhold: {timeout: 1m}":              true,
		"max_iterations: 3\nhold: {timeout: 1m}":                false,
		"tree: {token_budget: {total: 9}}\nhold: {timeout: 1m}": false,
		"any: [{cost_budget: {limit: 1}}]\nhold: {timeout: 1m}": false,
		"max_iterations: 3":                                     false,
	} {
		if got := MustParsePolicy(src).HoldsNothingOfItsOwn(); got != want {
			t.Errorf("%q: HoldsNothingOfItsOwn() = %v, want %v", src, got, want)
		}
	}
}

// TestHoldWhichLimits: which fired causes hold and which stop, and a
// limit with a never-held condition on the same event stops as without
// hold.
func TestHoldWhichLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy string
		events []Event
		held   Cause // the cause the run is held at after the events, nil: stopped or running
		stop   Cause // the cause the run stopped with, nil: not stopped
	}{
		{name: "max_iterations holds", policy: "max_iterations: 2",
			events: repeat(3, msg("a", "x")), held: MaxIterationsReached{Limit: 2, Count: 3}},
		{name: "max_tool_calls holds", policy: "max_tool_calls: 1",
			events: evs(call("a", "1"), call("b", "2")), held: MaxToolCallsReached{Limit: 1, Count: 2}},
		{name: "per-tool limit holds", policy: "max_tool_calls: {per_tool: {a: 1}}",
			events: evs(call("a", "1"), call("a", "2")), held: MaxToolCallsReached{Limit: 1, Count: 2, Tool: "a"}},
		{name: "token budget holds", policy: "token_budget: {total: 10}",
			events: evs(msg("a", "x").used(5, 5)), held: BudgetExhausted{Resource: ResourceTotalTokens, Used: 10, Limit: 10}},
		{name: "cost budget holds", policy: "cost_budget: {limit: 1}",
			events: evs(msg("a", "x").costs(1)), held: BudgetExhausted{Resource: ResourceCost, Used: 1, Limit: 1}},
		{name: "grace stop is not held", policy: "token_budget: {total: 100, pressure: 0.5, grace: 0}",
			events: evs(msg("a", "x").used(30, 30)), stop: BudgetPressure{Resource: ResourceTotalTokens, Threshold: 0.5, Used: 60, Limit: 100}},
		{name: "stall is not held", policy: "stall: {repeats: 2}\nmax_iterations: 100",
			events: evs(call("a", "1"), call("a", "1")), stop: StallDetected{Signal: SignalRepeatedToolCall, Repeats: 2}},
		{name: "errors are not held", policy: "errors: {consecutive: 1}\nmax_iterations: 100",
			events: evs(errEv("boom")), stop: Failed{Reason: FailErrorThreshold, Err: "boom"}},
		{name: "completion is not held", policy: "stop_message: true\nmax_iterations: 100",
			events: evs(stopEv("done")), stop: Completed{Condition: "stop_message", Detail: "done"}},
		{name: "a limit and a stall on one event stop", policy: "max_tool_calls: 1\nstall: {repeats: 2}",
			events: evs(call("a", "1"), call("a", "1")), stop: MaxToolCallsReached{Limit: 1, Count: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := MustParsePolicy(tc.policy + "\nhold: {timeout: 1m}")
			e := NewEvaluator(p.Condition(), time.Time{})
			h, _ := p.Hold()
			e.SetHold(h)
			for _, ev := range tc.events {
				e.Observe(ev)
			}
			held, isHeld := e.Held()
			stop, stopped := e.Stopped()
			if tc.held != nil {
				if !isHeld || !causeEqual(held, tc.held) || stopped {
					t.Fatalf("held %v (%v), stopped %v; want held at %v", held, isHeld, stop, tc.held)
				}
				w := e.Warnings()
				if len(w) == 0 || !causeEqual(w[len(w)-1], tc.held) {
					t.Errorf("warnings %v: want the held cause last", w)
				}
				return
			}
			if isHeld || !stopped || Tag(stop, nil) != Tag(tc.stop, nil) {
				t.Fatalf("held %v (%v), stopped %v; want stopped with %v", held, isHeld, stop, tc.stop)
			}
		})
	}
}

func causeEqual(a, b Cause) bool {
	ja, _ := marshalCause(a)
	jb, _ := marshalCause(b)
	return string(ja) == string(jb)
}

func heldEvaluator(t *testing.T, policy string) *Evaluator {
	t.Helper()
	p := MustParsePolicy(policy)
	e := NewEvaluator(p.Condition(), time.Now())
	h, ok := p.Hold()
	if !ok {
		t.Fatal("no hold")
	}
	e.SetHold(h)
	return e
}

func TestHoldRaise(t *testing.T) {
	e := heldEvaluator(t, "max_iterations: 2\ntoken_budget: {total: 100}\nhold: {timeout: 1m}")
	if err := e.Raise(Limits{Iterations: 1, Has: LimitIterations}); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("raise of a running run: %v, want ErrNotHeld", err)
	}
	for range 3 {
		if c, stop := e.Observe(msg("a", "x")); stop {
			t.Fatalf("stopped with %v, want held", c)
		}
	}
	if _, held := e.Held(); !held {
		t.Fatal("not held at the third message")
	}
	for _, bad := range []Limits{{}, {Iterations: 0, Has: LimitIterations}, {Cost: -1, Has: LimitCost}, {Time: time.Second, Has: LimitTime}} {
		if err := e.Raise(bad); err == nil || errors.Is(err, ErrNotHeld) {
			t.Errorf("Raise(%+v) = %v, want an invalid-amount error", bad, err)
		}
	}
	if err := e.Raise(Limits{Iterations: 2, Has: LimitIterations}); err != nil {
		t.Fatal(err)
	}
	if got := e.Remaining(); got.Iterations != 1 {
		t.Errorf("remaining iterations after a raise of 2 at 3 of 2: %d, want 1", got.Iterations)
	}
	if err := e.Raise(Limits{Iterations: 2, Has: LimitIterations}); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("second raise: %v, want ErrNotHeld", err)
	}
	e.Observe(msg("a", "x")) // 4 of 4
	if _, held := e.Held(); held {
		t.Fatal("held at 4 of a raised 4")
	}
	e.Observe(msg("a", "x")) // 5 of 4
	c, held := e.Held()
	if !held || !causeEqual(c, MaxIterationsReached{Limit: 4, Count: 5}) {
		t.Fatalf("held %v %v, want at the raised limit 4", c, held)
	}
	// An event evaluated while held is counted; the hold stands at its
	// first limit, and ending it ends the run there.
	if c, stop := e.Observe(msg("a", "x")); stop {
		t.Fatalf("event while held stopped the run: %v", c)
	}
	c, ok := e.EndHold()
	if !ok || !causeEqual(c, MaxIterationsReached{Limit: 4, Count: 5}) {
		t.Fatalf("EndHold: %v %v, want the first limit's cause", c, ok)
	}
	r := e.Result()
	if r.StoppedAt != 5 || r.Events != 6 {
		t.Errorf("stopped_at %d, events %d; want 5, 6", r.StoppedAt, r.Events)
	}
}

func TestHoldEndHold(t *testing.T) {
	e := heldEvaluator(t, "cost_budget: {limit: 1}\nhold: {timeout: 1m}")
	if _, ok := e.EndHold(); ok {
		t.Fatal("EndHold of a running run")
	}
	e.Observe(msg("a", "x").costs(0.5))
	e.Observe(msg("a", "x").costs(0.6))
	c, ok := e.EndHold()
	if !ok || Tag(c, nil) != "budget_exhausted" {
		t.Fatalf("EndHold = %v, %v", c, ok)
	}
	r := e.Result()
	if r.StoppedAt != 2 || len(r.Fired) != 1 || len(r.Evidence) != 1 || r.Evidence[0] != 2 {
		t.Errorf("result %+v: want stopped at 2 with its evidence", r)
	}
}

// TestHoldTimeoutAndIdle: the hold timeout ends the held run with the
// limit's cause; idle pauses while held, timeout keeps counting.
func TestHoldTimeoutAndIdle(t *testing.T) {
	e := heldEvaluator(t, "max_iterations: 1\nidle: 50ms\ntimeout: 1h\nhold: {timeout: 200ms}")
	e.Observe(msg("a", "x"))
	e.Observe(msg("a", "x"))
	since, held := e.HeldSince()
	if !held {
		t.Fatal("not held")
	}
	at, ok := e.NextTick()
	if !ok || !at.Equal(since.Add(200*time.Millisecond)) {
		t.Fatalf("next tick %v, want the hold timeout %v (idle paused)", at, since.Add(200*time.Millisecond))
	}
	if c, stop := e.Tick(since.Add(100 * time.Millisecond)); stop {
		t.Fatalf("idle fired while held: %v", c)
	}
	c, stop := e.Tick(since.Add(200 * time.Millisecond))
	if !stop || Tag(c, nil) != "max_iterations" {
		t.Fatalf("hold timeout: %v %v, want max_iterations", c, stop)
	}

	// The total timeout keeps counting while held.
	e = heldEvaluator(t, "max_iterations: 1\ntimeout: 100ms\nhold: {timeout: 1h}")
	e.Observe(msg("a", "x"))
	e.Observe(msg("a", "x"))
	c, stop = e.Tick(e.start.Add(100 * time.Millisecond))
	if !stop || Tag(c, nil) != "timeout" {
		t.Fatalf("timeout while held: %v %v", c, stop)
	}
}

// TestHoldRaiseReachesAllOf: a raise raises every limit of the run, those
// under an all_of included (§3: a raise "raises that run's limits"): the
// all_of's max_tool_calls of 3, raised by 5, no longer fires at the fourth
// call, so "done" alone does not complete it. (Before 2026-11-29 a raise
// did not reach the children of an all_of.)
func TestHoldRaiseReachesAllOf(t *testing.T) {
	cond := AnyOf(ToolCallLimits{Limit: 2}, AllOf(ToolCallLimits{Limit: 3}, CompletionSignals{TextMention: "done"}))
	e := NewEvaluator(cond, time.Now())
	e.SetHold(Hold{Timeout: time.Minute})
	for i := range 3 {
		if c, stop := e.Observe(call("search", fmt.Sprintf(`{"page":%d}`, i))); stop {
			t.Fatalf("call %d stopped the run: %v", i+1, c)
		}
	}
	if _, held := e.Held(); !held {
		t.Fatal("not held at the third call of 2")
	}
	if err := e.Raise(Limits{ToolCalls: 5, Has: LimitToolCalls}); err != nil {
		t.Fatal(err)
	}
	if c, stop := e.Observe(call("search", `{"page":4}`)); stop {
		t.Fatalf("the fourth call stopped the run: %v", c)
	}
	if c, stop := e.Observe(msg("assistant", "done")); stop {
		t.Fatalf("done stopped the run with %v: the all_of's raised limit (8) was not reached", c)
	}
	if _, held := e.Held(); held {
		t.Fatal("held again below the raised limits")
	}
}

// TestCheckRaise: a raise must name the resource of every limit that holds
// the run (all that fired on the event that reached them); otherwise it
// changes nothing, and the error (wrapping ErrNotHeld) says what to name.
// A run that is not held gets ErrNotHeld itself.
func TestCheckRaise(t *testing.T) {
	call := func(tool string) Event { return Event{Kind: KindToolCall, Tool: tool} }
	for _, tc := range []struct {
		policy string
		events []Event
		raise  Limits
		want   string // "" for a raise that releases the run
	}{
		{"max_tool_calls: {limit: 9, per_tool: {search: 1}}", []Event{call("search"), call("search")}, Limits{Iterations: 1, Has: LimitIterations}, "a raise must name tool_calls"},
		{"max_tool_calls: {limit: 9, per_tool: {search: 1}}", []Event{call("search"), call("search")}, Limits{ToolCalls: 1, Has: LimitToolCalls}, ""},
		{"cost_budget: {limit: 1}", []Event{{Kind: KindMessage, Cost: 2}}, Limits{TotalTokens: 9, Has: LimitTotalTokens}, "held at budget_exhausted"},
		{"cost_budget: {limit: 1}", []Event{{Kind: KindMessage, Cost: 2}}, Limits{Cost: 5, TotalTokens: 9, Has: LimitCost | LimitTotalTokens}, ""},
		{"max_iterations: 1\nmax_tool_calls: 1", []Event{{Kind: KindMessage}, {Kind: KindMessage}}, Limits{ToolCalls: 1, Has: LimitToolCalls}, "a raise must name iterations"},
		{"token_budget: {output: 5}", []Event{{Kind: KindMessage, Usage: Usage{OutputTokens: 6}}}, Limits{InputTokens: 5, Has: LimitInputTokens}, "a raise must name output_tokens"},
	} {
		e := heldEvaluator(t, tc.policy+"\nhold: {timeout: 1m}")
		for _, ev := range tc.events {
			e.Observe(ev)
		}
		if _, held := e.Held(); !held {
			t.Fatalf("%q: not held", tc.policy)
		}
		err := e.Raise(tc.raise)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: Raise(%v) = %v", tc.policy, tc.raise, err)
			}
			continue
		}
		if !errors.Is(err, ErrNotHeld) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: Raise(%v) = %v, want ErrNotHeld saying %q", tc.policy, tc.raise, err, tc.want)
		}
		if _, held := e.Held(); !held {
			t.Errorf("%q: a raise that misses the limit released the run", tc.policy)
		}
	}
	e := heldEvaluator(t, "max_iterations: 5\nhold: {timeout: 1m}")
	if err := e.CheckRaise(Limits{Iterations: 1, Has: LimitIterations}); err != ErrNotHeld { //nolint:errorlint // the sentinel itself
		t.Errorf("a run that is not held: %v, want ErrNotHeld itself", err)
	}
}

// TestLimitsRaises: a raise names a held limit's resource by the cause it
// fired with; a cause that is never held is raised by nothing.
func TestLimitsRaises(t *testing.T) {
	l := Limits{Iterations: 1, InputTokens: 5, Has: LimitIterations | LimitInputTokens}
	for c, want := range map[Cause]bool{
		MaxIterationsReached{Limit: 1, Count: 2}:                        true,
		MaxToolCallsReached{Limit: 1, Count: 2, Tool: "search"}:         false,
		BudgetExhausted{Resource: ResourceInputTokens, Used: 6}:         true,
		BudgetExhausted{Resource: ResourceTotalTokens, Used: 6}:         false,
		StallDetected{Signal: SignalRepeatedToolCall, Repeats: 3}:       false,
		BudgetExhausted{Resource: ResourceCost, Used: 2, Scope: "tree"}: false,
	} {
		if got := l.Raises(c); got != want {
			t.Errorf("Raises(%v) = %v, want %v", c, got, want)
		}
	}
}
