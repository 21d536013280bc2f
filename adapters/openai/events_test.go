package openaistop_test

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"

	openaistop "github.com/agentstop/agentstop/adapters/openai"
	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/termination"
)

func TestEvents(t *testing.T) {
	const usage = `"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}`
	u := termination.Usage{InputTokens: 9, OutputTokens: 4}
	tests := []struct {
		name string
		json string
		want []termination.Event
	}{{
		name: "final",
		json: `{"model":"m","choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"done"}}],` + usage + `}`,
		want: []termination.Event{{Kind: termination.KindFinal, Source: "m", Text: "done", Usage: u, Model: "m"}},
	}, {
		name: "tool calls",
		json: `{"model":"m","choices":[{"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[
			{"id":"1","type":"function","function":{"name":"a","arguments":"{\"x\":1}"}},
			{"id":"2","type":"custom","custom":{"name":"grep","input":"foo bar"}},
			{"id":"3","type":"function","function":{"name":"b","arguments":"{\"x\":"}},
			{"id":"4","type":"function","function":{"name":"c","arguments":""}}]}}],` + usage + `}`,
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "m", Usage: u, Model: "m"},
			{Kind: termination.KindToolCall, Tool: "a", Args: json.RawMessage(`{"x":1}`), CallID: "1"},
			{Kind: termination.KindToolCall, Tool: "grep", Args: json.RawMessage(`"foo bar"`), CallID: "2"},
			{Kind: termination.KindToolCall, Tool: "b", Args: json.RawMessage(`"{\"x\":"`), CallID: "3"},
			{Kind: termination.KindToolCall, Tool: "c", CallID: "4"},
		},
	}, {
		name: "tool calls with finish_reason stop",
		json: `{"model":"m","choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"x","tool_calls":[
			{"id":"1","type":"function","function":{"name":"a","arguments":"{}"}}]}}],` + usage + `}`,
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "m", Text: "x", Usage: u, Model: "m"},
			{Kind: termination.KindToolCall, Tool: "a", Args: json.RawMessage(`{}`), CallID: "1"},
		},
	}, {
		name: "legacy function_call",
		json: `{"model":"m","choices":[{"finish_reason":"function_call","message":{"role":"assistant","function_call":{"name":"f","arguments":"{}"}}}],` + usage + `}`,
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "m", Usage: u, Model: "m"},
			{Kind: termination.KindToolCall, Tool: "f", Args: json.RawMessage(`{}`)},
		},
	}, {
		name: "length",
		json: `{"model":"m","choices":[{"finish_reason":"length","message":{"role":"assistant","content":"the answ"}}],` + usage + `}`,
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "m", Text: "the answ", Usage: u, Model: "m"},
			{Kind: termination.KindError, Source: "m", Err: "finish_reason length: the response was cut off at the token limit"},
		},
	}, {
		name: "content filter",
		json: `{"model":"m","choices":[{"finish_reason":"content_filter","message":{"role":"assistant","content":""}}],` + usage + `}`,
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "m", Usage: u, Model: "m"},
			{Kind: termination.KindError, Source: "m", Err: "finish_reason content_filter: content was omitted by the content filter"},
		},
	}, {
		name: "refusal",
		json: `{"model":"m","choices":[{"finish_reason":"stop","message":{"role":"assistant","content":null,"refusal":"I can't help with that."}}],` + usage + `}`,
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "m", Text: "I can't help with that.", Usage: u, Model: "m"},
			{Kind: termination.KindError, Source: "m", Err: "refusal: I can't help with that."},
		},
	}, {
		name: "no choices",
		json: `{"model":"m","choices":[],` + usage + `}`,
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "m", Usage: u, Model: "m"},
			{Kind: termination.KindError, Source: "m", Err: "the completion has no choices"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := adaptertest.DecodeEvents(tt.json, openaistop.Events)
			if err != nil {
				t.Fatal(err)
			}
			if err := adaptertest.DiffEvents(got, tt.want); err != nil {
				t.Error(err)
			}
			for i, g := range got {
				if g.Args != nil && !json.Valid(g.Args) {
					t.Errorf("event %d: args %q are not JSON", i, g.Args)
				}
			}
		})
	}
	openaistop.Events(nil, func(ev termination.Event) { t.Errorf("nil completion emitted %+v", ev) })
}

func TestToolResultEvent(t *testing.T) {
	var call openai.ChatCompletionMessageToolCallUnion
	if err := json.Unmarshal([]byte(`{"id":"1","type":"function","function":{"name":"search","arguments":"{}"}}`), &call); err != nil {
		t.Fatal(err)
	}
	if err := adaptertest.CheckToolResultEvent(func(out string, err error) termination.Event {
		return openaistop.ToolResultEvent(call, out, err)
	}); err != nil {
		t.Error(err)
	}
}

func TestObserveError(t *testing.T) {
	if err := adaptertest.CheckObserveError(openaistop.ObserveError); err != nil {
		t.Error(err)
	}
}

// TestEventsUsageDetails: cached and reasoning tokens are already inside
// prompt_tokens and completion_tokens; the details are not added again
// (contract §1: input includes cached tokens, output reasoning tokens).
func TestEventsUsageDetails(t *testing.T) {
	var c openai.ChatCompletion
	if err := json.Unmarshal([]byte(`{"model":"o4","choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"done"}}],`+
		`"usage":{"prompt_tokens":1200,"completion_tokens":340,"total_tokens":1540,`+
		`"prompt_tokens_details":{"cached_tokens":1000},"completion_tokens_details":{"reasoning_tokens":300}}}`), &c); err != nil {
		t.Fatal(err)
	}
	var got []termination.Event
	openaistop.Events(&c, func(ev termination.Event) { got = append(got, ev) })
	if want := (termination.Usage{InputTokens: 1200, OutputTokens: 340}); len(got) != 1 || got[0].Usage != want {
		t.Fatalf("events %+v, want one final with usage %+v", got, want)
	}
}
