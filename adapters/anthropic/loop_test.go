package anthropicstop_test

import (
	"context"
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// loop is one way of running a tool loop with the SDK.
type loop struct {
	name   string
	runner bool // the SDK's own loop (beta tool runner) rather than a hand-written one
	run    func(ctx context.Context, run *middleware.Run, client anthropic.Client, prompt string) termination.Result
}

var loops = []loop{
	{"messages", false, func(ctx context.Context, run *middleware.Run, c anthropic.Client, p string) termination.Result {
		return agentLoop(ctx, run, c, false, p)
	}},
	{"messages-stream", false, func(ctx context.Context, run *middleware.Run, c anthropic.Client, p string) termination.Result {
		return agentLoop(ctx, run, c, true, p)
	}},
	{"toolrunner", true, func(ctx context.Context, run *middleware.Run, c anthropic.Client, p string) termination.Result {
		res, _ := runnerLoop(ctx, run, c, false, p)
		return res
	}},
	{"toolrunner-stream", true, func(ctx context.Context, run *middleware.Run, c anthropic.Client, p string) termination.Result {
		res, _ := runnerLoop(ctx, run, c, true, p)
		return res
	}},
}

// on runs the loop with a client of the scripted server s.
func (l loop) on(ctx context.Context, run *middleware.Run, s *adaptertest.Server, prompt string) termination.Result {
	return l.run(ctx, run, client(s), prompt)
}

func forEachLoop(t *testing.T, f func(t *testing.T, l loop)) {
	for _, l := range loops {
		t.Run(l.name, func(t *testing.T) { f(t, l) })
	}
}

func TestRunawayStoppedByMaxToolCalls(t *testing.T) {
	forEachLoop(t, func(t *testing.T, l loop) {
		m := api.Serve(t, true, adaptertest.Turn{Text: "searching", ToolCalls: adaptertest.Calls("search", `{"q":"again"}`), Usage: termination.Usage{InputTokens: 10, OutputTokens: 3}, CacheRead: 90})
		stage, _ := adaptertest.NewStage(t, "anthropic_test", "max_tool_calls: 3")
		ctx, run := stage.Start(t.Context())
		res := l.run(ctx, run, client(m), "find it")

		var limit termination.MaxToolCallsReached
		if !errors.As(res.Cause, &limit) || limit.Limit != 3 || limit.Count != 4 {
			t.Fatalf("cause = %#v, want MaxToolCallsReached{3, 4}", res.Cause)
		}
		if !errors.As(context.Cause(ctx), &limit) {
			t.Errorf("context.Cause(ctx) = %v, want the typed cause", context.Cause(ctx))
		}
		// The 4th response requested the 4th call: no request after it.
		if got := m.Requests(); got != 4 {
			t.Errorf("model calls = %d, want 4", got)
		}
		// Cached prompt tokens count as input.
		if res.Tokens != (termination.Usage{InputTokens: 400, OutputTokens: 12}) {
			t.Errorf("tokens = %+v, want 400 in, 12 out", res.Tokens)
		}
	})
}

func TestRunawayStoppedByStall(t *testing.T) {
	forEachLoop(t, func(t *testing.T, l loop) {
		m := api.Serve(t, true, adaptertest.NewTurn("", 7, 2, "search", `{"q": "same", "page": 1}`))
		stage, _ := adaptertest.NewStage(t, "anthropic_test", "{stall: {repeats: 3}, max_iterations: 50}")
		ctx, run := stage.Start(t.Context())
		res := l.run(ctx, run, client(m), "find it")

		var stall termination.StallDetected
		if !errors.As(res.Cause, &stall) || stall.Signal != termination.SignalRepeatedToolCall || stall.Repeats != 3 {
			t.Fatalf("cause = %#v, want StallDetected{repeated_tool_call, 3}", res.Cause)
		}
		if got := m.Requests(); got != 3 {
			t.Errorf("model calls = %d, want 3", got)
		}
		if res.Tokens != (termination.Usage{InputTokens: 21, OutputTokens: 6}) {
			t.Errorf("tokens = %+v, want 21 in, 6 out", res.Tokens)
		}
	})
}

func TestNaturalCompletion(t *testing.T) {
	forEachLoop(t, func(t *testing.T, l loop) {
		// The tool runner reports no input event, and the results of its
		// parallel tools in the order they finish, which this check of the
		// call ids by position does not allow for: TestToolsParallelCallIDs
		// and the conformance suite check the tool runner's.
		traits := adaptertest.LoopTraits{Model: "scripted", Input: !l.runner, CallID: callID, ResultIDs: true}
		if l.runner {
			traits.CallID = nil
		}
		if err := api.CheckNaturalCompletion(t, l.on, traits); err != nil {
			t.Fatal(err)
		}
	})
}

// A turn that is not an answer ends the loop as Failed{stream_error} with
// the reason in the error text.
func TestTruncatedAnswerFails(t *testing.T) {
	forEachLoop(t, func(t *testing.T, l loop) {
		const want = "stop_reason max_tokens: the response was cut off at the token limit"
		if _, err := api.CheckTruncatedAnswer(t, "max_tokens", want, l.on); err != nil {
			t.Fatal(err)
		}
	})
}

// A run stopped from outside cancels the request the loop is waiting on.
func TestStopCancelsLoop(t *testing.T) {
	forEachLoop(t, func(t *testing.T, l loop) {
		if err := api.CheckStopCancelsLoop(t, l.on); err != nil {
			t.Fatal(err)
		}
	})
}
