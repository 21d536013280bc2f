package langchaingo_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/agentstop/agentstop/adapters/langchaingo"
	"github.com/agentstop/agentstop/termination"
)

// TestStopReason: an answer cut off at the token limit or blocked (the
// choice's StopReason, as the providers pass it on: OpenAI's "length" and
// "content_filter", Anthropic's "max_tokens" and "refusal", Google AI's
// FinishReasonMaxTokens and FinishReasonSafety) is a model turn but not a
// final answer: a message, then an error that says why, as the openai,
// anthropic and genkit adapters report it.
func TestStopReason(t *testing.T) {
	const cut, blocked = "the response was cut off at the token limit", "the response was blocked"
	for _, tc := range []struct {
		reason string
		want   []string
	}{
		{"stop", []string{`final  "the ans" {9 4}`}},
		{"end_turn", []string{`final  "the ans" {9 4}`}},
		{"length", []string{`message  "the ans" {9 4}`, `error "stop_reason length: ` + cut + `"`}},
		{"max_tokens", []string{`message  "the ans" {9 4}`, `error "stop_reason max_tokens: ` + cut + `"`}},
		{"FinishReasonMaxTokens", []string{`message  "the ans" {9 4}`, `error "stop_reason FinishReasonMaxTokens: ` + cut + `"`}},
		{"content_filter", []string{`message  "the ans" {9 4}`, `error "stop_reason content_filter: ` + blocked + `"`}},
		{"FinishReasonSafety", []string{`message  "the ans" {9 4}`, `error "stop_reason FinishReasonSafety: ` + blocked + `"`}},
		{"refusal", []string{`message  "the ans" {9 4}`, `error "stop_reason refusal: ` + blocked + `"`}},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			stage, seen := newStage(t, "max_iterations: 10")
			ctx, run := stage.Start(context.Background())
			h := langchaingo.NewHandler(run)
			h.HandleLLMGenerateContentStart(ctx, nil)
			h.HandleLLMGenerateContentEnd(ctx, &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: "the ans", StopReason: tc.reason,
				GenerationInfo: map[string]any{"PromptTokens": 9, "CompletionTokens": 4}}}})
			// The OpenAI functions agent makes any response without tool
			// calls its finish, with the response's content as output.
			h.HandleAgentFinish(ctx, schema.AgentFinish{ReturnValues: map[string]any{"output": "the ans"}})
			res := h.Finish(nil)
			if got := describe(seen.All()); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("events %q, want %q", got, tc.want)
			}
			if res.Iterations != 1 || res.Tokens != (termination.Usage{InputTokens: 9, OutputTokens: 4}) {
				t.Errorf("iterations, tokens = %d, %+v; want 1, {9 4}", res.Iterations, res.Tokens)
			}
		})
	}
}
