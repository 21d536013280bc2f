package importer

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// attrCode names the span attributes the otlp mapping reads; every other
// attribute is passed over without being decoded (the bulk of a GenAI
// span's bytes are prompts and completions it does not need).
type attrCode uint8

const (
	attrNone attrCode = iota
	attrOperation
	attrAgentName   // gen_ai.agent.name
	attrOIAgentName // agent.name (OpenInference)
	attrRequestModel
	attrResponseModel
	attrLLMModel // llm.model_name (OpenInference)
	attrInputTokens
	attrOutputTokens
	attrPromptTokens     // gen_ai.usage.prompt_tokens (before semconv 1.27)
	attrCompletionTokens // gen_ai.usage.completion_tokens
	attrOIPromptTokens   // llm.token_count.prompt
	attrOICompletionTokens
	attrFinishReasons // gen_ai.response.finish_reasons, llm.finish_reason, gen_ai.completion.N.finish_reason
	attrOutputToolCall
	attrToolName
	attrToolCallID
	attrToolArgs
	attrToolResult
	attrOIKind
	attrOIToolName
	attrOIToolCallID
	attrOIToolParameters
	attrInputValue
	attrOutputValue
	attrTLKind // traceloop.span.kind (OpenLLMetry)
	attrTLName
	attrTLInput
	attrTLOutput
	attrLLMRequestType // llm.request.type (OpenLLMetry)
	attrErrorType
	attrHTTP
	attrDB
	attrRPC
	attrMessaging
)

// attrCodeOf returns the code of an attribute key; the switch on a
// converted []byte does not allocate.
func attrCodeOf(key []byte) attrCode {
	switch string(key) {
	case "gen_ai.operation.name":
		return attrOperation
	case "gen_ai.agent.name":
		return attrAgentName
	case "agent.name":
		return attrOIAgentName
	case "gen_ai.request.model":
		return attrRequestModel
	case "gen_ai.response.model":
		return attrResponseModel
	case "llm.model_name":
		return attrLLMModel
	case "gen_ai.usage.input_tokens":
		return attrInputTokens
	case "gen_ai.usage.output_tokens":
		return attrOutputTokens
	case "gen_ai.usage.prompt_tokens":
		return attrPromptTokens
	case "gen_ai.usage.completion_tokens":
		return attrCompletionTokens
	case "llm.token_count.prompt":
		return attrOIPromptTokens
	case "llm.token_count.completion":
		return attrOICompletionTokens
	case "gen_ai.response.finish_reasons", "llm.finish_reason":
		return attrFinishReasons
	case "gen_ai.tool.name":
		return attrToolName
	case "gen_ai.tool.call.id":
		return attrToolCallID
	case "gen_ai.tool.call.arguments":
		return attrToolArgs
	case "gen_ai.tool.call.result":
		return attrToolResult
	case "openinference.span.kind":
		return attrOIKind
	case "tool.name":
		return attrOIToolName
	case "tool_call.id", "tool.id":
		return attrOIToolCallID
	case "tool.parameters":
		return attrOIToolParameters
	case "input.value":
		return attrInputValue
	case "output.value":
		return attrOutputValue
	case "traceloop.span.kind":
		return attrTLKind
	case "traceloop.entity.name":
		return attrTLName
	case "traceloop.entity.input":
		return attrTLInput
	case "traceloop.entity.output":
		return attrTLOutput
	case "llm.request.type":
		return attrLLMRequestType
	case "error.type":
		return attrErrorType
	case "http.request.method", "http.method", "url.full", "http.url", "http.route":
		return attrHTTP
	case "db.system", "db.system.name":
		return attrDB
	case "rpc.system":
		return attrRPC
	case "messaging.system":
		return attrMessaging
	}
	return prefixedAttrCode(key)
}

// prefixedAttrCode recognises the indexed attributes that say a model
// turn asked for a tool: OpenInference's
// llm.output_messages.N.message.tool_calls.…, OpenLLMetry's (and
// LiteLLM's) gen_ai.completion.N.tool_calls.…,
// gen_ai.completion.N.function_call.… and
// gen_ai.completion.N.finish_reason.
func prefixedAttrCode(key []byte) attrCode {
	toolCalls := bytes.Contains(key, []byte(".tool_calls.")) || bytes.Contains(key, []byte(".function_call."))
	switch {
	case toolCalls && (bytes.HasPrefix(key, []byte("llm.output_messages.")) || bytes.HasPrefix(key, []byte("gen_ai.completion."))):
		return attrOutputToolCall
	case bytes.HasPrefix(key, []byte("gen_ai.completion.")) && bytes.HasSuffix(key, []byte(".finish_reason")):
		return attrFinishReasons
	}
	return attrNone
}

