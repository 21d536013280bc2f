package langchaingo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/callbacks"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/tools"

	"github.com/agentstop/agentstop/adapters/langchaingo"
	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// plainTool is a user's own tool: it reports to no handler.
type plainTool struct {
	name string
	err  error
}

func (t plainTool) Name() string        { return t.name }
func (t plainTool) Description() string { return "looks things up" }

func (t plainTool) Call(context.Context, string) (string, error) {
	if t.err != nil {
		return "", t.err
	}
	return "Paris is the capital of France.", nil
}

// detachedTool reports to its handler under a context of its own, not the
// one its Call got.
type detachedTool struct{ fixedTool }

func (t detachedTool) Call(_ context.Context, input string) (string, error) {
	return t.fixedTool.Call(context.Background(), input)
}

// driveTools runs an OpenAI functions agent with the tools mk returns for
// the run's handler under an agents.Executor.
func driveTools(t *testing.T, stage *middleware.Stage, script adaptertest.Script, mk func(h *langchaingo.Handler) []tools.Tool) outcome {
	t.Helper()
	ctx, run := stage.Start(context.Background())
	h := langchaingo.NewHandler(run, langchaingo.WithSource("assistant"))
	llm := &scriptedLLM{script: script, CallbacksHandler: h}
	agent := agents.NewOpenAIFunctionsAgent(llm, mk(h), agents.WithCallbacksHandler(h))
	executor := agents.NewExecutor(agent, agents.WithCallbacksHandler(h), agents.WithMaxIterations(100))
	out, err := chains.Call(ctx, executor, map[string]any{"input": script.Input})
	return outcome{res: h.Finish(err), err: err, output: out, calls: llm.Calls()}
}

// A tool wrapped by Tools reports its result once, whether or not it also
// reports to the handler itself, and however it does.
func TestToolsReportOnce(t *testing.T) {
	boom := errors.New("search backend down")
	answered := []string{
		`message assistant "Let me look that up." {120 15}`,
		`tool_call search {"query":"capital of France"}`,
		`tool_result search "Paris is the capital of France."`,
		`final assistant "The capital of France is Paris." {160 9}`,
	}
	failed := []string{
		`message assistant "Let me look that up." {120 15}`,
		`tool_call search {"query":"capital of France"}`,
		`tool_result search ""search backend down`,
	}
	for _, tc := range []struct {
		name  string
		tools func(h *langchaingo.Handler) []tools.Tool
		want  []string
	}{
		{"Unwrapped", func(*langchaingo.Handler) []tools.Tool { return []tools.Tool{plainTool{name: "search"}} },
			[]string{answered[0], answered[1], answered[3]}},
		{"Plain", func(h *langchaingo.Handler) []tools.Tool { return langchaingo.Tools(h, plainTool{name: "search"}) }, answered},
		{"NameCaseDiffers", func(h *langchaingo.Handler) []tools.Tool { return langchaingo.Tools(h, plainTool{name: "Search"}) }, answered},
		{"ReportsItselfToo", func(h *langchaingo.Handler) []tools.Tool {
			return langchaingo.Tools(h, fixedTool{name: "search", CallbacksHandler: h})
		}, answered},
		{"ReportsUnderAnotherContext", func(h *langchaingo.Handler) []tools.Tool {
			return langchaingo.Tools(h, detachedTool{fixedTool{name: "search", CallbacksHandler: h}})
		}, answered},
		{"ReportsThroughCombiningHandler", func(h *langchaingo.Handler) []tools.Tool {
			both := callbacks.CombiningHandler{Callbacks: []callbacks.Handler{callbacks.SimpleHandler{}, h}}
			return langchaingo.Tools(h, fixedTool{name: "search", CallbacksHandler: both})
		}, answered},
		{"WrappedTwice", func(h *langchaingo.Handler) []tools.Tool {
			return langchaingo.Tools(h, langchaingo.Tools(h, plainTool{name: "search"})...)
		}, answered},
		{"Fails", func(h *langchaingo.Handler) []tools.Tool {
			return langchaingo.Tools(h, plainTool{name: "search", err: boom})
		}, failed},
		{"FailsAndReportsItselfToo", func(h *langchaingo.Handler) []tools.Tool {
			return langchaingo.Tools(h, fixedTool{name: "search", err: boom, CallbacksHandler: h})
		}, failed},
		{"FailsWithoutText", func(h *langchaingo.Handler) []tools.Tool {
			return langchaingo.Tools(h, plainTool{name: "search", err: errors.New("")})
		}, []string{failed[0], failed[1], `tool_result search ""search failed with an error that has no text`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stage, seen := newStage(t, "max_tool_calls: 10")
			driveTools(t, stage, adaptertest.Lookup, tc.tools)
			evs := seen.All()
			if got := describe(evs); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			for _, ev := range evs {
				if ev.Kind == termination.KindToolResult && ev.CallID != "call_0_0" {
					t.Errorf("tool_result call id = %q, want the action's call_0_0", ev.CallID)
				}
			}
		})
	}
}

