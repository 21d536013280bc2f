package genkitstop_test

import (
	"testing"

	"github.com/firebase/genkit/go/ai"

	genkitstop "github.com/agentstop/agentstop/adapters/genkit"
	"github.com/agentstop/agentstop/termination"
)

func TestEvents(t *testing.T) {
	u := &ai.GenerationUsage{InputTokens: 9, OutputTokens: 4}
	tool := ai.NewToolRequestPart(&ai.ToolRequest{Name: "search", Input: map[string]any{"q": "x"}})
	tests := []struct {
		name string
		resp *ai.ModelResponse
		want []termination.Event
	}{{
		name: "final",
		resp: &ai.ModelResponse{Message: ai.NewModelTextMessage("done"), FinishReason: ai.FinishReasonStop, Usage: u},
		want: []termination.Event{{Kind: termination.KindFinal, Text: "done", Usage: termination.Usage{InputTokens: 9, OutputTokens: 4}}},
	}, {
		name: "tool request",
		resp: &ai.ModelResponse{Message: ai.NewModelMessage(ai.NewTextPart("hm"), tool), FinishReason: ai.FinishReasonStop, Usage: u},
		want: []termination.Event{
			{Kind: termination.KindMessage, Text: "hm", Usage: termination.Usage{InputTokens: 9, OutputTokens: 4}},
			{Kind: termination.KindToolCall, Tool: "search", Args: []byte(`{"q":"x"}`)},
		},
	}, {
		name: "length",
		resp: &ai.ModelResponse{Message: ai.NewModelTextMessage("the ans"), FinishReason: ai.FinishReasonLength},
		want: []termination.Event{
			{Kind: termination.KindMessage, Text: "the ans"},
			{Kind: termination.KindError, Err: "finish_reason length: the response was cut off at the token limit"},
		},
	}, {
		// A thinking model cut off while it thought (googlegenai turns
		// Gemini's thoughts into reasoning parts): the thoughts are not the
		// message's text, even when they are its only part.
		name: "thoughts only",
		resp: &ai.ModelResponse{Message: ai.NewModelMessage(ai.NewReasoningPart("TERMINATE is not the answer yet", nil)), FinishReason: ai.FinishReasonLength},
		want: []termination.Event{
			{Kind: termination.KindMessage},
			{Kind: termination.KindError, Err: "finish_reason length: the response was cut off at the token limit"},
		},
	}, {
		name: "thoughts and text",
		resp: &ai.ModelResponse{Message: ai.NewModelMessage(ai.NewReasoningPart("hmm", nil), ai.NewTextPart("Paris")), FinishReason: ai.FinishReasonStop},
		want: []termination.Event{{Kind: termination.KindFinal, Text: "Paris"}},
	}, {
		name: "blocked",
		resp: &ai.ModelResponse{FinishReason: ai.FinishReasonBlocked, FinishMessage: "SAFETY"},
		want: []termination.Event{
			{Kind: termination.KindMessage},
			{Kind: termination.KindError, Err: "finish_reason blocked: the response was blocked: SAFETY"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []termination.Event
			genkitstop.Events(tt.resp, func(ev termination.Event) { got = append(got, ev) })
			if len(got) != len(tt.want) {
				t.Fatalf("got %d events %+v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.Kind != w.Kind || g.Text != w.Text || g.Tool != w.Tool || string(g.Args) != string(w.Args) || g.Usage != w.Usage || g.Err != w.Err {
					t.Errorf("event %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
	genkitstop.Events(nil, func(ev termination.Event) { t.Errorf("nil response emitted %+v", ev) })
}

// TestEventsUsage: tokens are counted as the GenAI conventions count them,
// whichever plugin served the response (contract §1).
func TestEventsUsage(t *testing.T) {
	cases := []struct {
		name string
		u    ai.GenerationUsage
		want termination.Usage
	}{
		{"plain", ai.GenerationUsage{InputTokens: 9, OutputTokens: 4, TotalTokens: 13}, termination.Usage{InputTokens: 9, OutputTokens: 4}},
		{"no total", ai.GenerationUsage{InputTokens: 9, OutputTokens: 4}, termination.Usage{InputTokens: 9, OutputTokens: 4}},
		// googlegenai: prompt (cache included), candidates, thoughts apart, total of all.
		{"gemini thoughts and cache", ai.GenerationUsage{InputTokens: 1200, CachedContentTokens: 1000, OutputTokens: 40, ThoughtsTokens: 300, TotalTokens: 1540},
			termination.Usage{InputTokens: 1200, OutputTokens: 340}},
		// compat_oai: completion tokens already include the reasoning.
		{"openai-compatible reasoning", ai.GenerationUsage{InputTokens: 500, CachedContentTokens: 400, OutputTokens: 340, ThoughtsTokens: 300, TotalTokens: 840},
			termination.Usage{InputTokens: 500, OutputTokens: 340}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []termination.Event
			genkitstop.Events(&ai.ModelResponse{Message: ai.NewModelTextMessage("done"), FinishReason: ai.FinishReasonStop, Usage: &tc.u},
				func(ev termination.Event) { got = append(got, ev) })
			if len(got) != 1 || got[0].Usage != tc.want {
				t.Fatalf("events %+v, want one final with usage %+v", got, tc.want)
			}
		})
	}
}
