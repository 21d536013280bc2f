package langchaingo

import (
	"encoding/json"
	"reflect"

	"github.com/tmc/langchaingo/llms"

	"github.com/agentstop/agentstop/termination"
)

// usageKeys are the GenerationInfo keys providers put a response's token
// counts under, input then output.
var usageKeys = [...][2]string{
	{"PromptTokens", "CompletionTokens"}, // openai, ollama, maritaca, googleai (standardized)
	{"InputTokens", "OutputTokens"},      // anthropic
	{"input_tokens", "output_tokens"},    // googleai, vertex, bedrock
	{"prompt_tokens", "completion_tokens"},
}

// Usage returns the tokens a model response reports in its choices'
// GenerationInfo: the first choice that carries them, since providers repeat
// the response's usage in every choice. It returns zero usage when no choice
// carries a known key.
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
			in, okIn := count(gi[k[0]])
			out, okOut := count(gi[k[1]])
			if okIn || okOut {
				return termination.Usage{InputTokens: in, OutputTokens: out}
			}
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
