package anthropicstop

import (
	"encoding/json"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentstop/agentstop/termination"
)

// The error texts of turns that are not answers (see the package doc).
const (
	errMaxTokens     = "stop_reason max_tokens: the response was cut off at the token limit"
	errContextWindow = "stop_reason model_context_window_exceeded: the response was cut off at the context window"
	errRefusal       = "stop_reason refusal: the model refused"
)

// Events turns one message into events and passes them to emit, in order: a
// message or final event with the message's usage, a tool_call event per
// tool call, and an error event when the turn is not an answer (max_tokens,
// model_context_window_exceeded, refusal). The package doc has the full
// mapping. A nil message emits nothing.
//
// Events is the decode function for middleware.ForwardEach and
// middleware.ForwardSeqEach over a loop that yields messages.
func Events(m *anthropic.Message, emit func(termination.Event)) {
	if m == nil {
		return
	}
	u := m.Usage
	t := newTurn(m.Model, m.StopReason, m.StopDetails.Explanation, m.StopDetails.Category,
		usage(u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens))
	decode(t, m.Content, func(b *anthropic.ContentBlockUnion) block {
		return block{typ: b.Type, text: b.Text, name: b.Name, id: b.ID, input: b.Input}
	}, emit)
}

// BetaEvents is [Events] for a message of the beta API, the one the SDK's
// tool runner returns.
func BetaEvents(m *anthropic.BetaMessage, emit func(termination.Event)) {
	if m == nil {
		return
	}
	t := newTurn(m.Model, m.StopReason, m.StopDetails.Explanation, m.StopDetails.Category, betaUsage(&m.Usage))
	decode(t, m.Content, func(b *anthropic.BetaContentBlockUnion) block {
		return block{typ: b.Type, text: b.Text, name: b.Name, id: b.ID, input: b.Input}
	}, emit)
}

// ToolResultEvent returns the tool_result event of one tool_use block:
// output as its text, err's text as its Err when the tool failed, and the
// block's id as its call id.
func ToolResultEvent(call anthropic.ToolUseBlock, output string, err error) termination.Event {
	ev := termination.Event{Kind: termination.KindToolResult, Tool: call.Name, Text: output, CallID: call.ID}
	if err != nil {
		ev.Err = err.Error()
	}
	return ev
}

// usage is the tokens of one response. Anthropic's input_tokens leaves out
// the prompt tokens written to or read from the prompt cache; they are
// input the model processed (and is billed for), so they are counted in.
func usage(input, cacheWrite, cacheRead, output int64) termination.Usage {
	return termination.Usage{InputTokens: input + cacheWrite + cacheRead, OutputTokens: output}
}

// betaUsage is [usage] of a beta message, plus the tokens of its
// server-side compactions: the beta API reports those only in
// usage.iterations (a compaction entry's tokens are not part of the
// top-level fields), although the request spent them. The other entries
// (the message's sampling iterations) break the top-level counts down and
// are not added again.
func betaUsage(u *anthropic.BetaUsage) termination.Usage {
	total := usage(u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens)
	for i := range u.Iterations {
		if it := &u.Iterations[i]; it.Type == "compaction" {
			c := usage(it.InputTokens, it.CacheCreationInputTokens, it.CacheReadInputTokens, it.OutputTokens)
			total.InputTokens += c.InputTokens
			total.OutputTokens += c.OutputTokens
		}
	}
	return total
}

// newTurn returns what decode needs of a Message or a BetaMessage, whose
// stop reasons and refusal categories are string types of their own.
func newTurn[Stop, Category ~string](model anthropic.Model, stop Stop, explanation string, category Category, u termination.Usage) turn {
	return turn{model: string(model), stop: string(stop), refusal: refusal(explanation, string(category)), usage: u}
}

func refusal(explanation, category string) string {
	switch {
	case explanation != "":
		return errRefusal + ": " + explanation
	case category != "":
		return errRefusal + " (" + category + ")"
	}
	return errRefusal
}

// turn and block are what Events needs of a Message or a BetaMessage.
type turn struct {
	model, stop, refusal string
	usage                termination.Usage
}

type block struct {
	typ, text, name, id string
	input               json.RawMessage
}

func decode[B any](t turn, content []B, get func(*B) block, emit func(termination.Event)) {
	ev := termination.Event{Kind: termination.KindFinal, Source: t.model, Model: t.model, Usage: t.usage}
	var problem string
	switch t.stop {
	case "tool_use", "pause_turn", "compaction":
		// The loop goes on: tools to run, or a turn the server resumes.
		ev.Kind = termination.KindMessage
	case "max_tokens":
		problem = errMaxTokens
	case "model_context_window_exceeded":
		problem = errContextWindow
	case "refusal":
		problem = t.refusal
	}
	if problem != "" {
		ev.Kind = termination.KindMessage
	}
	ev.Text = joinText(content, get)
	emit(ev)
	for i := range content {
		b := get(&content[i])
		switch {
		case b.typ == "tool_use" && t.stop == "tool_use",
			// Server and MCP tools ran on Anthropic's side, whatever the
			// turn's stop reason.
			b.typ == "server_tool_use", b.typ == "mcp_tool_use":
			emit(termination.Event{Kind: termination.KindToolCall, Tool: b.name, Args: args(b.input), CallID: b.id})
		}
	}
	if problem != "" {
		emit(termination.Event{Kind: termination.KindError, Source: t.model, Err: problem})
	}
}

// args returns a tool call's input, or nothing when it is empty or not JSON
// (a streamed input cut off by max_tokens is reported as a JSON string).
func args(in json.RawMessage) json.RawMessage {
	if len(in) == 0 {
		return nil
	}
	if json.Valid(in) {
		return in
	}
	b, _ := json.Marshal(string(in))
	return b
}

// joinText is the text of a message's text blocks, one per line.
func joinText[B any](content []B, get func(*B) block) string {
	var text strings.Builder
	for i := range content {
		if b := get(&content[i]); b.typ == "text" && b.text != "" {
			if text.Len() > 0 {
				text.WriteByte('\n')
			}
			text.WriteString(b.text)
		}
	}
	return text.String()
}

// cutEvents are the events of a turn that a stream error cut short: a
// message event with its text and usage, when the stream delivered any of
// it (begun), then an error event with err's text. Its tool calls are not
// reported: the loop does not run them, and their input may be cut off.
func cutEvents[B any](t turn, content []B, get func(*B) block, begun bool, err error) []termination.Event {
	var evs []termination.Event
	if begun {
		evs = append(evs, termination.Event{Kind: termination.KindMessage, Source: t.model, Model: t.model, Usage: t.usage, Text: joinText(content, get)})
	}
	return append(evs, termination.Event{Kind: termination.KindError, Source: t.model, Err: err.Error()})
}
