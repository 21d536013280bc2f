package openaistop

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// The error texts of turns that are not answers (see the package doc).
const (
	errLength        = "finish_reason length: the response was cut off at the token limit"
	errContentFilter = "finish_reason content_filter: content was omitted by the content filter"
	errNoChoices     = "the completion has no choices"
	refusalPrefix    = "refusal: "
)

// Events turns one chat completion into events and passes them to emit, in
// order: a message or final event with the completion's usage, a tool_call
// event per tool call of Choices[0], and an error event when the turn is not
// an answer (finish_reason length or content_filter, a refusal). The package
// doc has the full mapping. A nil completion emits nothing.
//
// Events is the decode function for middleware.ForwardEach and
// middleware.ForwardSeqEach over a loop that yields completions.
func Events(c *openai.ChatCompletion, emit func(termination.Event)) {
	if c == nil {
		return
	}
	turn := termination.Event{
		Kind:   termination.KindFinal,
		Source: c.Model,
		Model:  c.Model,
		Usage: termination.Usage{
			InputTokens:  c.Usage.PromptTokens,
			OutputTokens: c.Usage.CompletionTokens,
		},
	}
	if len(c.Choices) == 0 {
		turn.Kind = termination.KindMessage
		emit(turn)
		emit(termination.Event{Kind: termination.KindError, Source: c.Model, Err: errNoChoices})
		return
	}
	choice := &c.Choices[0]
	msg := &choice.Message
	turn.Text = msg.Content
	var problem string
	switch choice.FinishReason {
	case "length":
		problem = errLength
	case "content_filter":
		problem = errContentFilter
	}
	if msg.Refusal != "" {
		problem = refusalPrefix + msg.Refusal
		if turn.Text == "" {
			turn.Text = msg.Refusal
		}
	}
	legacy := msg.FunctionCall.Name != ""
	if len(msg.ToolCalls) > 0 || legacy || problem != "" ||
		choice.FinishReason == "tool_calls" || choice.FinishReason == "function_call" {
		turn.Kind = termination.KindMessage
	}
	emit(turn)
	for i := range msg.ToolCalls {
		emit(ToolCallEvent(msg.ToolCalls[i]))
	}
	if legacy {
		emit(termination.Event{Kind: termination.KindToolCall, Tool: msg.FunctionCall.Name, Args: args(msg.FunctionCall.Arguments)})
	}
	if problem != "" {
		emit(termination.Event{Kind: termination.KindError, Source: c.Model, Err: problem})
	}
}

// ToolCallEvent returns the tool_call event of one tool call: the function's
// name and arguments, or a custom tool's name and its input as a JSON
// string, with the call's id.
func ToolCallEvent(call openai.ChatCompletionMessageToolCallUnion) termination.Event {
	name, input := toolCall(call)
	return termination.Event{Kind: termination.KindToolCall, Tool: name, Args: input, CallID: call.ID}
}

// ToolResultEvent returns the tool_result event of one tool call: output as
// its text, err's text as its Err when the tool failed, and the call's id.
func ToolResultEvent(call openai.ChatCompletionMessageToolCallUnion, output string, err error) termination.Event {
	name, _ := toolCall(call)
	ev := termination.Event{Kind: termination.KindToolResult, Tool: name, Text: output, CallID: call.ID}
	if err != nil {
		ev.Err = err.Error()
	}
	return ev
}

func toolCall(call openai.ChatCompletionMessageToolCallUnion) (string, json.RawMessage) {
	if call.Type == "custom" {
		in, _ := json.Marshal(call.Custom.Input) // a string always marshals
		return call.Custom.Name, in
	}
	return call.Function.Name, args(call.Function.Arguments)
}

