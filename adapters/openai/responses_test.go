package openaistop_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/openai/openai-go/v3/responses"

	openaistop "github.com/agentstop/agentstop/adapters/openai"
	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/termination"
)

// sample returns a documented example of testdata/responses (see its
// README for where each comes from); an event's response when the file is
// a stream event.
func sample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "responses", name))
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(b, &ev); err == nil && len(ev.Response) > 0 {
		return string(ev.Response)
	}
	return string(b)
}

// built wraps output items and usage into a response of model "gpt-5",
// for the shapes the documented examples lack: built from the schemas of
// openapi.yaml (openai/openai-openapi f85dbe223d40e1a31cba812ab2d755c7e98a92a3,
// components.schemas.Response and its output item schemas).
func built(status, extra, output string) string {
	return `{"id":"resp_1","object":"response","model":"gpt-5","status":"` + status + `"` + extra +
		`,"output":[` + output + `],"usage":{"input_tokens":1200,"input_tokens_details":{"cached_tokens":1000},` +
		`"output_tokens":340,"output_tokens_details":{"reasoning_tokens":300},"total_tokens":1540}}`
}

func TestResponseEvents(t *testing.T) {
	const model = "gpt-5.4"
	u := termination.Usage{InputTokens: 1200, OutputTokens: 340}
	reasoning := `{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"The user wants the weather. DONE"}],` +
		`"content":[{"type":"reasoning_text","text":"DONE thinking"}]}`
	tests := []struct {
		name string
		json string
		want []termination.Event
	}{{
		name: "text (documented)",
		json: sample(t, "text.json"),
		want: []termination.Event{{Kind: termination.KindFinal, Source: model, Model: model, Usage: termination.Usage{InputTokens: 36, OutputTokens: 87},
			Text: "In a peaceful grove beneath a silver moon, a unicorn named Lumina discovered a hidden pool that reflected the stars. As she dipped her horn into the water, the pool began to shimmer, revealing a pathway to a magical realm of endless night skies. Filled with wonder, Lumina whispered a wish for all who dream to find their own hidden magic, and as she glanced back, her hoofprints sparkled like stardust."}},
	}, {
		name: "web search (documented): a server-run call, then the answer",
		json: sample(t, "web_search.json"),
		want: []termination.Event{
			{Kind: termination.KindFinal, Source: model, Model: model, Text: "As of today, March 9, 2025, one notable positive news story...", Usage: termination.Usage{InputTokens: 328, OutputTokens: 356}},
			{Kind: termination.KindToolCall, Tool: "web_search", CallID: "ws_67ccf18f64008190a39b619f4c8455ef087bb177ab789d5c"},
		},
	}, {
		name: "file search (documented)",
		json: sample(t, "file_search.json"),
		want: []termination.Event{
			{Kind: termination.KindFinal, Source: model, Model: model, Text: "The attributes of an ancient brown dragon include...", Usage: termination.Usage{InputTokens: 18307, OutputTokens: 348}},
			{Kind: termination.KindToolCall, Tool: "file_search", Args: json.RawMessage(`["attributes of an ancient brown dragon"]`), CallID: "fs_67ccf4c63cd08190887ef6464ba5681609504fb6872380d7"},
		},
	}, {
		name: "function call (documented)",
		json: sample(t, "functions.json"),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: model, Model: model, Usage: termination.Usage{InputTokens: 291, OutputTokens: 23}},
			{Kind: termination.KindToolCall, Tool: "get_current_weather", Args: json.RawMessage(`{"location":"Boston, MA","unit":"celsius"}`), CallID: "call_unLAR8MvFNptuiZK6K6HCy5k"},
		},
	}, {
		name: "reasoning (documented): output_tokens already hold the reasoning tokens",
		json: sample(t, "reasoning.json"),
		want: []termination.Event{{Kind: termination.KindFinal, Source: "o1-2024-12-17", Model: "o1-2024-12-17", Text: "The classic tongue twister...", Usage: termination.Usage{InputTokens: 81, OutputTokens: 1035}}},
	}, {
		name: "failed (documented event)",
		json: sample(t, "event_failed.json"),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "gpt-4o-mini-2024-07-18", Model: "gpt-4o-mini-2024-07-18"},
			{Kind: termination.KindError, Source: "gpt-4o-mini-2024-07-18", Err: "status failed: server_error: The model failed to generate a response."},
		},
	}, {
		name: "incomplete with another reason (documented event)",
		json: sample(t, "event_incomplete.json"),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "gpt-4o-mini-2024-07-18", Model: "gpt-4o-mini-2024-07-18"},
			{Kind: termination.KindError, Source: "gpt-4o-mini-2024-07-18", Err: "status incomplete (max_tokens): the response is incomplete"},
		},
	}, {
		name: "reasoning summary is not the answer; arguments keep their escapes; cached and reasoning tokens not added again",
		json: built("completed", "", reasoning+`,{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather",`+
			`"arguments":"{\"city\":\"Bogot\\u00e1\",\"note\":\"say \\\"hi\\\"\"}","status":"completed"}`),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "gpt-5", Model: "gpt-5", Usage: u},
			{Kind: termination.KindToolCall, Tool: "get_weather", Args: json.RawMessage(`{"city":"Bogot\u00e1","note":"say \"hi\""}`), CallID: "call_1"},
		},
	}, {
		name: "a preamble message, parallel calls, arguments that are not JSON",
		json: built("completed", "", `{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Let me check.","annotations":[]}]},`+
			`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"a","arguments":"{\"x\":"},`+
			`{"type":"function_call","id":"fc_2","call_id":"call_2","name":"b","arguments":""}`),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "gpt-5", Model: "gpt-5", Text: "Let me check.", Usage: u},
			{Kind: termination.KindToolCall, Tool: "a", Args: json.RawMessage(`"{\"x\":"`), CallID: "call_1"},
			{Kind: termination.KindToolCall, Tool: "b", CallID: "call_2"},
		},
	}, {
		name: "two message items, two parts",
		json: built("completed", "", `{"type":"message","id":"msg_1","role":"assistant","status":"completed","phase":"commentary","content":[{"type":"output_text","text":"Checked.","annotations":[]}]},`+
			`{"type":"message","id":"msg_2","role":"assistant","status":"completed","phase":"final_answer","content":[{"type":"output_text","text":"It is ","annotations":[]},{"type":"output_text","text":"42.","annotations":[]}]}`),
		want: []termination.Event{{Kind: termination.KindFinal, Source: "gpt-5", Model: "gpt-5", Text: "Checked.\nIt is 42.", Usage: u}},
	}, {
		name: "incomplete: max_output_tokens",
		json: built("incomplete", `,"incomplete_details":{"reason":"max_output_tokens"}`,
			reasoning+`,{"type":"message","id":"msg_1","role":"assistant","status":"incomplete","content":[{"type":"output_text","text":"the answ","annotations":[]}]}`),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "gpt-5", Model: "gpt-5", Text: "the answ", Usage: u},
			{Kind: termination.KindError, Source: "gpt-5", Err: "status incomplete (max_output_tokens): the response was cut off at the token limit"},
		},
	}, {
		name: "incomplete: content_filter, a call cut off still reported",
		json: built("incomplete", `,"incomplete_details":{"reason":"content_filter"}`,
			`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"a","arguments":"{\"q\":\"x","status":"incomplete"}`),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "gpt-5", Model: "gpt-5", Usage: u},
			{Kind: termination.KindToolCall, Tool: "a", Args: json.RawMessage(`"{\"q\":\"x"`), CallID: "call_1"},
			{Kind: termination.KindError, Source: "gpt-5", Err: "status incomplete (content_filter): content was omitted by the content filter"},
		},
	}, {
		name: "refusal",
		json: built("completed", "", `{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"refusal","refusal":"I can't help with that."}]}`),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "gpt-5", Model: "gpt-5", Text: "I can't help with that.", Usage: u},
			{Kind: termination.KindError, Source: "gpt-5", Err: "refusal: I can't help with that."},
		},
	}, {
		name: "cancelled, and a background response still in progress",
		json: built("cancelled", "", ""),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "gpt-5", Model: "gpt-5", Usage: u},
			{Kind: termination.KindError, Source: "gpt-5", Err: "status cancelled: the response was cancelled"},
		},
	}, {
		name: "in progress",
		json: built("in_progress", "", ""),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "gpt-5", Model: "gpt-5", Usage: u},
			{Kind: termination.KindError, Source: "gpt-5", Err: "status in_progress: the response is not finished (report it once it is)"},
		},
	}, {
		name: "client-run built-in tools: custom, computer, local shell, apply_patch",
		json: built("completed", "", `{"type":"custom_tool_call","id":"ctc_1","call_id":"call_1","name":"grep","input":"foo bar"},`+
			`{"type":"computer_call","id":"cu_1","call_id":"call_2","action":{"type":"click","button":"left","x":10,"y":20},"pending_safety_checks":[],"status":"completed"},`+
			`{"type":"local_shell_call","id":"ls_1","call_id":"call_3","action":{"type":"exec","command":["ls"],"env":{}},"status":"completed"},`+
			`{"type":"apply_patch_call","id":"ap_1","call_id":"call_4","operation":{"type":"delete_file","path":"a.go"},"status":"completed"}`),
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "gpt-5", Model: "gpt-5", Usage: u},
			{Kind: termination.KindToolCall, Tool: "grep", Args: json.RawMessage(`"foo bar"`), CallID: "call_1"},
			{Kind: termination.KindToolCall, Tool: "computer", Args: json.RawMessage(`{"type":"click","button":"left","x":10,"y":20}`), CallID: "call_2"},
			{Kind: termination.KindToolCall, Tool: "local_shell", Args: json.RawMessage(`{"type":"exec","command":["ls"],"env":{}}`), CallID: "call_3"},
			{Kind: termination.KindToolCall, Tool: "apply_patch", Args: json.RawMessage(`{"type":"delete_file","path":"a.go"}`), CallID: "call_4"},
		},
	}, {
		name: "server-run tools: code interpreter, MCP, a shell in a hosted container, a server tool search",
		json: built("completed", "", `{"type":"code_interpreter_call","id":"ci_1","code":"print(1+1)","container_id":"cntr_1","outputs":null,"status":"completed"},`+
			`{"type":"mcp_call","id":"mcp_1","name":"roll","server_label":"dice","arguments":"{\"sides\":6}","output":"4"},`+
			`{"type":"shell_call","id":"sh_1","call_id":"call_5","action":{"commands":["ls"]},"environment":{"type":"container_reference","container_id":"cntr_1"},"status":"completed"},`+
			`{"type":"shell_call_output","id":"sho_1","call_id":"call_5","output":[],"status":"completed"},`+
			`{"type":"tool_search_call","id":"ts_1","call_id":"call_6","execution":"server","arguments":{"query":"crm"},"status":"completed"},`+
			`{"type":"image_generation_call","id":"ig_1","status":"completed","result":null},`+
			`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"2","annotations":[]}]}`),
		want: []termination.Event{
			{Kind: termination.KindFinal, Source: "gpt-5", Model: "gpt-5", Text: "2", Usage: u},
			{Kind: termination.KindToolCall, Tool: "code_interpreter", Args: json.RawMessage(`"print(1+1)"`), CallID: "ci_1"},
			{Kind: termination.KindToolCall, Tool: "roll", Args: json.RawMessage(`{"sides":6}`), CallID: "mcp_1"},
			{Kind: termination.KindToolCall, Tool: "shell", Args: json.RawMessage(`{"commands":["ls"]}`), CallID: "call_5"},
			{Kind: termination.KindToolCall, Tool: "tool_search", Args: json.RawMessage(`{"query":"crm"}`), CallID: "call_6"},
			{Kind: termination.KindToolCall, Tool: "image_generation", CallID: "ig_1"},
		},
	}, {
		name: "an MCP approval request waits for the loop, and is not a call yet",
		json: built("completed", "", `{"type":"mcp_approval_request","id":"mcpr_1","name":"roll","server_label":"dice","arguments":"{}"}`),
		want: []termination.Event{{Kind: termination.KindMessage, Source: "gpt-5", Model: "gpt-5", Usage: u}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := adaptertest.DecodeEvents(tt.json, openaistop.ResponseEvents)
			if err != nil {
				t.Fatal(err)
			}
			if err := diffResponseEvents(got, tt.want); err != nil {
				t.Error(err)
			}
		})
	}
	openaistop.ResponseEvents(nil, func(ev termination.Event) { t.Errorf("nil response emitted %+v", ev) })
}

