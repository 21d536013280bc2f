package langchaingo

import (
	"encoding/json"
	"reflect"

	"github.com/tmc/langchaingo/llms"

	"github.com/agentstop/agentstop/termination"
)

// usageKeys are the GenerationInfo keys providers put a response's token
// counts under: input, output, the total ("" when the provider gives none)
// and the input tokens a provider reports apart from input (Anthropic's
// prompt cache).
var usageKeys = [...]struct {
	in, out, total string
	moreIn         []string
}{
	{"PromptTokens", "CompletionTokens", "TotalTokens", nil},                                          // openai, ollama, maritaca, googleai (standardized)
	{"InputTokens", "OutputTokens", "", []string{"CacheCreationInputTokens", "CacheReadInputTokens"}}, // anthropic
	{"input_tokens", "output_tokens", "total_tokens", nil},                                            // googleai, vertex, bedrock
	{"prompt_tokens", "completion_tokens", "total_tokens", nil},
}

// Usage returns the tokens a model response reports in its choices'
// GenerationInfo: the first choice that carries them, since providers repeat
// the response's usage in every choice. It returns zero usage when no choice
// carries a known key.
//
// Tokens are counted as the OpenTelemetry GenAI conventions count them:
// input includes cached input tokens, output includes reasoning tokens.
// Anthropic reports its prompt-cache tokens apart (CacheCreationInputTokens,
// CacheReadInputTokens): they are added to input. OpenAI's prompt and
// completion tokens already include cached and reasoning tokens. Google AI
// reports Gemini's thinking tokens only in its total: when a total exceeds
// input + output, the rest is counted as output (the thoughts, plus the
// prompt of a built-in tool when one ran), so that input + output is the
// provider's total.
func Usage(res *llms.ContentResponse) termination.Usage {
	if res == nil {
		return termination.Usage{}
	}
	for _, c := range res.Choices {
		if c == nil || c.GenerationInfo == nil {
			continue
		}
		gi := c.GenerationInfo
		for _, k := range usageKeys {
			in, okIn := count(gi[k.in])
			out, okOut := count(gi[k.out])
			if !okIn && !okOut {
				continue
			}
			for _, key := range k.moreIn {
				n, _ := count(gi[key])
				in += max(n, 0)
			}
			if total, ok := count(gi[k.total]); ok && k.total != "" && total > in+out {
				out = total - in
			}
			return termination.Usage{InputTokens: in, OutputTokens: out}
		}
		if u, ok := usageStruct(gi["usage"]); ok { // mistral
			return u
		}
	}
	return termination.Usage{}
}

// count converts a GenerationInfo number.
func count(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint32:
		return int64(n), true
	case uint64:
		return int64(n), true
	case float64:
		return int64(n), true
	case float32:
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

// usageStruct reads a usage struct with PromptTokens and CompletionTokens
// fields.
func usageStruct(v any) (termination.Usage, bool) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return termination.Usage{}, false
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return termination.Usage{}, false
	}
	in, out := rv.FieldByName("PromptTokens"), rv.FieldByName("CompletionTokens")
	if !in.IsValid() || !out.IsValid() || !in.CanInt() || !out.CanInt() {
		return termination.Usage{}, false
	}
	return termination.Usage{InputTokens: in.Int(), OutputTokens: out.Int()}, true
}
