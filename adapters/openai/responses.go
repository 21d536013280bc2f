package openaistop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// The error texts of responses that are not answers (see the package doc).
const (
	errIncompleteTokens = "status incomplete (max_output_tokens): the response was cut off at the token limit"
	errIncompleteFilter = "status incomplete (content_filter): content was omitted by the content filter"
	errIncomplete       = "status incomplete: the response is incomplete"
	errFailed           = "status failed: the model failed to generate a response"
	errCancelled        = "status cancelled: the response was cancelled"
	errUnfinished       = ": the response is not finished (report it once it is)"
)

// ResponseEvents is [Events] for a response of the Responses API
// (client.Responses.New): it turns one response into events and passes
// them to emit, in order: a message or final event with the response's
// usage and the text of its message items, a tool_call event per tool call
// item (the function calls the loop runs, and the built-in tools' calls), and
// an error event when the response is not an answer (status incomplete,
// failed or cancelled, a refusal). The package doc has the full mapping. A
// nil response emits nothing.
//
// ResponseEvents is the decode function for middleware.ForwardEach and
// middleware.ForwardSeqEach over a loop that yields responses.
func ResponseEvents(r *responses.Response, emit func(termination.Event)) {
	if r == nil {
		return
	}
	model := string(r.Model)
	turn := termination.Event{
		Kind:   termination.KindFinal,
		Source: model,
		Model:  model,
		Usage: termination.Usage{
			InputTokens:  r.Usage.InputTokens,
			OutputTokens: r.Usage.OutputTokens,
		},
	}
	text, refusal := responseText(r.Output)
	turn.Text = text
	problem := responseProblem(r)
	if problem == "" && refusal != "" {
		problem = refusalPrefix + refusal
	}
	if refusal != "" && turn.Text == "" {
		turn.Text = refusal
	}
	if problem != "" || awaitsClient(r.Output) {
		turn.Kind = termination.KindMessage
	}
	emit(turn)
	for i := range r.Output {
		if ev, ok := responseToolCall(&r.Output[i]); ok {
			emit(ev)
		}
	}
	if problem != "" {
		emit(termination.Event{Kind: termination.KindError, Source: model, Err: problem})
	}
}

// responseText returns the output_text parts of the message items (the
// parts of one item joined as the SDK's Response.OutputText joins them, a
// newline between two items) and their refusal parts.
func responseText(output []responses.ResponseOutputItemUnion) (text, refusal string) {
	var t, ref strings.Builder
	for i := range output {
		item := &output[i]
		if item.Type != "message" {
			continue // reasoning summaries are not the answer
		}
		sep := t.Len() > 0
		for _, part := range item.Content {
			switch part.Type {
			case "output_text":
				if part.Text == "" {
					continue
				}
				if sep {
					t.WriteByte('\n')
					sep = false
				}
				t.WriteString(part.Text)
			case "refusal":
				ref.WriteString(part.Refusal)
			}
		}
	}
	return t.String(), ref.String()
}

// responseProblem returns why a response is not an answer, from its status
// and error, or "" when it is complete.
func responseProblem(r *responses.Response) string {
	switch r.Status {
	case "", responses.ResponseStatusCompleted:
	case responses.ResponseStatusIncomplete:
		switch reason := r.IncompleteDetails.Reason; reason {
		case "max_output_tokens":
			return errIncompleteTokens
		case "content_filter":
			return errIncompleteFilter
		case "":
			return errIncomplete
		default:
			return "status incomplete (" + reason + "): the response is incomplete"
		}
	case responses.ResponseStatusFailed:
		return failure(r.Error)
	case responses.ResponseStatusCancelled:
		return errCancelled
	default: // queued, in_progress: a background response polled too early
		return "status " + string(r.Status) + errUnfinished
	}
	if r.Error.Code != "" || r.Error.Message != "" {
		return failure(r.Error)
	}
	return ""
}

// failure is the error text of a failed response: its error's code and
// message.
func failure(e responses.ResponseError) string {
	switch {
	case e.Code != "" && e.Message != "":
		return "status failed: " + string(e.Code) + ": " + e.Message
	case e.Message != "":
		return "status failed: " + e.Message
	case e.Code != "":
		return "status failed: " + string(e.Code)
	}
	return errFailed
}

