package openaistop_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	openaistop "github.com/agentstop/agentstop/adapters/openai"
	"github.com/agentstop/agentstop/internal/adaptertest"
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
	var item responses.ResponseOutputItemUnion
	if err := json.Unmarshal([]byte(`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"search","arguments":"{}"}`), &item); err != nil {
		t.Fatal(err)
	}
	var r responses.Response
	if err := json.Unmarshal([]byte(`{"model":"m","status":"completed","output":[]}`), &r); err != nil {
		t.Fatal(err)
	}
	for name, observe := range map[string]func() bool{
		"ObserveResponse":           func() bool { _, stop := openaistop.ObserveResponse(nil, &r); return stop },
		"ObserveResponseToolResult": func() bool { _, stop := openaistop.ObserveResponseToolResult(nil, item, "3 hits", nil); return stop },
		"Observe":                   func() bool { _, stop := openaistop.Observe(nil, &c); return stop },
		"ObserveToolResult":         func() bool { _, stop := openaistop.ObserveToolResult(nil, call, "3 hits", nil); return stop },
		"ObserveError":              func() bool { _, stop := openaistop.ObserveError(nil, errors.New("boom")); return stop },
	} {
		if observe() {
			t.Errorf("%s with a nil run says stop", name)
		}
	}
}

// TestObserveNilResponse: a nil response is not reported; the run goes on.
func TestObserveNilResponse(t *testing.T) {
	stage, rec := adaptertest.NewStage(t, "openai_test", "max_iterations: 1")
	_, run := stage.Start(t.Context())
	if _, stop := openaistop.ObserveResponse(run, nil); stop {
		t.Error("a nil response says stop")
	}
	if _, stop := openaistop.Observe(run, nil); stop {
		t.Error("a nil completion says stop")
	}
	run.Finish(nil)
	if kinds := rec.Kinds(); len(kinds) != 0 {
		t.Errorf("events %v, want none", kinds)
	}
}