// args returns a tool call's arguments as JSON: the arguments themselves
// when they are valid JSON (they normally are), else a JSON string holding
// them, so that a malformed call is still compared and counted. No
// arguments is no Args.
func args(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// Observe reports one chat completion to run (see [Events]) and returns the
// cause and true when the loop must stop: on this completion or earlier. The
// run's context is then already cancelled with the cause, so requests made
// under it fail; the loop should break and call run.Finish. A nil
// completion is not reported. Every Observe function of this package
// returns this shape.
func Observe(run *middleware.Run, c *openai.ChatCompletion) (termination.Cause, bool) {
	return middleware.ObserveEach(run, c, Events)
}

// ObserveToolResult reports the result of one tool call to run (see
// [ToolResultEvent]) and returns the cause and true when the loop must stop.
// A nil run is told nothing.
func ObserveToolResult(run *middleware.Run, call openai.ChatCompletionMessageToolCallUnion, output string, err error) (termination.Cause, bool) {
	if run == nil {
		return nil, false
	}
	return run.Observe(ToolResultEvent(call, output, err))
}

// ObserveError reports a loop-level error that the loop survives (a failed
// request it retries) as an error event, so that the errors condition counts
// it, and returns the cause and true when the loop must stop; see
// Run.ObserveError. An error that ends the loop goes to run.Finish
// instead.
func ObserveError(run *middleware.Run, err error) (termination.Cause, bool) {
	return run.ObserveError(err)
}

// Accumulate reads a streamed chat completion to its end, passing each
// chunk to onChunk (if not nil) as it arrives and accumulating it with the
// SDK's ChatCompletionAccumulator, closes the stream, and returns the
// accumulated completion with the stream's error. Report the completion
// with [Observe], like one that was not streamed. With an error, the
// completion is what arrived before it: report it with
// [ObserveStreamError] (its tokens were spent), then hand the error to
// run.Finish (which keeps the run's cause when the stream failed because
// the run stopped) or retry. Usage is only streamed when the request sets
// StreamOptions.IncludeUsage.
//
// The completion's usage is the last one a chunk reported, not the sum of
// the chunks' (the SDK's accumulator adds them up): OpenAI reports it once,
// on the last chunk, but some OpenAI-compatible servers (vLLM's
// continuous_usage_stats) repeat the running totals on every chunk, which a
// sum would count many times over. A chunk the accumulator rejects (an id
// other than the completion's, as some local servers send, or an index out
// of range) is an error that names it: the completion returned with it
// lacks that chunk's content.
func Accumulate(stream *ssestream.Stream[openai.ChatCompletionChunk], onChunk func(openai.ChatCompletionChunk)) (openai.ChatCompletion, error) {
	if stream == nil {
		return openai.ChatCompletion{}, errNilStream
	}
	defer stream.Close()
	var (
		acc      openai.ChatCompletionAccumulator
		usage    openai.CompletionUsage
		rejected error
	)
	for n := 1; stream.Next(); n++ {
		chunk := stream.Current()
		id := acc.ID
		if !acc.AddChunk(chunk) && rejected == nil {
			rejected = rejectedChunk(n, chunk.ID, id)
		}
		if u := chunk.Usage; u.PromptTokens != 0 || u.CompletionTokens != 0 || u.TotalTokens != 0 {
			usage = u
		}
		if onChunk != nil {
			onChunk(chunk)
		}
	}
	acc.Usage = usage
	if rejected == nil {
		return acc.ChatCompletion, stream.Err() // the stream's own error, unwrapped
	}
	return acc.ChatCompletion, errors.Join(stream.Err(), rejected)
}

// rejectedChunk is the error of the nth chunk of a stream, which the SDK's
// accumulator did not take; id is the completion's id before it.
func rejectedChunk(n int, chunkID, id string) error {
	if id != "" && chunkID != id {
		return fmt.Errorf("openaistop: chunk %d was not accumulated: its id %q is not the completion's %q (the completion is incomplete)", n, chunkID, id)
	}
	return fmt.Errorf("openaistop: chunk %d was not accumulated: a choice or tool call index is out of range, or a size limit was reached (the completion is incomplete)", n)
}

var errNilStream = errors.New("openaistop: nil stream")
