package openaistop_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentstop/agentstop/internal/adaptertest"
)

// api is the Chat Completions API, scripted (see respond and stream).
var api = adaptertest.API{Path: "/v1/chat/completions", Respond: respond, Stream: stream}

// client returns an SDK client that talks to the scripted server only.
func client(s *adaptertest.Server) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(s.URL+"/v1/"),
		option.WithAPIKey("test-key"),
		option.WithHTTPClient(s.HTTPClient()),
		option.WithMaxRetries(0),
	)
}

// respond answers like the Chat Completions API, as JSON, with completion
// id chatcmpl-<request>, model "scripted" and call ids
// call_<request>_<index>; stream answers the same as an SSE stream.
func respond(w http.ResponseWriter, _ map[string]any, n int, tr adaptertest.Turn) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1700000000, "model": "scripted",
		"choices": []any{map[string]any{
			"index": 0, "finish_reason": finish(tr), "logprobs": nil,
			"message": map[string]any{
				"role": "assistant", "content": nullable(tr.Text), "refusal": nullable(tr.Refusal),
				"tool_calls": toolCalls(n, tr.ToolCalls),
			},
		}},
		"usage": usage(tr),
	})
}

func stream(w http.ResponseWriter, req map[string]any, n int, tr adaptertest.Turn) {
	includeUsage := false
	if so, ok := req["stream_options"].(map[string]any); ok {
		includeUsage, _ = so["include_usage"].(bool)
	}
	id := fmt.Sprintf("chatcmpl-%d", n)
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(choices []any, u any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": "scripted", "choices": choices}
		if includeUsage {
			c["usage"] = u
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	delta := func(d map[string]any, fin any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "finish_reason": fin, "logprobs": nil}}
	}
	chunk(delta(map[string]any{"role": "assistant", "content": ""}, nil), nil)
	// Text in two pieces, to exercise the accumulator.
	if tr.Text != "" {
		half := len(tr.Text) / 2
		chunk(delta(map[string]any{"content": tr.Text[:half]}, nil), nil)
		chunk(delta(map[string]any{"content": tr.Text[half:]}, nil), nil)
	}
	if tr.Refusal != "" {
		chunk(delta(map[string]any{"refusal": tr.Refusal}, nil), nil)
	}
	for i, c := range tr.ToolCalls {
		chunk(delta(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": callID(n, i), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""},
		}}}, nil), nil)
		half := len(c.Args) / 2
		for _, part := range []string{c.Args[:half], c.Args[half:]} {
			chunk(delta(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": part},
			}}}, nil), nil)
		}
	}
	chunk(delta(map[string]any{}, finish(tr)), nil)
	if includeUsage {
		chunk([]any{}, usage(tr))
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func finish(tr adaptertest.Turn) string {
	switch {
	case tr.Stop != "":
		return tr.Stop
	case len(tr.ToolCalls) > 0:
		return "tool_calls"
	}
	return "stop"
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func toolCalls(n int, calls []adaptertest.ToolCall) any {
	if len(calls) == 0 {
		return nil
	}
	out := make([]any, len(calls))
	for i, c := range calls {
		out[i] = map[string]any{
			"id": callID(n, i), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": c.Args},
		}
	}
	return out
}

func usage(tr adaptertest.Turn) map[string]any {
	return map[string]any{"prompt_tokens": tr.Usage.InputTokens, "completion_tokens": tr.Usage.OutputTokens, "total_tokens": tr.Usage.Total()}
}

// echoTool is the scripted loop's only tool runner: every tool echoes its
// arguments; a tool named "fail" fails.
func echoTool(c openai.ChatCompletionMessageToolCallUnion) (string, error) {
	if c.Function.Name == "fail" {
		return "", fmt.Errorf("tool %s failed", c.Function.Name)
	}
	return strings.TrimSpace(c.Function.Arguments), nil
}

// callID is the id of the i-th tool call of the n-th response.
func callID(n, i int) string { return fmt.Sprintf("call_%d_%d", n, i) }
