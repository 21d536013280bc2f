package adk_test

import (
	"context"
	"iter"
	"testing"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"

	"github.com/agentstop/agentstop/adapters/adk/internal/genai"
	"github.com/agentstop/agentstop/adapters/adk/internal/model"
	"github.com/agentstop/agentstop/adapters/adk/internal/session"
)

// TestToolResultText: a tool_result carries what the tool returned, as
// ADK hands it back to the model: the text of a {"result": "..."} response
// (ADK wraps a tool's non-map result so), else the response as JSON.
func TestToolResultText(t *testing.T) {
	for _, tc := range []struct {
		name     string
		response map[string]any
		text     string
		err      string
	}{
		{"text result", map[string]any{"result": "3 hits"}, "3 hits", ""},
		{"map result", map[string]any{"hits": 3, "top": "a<b"}, `{"hits":3,"top":"a<b"}`, ""},
		{"number result", map[string]any{"result": 3}, `{"result":3}`, ""},
		{"empty result", map[string]any{}, `{}`, ""},
		{"error", map[string]any{"error": "backend down"}, "", "backend down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := &session.Event{Author: "a", LLMResponse: model.LLMResponse{Content: &genai.Content{Role: "user", Parts: []*genai.Part{
				{FunctionResponse: &genai.FunctionResponse{ID: "call_1", Name: "search", Response: tc.response}}}}}}
			var got []termination.Event
			decodeADK(ev, func(e termination.Event) { got = append(got, e) })
			if len(got) != 1 || got[0].Kind != termination.KindToolResult || got[0].Tool != "search" || got[0].CallID != "call_1" ||
				got[0].Text != tc.text || got[0].Err != tc.err {
				t.Fatalf("events %+v, want one tool_result of search (call_1) with text %q and error %q", got, tc.text, tc.err)
			}
		})
	}
}

// A tool polled with the same args that answers something new each time
// is not a stall under same_result: the results differ.
func TestPollingIsNotRepeatedResult(t *testing.T) {
	stage, _ := newStage(t, "{stall: {repeats: 3, same_result: true}}")
	_, run := stage.Start(context.Background())
	events := func(yield func(*session.Event, error) bool) {
		for i, status := range []string{"queued", "running", "running 50%", "done"} {
			call := &session.Event{Author: "a", LLMResponse: model.LLMResponse{Content: &genai.Content{Role: "model", Parts: []*genai.Part{
				{FunctionCall: &genai.FunctionCall{ID: string(rune('a' + i)), Name: "job_status", Args: map[string]any{"job": "42"}}}}}}}
			result := &session.Event{Author: "a", LLMResponse: model.LLMResponse{Content: &genai.Content{Role: "user", Parts: []*genai.Part{
				{FunctionResponse: &genai.FunctionResponse{ID: string(rune('a' + i)), Name: "job_status", Response: map[string]any{"result": status}}}}}}}
			if !yield(call, nil) || !yield(result, nil) {
				return
			}
		}
	}
	for range middleware.ForwardSeqEach(run, iter.Seq2[*session.Event, error](events), decodeADK) {
	}
	if res := run.Wait(); res.Cause != (termination.NaturalCompletion{}) {
		t.Errorf("cause = %#v, want NaturalCompletion (every status differs)", res.Cause)
	}
}
