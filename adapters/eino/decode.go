package eino

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/agentstop/agentstop/termination"
)

// Decode turns one agent event whose message, if any, is not streaming into
// termination events, in order, passing each to emit:
//
//   - an assistant message that requests tools: a message event (its text and
//     usage), then one tool_call event per requested call (its ID as call
//     id);
//   - an assistant message that requests no tool: a final event (a message
//     event when the agent is not one of [WithFinalAgents]);
//   - an assistant message cut off at the token limit or blocked (its
//     ResponseMeta.FinishReason is length, max_tokens, content_filter,
//     safety or refusal, in any case): a message event, its tool calls,
//     then an error event that says why;
//   - a tool message: a tool_result event (its ToolCallID as call id);
//   - the event's action: TransferToAgent is a handoff, Exit and BreakLoop
//     are a stop (Exit's text is the exit tool's result);
//   - the event's Err: an error event.
//
// Streaming messages are decoded by [Forward], which tees the stream; Decode
// ignores them (it never reads a stream). Decode is the building block for
// callers who forward events themselves, e.g. with middleware.ForwardEach.
func Decode(ev *adk.AgentEvent, emit func(termination.Event), opts ...Option) {
	if ev == nil || emit == nil {
		return
	}
	cfg := newConfig(opts)
	var msg *schema.Message
	var mv *adk.MessageVariant
	if ev.Output != nil && ev.Output.MessageOutput != nil {
		mv = ev.Output.MessageOutput
		if !mv.IsStreaming {
			msg = mv.Message
		}
	}
	cfg.decode(ev, mv, msg, emit)
}

// decode is Decode with the message already read (a teed stream
// concatenated), so both paths map the same way.
func (c *config) decode(ev *adk.AgentEvent, mv *adk.MessageVariant, msg *schema.Message, emit func(termination.Event)) {
	src := ev.AgentName
	if src == "" {
		src = c.source
	}
	if mv != nil && msg != nil {
		role := mv.Role
		if role == "" {
			role = msg.Role
		}
		switch role {
		case schema.Tool:
			name := mv.ToolName
			if name == "" {
				name = msg.ToolName
			}
			emit(termination.Event{Kind: termination.KindToolResult, Source: src, Tool: name, Text: msg.Content, CallID: msg.ToolCallID})
		default:
			c.decodeModelMessage(src, msg, nil, emit)
		}
	}
	if a := ev.Action; a != nil {
		switch {
		case a.TransferToAgent != nil:
			emit(termination.Event{Kind: termination.KindHandoff, Source: src, Target: a.TransferToAgent.DestAgentName})
		case a.Exit:
			text := ""
			if msg != nil && (mv.Role == schema.Tool || msg.Role == schema.Tool) {
				text = msg.Content
			}
			emit(termination.Event{Kind: termination.KindStop, Source: src, Text: text})
		case a.BreakLoop != nil:
			from := a.BreakLoop.From
			if from == "" {
				from = src
			}
			emit(termination.Event{Kind: termination.KindStop, Source: from, Text: "break loop"})
		}
	}
	if ev.Err != nil {
		emit(errorEvent(src, ev.Err))
	}
}

// decodeModelMessage maps one model response: message + tool calls, or final.
// cbUsage is the usage a callback reported beside the message, used only
// when the message carries none.
func (c *config) decodeModelMessage(src string, msg *schema.Message, cbUsage *model.TokenUsage, emit func(termination.Event)) {
	ev := termination.Event{Kind: termination.KindFinal, Source: src, Text: msg.Content, Usage: usageOf(msg, cbUsage), Model: c.model}
	problem := unfinished(msg)
	if len(msg.ToolCalls) > 0 || !c.isFinalAgent(src) || problem != "" {
		ev.Kind = termination.KindMessage
	}
	emit(ev)
	for i := range msg.ToolCalls {
		tc := &msg.ToolCalls[i]
		emit(termination.Event{Kind: termination.KindToolCall, Source: src, Tool: tc.Function.Name, Args: argsJSON(tc.Function.Arguments), CallID: tc.ID})
	}
	if problem != "" {
		emit(termination.Event{Kind: termination.KindError, Source: src, Err: problem})
	}
}

