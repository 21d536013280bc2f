package langchaingo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/callbacks"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/tools"
	"go.uber.org/goleak"

	"github.com/agentstop/agentstop/adapters/langchaingo"
	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scriptedLLM is an llms.Model that answers with a script's turns the way a
// provider does: it fails once its context is done (as an HTTP client does),
// calls its callbacks handler around each generation (as llms/openai does),
// and reports usage in GenerationInfo under a provider's keys.
type scriptedLLM struct {
	script           adaptertest.Script
	keys             [2]string // GenerationInfo keys for input and output tokens
	CallbacksHandler callbacks.Handler

	mu    sync.Mutex
	calls int
}

var openAIKeys = [2]string{"PromptTokens", "CompletionTokens"}

func (m *scriptedLLM) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

func (m *scriptedLLM) GenerateContent(ctx context.Context, msgs []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	m.mu.Lock()
	i := m.calls
	m.calls++
	m.mu.Unlock()
	if m.CallbacksHandler != nil {
		m.CallbacksHandler.HandleLLMGenerateContentStart(ctx, msgs)
	}
	if err := ctx.Err(); err != nil {
		if m.CallbacksHandler != nil {
			m.CallbacksHandler.HandleLLMError(ctx, err)
		}
		return nil, err
	}
	turn, ok := m.script.TurnAt(i)
	if !ok {
		return nil, fmt.Errorf("scripted model: no turn %d", i)
	}
	keys := m.keys
	if keys[0] == "" {
		keys = openAIKeys
	}
	choice := &llms.ContentChoice{Content: turn.Text, StopReason: "stop", GenerationInfo: map[string]any{
		keys[0]: int(turn.Usage.InputTokens), keys[1]: int(turn.Usage.OutputTokens),
	}}
	for j, tc := range turn.ToolCalls {
		choice.StopReason = "tool_calls"
		choice.ToolCalls = append(choice.ToolCalls, llms.ToolCall{ID: fmt.Sprintf("call_%d_%d", i, j), Type: "function",
			FunctionCall: &llms.FunctionCall{Name: tc.Name, Arguments: tc.Args}})
	}
	res := &llms.ContentResponse{Choices: []*llms.ContentChoice{choice}}
	if m.CallbacksHandler != nil {
		m.CallbacksHandler.HandleLLMGenerateContentEnd(ctx, res)
	}
	return res, nil
}

func (m *scriptedLLM) Call(ctx context.Context, prompt string, opts ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, opts...)
}

// fixedTool returns a short fixed text and reports to its handler, as
// langchaingo's built-in tools do.
type fixedTool struct {
	name             string
	err              error
	CallbacksHandler callbacks.Handler
}

func (t fixedTool) Name() string        { return t.name }
func (t fixedTool) Description() string { return "looks things up" }

func (t fixedTool) Call(ctx context.Context, input string) (string, error) {
	if t.CallbacksHandler != nil {
		t.CallbacksHandler.HandleToolStart(ctx, input)
	}
	if t.err != nil {
		if t.CallbacksHandler != nil {
			t.CallbacksHandler.HandleToolError(ctx, t.err)
		}
		return "", t.err
	}
	out := "Paris is the capital of France."
	if t.CallbacksHandler != nil {
		t.CallbacksHandler.HandleToolEnd(ctx, out)
	}
	return out, nil
}

type setup struct {
	keys          [2]string
	maxIterations int
	toolErr       error
}

type outcome struct {
	res    termination.Result
	err    error
	output map[string]any
	calls  int
}

// drive runs an OpenAI functions agent under an agents.Executor, fed to a
// run of stage.
func drive(t *testing.T, stage *middleware.Stage, script adaptertest.Script, s setup) outcome {
	t.Helper()
	ctx, run := stage.Start(context.Background())
	h := langchaingo.NewHandler(run, langchaingo.WithSource("assistant"))
	llm := &scriptedLLM{script: script, keys: s.keys, CallbacksHandler: h}
	agent := agents.NewOpenAIFunctionsAgent(llm, []tools.Tool{fixedTool{name: "search", err: s.toolErr, CallbacksHandler: h}},
		agents.WithCallbacksHandler(h))
	maxIter := s.maxIterations
	if maxIter == 0 {
		maxIter = 100
	}
	executor := agents.NewExecutor(agent, agents.WithCallbacksHandler(h), agents.WithMaxIterations(maxIter))
	out, err := chains.Call(ctx, executor, map[string]any{"input": script.Input})
	return outcome{res: h.Finish(err), err: err, output: out, calls: llm.Calls()}
}

func TestConformance(t *testing.T) {
	adaptertest.Run(t, adaptertest.Harness{
		Run: func(t *testing.T, stage *middleware.Stage, script adaptertest.Script) adaptertest.Report {
			out := drive(t, stage, script, setup{})
			return adaptertest.Report{Result: out.res, ModelCalls: out.calls}
		},
		CallIDs: true, // langchaingo's responses do not name their model in a standard way
	})
}

