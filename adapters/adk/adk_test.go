package adk_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"

	"github.com/agentstop/agentstop/adapters/adk/internal/genai"
	"github.com/agentstop/agentstop/adapters/adk/internal/model"
	"github.com/agentstop/agentstop/adapters/adk/internal/runner"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scripted returns an LLM that answers with script's turns, failing once
// its context is done.
func scripted(script adaptertest.Script) runner.LLM {
	return func(ctx context.Context, i int) (*model.LLMResponse, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		turn, ok := script.TurnAt(i)
		if !ok {
			return nil, fmt.Errorf("scripted model: no turn %d", i)
		}
		c := &genai.Content{Role: "model"}
		if turn.Text != "" {
			c.Parts = append(c.Parts, &genai.Part{Text: turn.Text})
		}
		for j, tc := range turn.ToolCalls {
			var args map[string]any
			if err := jsonUnmarshal(tc.Args, &args); err != nil {
				return nil, err
			}
			c.Parts = append(c.Parts, &genai.Part{FunctionCall: &genai.FunctionCall{ID: fmt.Sprintf("call_%d_%d", i, j), Name: tc.Name, Args: args}})
		}
		return &model.LLMResponse{Content: c, TurnComplete: true, UsageMetadata: &genai.GenerateContentResponseUsageMetadata{
			PromptTokenCount: int32(turn.Usage.InputTokens), CandidatesTokenCount: int32(turn.Usage.OutputTokens),
			TotalTokenCount: int32(turn.Usage.Total()),
		}}, nil
	}
}

// drive runs the stand-in runner under a run of stage, through the recipe.
func drive(stage *middleware.Stage, r *runner.Runner, input string) (termination.Result, int) {
	ctx, run := stage.Start(context.Background())
	events := middleware.ForwardSeqEach(run, r.Run(ctx, "user", "session", genai.NewContentFromText(input, "user")), decodeADK)
	for range events {
	}
	return run.Wait(), r.Calls()
}

func TestConformance(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprint("streaming=", streaming), func(t *testing.T) {
			adaptertest.Run(t, adaptertest.Harness{
				Run: func(t *testing.T, stage *middleware.Stage, script adaptertest.Script) adaptertest.Report {
					res, calls := drive(stage, &runner.Runner{Agent: "assistant", Model: scripted(script), Streaming: streaming}, script.Input)
					return adaptertest.Report{Result: res, ModelCalls: calls}
				},
				CallIDs: true,
			})
		})
	}
}

func newStage(t *testing.T, policy string, opts ...middleware.Option) (*middleware.Stage, *adaptertest.Events) {
	t.Helper()
	return adaptertest.NewStage(t, "adk_test", policy, opts...)
}

func TestRunawayStops(t *testing.T) {
	runaway := adaptertest.Script{Repeat: true, Turns: []adaptertest.Turn{{
		ToolCalls: []adaptertest.ToolCall{{Name: "search", Args: `{"query":"Acme CEO"}`}}, Usage: termination.Usage{InputTokens: 50, OutputTokens: 5}}}}
	for _, tc := range []struct {
		policy string
		want   termination.Cause
	}{
		{"max_tool_calls: 3", termination.MaxToolCallsReached{Limit: 3, Count: 4}},
		{"{stall: {repeats: 3}}", termination.StallDetected{Signal: termination.SignalRepeatedToolCall, Repeats: 3}},
	} {
		t.Run(tc.want.TagValue(), func(t *testing.T) {
			stage, _ := newStage(t, tc.policy)
			r := &runner.Runner{Agent: "assistant", Model: scripted(runaway)}
			res, calls := drive(stage, r, "Find the CEO of Acme.")
			if res.Cause != tc.want {
				t.Errorf("cause = %#v, want %#v", res.Cause, tc.want)
			}
			if calls != res.ToolCalls {
				t.Errorf("model calls = %d after a stop at tool call %d", calls, res.ToolCalls)
			}
		})
	}
}

func TestActions(t *testing.T) {
	for _, tc := range []struct {
		name, policy string
		call         adaptertest.ToolCall
		want         termination.Cause
		last         string
	}{
		{"EscalateIsStop", "stop_message: true", adaptertest.ToolCall{Name: "exit_loop", Args: `{}`},
			termination.Completed{Condition: "stop_message", Detail: "critic"}, "stop critic escalate"},
		{"TransferIsHandoff", "handoff: [billing]", adaptertest.ToolCall{Name: "transfer_to_agent", Args: `{"agent_name":"billing"}`},
			termination.HandoffRequested{Target: "billing", Source: "critic"}, "handoff critic billing"},
		{"FailedTool", "errors: {total: 1}", adaptertest.ToolCall{Name: "broken", Args: `{}`},
			termination.Failed{Reason: termination.FailErrorThreshold}, "tool_result critic backend down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stage, seen := newStage(t, tc.policy)
			script := adaptertest.Script{Turns: []adaptertest.Turn{{ToolCalls: []adaptertest.ToolCall{tc.call}}}}
			res, _ := drive(stage, &runner.Runner{Agent: "critic", Model: scripted(script)}, "go")
			if fmt.Sprintf("%T", res.Cause) != fmt.Sprintf("%T", tc.want) || res.TerminationCause != tc.want.TagValue() {
				t.Errorf("cause = %#v, want %#v", res.Cause, tc.want)
			}
			evs := seen.All()
			last := evs[len(evs)-1]
			if got := strings.TrimSpace(fmt.Sprintf("%s %s %s%s%s", last.Kind, last.Source, last.Text, last.Target, last.Err)); got != tc.last {
				t.Errorf("last event = %q, want %q", got, tc.last)
			}
		})
	}
}

