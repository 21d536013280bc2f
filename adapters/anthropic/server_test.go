package anthropicstop_test

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentstop/agentstop/internal/adaptertest"
)

// api is the Messages API, scripted (see respond and stream); the beta
// endpoint (?beta=true, used by the tool runner) is the same.
var api = adaptertest.API{Path: "/v1/messages", Respond: respond, Stream: stream}

// client returns an SDK client that talks to the scripted server only.
func client(s *adaptertest.Server) anthropic.Client {
	return anthropic.NewClient(
		option.WithBaseURL(s.URL+"/"),
		option.WithAPIKey("test-key"),
		option.WithHTTPClient(s.HTTPClient()),
		option.WithMaxRetries(0),
	)
}

// respond answers like the Messages API, as JSON, with message id
// msg_<request>, model "scripted" and tool_use ids toolu_<request>_<index>;
// stream answers the same as an SSE stream.
func respond(w http.ResponseWriter, _ map[string]any, n int, tr adaptertest.Turn) {
	content := []any{}
	if tr.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": tr.Text})
	}
	for i, c := range tr.ToolCalls {
		content = append(content, map[string]any{
			"type": "tool_use", "id": callID(n, i), "name": c.Name, "input": json.RawMessage(c.Args),
		})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": "scripted",
		"content": content, "stop_reason": stopReason(tr), "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": tr.Usage.InputTokens, "output_tokens": tr.Usage.OutputTokens,
			"cache_read_input_tokens": tr.CacheRead, "cache_creation_input_tokens": 0},
	})
}

func stream(w http.ResponseWriter, _ map[string]any, n int, tr adaptertest.Turn) {
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], b)
	}
	// Like the real API: message_start carries the input tokens and a
	// provisional output count; message_delta carries the final output
	// count (a cumulative total, not a delta).
	send(map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": "scripted", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": tr.Usage.InputTokens, "output_tokens": 1,
			"cache_read_input_tokens": tr.CacheRead, "cache_creation_input_tokens": 0},
	}})
	index := 0
	if tr.Text != "" {
		send(map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""}})
		half := len(tr.Text) / 2
		for _, part := range []string{tr.Text[:half], tr.Text[half:]} {
			send(map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "text_delta", "text": part}})
		}
		send(map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	for i, c := range tr.ToolCalls {
		send(map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{
			"type": "tool_use", "id": callID(n, i), "name": c.Name, "input": map[string]any{}}})
		half := len(c.Args) / 2
		for _, part := range []string{c.Args[:half], c.Args[half:]} {
			send(map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		send(map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	send(map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason(tr), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": tr.Usage.OutputTokens}})
	send(map[string]any{"type": "message_stop"})
}

func stopReason(tr adaptertest.Turn) string {
	switch {
	case tr.Stop != "":
		return tr.Stop
	case len(tr.ToolCalls) > 0:
		return "tool_use"
	}
	return "end_turn"
}

// callID is the id of the i-th tool_use block of the n-th response.
func callID(n, i int) string { return fmt.Sprintf("toolu_%d_%d", n, i) }