func newStage(t *testing.T, policy string, opts ...middleware.Option) (*middleware.Stage, *adaptertest.Events) {
	t.Helper()
	return adaptertest.NewStage(t, "langchaingo_test", policy, opts...)
}

var lookup = adaptertest.Lookup

// runaway calls the same tool forever, saying nothing.
var runaway = adaptertest.Runaway

func describe(evs []termination.Event) []string {
	var out []string
	for _, ev := range evs {
		switch ev.Kind {
		case termination.KindMessage, termination.KindFinal:
			out = append(out, fmt.Sprintf("%s %s %q %v", ev.Kind, ev.Source, ev.Text, ev.Usage))
		case termination.KindToolCall:
			out = append(out, fmt.Sprintf("%s %s %s", ev.Kind, ev.Tool, ev.Args))
		case termination.KindToolResult:
			out = append(out, fmt.Sprintf("%s %s %q%s", ev.Kind, ev.Tool, ev.Text, ev.Err))
		default:
			out = append(out, fmt.Sprintf("%s %q", ev.Kind, ev.Err))
		}
	}
	return out
}

// Every provider's usage keys are read, and each response counted once.
func TestCompletesWithProviderUsage(t *testing.T) {
	for name, keys := range map[string][2]string{
		"openai":    openAIKeys,
		"anthropic": {"InputTokens", "OutputTokens"},
		"googleai":  {"input_tokens", "output_tokens"},
	} {
		t.Run(name, func(t *testing.T) {
			stage, seen := newStage(t, "max_tool_calls: 10")
			out := drive(t, stage, lookup, setup{keys: keys})
			if out.err != nil || out.output["output"] != "The capital of France is Paris." {
				t.Fatalf("executor = %v, %v", out.output, out.err)
			}
			if _, ok := out.res.Cause.(termination.NaturalCompletion); !ok {
				t.Errorf("cause = %#v, want NaturalCompletion", out.res.Cause)
			}
			want := []string{
				`message assistant "Let me look that up." {120 15}`,
				`tool_call search {"query":"capital of France"}`,
				`tool_result search "Paris is the capital of France."`,
				`final assistant "The capital of France is Paris." {160 9}`,
			}
			if got := describe(seen.All()); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if out.res.Tokens != (termination.Usage{InputTokens: 280, OutputTokens: 24}) {
				t.Errorf("tokens = %+v, want {280 24}", out.res.Tokens)
			}
		})
	}
}

// A runaway executor is stopped: the next model call fails with the
// cancelled context and the executor returns.
func TestRunawayStopsExecutor(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   termination.Cause
	}{
		{"max_tool_calls: 3", termination.MaxToolCallsReached{Limit: 3, Count: 4}},
		{"{stall: {repeats: 3}}", termination.StallDetected{Signal: termination.SignalRepeatedToolCall, Repeats: 3}},
	} {
		t.Run(tc.want.TagValue(), func(t *testing.T) {
			stage, _ := newStage(t, tc.policy)
			out := drive(t, stage, runaway, setup{})
			if out.res.Cause != tc.want {
				t.Errorf("cause = %#v, want %#v", out.res.Cause, tc.want)
			}
			var c termination.Cause
			if !errors.Is(out.err, context.Canceled) && !errors.As(out.err, &c) {
				t.Errorf("executor error = %v, want the cancelled context", out.err)
			}
			if out.res.ToolCalls > 4 || out.calls > out.res.ToolCalls+1 {
				t.Errorf("model calls %d, tool calls %d: the executor ran on after the stop", out.calls, out.res.ToolCalls)
			}
		})
	}
}

// The executor's own MaxIterations is not a final answer: the run ends with
// MaxIterationsReached, mapped from agents.ErrNotFinished.
func TestExecutorMaxIterations(t *testing.T) {
	stage, seen := newStage(t, "max_tool_calls: 50")
	out := drive(t, stage, runaway, setup{maxIterations: 3})
	if !errors.Is(out.err, agents.ErrNotFinished) {
		t.Fatalf("executor error = %v, want ErrNotFinished", out.err)
	}
	if want := (termination.MaxIterationsReached{Limit: 3, Count: 4}); out.res.Cause != want {
		t.Errorf("cause = %#v, want %#v (from %q)", out.res.Cause, want, agents.ErrNotFinished)
	}
	if out.res.Iterations != 3 || out.calls != 3 {
		t.Errorf("iterations, model calls = %d, %d; want 3, 3", out.res.Iterations, out.calls)
	}
	for _, ev := range seen.All() {
		if ev.Kind == termination.KindFinal {
			t.Errorf("the executor's max-iterations report became a final event: %+v", ev)
		}
	}
}

