package openaistop_test

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentstop/agentstop/internal/adaptertest"
)

// responsesAPI is the Responses API, scripted (see respondResponse and
// streamResponse).
var responsesAPI = adaptertest.API{Path: "/v1/responses", Respond: respondResponse, Stream: streamResponse}

// respondResponse answers like the Responses API, as JSON, with response
// id resp_<request>, model "scripted", a reasoning item, a message item when
// the turn has text or a refusal, and a function_call item per tool call,
// with call id call_<request>_<index>. A turn with a Stop reason is an
// incomplete response, for that reason.
func respondResponse(w http.ResponseWriter, _ map[string]any, n int, tr adaptertest.Turn) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(scriptedResponse(n, tr))
}

// streamResponse answers the same as an SSE stream: response.created, the
// items (a message's text in two deltas), then response.completed or
// response.incomplete with the whole response.
func streamResponse(w http.ResponseWriter, _ map[string]any, n int, tr adaptertest.Turn) {
	w.Header().Set("Content-Type", "text/event-stream")
	seq := 0
	send := func(ev map[string]any) {
		ev["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev["type"], b)
	}
	resp := scriptedResponse(n, tr)
	created := map[string]any{"id": resp["id"], "object": "response", "model": "scripted", "status": "in_progress", "output": []any{}, "usage": nil}
	send(map[string]any{"type": "response.created", "response": created})
	for i, item := range resp["output"].([]any) {
		send(map[string]any{"type": "response.output_item.added", "output_index": i, "item": item})
		if tr.Text != "" && item.(map[string]any)["type"] == "message" {
			half := len(tr.Text) / 2
			for _, d := range []string{tr.Text[:half], tr.Text[half:]} {
				send(map[string]any{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": i, "content_index": 0, "delta": d})
			}
		}
		send(map[string]any{"type": "response.output_item.done", "output_index": i, "item": item})
	}
	terminal := "response.completed"
	if tr.Stop != "" {
		terminal = "response.incomplete"
	}
	send(map[string]any{"type": terminal, "response": resp})
}

func scriptedResponse(n int, tr adaptertest.Turn) map[string]any {
	output := []any{map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%d", n), "summary": []any{
		map[string]any{"type": "summary_text", "text": "Thinking about the task."},
	}}}
	var content []any
	if tr.Text != "" {
		content = append(content, map[string]any{"type": "output_text", "text": tr.Text, "annotations": []any{}})
	}
	if tr.Refusal != "" {
		content = append(content, map[string]any{"type": "refusal", "refusal": tr.Refusal})
	}
	if content != nil {
		output = append(output, map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": content})
	}
	for i, c := range tr.ToolCalls {
		output = append(output, map[string]any{
			"type": "function_call", "id": fmt.Sprintf("fc_%d_%d", n, i), "call_id": callID(n, i),
			"name": c.Name, "arguments": c.Args, "status": "completed",
		})
	}
	resp := map[string]any{
		"id": fmt.Sprintf("resp_%d", n), "object": "response", "created_at": 1700000000, "model": "scripted",
		"status": "completed", "error": nil, "incomplete_details": nil, "output": output,
		"usage": map[string]any{
			"input_tokens": tr.Usage.InputTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": tr.Usage.OutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens": tr.Usage.Total(),
		},
	}
	if tr.Stop != "" {
		resp["status"] = "incomplete"
		resp["incomplete_details"] = map[string]any{"reason": tr.Stop}
	}
	return resp
}