// diffResponseEvents is adaptertest.DiffEvents that also compares call ids
// and models, and checks that every Args is JSON.
func diffResponseEvents(got, want []termination.Event) error {
	if err := adaptertest.DiffEvents(got, want); err != nil {
		return err
	}
	var errs []error
	for i := range got {
		if got[i].CallID != want[i].CallID || got[i].Model != want[i].Model {
			errs = append(errs, fmt.Errorf("event %d: call id, model = %q, %q; want %q, %q", i, got[i].CallID, got[i].Model, want[i].CallID, want[i].Model))
		}
		if got[i].Args != nil && !json.Valid(got[i].Args) {
			errs = append(errs, fmt.Errorf("event %d: args %q are not JSON", i, got[i].Args))
		}
	}
	return errors.Join(errs...)
}

func TestResponseToolResultEvent(t *testing.T) {
	var call responses.ResponseOutputItemUnion
	if err := json.Unmarshal([]byte(`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"search","arguments":"{}"}`), &call); err != nil {
		t.Fatal(err)
	}
	if err := adaptertest.CheckToolResultEvent(func(out string, err error) termination.Event {
		return openaistop.ResponseToolResultEvent(call, out, err)
	}); err != nil {
		t.Error(err)
	}
	// The result pairs with its call by call_id (fc_1 is the item's id).
	if ev := openaistop.ResponseToolResultEvent(call, "3 hits", nil); ev.CallID != "call_1" {
		t.Errorf("call id = %q, want call_1", ev.CallID)
	}
}