// clientCall reports whether an output item of type typ is one the loop
// answers with an input item of its own (a tool's output, an approval)
// before the model goes on.
func clientCall(typ string) bool {
	switch typ {
	case "function_call", "custom_tool_call", "computer_call", "local_shell_call",
		"shell_call", "apply_patch_call", "mcp_approval_request":
		return true
	}
	return false
}

// awaitsClient reports whether output holds a call the loop must answer: a
// client call whose output the same response does not carry (a shell run
// in a hosted container is answered by the server, in the response), or a
// tool search the client executes.
func awaitsClient(output []responses.ResponseOutputItemUnion) bool {
	for i := range output {
		item := &output[i]
		if item.Type == "tool_search_call" && item.Execution == "client" {
			return true
		}
		if clientCall(item.Type) && !answered(output, item.Type, item.CallID) {
			return true
		}
	}
	return false
}

func answered(output []responses.ResponseOutputItemUnion, typ, callID string) bool {
	if callID == "" {
		return false
	}
	for i := range output {
		if output[i].Type == typ+"_output" && output[i].CallID == callID {
			return true
		}
	}
	return false
}

// responseToolCall returns the tool_call event of an output item that calls
// a tool, and false for any other item. Function and custom tool calls
// carry the tool's name; the built-in tools, the tool's type as the request
// names it (web_search, file_search, computer, code_interpreter, ...) and
// what the call does as its args.
func responseToolCall(item *responses.ResponseOutputItemUnion) (termination.Event, bool) {
	name, input, ok := toolOf(item)
	if !ok {
		return termination.Event{}, false
	}
	id := item.CallID
	if id == "" {
		id = item.ID // server-run calls have no call_id
	}
	return termination.Event{Kind: termination.KindToolCall, Tool: name, Args: input, CallID: id}, true
}

// toolOf returns the tool name and arguments of an output item that calls
// a tool.
func toolOf(item *responses.ResponseOutputItemUnion) (string, json.RawMessage, bool) {
	j := &item.JSON
	switch item.Type {
	case "function_call", "mcp_call":
		return item.Name, args(item.Arguments.OfString), true
	case "custom_tool_call":
		in, _ := json.Marshal(item.Input) // a string always marshals
		return item.Name, in, true
	case "web_search_call":
		return "web_search", raw(j.Action.Raw()), true
	case "file_search_call":
		return "file_search", raw(j.Queries.Raw()), true
	case "computer_call":
		if a := raw(j.Action.Raw()); a != nil {
			return "computer", a, true
		}
		return "computer", raw(j.Actions.Raw()), true
	case "code_interpreter_call":
		code, _ := json.Marshal(item.Code)
		return "code_interpreter", code, true
	case "image_generation_call":
		return "image_generation", nil, true
	case "local_shell_call":
		return "local_shell", raw(j.Action.Raw()), true
	case "shell_call":
		return "shell", raw(j.Action.Raw()), true
	case "apply_patch_call":
		return "apply_patch", raw(j.Operation.Raw()), true
	case "tool_search_call":
		return "tool_search", raw(j.Arguments.Raw()), true
	}
	return "", nil, false
}

// raw returns a field's raw JSON without its insignificant whitespace (a
// pretty-printed response keeps it), or nothing when the field is absent or
// null.
func raw(s string) json.RawMessage {
	if s == "" || s == "null" {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return args(s)
	}
	return b.Bytes()
}

// ResponseToolResultEvent returns the tool_result event of one tool call
// item of a response (a function_call, whose output the loop sends back as
// a function_call_output item; or a custom_tool_call, computer_call, ...):
// output as its text, err's text as its Err when the tool failed, and the
// item's call_id.
func ResponseToolResultEvent(call responses.ResponseOutputItemUnion, output string, err error) termination.Event {
	name, _, _ := toolOf(&call)
	ev := termination.Event{Kind: termination.KindToolResult, Tool: name, Text: output, CallID: call.CallID}
	if err != nil {
		ev.Err = err.Error()
	}
	return ev
}

