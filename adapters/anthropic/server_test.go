package anthropicstop_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// call is one scripted tool call.
type call struct{ name, args string }

// turn is one scripted model response.
type turn struct {
	text      string
	calls     []call
	input     int64 // input_tokens
	cacheRead int64 // cache_read_input_tokens
	output    int64 // output_tokens
	stop      string
}

// model is a scripted Messages API server on 127.0.0.1: it answers the
// n-th request with turns[n] (the last turn again once they run out, when
// repeat is set), as JSON or as an SSE stream, like the real API. The beta
// endpoint (?beta=true, used by the tool runner) is the same.
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
func (m *model) client() anthropic.Client {
	return anthropic.NewClient(
		option.WithBaseURL(m.srv.URL+"/"),
		option.WithAPIKey("test-key"),
		option.WithHTTPClient(m.srv.Client()),
		option.WithMaxRetries(0),
	)
}

// calls returns how many messages the server was asked for.
func (m *model) calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.requests)
}

func (m *model) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		writeError(w, http.StatusNotFound, "not_found_error", "not found")
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "bad json")
		return
	}
	m.mu.Lock()
	n := len(m.requests)
	m.requests = append(m.requests, req)
	m.mu.Unlock()
	if n >= len(m.turns) && !m.repeat {
		writeError(w, http.StatusInternalServerError, "api_error", "script exhausted")
		return
	}
	tr := m.turns[min(n, len(m.turns)-1)]
	id := fmt.Sprintf("msg_%d", n)
	if stream, _ := req["stream"].(bool); stream {
		m.stream(w, id, n, tr)
		return
	}
	content := []any{}
	if tr.text != "" {
		content = append(content, map[string]any{"type": "text", "text": tr.text})
	}
	for i, c := range tr.calls {
		content = append(content, map[string]any{
			"type": "tool_use", "id": fmt.Sprintf("toolu_%d_%d", n, i), "name": c.name, "input": json.RawMessage(c.args),
		})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": "scripted",
		"content": content, "stop_reason": stopReason(tr), "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": tr.input, "output_tokens": tr.output,
			"cache_read_input_tokens": tr.cacheRead, "cache_creation_input_tokens": 0},
	})
}

func writeError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q}}`, typ, msg)
}

func (m *model) stream(w http.ResponseWriter, id string, n int, tr turn) {
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], b)
	}
	// Like the real API: message_start carries the input tokens and a
	// provisional output count; message_delta carries the final output
	// count (a cumulative total, not a delta).
	send(map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": "scripted", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": tr.input, "output_tokens": 1,
			"cache_read_input_tokens": tr.cacheRead, "cache_creation_input_tokens": 0},
	}})
	index := 0
	if tr.text != "" {
		send(map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""}})
		half := len(tr.text) / 2
		for _, part := range []string{tr.text[:half], tr.text[half:]} {
			send(map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "text_delta", "text": part}})
		}
		send(map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	for i, c := range tr.calls {
		send(map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{
			"type": "tool_use", "id": fmt.Sprintf("toolu_%d_%d", n, i), "name": c.name, "input": map[string]any{}}})
		half := len(c.args) / 2
		for _, part := range []string{c.args[:half], c.args[half:]} {
			send(map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		send(map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	send(map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason(tr), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": tr.output}})
	send(map[string]any{"type": "message_stop"})
}

func stopReason(tr turn) string {
	switch {
	case tr.stop != "":
		return tr.stop
	case len(tr.calls) > 0:
		return "tool_use"
	}
	return "end_turn"
}
