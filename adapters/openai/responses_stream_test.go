package openaistop_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	openaistop "github.com/agentstop/agentstop/adapters/openai"
	"github.com/agentstop/agentstop/termination"
)

// responseStream returns a stream of Responses API events read from an SSE
// body, as the SDK reads a server's response.
func responseStream(body string) *ssestream.Stream[responses.ResponseStreamEventUnion] {
	res := &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(strings.NewReader(body)),
	}
	return ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(res), nil)
}

// sseEvents returns an SSE body of data lines, each with its event line.
func sseEvents(events ...string) string {
	var b strings.Builder
	for _, ev := range events {
		typ := ev[strings.Index(ev, `"type":"`)+8:]
		typ = typ[:strings.IndexByte(typ, '"')]
		b.WriteString("event: " + typ + "\ndata: " + ev + "\n\n")
	}
	return b.String()
}

// TestAccumulateResponse: a streamed response is reported as the response
// its terminal event carries; a stream that ends without one, or reports an
// error, is an error, never a silently empty answer.
func TestAccumulateResponse(t *testing.T) {
	documented, err := os.ReadFile(filepath.Join("testdata", "responses", "stream_text.sse"))
	if err != nil {
		t.Fatal(err)
	}
	const (
		created = `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","model":"gpt-5","status":"in_progress","output":[],"usage":null}}`
		call    = `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"search","arguments":"{\"q\":\"x\"}","status":"completed"}`
		usage   = `"usage":{"input_tokens":9,"output_tokens":2,"total_tokens":11}`
	)
	tests := []struct {
		name    string
		body    string
		events  int
		want    []termination.Event
		wantErr string
	}{{
		name: "documented text stream (openapi.yaml, Streaming)",
		// The example ends its last event with one newline, where a server
		// ends every event with a blank line (without it the SSE decoder
		// drops the event, and the stream has no terminal event).
		body:   string(documented) + "\n",
		events: 9,
		want: []termination.Event{{Kind: termination.KindFinal, Source: "gpt-5.4", Model: "gpt-5.4", Text: "Hi there! How can I assist you today?",
			Usage: termination.Usage{InputTokens: 37, OutputTokens: 11}}},
	}, {
		name: "a function call; the terminal response carries the output",
		body: sseEvents(created,
			`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"search","arguments":"","status":"in_progress"}}`,
			`{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":"{\"q\":\"x\"}"}`,
			`{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":`+call+`}`,
			`{"type":"response.completed","sequence_number":4,"response":{"id":"resp_1","object":"response","model":"gpt-5","status":"completed","output":[`+call+`],`+usage+`}}`),
		events: 5,
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "gpt-5", Model: "gpt-5", Usage: termination.Usage{InputTokens: 9, OutputTokens: 2}},
			{Kind: termination.KindToolCall, Tool: "search", Args: []byte(`{"q":"x"}`), CallID: "call_1"},
		},
	}, {
		name: "a terminal response that omits its output gets the finished items",
		body: sseEvents(created,
			`{"type":"response.output_item.done","sequence_number":1,"output_index":1,"item":`+call+`}`,
			`{"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Let me look.","annotations":[]}]}}`,
			`{"type":"response.completed","sequence_number":3,"response":{"id":"resp_1","object":"response","model":"gpt-5","status":"completed",`+usage+`}}`),
		events: 4,
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "gpt-5", Model: "gpt-5", Text: "Let me look.", Usage: termination.Usage{InputTokens: 9, OutputTokens: 2}},
			{Kind: termination.KindToolCall, Tool: "search", Args: []byte(`{"q":"x"}`), CallID: "call_1"},
		},
	}, {
		name: "a terminal response with an empty output gets the finished items (as some endpoints and proxies send it)",
		body: sseEvents(created,
			`{"type":"response.output_item.done","sequence_number":1,"output_index":0,"item":`+call+`}`,
			`{"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","object":"response","model":"gpt-5","status":"completed","output":[],`+usage+`}}`),
		events: 3,
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "gpt-5", Model: "gpt-5", Usage: termination.Usage{InputTokens: 9, OutputTokens: 2}},
			{Kind: termination.KindToolCall, Tool: "search", Args: []byte(`{"q":"x"}`), CallID: "call_1"},
		},
	}, {
		name: "cut off: response.incomplete",
		body: sseEvents(created,
			`{"type":"response.incomplete","sequence_number":1,"response":{"id":"resp_1","object":"response","model":"gpt-5","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[],`+usage+`}}`),
		events: 2,
		want: []termination.Event{
			{Kind: termination.KindMessage, Source: "gpt-5", Model: "gpt-5", Usage: termination.Usage{InputTokens: 9, OutputTokens: 2}},
			{Kind: termination.KindError, Source: "gpt-5", Err: "status incomplete (max_output_tokens): the response was cut off at the token limit"},
		},
	}, {
		name:    "an error event (openapi.yaml, ResponseErrorEvent)",
		body:    sseEvents(created, `{"type":"error","code":"ERR_SOMETHING","message":"Something went wrong","param":null,"sequence_number":1}`),
		events:  2,
		wantErr: "openaistop: the response stream reported an error: ERR_SOMETHING: Something went wrong",
	}, {
		name:    "no terminal event",
		body:    sseEvents(created, `{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}`),
		events:  2,
		wantErr: "openaistop: the response stream ended before response.completed (the response is incomplete)",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := 0
			r, err := openaistop.AccumulateResponse(responseStream(tt.body), func(responses.ResponseStreamEventUnion) { events++ })
			if events != tt.events {
				t.Errorf("onEvent saw %d events, want %d", events, tt.events)
			}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []termination.Event
			openaistop.ResponseEvents(&r, func(ev termination.Event) { got = append(got, ev) })
			if err := diffResponseEvents(got, tt.want); err != nil {
				t.Error(err)
			}
		})
	}
	if _, err := openaistop.AccumulateResponse(nil, nil); err == nil {
		t.Error("a nil stream is not an error")
	}
}
