package eino_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/agentstop/agentstop/adapters/eino"
	"github.com/agentstop/agentstop/termination"
)

// TestFinishReason: an answer cut off at the token limit or blocked by a
// filter (ResponseMeta.FinishReason, as eino's chat models pass the
// provider's on: OpenAI's and ARK's "length" and "content_filter", Claude's
// "max_tokens" and "refusal", Gemini's "MAX_TOKENS" and "SAFETY") is a
// model turn but not a final answer: a message, then an error that says
// why, as the openai, anthropic and genkit adapters report it.
func TestFinishReason(t *testing.T) {
	const cut, blocked = "the response was cut off at the token limit", "the response was blocked"
	for _, tc := range []struct {
		reason string
		calls  []schema.ToolCall
		want   []string
	}{
		{"stop", nil, []string{`final a "the ans" {0 0}`}},
		{"", nil, []string{`final a "the ans" {0 0}`}},
		{"length", nil, []string{`message a "the ans" {0 0}`, `error a "finish_reason length: ` + cut + `"`}},
		{"max_tokens", nil, []string{`message a "the ans" {0 0}`, `error a "finish_reason max_tokens: ` + cut + `"`}},
		{"MAX_TOKENS", nil, []string{`message a "the ans" {0 0}`, `error a "finish_reason MAX_TOKENS: ` + cut + `"`}},
		{"content_filter", nil, []string{`message a "the ans" {0 0}`, `error a "finish_reason content_filter: ` + blocked + `"`}},
		{"SAFETY", nil, []string{`message a "the ans" {0 0}`, `error a "finish_reason SAFETY: ` + blocked + `"`}},
		{"refusal", nil, []string{`message a "the ans" {0 0}`, `error a "finish_reason refusal: ` + blocked + `"`}},
		{"length", []schema.ToolCall{{ID: "1", Function: schema.FunctionCall{Name: "calc", Arguments: `{"x":`}}},
			[]string{`message a "the ans" {0 0}`, `tool_call a calc "{\"x\":"`, `error a "finish_reason length: ` + cut + `"`}},
	} {
		t.Run(fmt.Sprintf("%s/%d calls", tc.reason, len(tc.calls)), func(t *testing.T) {
			msg := schema.AssistantMessage("the ans", tc.calls)
			msg.ResponseMeta = &schema.ResponseMeta{FinishReason: tc.reason}
			var got []termination.Event
			eino.Decode(withName("a", adk.EventFromMessage(msg, nil, schema.Assistant, "")), func(ev termination.Event) { got = append(got, ev) })
			if fmt.Sprint(describeFinish(got)) != fmt.Sprint(tc.want) {
				t.Errorf("Decode: got %q, want %q", describeFinish(got), tc.want)
			}
			if tc.calls != nil {
				return // a Handler reports tool calls from the tools' own callbacks
			}
			// The Handler maps a model's end the same way.
			stage, seen := newStage(t, "max_iterations: 10")
			ctx, run := stage.Start(context.Background())
			h := eino.NewHandler(run)
			h.OnEnd(ctx, &callbacks.RunInfo{Component: components.ComponentOfChatModel}, &model.CallbackOutput{Message: msg})
			h.Finish(nil)
			var want []string
			for _, w := range tc.want {
				want = append(want, strings.Replace(w, " a ", "  ", 1)) // a Handler's events name no agent
			}
			if got := describeFinish(seen.All()); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("Handler: got %q, want %q", got, want)
			}
		})
	}
}

// describeFinish is describe with error texts quoted whole.
func describeFinish(evs []termination.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Kind == termination.KindError {
			out = append(out, fmt.Sprintf("%s %s %q", ev.Kind, ev.Source, ev.Err))
			continue
		}
		out = append(out, describe([]termination.Event{ev})...)
	}
	return out
}
