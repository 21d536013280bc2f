package openaistop_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	openaistop "github.com/agentstop/agentstop/adapters/openai"
	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// agentLoop is the hand-written tool loop a user of the SDK writes, with
// the three calls of the package doc. It runs until the model answers
// without tool calls, a request fails, or the run stops.
func agentLoop(ctx context.Context, run *middleware.Run, client openai.Client, stream bool, prompt string) termination.Result {
	params := openai.ChatCompletionNewParams{
		Model:    "scripted",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:       "echo",
			Parameters: shared.FunctionParameters{"type": "object"},
		})},
	}
	if stream {
		params.StreamOptions.IncludeUsage = openai.Bool(true)
	}
	run.Observe(termination.Event{Kind: termination.KindInput, Source: "user", Text: prompt})
	for {
		var completion *openai.ChatCompletion
		if stream {
			c, err := openaistop.Accumulate(client.Chat.Completions.NewStreaming(ctx, params), nil)
			if err != nil {
				return run.Finish(err)
			}
			if _, stop := openaistop.Observe(run, &c); stop {
				return run.Finish(nil)
			}
			completion = &c
		} else {
			c, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				return run.Finish(err)
			}
			if _, stop := openaistop.Observe(run, c); stop {
				return run.Finish(nil)
			}
			completion = c
		}
		msg := completion.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			return run.Finish(nil)
		}
		params.Messages = append(params.Messages, msg.ToParam())
		for _, tc := range msg.ToolCalls {
			out, err := echoTool(tc)
			if _, stop := openaistop.ObserveToolResult(run, tc, out, err); stop {
				return run.Finish(nil)
			}
			params.Messages = append(params.Messages, openai.ToolMessage(out, tc.ID))
		}
	}
}

func forEachMode(t *testing.T, f func(t *testing.T, stream bool)) {
	for _, mode := range []struct {
		name   string
		stream bool
	}{{"json", false}, {"stream", true}} {
		t.Run(mode.name, func(t *testing.T) { f(t, mode.stream) })
	}
}

func TestRunawayStoppedByMaxToolCalls(t *testing.T) {
	forEachMode(t, func(t *testing.T, stream bool) {
		m := api.Serve(t, true, adaptertest.NewTurn("searching", 10, 3, "echo", `{"q":"again"}`))
		stage, _ := adaptertest.NewStage(t, "openai_test", "max_tool_calls: 3")
		ctx, run := stage.Start(t.Context())
		res := agentLoop(ctx, run, client(m), stream, "find it")

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
		if res.Tokens.InputTokens != 40 || res.Tokens.OutputTokens != 12 {
			t.Errorf("tokens = %+v, want 40 in, 12 out", res.Tokens)
		}
	})
}

func TestRunawayStoppedByStall(t *testing.T) {
	forEachMode(t, func(t *testing.T, stream bool) {
		m := api.Serve(t, true, adaptertest.NewTurn("", 7, 2, "echo", `{"q": "same", "page": 1}`))
		stage, _ := adaptertest.NewStage(t, "openai_test", "{stall: {repeats: 3}, max_iterations: 50}")
		ctx, run := stage.Start(t.Context())
		res := agentLoop(ctx, run, client(m), stream, "find it")

		var stall termination.StallDetected
		if !errors.As(res.Cause, &stall) || stall.Signal != termination.SignalRepeatedToolCall || stall.Repeats != 3 {
			t.Fatalf("cause = %#v, want StallDetected{repeated_tool_call, 3}", res.Cause)
		}
		if got := m.Requests(); got != 3 {
			t.Errorf("model calls = %d, want 3", got)
		}
		if res.Tokens.InputTokens != 21 || res.Tokens.OutputTokens != 6 {
			t.Errorf("tokens = %+v, want 21 in, 6 out", res.Tokens)
		}
	})
}

func TestNaturalCompletion(t *testing.T) {
	forEachMode(t, func(t *testing.T, stream bool) {
		if err := api.CheckNaturalCompletion(t, on(stream), adaptertest.LoopTraits{
			Model: "scripted", Input: true, CallID: callID, ResultIDs: true,
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// A turn that is not an answer ends the loop as Failed{stream_error} with
// the reason in the error text.
func TestTruncatedAnswerFails(t *testing.T) {
	forEachMode(t, func(t *testing.T, stream bool) {
		const want = "finish_reason length: the response was cut off at the token limit"
		rec, err := api.CheckTruncatedAnswer(t, "length", want, on(stream))
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"input", "message", "error"}; !slices.Equal(rec.Kinds(), want) {
			t.Fatalf("events = %v, want %v", rec.Kinds(), want)
		}
	})
}

// The stop reaches requests in flight: a run stopped from outside cancels
// the request the loop is waiting on.
func TestStopCancelsLoop(t *testing.T) {
	forEachMode(t, func(t *testing.T, stream bool) {
		if err := api.CheckStopCancelsLoop(t, on(stream)); err != nil {
			t.Fatal(err)
		}
	})
}

// on returns agentLoop with a client of the scripted server, streaming or
// not.
func on(stream bool) adaptertest.Loop {
	return func(ctx context.Context, run *middleware.Run, s *adaptertest.Server, prompt string) termination.Result {
		return agentLoop(ctx, run, client(s), stream, prompt)
	}
}