func TestErrorResponse(t *testing.T) {
	stage, _ := newStage(t, "max_tool_calls: 3")
	llm := func(ctx context.Context, i int) (*model.LLMResponse, error) {
		return &model.LLMResponse{ErrorCode: "RESOURCE_EXHAUSTED", ErrorMessage: "quota"}, nil
	}
	res, _ := drive(stage, &runner.Runner{Agent: "a", Model: llm}, "go")
	f, ok := res.Cause.(termination.Failed)
	if !ok || f.Reason != termination.FailStreamError || f.Err != "RESOURCE_EXHAUSTED: quota" {
		t.Errorf("cause = %#v, want Failed{stream_error, RESOURCE_EXHAUSTED: quota}", res.Cause)
	}
}

// The README shows the recipe exactly as it is tested here.
func TestREADMEHasRecipe(t *testing.T) {
	src, err := os.ReadFile("recipe_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	begin, end := strings.Index(s, "// BEGIN RECIPE\n"), strings.Index(s, "// END RECIPE")
	recipe := strings.TrimSpace(s[begin+len("// BEGIN RECIPE\n") : end])
	if !strings.Contains(string(readme), recipe) {
		t.Errorf("README.md does not contain the recipe of recipe_test.go verbatim")
	}
}

// An error response is still a model turn: ADK's error responses (a
// blocked prompt, a finish reason other than STOP with no content) carry
// the usage the call spent, which must be counted.
func TestErrorResponseKeepsUsage(t *testing.T) {
	stage, seen := newStage(t, "max_tool_calls: 3")
	llm := func(ctx context.Context, i int) (*model.LLMResponse, error) {
		return &model.LLMResponse{ErrorCode: "SAFETY", ErrorMessage: "blocked",
			UsageMetadata: &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 40, CandidatesTokenCount: 2}}, nil
	}
	res, _ := drive(stage, &runner.Runner{Agent: "a", Model: llm}, "go")
	if want := (termination.Usage{InputTokens: 40, OutputTokens: 2}); res.Tokens != want {
		t.Errorf("tokens = %+v, want %+v", res.Tokens, want)
	}
	if res.Iterations != 1 {
		t.Errorf("iterations = %d, want 1 (the failed model turn)", res.Iterations)
	}
	var kinds []termination.Kind
	for _, ev := range seen.All() {
		kinds = append(kinds, ev.Kind)
	}
	if fmt.Sprint(kinds) != fmt.Sprint([]termination.Kind{termination.KindMessage, termination.KindError}) {
		t.Errorf("events = %v, want [message error]", kinds)
	}
	f, ok := res.Cause.(termination.Failed)
	if !ok || f.Reason != termination.FailStreamError || f.Err != "SAFETY: blocked" {
		t.Errorf("cause = %#v, want Failed{stream_error, SAFETY: blocked}", res.Cause)
	}
}

// Usage is counted as the GenAI conventions count it (contract §1): cached
// content is part of Gemini's prompt count and is not added again; thoughts
// are apart from the candidates and are added, and so is the prompt of a
// built-in tool.
func TestUsageCountsThoughtsAndCache(t *testing.T) {
	stage, _ := newStage(t, "max_tool_calls: 3")
	llm := func(ctx context.Context, i int) (*model.LLMResponse, error) {
		return &model.LLMResponse{Content: &genai.Content{Role: "model", Parts: []*genai.Part{{Text: "done"}}},
			UsageMetadata: &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 1200, CachedContentTokenCount: 1000,
				ToolUsePromptTokenCount: 50, CandidatesTokenCount: 40, ThoughtsTokenCount: 300, TotalTokenCount: 1590}}, nil
	}
	res, _ := drive(stage, &runner.Runner{Agent: "a", Model: llm}, "go")
	if want := (termination.Usage{InputTokens: 1250, OutputTokens: 340}); res.Tokens != want {
		t.Errorf("tokens = %+v, want %+v", res.Tokens, want)
	}
	if res.Tokens.Total() != 1590 {
		t.Errorf("total = %d, want the response's total 1590", res.Tokens.Total())
	}
}
