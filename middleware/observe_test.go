package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// ObserveEach evaluates an item's events until the stop, and reports a
// stop that happened before the item.
func TestObserveEach(t *testing.T) {
	stage, err := middleware.New("observe_each", middleware.WithCondition(termination.ToolCallLimits{Limit: 1}))
	if err != nil {
		t.Fatal(err)
	}
	_, run := stage.Start(context.Background())
	turn := func(calls int, emit func(termination.Event)) {
		emit(termination.Event{Kind: termination.KindMessage, Text: "looking"})
		emit(termination.Event{}) // Kind 0: skipped
		for range calls {
			emit(termination.Event{Kind: termination.KindToolCall, Tool: "search"})
		}
	}
	if c, stop := middleware.ObserveEach(run, 1, turn); stop || c != nil {
		t.Fatalf("first turn: %v, %v; want nil, false", c, stop)
	}
	c, stop := middleware.ObserveEach(run, 3, turn)
	want := termination.MaxToolCallsReached{Limit: 1, Count: 2}
	if !stop || c != want {
		t.Fatalf("second turn: %#v, %v; want %#v, true", c, stop, want)
	}
	if c, stop := middleware.ObserveEach(run, 0, turn); !stop || c != want {
		t.Fatalf("after the stop: %#v, %v; want %#v, true", c, stop, want)
	}
	res := run.Finish(nil)
	if res.ToolCalls != 2 || res.Drained != 1 {
		t.Errorf("tool calls, drained = %d, %d; want 2 (the third was not evaluated), 1", res.ToolCalls, res.Drained)
	}
	if c, stop := middleware.ObserveEach[int](nil, 0, turn); stop || c != nil {
		t.Errorf("nil run: %v, %v", c, stop)
	}
	if c, stop := middleware.ObserveEach(run, 0, nil); stop || c != nil {
		t.Errorf("nil decode: %v, %v", c, stop)
	}
}

// ObserveError reports errors the loop survives until the errors condition
// fires.
func TestObserveError(t *testing.T) {
	stage, err := middleware.New("observe_error", middleware.WithPolicy(termination.MustParsePolicy("errors: {consecutive: 2}")))
	if err != nil {
		t.Fatal(err)
	}
	_, run := stage.Start(context.Background())
	if _, stop := run.ObserveError(nil); stop {
		t.Fatal("nil error stopped the run")
	}
	if _, stop := run.ObserveError(errors.New("429")); stop {
		t.Fatal("first error stopped the run")
	}
	cause, stop := run.ObserveError(errors.New("429"))
	var failed termination.Failed
	if !stop || !errors.As(cause, &failed) || failed.Reason != termination.FailErrorThreshold {
		t.Fatalf("cause = %#v, %v, want Failed{error_threshold}", cause, stop)
	}
	if c, stop := run.ObserveError(nil); !stop || c != cause {
		t.Errorf("nil error after the stop = %v, %v; want the cause", c, stop)
	}
	run.Finish(nil)
	if c, stop := (*middleware.Run)(nil).ObserveError(errors.New("x")); stop || c != nil {
		t.Errorf("nil run: %v, %v", c, stop)
	}
}

// A callback framework hands the adapter one model response at a time; the
// adapter reports its events and tells the loop whether to go on.
func ExampleObserveEach() {
	type response struct{ calls []string }
	decode := func(r response, emit func(termination.Event)) {
		emit(termination.Event{Kind: termination.KindMessage})
		for _, c := range r.calls {
			emit(termination.Event{Kind: termination.KindToolCall, Tool: c})
		}
	}
	stage, _ := middleware.New("callbacks", middleware.WithCondition(termination.ToolCallLimits{Limit: 2}))
	_, run := stage.Start(context.Background())
	for turn := 1; ; turn++ {
		if cause, stop := middleware.ObserveEach(run, response{calls: []string{"search"}}, decode); stop {
			fmt.Println("stopped on turn", turn, "by", cause)
			break
		}
	}
	fmt.Println(run.Finish(nil).TerminationCause)
	// Output:
	// stopped on turn 3 by agentstop: max tool calls reached (3 > limit 2)
	// max_tool_calls
}
