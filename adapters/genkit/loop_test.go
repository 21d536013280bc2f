package genkitstop_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	genkitstop "github.com/agentstop/agentstop/adapters/genkit"
	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// mode is one way of running genkit's tool loop under a run, naming its
// model with WithModel.
type mode struct {
	name string
	run  func(ctx context.Context, g *genkit.Genkit, run *middleware.Run, prompt string) (termination.Result, error)
}

func options(prompt string) []ai.GenerateOption {
	return []ai.GenerateOption{
		ai.WithModelName("scripted/model"),
		ai.WithPrompt(prompt),
		ai.WithTools(ai.ToolName("search"), ai.ToolName("echo"), ai.ToolName("fail")),
		ai.WithMaxTurns(1000), // genkit's own limit (default 5) must not be what stops a runaway
	}
}

var modes = []mode{
	{"Generate", func(ctx context.Context, g *genkit.Genkit, run *middleware.Run, prompt string) (termination.Result, error) {
		_, err := genkitstop.Generate(ctx, g, run, append(options(prompt), genkitstop.WithModel("scripted/model"))...)
		return run.Wait(), err
	}},
	{"GenerateStream", func(ctx context.Context, g *genkit.Genkit, run *middleware.Run, prompt string) (termination.Result, error) {
		var err error
		for v, e := range genkitstop.GenerateStream(ctx, g, run, append(options(prompt), genkitstop.WithModel("scripted/model"))...) {
			if e != nil {
				err = e
			}
			_ = v
		}
		return run.Wait(), err
	}},
	{"Middleware", func(ctx context.Context, g *genkit.Genkit, run *middleware.Run, prompt string) (termination.Result, error) {
		// The middleware alone, with genkit's own Generate.
		_, err := genkit.Generate(ctx, g, append(options(prompt), ai.WithMiddleware(genkitstop.Middleware(run, genkitstop.WithModel("scripted/model"))))...)
		return run.Finish(err), err
	}},
}

func forEachMode(t *testing.T, f func(t *testing.T, m mode)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { f(t, m) })
	}
}

func TestRunawayStoppedByMaxToolCalls(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		g, model := newGenkit(t.Context(), true, turn{text: "searching", calls: []call{{"search", `{"q":"again"}`}}, input: 10, output: 3})
		stage, _ := adaptertest.NewStage(t, "genkit_test", "max_tool_calls: 3")
		ctx, run := stage.Start(t.Context())
		res, err := m.run(ctx, g, run, "find it")

		var limit termination.MaxToolCallsReached
		if !errors.As(res.Cause, &limit) || limit.Limit != 3 || limit.Count != 4 {
			t.Fatalf("cause = %#v, want MaxToolCallsReached{3, 4}", res.Cause)
		}
		if m.name != "GenerateStream" && !errors.As(err, &limit) {
			t.Errorf("generate error = %v, want the typed cause", err)
		}
		if got := model.modelCalls(); got != 4 {
			t.Errorf("model calls = %d, want 4", got)
		}
		if res.Tokens != (termination.Usage{InputTokens: 40, OutputTokens: 12}) {
			t.Errorf("tokens = %+v, want 40 in, 12 out", res.Tokens)
		}
	})
}

func TestRunawayStoppedByStall(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		g, model := newGenkit(t.Context(), true, turn{calls: []call{{"search", `{"q": "same", "page": 1}`}}, input: 7, output: 2})
		stage, _ := adaptertest.NewStage(t, "genkit_test", "{stall: {repeats: 3}, max_iterations: 50}")
		ctx, run := stage.Start(t.Context())
		res, _ := m.run(ctx, g, run, "find it")

		var stall termination.StallDetected
		if !errors.As(res.Cause, &stall) || stall.Signal != termination.SignalRepeatedToolCall || stall.Repeats != 3 {
			t.Fatalf("cause = %#v, want StallDetected{repeated_tool_call, 3}", res.Cause)
		}
		if got := model.modelCalls(); got != 3 {
			t.Errorf("model calls = %d, want 3", got)
		}
		if res.Tokens != (termination.Usage{InputTokens: 21, OutputTokens: 6}) {
			t.Errorf("tokens = %+v, want 21 in, 6 out", res.Tokens)
		}
	})
}

