package openaistop_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	openaistop "github.com/agentstop/agentstop/adapters/openai"
	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// responsesLoop is the hand-written Responses API tool loop a user of the
// SDK writes, with the calls of the package doc. It runs until the model
// answers without function calls, a request fails, or the run stops.
func responsesLoop(ctx context.Context, run *middleware.Run, client openai.Client, stream bool, prompt string) termination.Result {
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(prompt, responses.EasyInputMessageRoleUser)}
	tools := []responses.ToolUnionParam{responses.ToolParamOfFunction("echo", map[string]any{"type": "object"}, false)}
	run.Observe(termination.Event{Kind: termination.KindInput, Source: "user", Text: prompt})
	for {
		params := responses.ResponseNewParams{
			Model: "scripted",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
			Tools: tools,
		}
		var resp *responses.Response
		if stream {
			r, err := openaistop.AccumulateResponse(client.Responses.NewStreaming(ctx, params), nil)
			if err != nil {
				return run.Finish(err)
			}
			resp = &r
		} else {
			r, err := client.Responses.New(ctx, params)
			if err != nil {
				return run.Finish(err)
			}
			resp = r
		}
		if _, stop := openaistop.ObserveResponse(run, resp); stop {
			return run.Finish(nil)
		}
		calls := 0
		for _, item := range resp.Output {
			if item.Type != "function_call" {
				continue
			}
			calls++
			out, err := echoResponseTool(item)
			if _, stop := openaistop.ObserveResponseToolResult(run, item, out, err); stop {
				return run.Finish(nil)
			}
			input = append(input,
				responses.ResponseInputItemParamOfFunctionCall(item.Arguments.OfString, item.CallID, item.Name),
				functionCallOutput(item.CallID, out))
		}
		if calls == 0 {
			return run.Finish(nil)
		}
	}
}

// functionCallOutput is the function_call_output input item that answers
// the call callID with output.
func functionCallOutput(callID, output string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	item.OfFunctionCallOutput.CallID = openai.String(callID)
	return item
}

// echoResponseTool is the Responses loop's only tool runner: every tool
// echoes its arguments; a tool named "fail" fails.
func echoResponseTool(call responses.ResponseOutputItemUnion) (string, error) {
	if call.Name == "fail" {
		return "", fmt.Errorf("tool %s failed", call.Name)
	}
	return strings.TrimSpace(call.Arguments.OfString), nil
}

// onResponses returns responsesLoop with a client of the scripted server,
// streaming or not.
func onResponses(stream bool) adaptertest.Loop {
	return func(ctx context.Context, run *middleware.Run, s *adaptertest.Server, prompt string) termination.Result {
		return responsesLoop(ctx, run, client(s), stream, prompt)
	}
}

func TestResponsesConformance(t *testing.T) {
	harness := func(stream bool) adaptertest.Harness {
		return adaptertest.Harness{Run: func(t *testing.T, stage *middleware.Stage, s adaptertest.Script) adaptertest.Report {
			m := responsesAPI.Serve(t, s.Repeat, s.Turns...)
			ctx, run := stage.Start(t.Context())
			res := responsesLoop(ctx, run, client(m), stream, s.Input)
			return adaptertest.Report{Result: res, ModelCalls: m.Requests()}
		}, CallIDs: true, Model: "scripted", ToolErrorsGoOn: true}
	}
	t.Run("json", func(t *testing.T) { adaptertest.Run(t, harness(false)) })
	t.Run("stream", func(t *testing.T) { adaptertest.Run(t, harness(true)) })
}

func TestResponsesRunawayStoppedByMaxToolCalls(t *testing.T) {
	forEachMode(t, func(t *testing.T, stream bool) {
		m := responsesAPI.Serve(t, true, adaptertest.NewTurn("searching", 10, 3, "echo", `{"q":"again"}`))
		stage, _ := adaptertest.NewStage(t, "openai_test", "max_tool_calls: 3")
		ctx, run := stage.Start(t.Context())
		res := responsesLoop(ctx, run, client(m), stream, "find it")

		var limit termination.MaxToolCallsReached
		if !errors.As(res.Cause, &limit) || limit.Limit != 3 || limit.Count != 4 {
			t.Fatalf("cause = %#v, want MaxToolCallsReached{3, 4}", res.Cause)
		}
		if got := m.Requests(); got != 4 {
			t.Errorf("model calls = %d, want 4", got)
		}
		if res.Tokens.InputTokens != 40 || res.Tokens.OutputTokens != 12 {
			t.Errorf("tokens = %+v, want 40 in, 12 out", res.Tokens)
		}
	})
}

// A reasoning summary that says the stop word does not end the run: only
// the answer's text is matched by text_mention.
func TestResponsesReasoningNeverMentions(t *testing.T) {
	forEachMode(t, func(t *testing.T, stream bool) {
		m := responsesAPI.Serve(t, false,
			adaptertest.NewTurn("", 5, 5, "echo", `{"q":"a"}`),
			adaptertest.NewTurn("Thinking done: the answer is 4.", 5, 5))
		// The scripted reasoning summary is "Thinking about the task."
		stage, _ := adaptertest.NewStage(t, "openai_test", "text_mention: {text: Thinking about}")
		ctx, run := stage.Start(t.Context())
		res := responsesLoop(ctx, run, client(m), stream, "what is 2+2?")
		if _, ok := res.Cause.(termination.NaturalCompletion); !ok {
			t.Fatalf("cause = %#v, want NaturalCompletion (the summary is not the answer)", res.Cause)
		}
		if got := m.Requests(); got != 2 {
			t.Errorf("model calls = %d, want 2", got)
		}
	})
}

func TestResponsesNaturalCompletion(t *testing.T) {
	forEachMode(t, func(t *testing.T, stream bool) {
		if err := responsesAPI.CheckNaturalCompletion(t, onResponses(stream), adaptertest.LoopTraits{
			Model: "scripted", Input: true, CallID: callID, ResultIDs: true,
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// A response cut off at max_output_tokens ends the loop as
// Failed{stream_error} with the reason in the error text.
func TestResponsesTruncatedAnswerFails(t *testing.T) {
	forEachMode(t, func(t *testing.T, stream bool) {
		const want = "status incomplete (max_output_tokens): the response was cut off at the token limit"
		rec, err := responsesAPI.CheckTruncatedAnswer(t, "max_output_tokens", want, onResponses(stream))
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"input", "message", "error"}; !slices.Equal(rec.Kinds(), want) {
			t.Fatalf("events = %v, want %v", rec.Kinds(), want)
		}
	})
}

func TestResponsesStopCancelsLoop(t *testing.T) {
	forEachMode(t, func(t *testing.T, stream bool) {
		if err := responsesAPI.CheckStopCancelsLoop(t, onResponses(stream)); err != nil {
			t.Fatal(err)
		}
	})
}
