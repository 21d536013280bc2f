package openaistop_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// call is one scripted tool call.
type call struct{ name, args string }

// turn is one scripted model response.
type turn struct {
	text    string
	calls   []call
	input   int64 // prompt_tokens
	output  int64 // completion_tokens
	finish  string
	refusal string
}

// model is a scripted Chat Completions server on 127.0.0.1: it answers the
// n-th request with turns[n] (the last turn again once they run out, when
// repeat is set), as JSON or as an SSE stream, like the real API.
type model struct {
	srv    *httptest.Server
	turns  []turn
	repeat bool

	mu       sync.Mutex
	requests []map[string]any
}

func newModel(t testing.TB, repeat bool, turns ...turn) *model {
	t.Helper()
	m, err := startModel(repeat, turns...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.srv.Close)
	return m
}

// startModel starts a scripted server; the caller closes m.srv.
func startModel(repeat bool, turns ...turn) (*model, error) {
	m := &model{turns: turns, repeat: repeat}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(m.serve)}}
	m.srv.Start()
	return m, nil
}

// client returns an SDK client that talks to the scripted server only.
func (m *model) client() openai.Client {
	return openai.NewClient(
		option.WithBaseURL(m.srv.URL+"/v1/"),
		option.WithAPIKey("test-key"),
		option.WithHTTPClient(m.srv.Client()),
		option.WithMaxRetries(0),
	)
}

// calls returns how many completions the server was asked for.
func (m *model) calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.requests)
}

func (m *model) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	n := len(m.requests)
	m.requests = append(m.requests, req)
	m.mu.Unlock()
	if n >= len(m.turns) && !m.repeat {
		http.Error(w, `{"error":{"message":"script exhausted"}}`, http.StatusInternalServerError)
		return
	}
	tr := m.turns[min(n, len(m.turns)-1)]
	id := fmt.Sprintf("chatcmpl-%d", n)
	if stream, _ := req["stream"].(bool); stream {
		includeUsage := false
		if so, ok := req["stream_options"].(map[string]any); ok {
			includeUsage, _ = so["include_usage"].(bool)
		}
		m.stream(w, id, n, tr, includeUsage)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": id, "object": "chat.completion", "created": 1700000000, "model": "scripted",
		"choices": []any{map[string]any{
			"index": 0, "finish_reason": finish(tr), "logprobs": nil,
			"message": map[string]any{
				"role": "assistant", "content": nullable(tr.text), "refusal": nullable(tr.refusal),
				"tool_calls": toolCalls(n, tr.calls),
			},
		}},
		"usage": usage(tr),
	})
}

func (m *model) stream(w http.ResponseWriter, id string, n int, tr turn, includeUsage bool) {
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
	if tr.text != "" {
		half := len(tr.text) / 2
		chunk(delta(map[string]any{"content": tr.text[:half]}, nil), nil)
		chunk(delta(map[string]any{"content": tr.text[half:]}, nil), nil)
	}
	if tr.refusal != "" {
		chunk(delta(map[string]any{"refusal": tr.refusal}, nil), nil)
	}
	for i, c := range tr.calls {
		chunk(delta(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": fmt.Sprintf("call_%d_%d", n, i), "type": "function",
			"function": map[string]any{"name": c.name, "arguments": ""},
		}}}, nil), nil)
		half := len(c.args) / 2
		for _, part := range []string{c.args[:half], c.args[half:]} {
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

func finish(tr turn) string {
	switch {
	case tr.finish != "":
		return tr.finish
	case len(tr.calls) > 0:
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

func toolCalls(n int, calls []call) any {
	if len(calls) == 0 {
		return nil
	}
	out := make([]any, len(calls))
	for i, c := range calls {
		out[i] = map[string]any{
			"id": fmt.Sprintf("call_%d_%d", n, i), "type": "function",
			"function": map[string]any{"name": c.name, "arguments": c.args},
		}
	}
	return out
}

func usage(tr turn) map[string]any {
	return map[string]any{"prompt_tokens": tr.input, "completion_tokens": tr.output, "total_tokens": tr.input + tr.output}
}

// echoTool is the scripted loop's only tool runner: every tool echoes its
// arguments; a tool named "fail" fails.
func echoTool(c openai.ChatCompletionMessageToolCallUnion) (string, error) {
	if c.Function.Name == "fail" {
		return "", fmt.Errorf("tool %s failed", c.Function.Name)
	}
	return strings.TrimSpace(c.Function.Arguments), nil
}
