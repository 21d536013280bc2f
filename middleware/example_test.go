package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// step is what an imaginary agent loop emits.
type step struct {
	Kind string
	Tool string
	Args string
}

func decode(s step) termination.Event {
	switch s.Kind {
	case "tool":
		return termination.Event{Kind: termination.KindToolCall, Tool: s.Tool, Args: []byte(s.Args)}
	case "answer":
		return termination.Event{Kind: termination.KindFinal, Text: s.Args}
	}
	return termination.Event{Kind: termination.KindMessage, Text: s.Args}
}

// runawayLoop calls the same tool until its context is cancelled.
func runawayLoop(ctx context.Context) <-chan step {
	out := make(chan step)
	go func() {
		defer close(out)
		for {
			select {
			case out <- step{Kind: "tool", Tool: "search", Args: `{"q":"agentstop"}`}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// Wrap an existing channel-based loop: same items out, stopped by the
// policy. A consumer that breaks out of this range must call run.Leave.
func ExampleForward() {
	stage, err := middleware.New("researcher",
		middleware.WithPolicy(termination.MustParsePolicy("max_tool_calls: 3")))
	if err != nil {
		panic(err)
	}
	ctx, run := stage.Start(context.Background())
	forwarded := 0
	for range middleware.Forward(run, runawayLoop(ctx), decode) {
		forwarded++
	}
	res := run.Wait()
	var limit termination.MaxToolCallsReached
	fmt.Println(forwarded, res.Tag(), res.Outcome, errors.As(context.Cause(ctx), &limit), limit.Count)
	// Output: 4 max_tool_calls failed true 4
}

// Guard a channel-based loop from the consumer's side: no goroutine, no
// second channel; the range loop ends when the policy fires, and a break
// ends the run.
func ExampleRange() {
	stage, err := middleware.New("researcher",
		middleware.WithPolicy(termination.MustParsePolicy("max_tool_calls: 3")))
	if err != nil {
		panic(err)
	}
	ctx, run := stage.Start(context.Background())
	received := 0
	for range middleware.Range(run, runawayLoop(ctx), decode) {
		received++ // breaking out here ends the run too: nothing more to call
	}
	res := run.Wait() // already finished: the range statement has returned
	var limit termination.MaxToolCallsReached
	fmt.Println(received, res.Tag(), res.Outcome, errors.As(context.Cause(ctx), &limit), limit.Count)
	// Output: 4 max_tool_calls failed true 4
}

// Wrap an iterator-based loop.
func ExampleForwardSeq() {
	stage, _ := middleware.New("planner",
		middleware.WithPolicy(termination.MustParsePolicy("stall: {repeats: 2}")))
	loop := func(ctx context.Context) iter.Seq2[step, error] {
		return func(yield func(step, error) bool) {
			for ctx.Err() == nil {
				if !yield(step{Kind: "say", Args: "let me think again"}, nil) {
					return
				}
			}
		}
	}
	ctx, run := stage.Start(context.Background())
	for s, err := range middleware.ForwardSeq(run, loop(ctx), decode) {
		fmt.Println(s.Args, err)
	}
	fmt.Println(run.Wait().Cause)
	// Output:
	// let me think again <nil>
	// let me think again <nil>
	// agentstop: stall detected (repeated_message, 2 repeats)
}

// Feed a callback-style framework with Observe, and Finish when it returns.
func ExampleRun_Observe() {
	stage, _ := middleware.New("critic",
		middleware.WithPolicy(termination.MustParsePolicy("text_mention: {text: APPROVE}")))
	ctx, run := stage.Start(context.Background())
	onMessage := func(text string) {
		if cause, stop := run.Observe(termination.Event{Kind: termination.KindMessage, Source: "critic", Text: text}); stop {
			fmt.Println("stopping:", cause)
		}
	}
	for _, text := range []string{"needs work", "APPROVE", "never seen"} {
		if ctx.Err() != nil {
			break
		}
		onMessage(text)
	}
	res := run.Finish(nil)
	fmt.Println(res.Tag(), res.Outcome, res.Iterations)
	// Output:
	// stopping: agentstop: completed (text_mention "APPROVE")
	// completed succeeded 2
}
