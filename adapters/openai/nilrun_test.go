package openaistop_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/openai/openai-go/v3"

	openaistop "github.com/agentstop/agentstop/adapters/openai"
)

// TestNilRun: every Observe function reports nothing to a nil run and says
// go on, as Observe does, instead of panicking in the middle of a loop.
func TestNilRun(t *testing.T) {
	var call openai.ChatCompletionMessageToolCallUnion
	if err := json.Unmarshal([]byte(`{"id":"1","type":"function","function":{"name":"search","arguments":"{}"}}`), &call); err != nil {
		t.Fatal(err)
	}
	var c openai.ChatCompletion
	if err := json.Unmarshal([]byte(`{"model":"m","choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"done"}}]}`), &c); err != nil {
		t.Fatal(err)
	}
	for name, observe := range map[string]func() bool{
		"Observe":           func() bool { _, stop := openaistop.Observe(nil, &c); return stop },
		"ObserveToolResult": func() bool { _, stop := openaistop.ObserveToolResult(nil, call, "3 hits", nil); return stop },
		"ObserveError":      func() bool { _, stop := openaistop.ObserveError(nil, errors.New("boom")); return stop },
	} {
		if observe() {
			t.Errorf("%s with a nil run says stop", name)
		}
	}
}
