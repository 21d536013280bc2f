package eino_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/agentstop/agentstop/adapters/eino"
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

// Decode: agent events carry no model, so WithModel names it on model
// turns (never on other kinds); the source is the AgentName, WithSource's
// only for an event without one.
func TestDecodeModelAndSource(t *testing.T) {
	calls := schema.AssistantMessage("thinking", []schema.ToolCall{{ID: "1", Function: schema.FunctionCall{Name: "calc", Arguments: "{}"}}})
	cut := schema.AssistantMessage("the ans", nil)
	cut.ResponseMeta = &schema.ResponseMeta{FinishReason: "length"}
	opts := []eino.Option{eino.WithModel("gpt-4o"), eino.WithSource("solo")}
	for _, tc := range []struct {
		name string
		ev   *adk.AgentEvent
		opts []eino.Option
		want []string
	}{
		{"NoOptions", withName("a", adk.EventFromMessage(schema.AssistantMessage("42", nil), nil, schema.Assistant, "")), nil,
			[]string{"final a "}},
		{"Answer", withName("a", adk.EventFromMessage(schema.AssistantMessage("42", nil), nil, schema.Assistant, "")), opts,
			[]string{"final a gpt-4o"}},
		{"ToolCalls", withName("a", adk.EventFromMessage(calls, nil, schema.Assistant, "")), opts,
			[]string{"message a gpt-4o", "tool_call a "}},
		{"CutOff", withName("a", adk.EventFromMessage(cut, nil, schema.Assistant, "")), opts,
			[]string{"message a gpt-4o", "error a "}},
		{"NoAgentName", adk.EventFromMessage(schema.AssistantMessage("42", nil), nil, schema.Assistant, ""), opts,
			[]string{"final solo gpt-4o"}},
		{"ToolResultNoAgentName", adk.EventFromMessage(schema.ToolMessage("2", "1"), nil, schema.Tool, "calc"), opts,
			[]string{"tool_result solo "}},
		{"ErrorNoAgentName", &adk.AgentEvent{Err: errors.New("boom")}, opts, []string{"error solo "}},
		{"LastOptionWins", withName("a", adk.EventFromMessage(schema.AssistantMessage("42", nil), nil, schema.Assistant, "")),
			[]eino.Option{eino.WithModel("gpt-4o"), eino.WithModel("gpt-4o-mini")}, []string{"final a gpt-4o-mini"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []termination.Event
			eino.Decode(tc.ev, func(ev termination.Event) { got = append(got, ev) }, tc.opts...)
			if fmt.Sprint(who(got)) != fmt.Sprint(tc.want) {
				t.Errorf("got %q, want %q", who(got), tc.want)
			}
		})
	}
}

// Handler: the callback's Config.Model wins, WithModel names the rest;
// WithSource is every event's source, and the name WithFinalAgents checks.
func TestHandlerModelAndSource(t *testing.T) {
	chat := &callbacks.RunInfo{Component: components.ComponentOfChatModel}
	search := &callbacks.RunInfo{Name: "search", Component: components.ComponentOfTool}
	answer := func(cfg *model.Config) callbacks.CallbackOutput {
		return &model.CallbackOutput{Message: schema.AssistantMessage("42", nil), Config: cfg}
	}
	for _, tc := range []struct {
		name string
		opts []eino.Option
		feed func(ctx context.Context, h *eino.Handler)
		want []string
	}{
		{"ConfigModelWins", []eino.Option{eino.WithModel("fallback")}, func(ctx context.Context, h *eino.Handler) {
			h.OnEnd(ctx, chat, answer(&model.Config{Model: "gpt-test"}))
		}, []string{"final  gpt-test"}},
		{"NoConfig", []eino.Option{eino.WithModel("fallback")}, func(ctx context.Context, h *eino.Handler) {
			h.OnEnd(ctx, chat, answer(nil))
		}, []string{"final  fallback"}},
		{"ConfigWithoutModel", []eino.Option{eino.WithModel("fallback")}, func(ctx context.Context, h *eino.Handler) {
			h.OnEnd(ctx, chat, answer(&model.Config{MaxTokens: 10}))
		}, []string{"final  fallback"}},
		{"NoOptions", nil, func(ctx context.Context, h *eino.Handler) {
			h.OnEnd(ctx, chat, answer(nil))
		}, []string{"final  "}},
		{"SourceOnEveryEvent", []eino.Option{eino.WithSource("writer")}, func(ctx context.Context, h *eino.Handler) {
			ctx = h.OnStart(ctx, search, &tool.CallbackInput{ArgumentsInJSON: "{}"})
			h.OnEnd(ctx, search, &tool.CallbackOutput{Response: "ok"})
			h.OnError(ctx, search, errors.New("down"))
			h.OnError(ctx, &callbacks.RunInfo{Component: compose.ComponentOfGraph}, errors.New("graph failed"))
			h.OnEnd(ctx, chat, answer(nil))
		}, []string{"tool_call writer ", "tool_result writer ", "tool_result writer ", "error writer ", "final writer "}},
		{"FinalAgentIsTheSource", []eino.Option{eino.WithSource("writer"), eino.WithFinalAgents("writer")}, func(ctx context.Context, h *eino.Handler) {
			h.OnEnd(ctx, chat, answer(nil))
		}, []string{"final writer "}},
		{"OtherFinalAgent", []eino.Option{eino.WithSource("writer"), eino.WithFinalAgents("critic")}, func(ctx context.Context, h *eino.Handler) {
			h.OnEnd(ctx, chat, answer(nil))
		}, []string{"message writer "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stage, seen := newStage(t, "max_tool_calls: 3")
			ctx, run := stage.Start(context.Background())
			h := eino.NewHandler(run, tc.opts...)
			tc.feed(ctx, h)
			h.Finish(nil)
			if got := who(seen.All()); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// In a real adk loop (a ChatModelAgent whose model reports no Config), the
// model turns carry WithModel's name on every path, and every event a
// source.
func TestLoopModelAndSource(t *testing.T) {
	opts := []eino.Option{eino.WithModel("scripted-1"), eino.WithSource("assistant")}
	for _, s := range []setup{
		{opts: opts}, {streaming: true, opts: opts},
		{handler: true, opts: opts}, {handler: true, streaming: true, opts: opts},
	} {
		t.Run(fmt.Sprintf("handler=%v,streaming=%v", s.handler, s.streaming), func(t *testing.T) {
			stage, seen := newStage(t, "max_tool_calls: 10")
			m := &scriptedModel{script: lookup}
			out := drive(t, stage, lookup.Input, s, func(ctx context.Context) adk.Agent {
				return newAgent(t, ctx, "assistant", m, s)
			}, m)
			if _, ok := out.res.Cause.(termination.NaturalCompletion); !ok {
				t.Fatalf("cause = %#v, want NaturalCompletion", out.res.Cause)
			}
			want := []string{"message assistant scripted-1", "tool_call assistant ", "tool_result assistant ", "final assistant scripted-1"}
			if got := who(seen.All()); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}