// A failing tool is a failed tool_result that the errors condition
// counts; the executor's error it becomes is not reported again.
func TestToolsFailingToolStopsRun(t *testing.T) {
	stage, seen := newStage(t, "{errors: {consecutive: 1}, max_tool_calls: 10}")
	boom := errors.New("search backend down")
	out := driveTools(t, stage, adaptertest.Lookup, func(h *langchaingo.Handler) []tools.Tool {
		return langchaingo.Tools(h, plainTool{name: "search", err: boom})
	})
	if !errors.Is(out.err, boom) {
		t.Fatalf("executor error = %v, want the tool's", out.err)
	}
	if f, ok := out.res.Cause.(termination.Failed); !ok || f.Reason != termination.FailErrorThreshold {
		t.Errorf("cause = %#v, want Failed{error_threshold}", out.res.Cause)
	}
	for _, ev := range seen.All() {
		if ev.Kind == termination.KindError {
			t.Errorf("the tool's error was reported again as an error event: %+v", ev)
		}
	}
}

// An agent whose tool fails on every call, and that is handed the error to
// try again, is stopped by errors.consecutive: the executor returns at its
// next model call.
func TestToolsConsecutiveErrorsStopExecutor(t *testing.T) {
	stage, seen := newStage(t, "{errors: {consecutive: 3}, max_tool_calls: 50}")
	out := driveTools(t, stage, adaptertest.Runaway, func(h *langchaingo.Handler) []tools.Tool {
		wrapped := langchaingo.Tools(h, plainTool{name: "search", err: errors.New("search backend down")})
		return []tools.Tool{errorsAsText{wrapped[0]}}
	})
	if f, ok := out.res.Cause.(termination.Failed); !ok || f.Reason != termination.FailErrorThreshold {
		t.Fatalf("cause = %#v, want Failed{error_threshold}", out.res.Cause)
	}
	if !errors.Is(out.err, context.Canceled) {
		var c termination.Cause
		if !errors.As(out.err, &c) {
			t.Errorf("executor error = %v, want the cancelled context", out.err)
		}
	}
	n := 0
	for _, ev := range seen.All() {
		if ev.Kind == termination.KindToolResult {
			n++
			if ev.Err != "search backend down" || ev.CallID == "" {
				t.Errorf("tool_result = %+v, want the failure with its call id", ev)
			}
		}
	}
	if n != 3 || out.calls != 4 {
		t.Errorf("failed results, model calls = %d, %d; want 3, 4 (stopped on the third failure, the fourth call cancelled)", n, out.calls)
	}
}

// Called outside an action naming it, a wrapped tool reports its own name
// and no call id; a nil handler or tool is left alone; a tool that panics
// is not reported, and the handler hears the tool callbacks again after it.
func TestToolsEdges(t *testing.T) {
	stage, seen := newStage(t, "max_tool_calls: 10")
	ctx, run := stage.Start(context.Background())
	h := langchaingo.NewHandler(run)
	ts := langchaingo.Tools(h, plainTool{name: "search"}, nil, panicTool{})
	if ts[1] != nil {
		t.Errorf("Tools(h, nil)[0] = %v, want nil", ts[1])
	}
	if got := langchaingo.Tools(nil, plainTool{name: "search"}); got[0] != (plainTool{name: "search"}) {
		t.Errorf("Tools(nil, tool) = %#v, want the tool as it is", got[0])
	}
	h.HandleAgentAction(ctx, schema.AgentAction{Tool: "SEARCH", ToolInput: "x", ToolID: "c1"})
	mustCall(t, ts[0])
	h.HandleAgentAction(ctx, schema.AgentAction{Tool: "lookup", ToolInput: "x", ToolID: "c2"})
	mustCall(t, ts[0])
	func() {
		defer func() { _ = recover() }()
		_, _ = ts[2].Call(ctx, "x")
	}()
	h.HandleToolEnd(ctx, "after the panic")
	run.Finish(nil)
	var got []string
	for _, ev := range seen.All() {
		if ev.Kind == termination.KindToolResult {
			got = append(got, ev.Tool+" "+ev.CallID+" "+ev.Text)
		}
	}
	want := []string{"SEARCH c1 Paris is the capital of France.", "search  Paris is the capital of France.", "lookup c2 after the panic"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("tool results = %q, want %q", got, want)
	}
}

func mustCall(t *testing.T, tool tools.Tool) {
	t.Helper()
	if _, err := tool.Call(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
}

type panicTool struct{}

func (panicTool) Name() string                                 { return "panics" }
func (panicTool) Description() string                          { return "panics" }
func (panicTool) Call(context.Context, string) (string, error) { panic("tool bug") }

// A tool error without text is still a failed tool_result, from the
// callbacks as from Tools (an empty Err would make it a success).
func TestHandleToolErrorWithoutText(t *testing.T) {
	stage, seen := newStage(t, "max_tool_calls: 10")
	ctx, run := stage.Start(context.Background())
	h := langchaingo.NewHandler(run)
	h.HandleAgentAction(ctx, schema.AgentAction{Tool: "search", ToolInput: "x", ToolID: "c1"})
	h.HandleToolError(ctx, errors.New(""))
	run.Finish(nil)
	var failed []string
	for _, ev := range seen.All() {
		if ev.Failed() {
			failed = append(failed, ev.Err)
		}
	}
	if want := []string{"search failed with an error that has no text"}; fmt.Sprint(failed) != fmt.Sprint(want) {
		t.Errorf("failed events = %q, want %q", failed, want)
	}
}
