package replay_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

func TestReplayEventsEqualsReplay(t *testing.T) {
	log := `{"kind":"input","text":"task"}
{"kind":"message","usage":{"input_tokens":10,"output_tokens":5}}
{"kind":"tool_call","tool":"search","args":{"q":"x"}}
{"kind":"tool_result","tool":"search","text":"r"}
{"kind":"message","usage":{"input_tokens":10,"output_tokens":5}}
{"kind":"tool_call","tool":"search","args":{"q":"x"}}
{"kind":"message"}
{"kind":"final","text":"done"}
`
	var events []termination.Event
	dec := codec.NewDecoder(bytes.NewReader([]byte(log)))
	for {
		ev, err := dec.Next()
		if err != nil {
			break
		}
		events = append(events, ev)
	}
	for _, policy := range []string{
		"", "max_iterations: 1", "max_tool_calls: 1", "stall: {repeats: 2}",
		"token_budget: {total: 20}", "text_mention: {text: done}",
	} {
		p := termination.MustParsePolicy(policy)
		want, err := replay.Log(p.Condition(), bytes.NewReader([]byte(log)))
		if err != nil {
			t.Fatal(err)
		}
		got := replay.Events(p.Condition(), events)
		wj, _ := json.Marshal(want)
		gj, _ := json.Marshal(got)
		if !bytes.Equal(wj, gj) {
			t.Errorf("policy %q:\nReplay       %s\nReplayEvents %s", policy, wj, gj)
		}
	}
}

func TestPolicyConditions(t *testing.T) {
	tests := []struct {
		policy string
		want   int
	}{
		{"", 0},
		{"max_iterations: 3", 1},
		{"max_iterations: 3\nstall: {repeats: 2}\ntext_mention: {text: X}", 3},
		{"all: [{max_iterations: 3}, {max_tool_calls: 2}]", 1},
	}
	for _, tt := range tests {
		got := termination.MustParsePolicy(tt.policy).Conditions()
		if len(got) != tt.want {
			t.Errorf("policy %q: %d conditions %v, want %d", tt.policy, len(got), got, tt.want)
		}
	}
}