func TestNaturalCompletion(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		g, model := newGenkit(t.Context(), false,
			turn{text: "let me look", calls: []call{{"search", `{"q":"a"}`}, {"echo", `{"q":"b"}`}}, input: 100, output: 20},
			turn{calls: []call{{"search", `{"q":"c"}`}}, input: 150, output: 5},
			turn{text: "the answer is 42", input: 200, output: 30},
		)
		stage, rec := adaptertest.NewStage(t, "genkit_test", "{max_tool_calls: 10, max_iterations: 10}")
		ctx, run := stage.Start(t.Context())
		res, err := m.run(ctx, g, run, "what is it?")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := res.Cause.(termination.NaturalCompletion); !ok {
			t.Fatalf("cause = %#v, want NaturalCompletion", res.Cause)
		}
		if res.Tokens != (termination.Usage{InputTokens: 450, OutputTokens: 55}) {
			t.Errorf("tokens = %+v, want 450 in, 55 out", res.Tokens)
		}
		if res.Iterations != 3 || res.ToolCalls != 3 {
			t.Errorf("iterations, tool calls = %d, %d, want 3, 3", res.Iterations, res.ToolCalls)
		}
		want := []string{"message", "tool_call", "tool_call", "tool_result", "tool_result",
			"message", "tool_call", "tool_result", "final"}
		if got := rec.Kinds(); !slices.Equal(got, want) {
			t.Fatalf("events = %v, want %v", got, want)
		}
		ev := rec.All()
		if ev[0].Text != "let me look" || ev[0].Usage != (termination.Usage{InputTokens: 100, OutputTokens: 20}) {
			t.Errorf("first message = %+v", ev[0])
		}
		if ev[1].Tool != "search" || string(ev[1].Args) != `{"q":"a"}` {
			t.Errorf("tool call = %+v (args %s)", ev[1], ev[1].Args)
		}
		if ev[3].Kind != termination.KindToolResult || ev[3].Text == "" || !ev[3].Usage.IsZero() {
			t.Errorf("tool result = %+v", ev[3])
		}
		// The tool requests' refs reach the events as call ids; genkit runs
		// a turn's tools in parallel, so the results are paired by id.
		for i, want := range map[int]string{1: "call_0_0", 2: "call_0_1", 6: "call_1_0"} {
			if ev[i].CallID != want {
				t.Errorf("event %d (%s) call_id = %q, want %q", i, ev[i].Kind, ev[i].CallID, want)
			}
		}
		if err := adaptertest.CheckCallIDs(ev); err != nil {
			t.Error(err)
		}
		if ev[8].Text != "the answer is 42" {
			t.Errorf("final = %+v", ev[8])
		}
		if got := model.modelCalls(); got != 3 {
			t.Errorf("model calls = %d, want 3", got)
		}
	})
}

// A failing tool aborts genkit's generation: the run fails with the tool's
// error.
func TestToolFailure(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		g, model := newGenkit(t.Context(), true, turn{calls: []call{{"fail", `{}`}}, input: 1, output: 1})
		stage, _ := adaptertest.NewStage(t, "genkit_test", "max_iterations: 10")
		ctx, run := stage.Start(t.Context())
		res, err := m.run(ctx, g, run, "go")
		var failed termination.Failed
		if !errors.As(res.Cause, &failed) || failed.Reason != termination.FailStreamError || err == nil {
			t.Fatalf("cause = %#v, err = %v, want Failed{stream_error}", res.Cause, err)
		}
		if got := model.modelCalls(); got != 1 {
			t.Errorf("model calls = %d, want 1", got)
		}
	})
}

// A run stopped before the generation starts makes no model call.
func TestStoppedRunMakesNoCall(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		g, model := newGenkit(t.Context(), true, turn{calls: []call{{"echo", `{}`}}, input: 1, output: 1})
		stage, _ := adaptertest.NewStage(t, "genkit_test", "{}")
		ctx, run := stage.Start(t.Context())
		run.Stop("user pressed stop")
		res, _ := m.run(ctx, g, run, "go")
		var c termination.Cancelled
		if !errors.As(res.Cause, &c) || c.Reason != termination.CancelExternal {
			t.Fatalf("cause = %#v, want Cancelled{external}", res.Cause)
		}
		if got := model.modelCalls(); got != 0 {
			t.Errorf("model calls = %d, want 0", got)
		}
	})
}

// A consumer that leaves GenerateStream early stops the run as
// Cancelled{external}, and genkit's extra yield after the break is absorbed.
func TestStreamConsumerLeaves(t *testing.T) {
	g, model := newGenkit(t.Context(), true, turn{text: "thinking hard", calls: []call{{"echo", `{}`}}, input: 1, output: 1})
	stage, _ := adaptertest.NewStage(t, "genkit_test", "{}")
	ctx, run := stage.Start(t.Context())
	for range genkitstop.GenerateStream(ctx, g, run, options("go")...) {
		break
	}
	res := run.Wait()
	var c termination.Cancelled
	if !errors.As(res.Cause, &c) || c.Reason != termination.CancelExternal {
		t.Fatalf("cause = %#v, want Cancelled{external}", res.Cause)
	}
	if got := model.modelCalls(); got != 1 {
		t.Errorf("model calls = %d, want 1", got)
	}
}
