package eino_test

import (
	"context"
	"testing"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/agentstop/agentstop/adapters/eino"
	"github.com/agentstop/agentstop/termination"
)

// geminiChunks is a streamed answer of a thinking Gemini model as eino
// delivers it: the usage rides on the last chunk, with the thoughts apart
// from CompletionTokens (and inside TotalTokens).
func geminiChunks(withUsage bool) []*schema.Message {
	first := schema.AssistantMessage("4", nil)
	last := schema.AssistantMessage("2", nil)
	last.ResponseMeta = &schema.ResponseMeta{FinishReason: "STOP"}
	if withUsage {
		last.ResponseMeta.Usage = &schema.TokenUsage{PromptTokens: 50, CompletionTokens: 40, TotalTokens: 390,
			CompletionTokensDetails: schema.CompletionTokensDetails{ReasoningTokens: 300}}
	}
	return []*schema.Message{first, last}
}

// The usage of a streamed answer counts as that of the same answer
// delivered whole (contract §1: output includes reasoning tokens), although
// eino's ConcatMessages drops the reasoning tokens of the chunks.
func TestStreamedReasoningTokens(t *testing.T) {
	const want = "{50 340}"
	whole := schema.AssistantMessage("42", nil)
	whole.ResponseMeta = geminiChunks(true)[1].ResponseMeta
	var decoded []termination.Event
	eino.Decode(withName("a", adk.EventFromMessage(whole, nil, schema.Assistant, "")), func(ev termination.Event) { decoded = append(decoded, ev) })
	if got := describe(decoded); len(got) != 1 || got[0] != `final a "42" `+want {
		t.Fatalf("whole answer: events %q, want one final with usage %s", got, want)
	}

	t.Run("Forward", func(t *testing.T) {
		stage, seen := newStage(t, "max_iterations: 10")
		_, run := stage.Start(context.Background())
		in, gen := adk.NewAsyncIteratorPair[*adk.AgentEvent]()
		gen.Send(withName("a", adk.EventFromMessage(nil, schema.StreamReaderFromArray(geminiChunks(true)), schema.Assistant, "")))
		gen.Close()
		out := eino.Forward(run, in)
		for {
			ev, ok := out.Next()
			if !ok {
				break
			}
			ev.Output.MessageOutput.MessageStream.Close()
		}
		run.Wait()
		if got := describe(seen.All()); len(got) != 1 || got[0] != `final a "42" `+want {
			t.Errorf("events %q, want one final with usage %s", got, want)
		}
	})

	for _, tc := range []struct {
		name string
		out  func(i int, m *schema.Message) *model.CallbackOutput
	}{
		{"HandlerMessageUsage", func(_ int, m *schema.Message) *model.CallbackOutput {
			return &model.CallbackOutput{Message: m}
		}},
		{"HandlerCallbackUsage", func(i int, m *schema.Message) *model.CallbackOutput {
			// The usage comes in the callbacks' TokenUsage, the message has
			// none: the prompt's with the first chunk, the whole with the last.
			u := geminiChunks(true)[1].ResponseMeta.Usage
			m.ResponseMeta = nil
			out := &model.CallbackOutput{Message: m, TokenUsage: &model.TokenUsage{PromptTokens: u.PromptTokens}}
			if i == 1 {
				out.TokenUsage = &model.TokenUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
					CompletionTokensDetails: model.CompletionTokensDetails{ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens}}
			}
			return out
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stage, seen := newStage(t, "max_iterations: 10")
			ctx, run := stage.Start(context.Background())
			h := eino.NewHandler(run)
			var outs []callbacks.CallbackOutput
			for i, m := range geminiChunks(true) {
				outs = append(outs, tc.out(i, m))
			}
			h.OnEndWithStreamOutput(ctx, &callbacks.RunInfo{Component: components.ComponentOfChatModel}, schema.StreamReaderFromArray(outs))
			h.Finish(nil)
			if got := describe(seen.All()); len(got) != 1 || got[0] != `final  "42" `+want {
				t.Errorf("events %q, want one final with usage %s", got, want)
			}
		})
	}
}
