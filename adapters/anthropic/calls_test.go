package anthropicstop

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentstop/agentstop/middleware"
)

// record keeps the calls the tool runner answers: none unless the turn
// stopped for tool_use, only tool_use blocks, and only those after the last
// fallback block; take hands each id out once, by name and input.
func TestOpenCallsRecord(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		take      [][2]string // name, input
		want      []string    // the ids take returns
	}{
		{"tool_use", `{"stop_reason":"tool_use","content":[
			{"type":"text","text":"x"},
			{"type":"tool_use","id":"a","name":"echo","input":{"q":"1","b":2}},
			{"type":"server_tool_use","id":"s","name":"web_search","input":{}},
			{"type":"tool_use","id":"b","name":"echo","input":{"q":"1","b":2}}]}`,
			// The runner marshals the input it decoded: keys sorted.
			[][2]string{{"echo", `{"b":2,"q":"1"}`}, {"web_search", `{}`}, {"echo", `{"b":2,"q":"1"}`}, {"echo", `{"b":2,"q":"1"}`}},
			[]string{"a", "", "b", ""}},
		{"other input or name", `{"stop_reason":"tool_use","content":[
			{"type":"tool_use","id":"a","name":"echo","input":{"q":"1"}}]}`,
			[][2]string{{"echo", `{"q":"2"}`}, {"search", `{"q":"1"}`}, {"echo", `{"q":"1"}`}},
			[]string{"", "", "a"}},
		{"end_turn", `{"stop_reason":"end_turn","content":[
			{"type":"tool_use","id":"a","name":"echo","input":{}}]}`,
			[][2]string{{"echo", `{}`}}, []string{""}},
		{"after fallback", `{"stop_reason":"tool_use","content":[
			{"type":"tool_use","id":"a","name":"echo","input":{}},
			{"type":"fallback"},
			{"type":"tool_use","id":"b","name":"echo","input":{}}]}`,
			[][2]string{{"echo", `{}`}, {"echo", `{}`}}, []string{"b", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m anthropic.BetaMessage
			if err := json.Unmarshal([]byte(tc.msg), &m); err != nil {
				t.Fatal(err)
			}
			o := &openCalls{calls: []openCall{{id: "stale", name: "echo", input: []byte(`{}`)}}}
			o.record(&m)
			for i, c := range tc.take {
				if got := o.take(c[0], []byte(c[1])); got != tc.want[i] {
					t.Errorf("take(%s, %s) #%d = %q, want %q", c[0], c[1], i, got, tc.want[i])
				}
			}
		})
	}
	var nilCalls *openCalls
	nilCalls.record(&anthropic.BetaMessage{})
	if id := nilCalls.take("echo", nil); id != "" {
		t.Errorf("take on nil = %q", id)
	}
}

// A run's open calls are dropped once the run has finished.
func TestOpenCallsDroppedWhenRunEnds(t *testing.T) {
	stage, err := middleware.New("calls_dropped")
	if err != nil {
		t.Fatal(err)
	}
	_, run := stage.Start(t.Context())
	Tools(run)
	if _, ok := runCalls.Load(run); !ok {
		t.Fatal("Tools kept no open calls for the run")
	}
	if callsFor(run, false) != callsFor(run, true) {
		t.Error("two open calls for one run")
	}
	run.Finish(nil)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := runCalls.Load(run); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run's open calls are kept after it finished")
		}
		time.Sleep(time.Millisecond)
	}
	if callsFor(run, false) != nil {
		t.Error("All of a finished run found open calls")
	}
}