// unfinished says why a model response is not an answer, from the finish
// reason eino's chat models pass on from the provider ("" when it is one):
// cut off at the token limit (OpenAI's, ARK's and Qwen's "length",
// Claude's "max_tokens", Gemini's "MAX_TOKENS") or blocked (OpenAI's
// "content_filter", Gemini's "SAFETY", Claude's "refusal").
func unfinished(msg *schema.Message) string {
	if msg.ResponseMeta == nil {
		return ""
	}
	r := msg.ResponseMeta.FinishReason
	switch strings.ToLower(r) {
	case "length", "max_tokens":
		return "finish_reason " + r + ": the response was cut off at the token limit"
	case "content_filter", "safety", "refusal":
		return "finish_reason " + r + ": the response was blocked"
	}
	return ""
}

// usageOf is the usage of one model response: ResponseMeta.Usage, else the
// callback's TokenUsage. Never both, so it is counted once.
func usageOf(msg *schema.Message, cbUsage *model.TokenUsage) termination.Usage {
	if msg != nil && msg.ResponseMeta != nil && msg.ResponseMeta.Usage != nil {
		u := msg.ResponseMeta.Usage
		return genAIUsage(u.PromptTokens, u.CompletionTokens, u.CompletionTokensDetails.ReasoningTokens, u.TotalTokens)
	}
	if cbUsage != nil {
		u := cbUsage
		return genAIUsage(u.PromptTokens, u.CompletionTokens, u.CompletionTokensDetails.ReasoningTokens, u.TotalTokens)
	}
	return termination.Usage{}
}

// genAIUsage counts a response's tokens as the OpenTelemetry GenAI
// conventions do: input includes cached input tokens, output includes
// reasoning tokens. Eino's PromptTokens include every input token, the
// cached ones too (PromptTokenDetails.CachedTokens is a part of them).
// Its chat models disagree on reasoning: OpenAI's (and ARK's, Qwen's)
// CompletionTokens include the ReasoningTokens that the details repeat,
// while Gemini's are the candidates only, with the thoughts apart and in
// TotalTokens. The reasoning is added when the total shows it is not in
// CompletionTokens.
func genAIUsage(prompt, completion, reasoning, total int) termination.Usage {
	in, out := int64(prompt), int64(completion)
	if r := int64(reasoning); r > 0 && int64(total) >= in+out+r {
		out += r
	}
	return termination.Usage{InputTokens: in, OutputTokens: out}
}

// argsJSON returns tool arguments as JSON: the arguments themselves when
// they are valid JSON (the usual case), else the string as a JSON string.
func argsJSON(args string) json.RawMessage {
	if args == "" {
		return nil
	}
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil
	}
	return b
}

func errorEvent(src string, err error) termination.Event {
	return termination.Event{Kind: termination.KindError, Source: src, Err: err.Error()}
}

// ErrMaxIterations is how [Forward] and [Handler.Finish] report that a
// ChatModelAgent ended with adk.ErrExceedMaxIterations, the framework's own
// iteration limit. The error they finish the run with matches both
// ErrMaxIterations and adk.ErrExceedMaxIterations with errors.Is, keeps the
// framework's message, and holds a termination.MaxIterationsReached
// (errors.As) whose Limit is the number of model turns the agent was
// allowed and ran, and whose Count is one more: the turn it refused.
var ErrMaxIterations = errors.New("eino: agent exceeded its MaxIterations")

// limitError is the framework's max-iterations error with its typed cause.
type limitError struct {
	err   error
	cause termination.MaxIterationsReached
}

func (e *limitError) Error() string   { return e.err.Error() }
func (e *limitError) Unwrap() []error { return []error{e.err, ErrMaxIterations, e.cause} }

// frameworkLimit wraps err when it is the framework's max-iterations error.
func frameworkLimit(err error, turns int64) error {
	if err == nil || !errors.Is(err, adk.ErrExceedMaxIterations) {
		return err
	}
	return &limitError{err: err, cause: termination.MaxIterationsReached{Limit: int(turns), Count: int(turns) + 1}}
}
