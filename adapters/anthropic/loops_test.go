package anthropicstop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	anthropicstop "github.com/agentstop/agentstop/adapters/anthropic"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// echo is the scripted loops' tool: it returns its input; a tool named
// "fail" fails.
func echo(name string, input json.RawMessage) (string, error) {
	if name == "fail" {
		return "", fmt.Errorf("tool %s failed", name)
	}
	return string(input), nil
}

// agentLoop is the hand-written tool loop a user of the Messages API
// writes, with the calls of the package doc. It runs until the model stops
// for anything but tool_use, a request fails, or the run stops.
func agentLoop(ctx context.Context, run *middleware.Run, client anthropic.Client, stream bool, prompt string) termination.Result {
	params := anthropic.MessageNewParams{
		Model:     "scripted",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name: "echo", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}},
		}}},
	}
	run.Observe(termination.Event{Kind: termination.KindInput, Source: "user", Text: prompt})
	for {
		var msg *anthropic.Message
		if stream {
			m, err := anthropicstop.Accumulate(client.Messages.NewStreaming(ctx, params), nil)
			if err != nil {
				return run.Finish(err)
			}
			if _, stop := anthropicstop.Observe(run, &m); stop {
				return run.Finish(nil)
			}
			msg = &m
		} else {
			m, err := client.Messages.New(ctx, params)
			if err != nil {
				return run.Finish(err)
			}
			if _, stop := anthropicstop.Observe(run, m); stop {
				return run.Finish(nil)
			}
			msg = m
		}
		if msg.StopReason != anthropic.StopReasonToolUse {
			return run.Finish(nil)
		}
		params.Messages = append(params.Messages, msg.ToParam())
		var results []anthropic.ContentBlockParamUnion
		for _, block := range msg.Content {
			if block.Type != "tool_use" {
				continue
			}
			call := block.AsToolUse()
			out, err := echo(call.Name, call.Input)
			if _, stop := anthropicstop.ObserveToolResult(run, call, out, err); stop {
				return run.Finish(nil)
			}
			results = append(results, anthropic.NewToolResultBlock(call.ID, out, err != nil))
		}
		params.Messages = append(params.Messages, anthropic.NewUserMessage(results...))
	}
}

// echoTool is echo as a tool of the SDK's beta tool runner.
type echoTool struct{ name string }

func (t echoTool) Name() string        { return t.name }
func (t echoTool) Description() string { return "echoes its input" }
func (t echoTool) InputSchema() anthropic.BetaToolInputSchemaParam {
	return anthropic.BetaToolInputSchemaParam{Properties: map[string]any{}}
}

func (t echoTool) Execute(_ context.Context, input json.RawMessage) ([]anthropic.BetaToolResultBlockParamContentUnion, error) {
	out, err := echo(t.name, input)
	if err != nil {
		return nil, err
	}
	return []anthropic.BetaToolResultBlockParamContentUnion{{OfText: &anthropic.BetaTextBlockParam{Text: out}}}, nil
}

// runnerLoop runs the SDK's own tool loop, the beta tool runner, wrapped by
// anthropicstop.All / AllStreaming and Tools, to its end.
func runnerLoop(ctx context.Context, run *middleware.Run, client anthropic.Client, stream bool, prompt string) (termination.Result, error) {
	tools := anthropicstop.Tools(run, echoTool{"echo"}, echoTool{"search"}, echoTool{"fail"})
	params := anthropic.BetaToolRunnerParams{BetaMessageNewParams: anthropic.BetaMessageNewParams{
		Model:     "scripted",
		MaxTokens: 1024,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(prompt))},
	}}
	// On an error the loop ends with run.Finish(err), which keeps the
	// error's text; breaking out on it would end the run the same way.
	if stream {
		runner := client.Beta.Messages.NewToolRunnerStreaming(tools, params)
		for events, err := range anthropicstop.AllStreaming(run, runner.AllStreaming(ctx)) {
			if err != nil {
				return run.Finish(err), err
			}
			for _, err := range events {
				if err != nil {
					return run.Finish(err), err
				}
			}
		}
	} else {
		runner := client.Beta.Messages.NewToolRunner(tools, params)
		for _, err := range anthropicstop.All(run, runner.All(ctx)) {
			if err != nil {
				return run.Finish(err), err
			}
		}
	}
	return run.Wait(), nil
}

// A nil iterator is misuse: the run ends with invalid_input; a nil run
// yields nothing and does not panic.
func TestAllStreamingNil(t *testing.T) {
	stage, err := middleware.New("nil_turns")
	if err != nil {
		t.Fatal(err)
	}
	_, run := stage.Start(context.Background())
	for range anthropicstop.AllStreaming(run, nil) {
		t.Fatal("yielded from a nil iterator")
	}
	if f, ok := run.Wait().Cause.(termination.Failed); !ok || f.Reason != termination.FailInvalidInput {
		t.Errorf("cause = %#v, want Failed{invalid_input}", run.Wait().Cause)
	}
	for range anthropicstop.AllStreaming(nil, nil) {
		t.Fatal("yielded with a nil run")
	}
}