// attrValue is one attribute value as both encodings give it.
type attrValue struct {
	str    string
	hasStr bool
	num    string   // an integer, a double or a bool, as written
	strs   []string // an array's string values
}

// Usage attribute slots in spanAttrs.tokens.
const (
	tokGenAIIn = iota
	tokGenAIOut
	tokOldIn
	tokOldOut
	tokOIIn
	tokOIOut
	tokSlots
)

// spanAttrs is what the mapping reads from a span's attributes.
type spanAttrs struct {
	op, agentName, oiAgentName               string
	requestModel, responseModel, llmModel    string
	tokens                                   [tokSlots]int64
	hasToken                                 [tokSlots]bool
	requestsTool                             bool
	toolName, toolCallID, toolArgs, toolRes  string
	oiKind, oiToolName, oiToolCallID, oiTool string // oiTool: tool.parameters
	inputValue, outputValue                  string
	tlKind, tlName, tlInput, tlOutput        string
	llmRequestType, errorType                string
	category                                 string // "http", "database", …: what a span left out is
}

// set records one attribute; an attribute of the wrong type is an error
// only where the mapping needs a number.
func (a *spanAttrs) set(code attrCode, key []byte, v *attrValue) error {
	switch code {
	case attrInputTokens, attrOutputTokens, attrPromptTokens, attrCompletionTokens, attrOIPromptTokens, attrOICompletionTokens:
		n, err := v.tokens()
		if err != nil {
			return fmt.Errorf("attribute %s: %v", shown(key), err)
		}
		slot := int(code - attrInputTokens)
		a.tokens[slot], a.hasToken[slot] = n, true
	case attrFinishReasons:
		a.requestsTool = a.requestsTool || asksForTool(v.str)
		for _, s := range v.strs {
			a.requestsTool = a.requestsTool || asksForTool(s)
		}
	case attrOutputToolCall:
		a.requestsTool = true
	case attrHTTP:
		a.category = "http"
	case attrDB:
		a.category = "database"
	case attrRPC:
		a.category = "rpc"
	case attrMessaging:
		a.category = "messaging"
	default:
		if p := a.stringField(code); p != nil {
			*p = v.text()
		}
	}
	return nil
}

func (a *spanAttrs) stringField(code attrCode) *string {
	switch code {
	case attrOperation:
		return &a.op
	case attrAgentName:
		return &a.agentName
	case attrOIAgentName:
		return &a.oiAgentName
	case attrRequestModel:
		return &a.requestModel
	case attrResponseModel:
		return &a.responseModel
	case attrLLMModel:
		return &a.llmModel
	case attrToolName:
		return &a.toolName
	case attrToolCallID:
		return &a.toolCallID
	case attrToolArgs:
		return &a.toolArgs
	case attrToolResult:
		return &a.toolRes
	case attrOIKind:
		return &a.oiKind
	case attrOIToolName:
		return &a.oiToolName
	case attrOIToolCallID:
		return &a.oiToolCallID
	case attrOIToolParameters:
		return &a.oiTool
	case attrInputValue:
		return &a.inputValue
	case attrOutputValue:
		return &a.outputValue
	case attrTLKind:
		return &a.tlKind
	case attrTLName:
		return &a.tlName
	case attrTLInput:
		return &a.tlInput
	case attrTLOutput:
		return &a.tlOutput
	case attrLLMRequestType:
		return &a.llmRequestType
	case attrErrorType:
		return &a.errorType
	}
	return nil
}

// shown is text from the input as an error shows it: as it is, or quoted
// when it holds control characters (an error is one line).
func shown(b []byte) string {
	if bytes.ContainsFunc(b, func(r rune) bool { return r < ' ' || r == 0x7f || r == utf8.RuneError }) {
		return strconv.Quote(string(b))
	}
	return string(b)
}

// asksForTool reports whether a finish reason says the model asked for a
// tool: tool_calls (OpenAI), tool_use (Anthropic), tool_call (the GenAI
// conventions), function_call (OpenAI's older form).
func asksForTool(reason string) bool {
	return strings.Contains(reason, "tool") || strings.Contains(reason, "function_call")
}

// text is a value as a string: a string as it is, a number as written.
func (v *attrValue) text() string {
	if v.hasStr {
		return v.str
	}
	return v.num
}

// tokens reads a token count: an integer, or a double or a string that
// holds a whole number (instrumentations write all three).
func (v *attrValue) tokens() (int64, error) {
	s := v.num
	if v.hasStr {
		s = v.str
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("a negative token count, %d", n)
		}
		return n, nil
	}
	if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil && f == math.Trunc(f) && f >= 0 && f < 1<<53 {
		return int64(f), nil
	}
	if s == "" {
		s = "no number"
	}
	return 0, fmt.Errorf("want a whole number of tokens, got %q", s)
}