// A failing tool is a failed tool_result; the executor's error an error
// event, reported once though every chain passes it on.
func TestToolError(t *testing.T) {
	stage, seen := newStage(t, "max_tool_calls: 10")
	boom := errors.New("search backend down")
	out := drive(t, stage, lookup, setup{toolErr: boom})
	if !errors.Is(out.err, boom) {
		t.Fatalf("executor error = %v", out.err)
	}
	want := []string{
		`message assistant "Let me look that up." {120 15}`,
		`tool_call search {"query":"capital of France"}`,
		`tool_result search ""search backend down`,
	}
	if got := describe(seen.All()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if f, ok := out.res.Cause.(termination.Failed); !ok || f.Reason != termination.FailStreamError {
		t.Errorf("cause = %#v, want Failed{stream_error}", out.res.Cause)
	}
}

func TestUsage(t *testing.T) {
	type mistralUsage struct{ PromptTokens, CompletionTokens, TotalTokens int }
	for _, tc := range []struct {
		name string
		res  *llms.ContentResponse
		want termination.Usage
	}{
		{"Nil", nil, termination.Usage{}},
		{"NoKeys", &llms.ContentResponse{Choices: []*llms.ContentChoice{{GenerationInfo: map[string]any{"model": "x"}}}}, termination.Usage{}},
		{"OpenAI", &llms.ContentResponse{Choices: []*llms.ContentChoice{{GenerationInfo: map[string]any{"PromptTokens": 3, "CompletionTokens": 4, "TotalTokens": 7}}}}, termination.Usage{InputTokens: 3, OutputTokens: 4}},
		{"AnthropicOnceAcrossBlocks", &llms.ContentResponse{Choices: []*llms.ContentChoice{
			{GenerationInfo: map[string]any{"InputTokens": 10, "OutputTokens": 20}},
			{GenerationInfo: map[string]any{"InputTokens": 10, "OutputTokens": 20}},
		}}, termination.Usage{InputTokens: 10, OutputTokens: 20}},
		{"GoogleInt32", &llms.ContentResponse{Choices: []*llms.ContentChoice{{GenerationInfo: map[string]any{"input_tokens": int32(5), "output_tokens": int32(6)}}}}, termination.Usage{InputTokens: 5, OutputTokens: 6}},
		{"Float", &llms.ContentResponse{Choices: []*llms.ContentChoice{{GenerationInfo: map[string]any{"prompt_tokens": 5.0, "completion_tokens": 6.0}}}}, termination.Usage{InputTokens: 5, OutputTokens: 6}},
		{"AnthropicCache", &llms.ContentResponse{Choices: []*llms.ContentChoice{{GenerationInfo: map[string]any{
			"InputTokens": 9, "OutputTokens": 4, "CacheCreationInputTokens": 100, "CacheReadInputTokens": 1000}}}},
			termination.Usage{InputTokens: 1109, OutputTokens: 4}},
		{"OpenAIReasoningAndCacheCountedOnce", &llms.ContentResponse{Choices: []*llms.ContentChoice{{GenerationInfo: map[string]any{
			"PromptTokens": 1200, "PromptCachedTokens": 1000, "CompletionTokens": 340, "ReasoningTokens": 300, "TotalTokens": 1540}}}},
			termination.Usage{InputTokens: 1200, OutputTokens: 340}},
		{"GoogleAIThoughtsInTheTotal", &llms.ContentResponse{Choices: []*llms.ContentChoice{{GenerationInfo: map[string]any{
			"input_tokens": int32(1200), "output_tokens": int32(40), "total_tokens": int32(1540), "CacheReadInputTokens": int32(1000),
			"PromptTokens": int32(1200), "CompletionTokens": int32(40), "TotalTokens": int32(1540)}}}},
			termination.Usage{InputTokens: 1200, OutputTokens: 340}},
		{"MistralStruct", &llms.ContentResponse{Choices: []*llms.ContentChoice{{GenerationInfo: map[string]any{"usage": &mistralUsage{7, 8, 15}}}}}, termination.Usage{InputTokens: 7, OutputTokens: 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := langchaingo.Usage(tc.res); got != tc.want {
				t.Errorf("Usage = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// An error with no text does not hide every later error from the run.
func TestHandlerEmptyErrorTextDoesNotHideLaterErrors(t *testing.T) {
	stage, seen := newStage(t, "max_tool_calls: 3")
	ctx, run := stage.Start(context.Background())
	h := langchaingo.NewHandler(run)
	h.HandleChainError(ctx, errors.New(""))
	h.HandleChainError(ctx, errors.New("model unavailable"))
	run.Finish(nil)
	n := 0
	for _, ev := range seen.All() {
		if ev.Kind == termination.KindError {
			n++
		}
	}
	if n != 2 {
		t.Errorf("error events = %d, want 2", n)
	}
}