// ObserveResponse reports one response of the Responses API to run (see
// [ResponseEvents]) and returns the cause and true when the loop must stop,
// as [Observe] does. A nil response is not reported.
func ObserveResponse(run *middleware.Run, r *responses.Response) (termination.Cause, bool) {
	return middleware.ObserveEach(run, r, ResponseEvents)
}

// ObserveResponseToolResult reports the result of one tool call item of a
// response to run (see [ResponseToolResultEvent]) and returns the cause and
// true when the loop must stop. A nil run is told nothing.
func ObserveResponseToolResult(run *middleware.Run, call responses.ResponseOutputItemUnion, output string, err error) (termination.Cause, bool) {
	if run == nil {
		return nil, false
	}
	return run.Observe(ResponseToolResultEvent(call, output, err))
}

// AccumulateResponse reads a streamed response of the Responses API
// (client.Responses.NewStreaming) to its end, passing each event to onEvent
// (if not nil) as it arrives, closes the stream, and returns the response
// that its terminal event (response.completed, response.incomplete or
// response.failed) carries, with the stream's error. Report the response
// with [ObserveResponse], like one that was not streamed; hand an error to
// run.Finish or to [ObserveError] and retry. Unlike a chat completion's
// (see [ObserveStreamError]), a response cut short has no tokens to count:
// the API reports usage only in the terminal response.
//
// A terminal response whose output is omitted or empty gets the items of the
// stream's response.output_item.done events, in output order. An error
// event, or a stream that ends without a terminal event, is an error: the
// response returned with it is the last one the stream announced
// (response.created, response.in_progress), not an answer.
func AccumulateResponse(stream *ssestream.Stream[responses.ResponseStreamEventUnion], onEvent func(responses.ResponseStreamEventUnion)) (responses.Response, error) {
	if stream == nil {
		return responses.Response{}, errNilStream
	}
	defer stream.Close()
	var (
		resp     responses.Response
		terminal bool
		done     []responses.ResponseOutputItemUnion
		failed   error
	)
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.created", "response.in_progress", "response.queued":
			if !terminal {
				resp = ev.Response
			}
		case "response.completed", "response.incomplete", "response.failed":
			resp, terminal = ev.Response, true
		case "response.output_item.done":
			done = placeItem(done, ev.OutputIndex, ev.Item)
		case "error":
			if failed == nil {
				failed = streamError(ev)
			}
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}
	if terminal && len(resp.Output) == 0 && len(done) > 0 {
		// The terminal response left its output out, or sent it empty (as
		// some Responses endpoints and proxies do): the finished items are
		// the answer.
		resp.Output = compact(done)
	}
	if failed == nil && !terminal && stream.Err() == nil {
		failed = errNoTerminal
	}
	if failed == nil {
		return resp, stream.Err() // the stream's own error, unwrapped
	}
	return resp, errors.Join(stream.Err(), failed)
}

// placeItem puts item at index i of items, growing it as needed; a
// negative or absurd index is dropped.
func placeItem(items []responses.ResponseOutputItemUnion, i int64, item responses.ResponseOutputItemUnion) []responses.ResponseOutputItemUnion {
	if i < 0 || i > 1<<16 {
		return items
	}
	for int64(len(items)) <= i {
		items = append(items, responses.ResponseOutputItemUnion{})
	}
	items[i] = item
	return items
}

// compact drops the holes (indices no event filled) of items.
func compact(items []responses.ResponseOutputItemUnion) []responses.ResponseOutputItemUnion {
	out := items[:0]
	for _, it := range items {
		if it.Type != "" {
			out = append(out, it)
		}
	}
	return out
}

// streamError is the error of a stream's error event: its code and message.
func streamError(ev responses.ResponseStreamEventUnion) error {
	msg := ev.Message
	if ev.Code != "" {
		msg = ev.Code + ": " + msg
	}
	return fmt.Errorf("openaistop: the response stream reported an error: %s", msg)
}

var errNoTerminal = errors.New("openaistop: the response stream ended before response.completed (the response is incomplete)")
