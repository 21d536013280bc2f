package genkitstop_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	genkitstop "github.com/agentstop/agentstop/adapters/genkit"
	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// who is an event's kind, source and model, the fields WithModel and
// WithSource set.
func who(evs []termination.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s %s %s", ev.Kind, ev.Source, ev.Model))
	}
	return out
}

// Events names the model of a response only when the response names it:
// the compat_oai plugin's Custom "model"; googlegenai's Custom and other
// shapes name none.
func TestEventsModel(t *testing.T) {
	tool := ai.NewToolRequestPart(&ai.ToolRequest{Name: "search", Input: map[string]any{"q": "x"}, Ref: "c1"})
	for _, tc := range []struct {
		name string
		resp *ai.ModelResponse
		want []string
	}{
		{"CompatOAI", &ai.ModelResponse{Message: ai.NewModelTextMessage("done"), FinishReason: ai.FinishReasonStop,
			Custom: map[string]any{"systemFingerprint": "fp_1", "model": "gpt-4o-2024-08-06", "id": "chatcmpl-1"}},
			[]string{"final  gpt-4o-2024-08-06"}},
		{"CompatOAIToolCall", &ai.ModelResponse{Message: ai.NewModelMessage(tool), FinishReason: ai.FinishReasonStop,
			Custom: map[string]any{"model": "gpt-4o-2024-08-06"}},
			[]string{"message  gpt-4o-2024-08-06", "tool_call  "}},
		{"GoogleGenAI", &ai.ModelResponse{Message: ai.NewModelTextMessage("done"), FinishReason: ai.FinishReasonStop,
			Custom: map[string]any{"candidates": nil, "usageMetadata": nil}}, []string{"final  "}},
		{"ModelNotAString", &ai.ModelResponse{Message: ai.NewModelTextMessage("done"), Custom: map[string]any{"model": 4}}, []string{"final  "}},
		{"NoCustom", &ai.ModelResponse{Message: ai.NewModelTextMessage("done")}, []string{"final  "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []termination.Event
			genkitstop.Events(tc.resp, func(ev termination.Event) { got = append(got, ev) })
			if fmt.Sprint(who(got)) != fmt.Sprint(tc.want) {
				t.Errorf("got %q, want %q", who(got), tc.want)
			}
		})
	}
}

// optionModes run genkit's loop with agentstop's options among genkit's
// (Generate, GenerateStream) or given to the middleware.
var optionModes = []struct {
	name string
	run  func(ctx context.Context, g *genkit.Genkit, run *middleware.Run, opts []genkitstop.Option) error
}{
	{"Generate", func(ctx context.Context, g *genkit.Genkit, run *middleware.Run, opts []genkitstop.Option) error {
		_, err := genkitstop.Generate(ctx, g, run, withOptions(options("go"), opts)...)
		return err
	}},
	{"GenerateStream", func(ctx context.Context, g *genkit.Genkit, run *middleware.Run, opts []genkitstop.Option) error {
		var err error
		for _, e := range genkitstop.GenerateStream(ctx, g, run, withOptions(options("go"), opts)...) {
			if e != nil {
				err = e
			}
		}
		return err
	}},
	{"Middleware", func(ctx context.Context, g *genkit.Genkit, run *middleware.Run, opts []genkitstop.Option) error {
		_, err := genkit.Generate(ctx, g, append(options("go"), ai.WithMiddleware(genkitstop.Middleware(run, opts...)))...)
		run.Finish(err)
		return err
	}},
}

// withOptions puts opts first among genkit's options, where a caller may.
func withOptions(ai0 []ai.GenerateOption, opts []genkitstop.Option) []ai.GenerateOption {
	var out []ai.GenerateOption
	for _, o := range opts {
		out = append(out, o)
	}
	return append(out, ai0...)
}

// In genkit's real loop, WithModel names the model of every model turn
// that does not name its own, and WithSource every event's agent.
func TestLoopModelAndSource(t *testing.T) {
	for _, m := range optionModes {
		for _, tc := range []struct {
			name   string
			served string
			opts   []genkitstop.Option
			model  string
			source string
		}{
			{"NoOptions", "", nil, "", ""},
			{"WithModel", "", []genkitstop.Option{genkitstop.WithModel("scripted/model"), genkitstop.WithSource("assistant")}, "scripted/model", "assistant"},
			{"ServedModelWins", "gpt-4o-2024-08-06", []genkitstop.Option{genkitstop.WithModel("openai/gpt-4o")}, "gpt-4o-2024-08-06", ""},
			{"LastWins", "", []genkitstop.Option{genkitstop.WithModel("a"), genkitstop.WithModel("b"), nil}, "b", ""},
		} {
			t.Run(m.name+"/"+tc.name, func(t *testing.T) {
				g, _ := newGenkit(t.Context(), false,
					turn{text: "let me look", calls: []call{{"search", `{"q":"a"}`}}, input: 10, output: 2, served: tc.served},
					turn{text: "the answer is 42", input: 20, output: 3, served: tc.served})
				stage, rec := adaptertest.NewStage(t, "genkit_test", "max_tool_calls: 10")
				ctx, run := stage.Start(t.Context())
				if err := m.run(ctx, g, run, tc.opts); err != nil {
					t.Fatal(err)
				}
				want := []string{
					"message " + tc.source + " " + tc.model,
					"tool_call " + tc.source + " ",
					"tool_result " + tc.source + " ",
					"final " + tc.source + " " + tc.model,
				}
				if got := who(rec.All()); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("got %q, want %q", got, want)
				}
			})
		}
	}
}

// Given to genkit itself, an Option is accepted and does nothing.
func TestOptionIgnoredByGenkit(t *testing.T) {
	g, _ := newGenkit(t.Context(), false, turn{text: "the answer is 42", input: 20, output: 3})
	resp, err := genkit.Generate(t.Context(), g, withOptions(options("go"), []genkitstop.Option{genkitstop.WithModel("x"), genkitstop.WithSource("y")})...)
	if err != nil || resp.Text() != "the answer is 42" {
		t.Fatalf("genkit.Generate = %v, %v; want the answer", resp, err)
	}
}
