package langchaingo_test

import (
	"context"
	"testing"

	"github.com/tmc/langchaingo/schema"

	"github.com/agentstop/agentstop/adapters/langchaingo"
	"github.com/agentstop/agentstop/termination"
)

// TestToolCallArgs: a tool_call's args are the input the executor hands the
// tool. A langchaingo tool takes a string: JSON arguments (an object or an
// array) are reported as they are, escapes kept; any other input — a MRKL
// agent's "Action Input: 42", or the "__arg1" value the OpenAI functions
// agent unwraps from {"__arg1":"true"} — is the string the tool gets, not
// the JSON number, boolean or null it happens to spell. The executor cuts a
// trailing "\nObservation:" off the input before the tool sees it.
func TestToolCallArgs(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{"object", `{"q":"caf\u00e9 \"x\""}`, `{"q":"caf\u00e9 \"x\""}`},
		{"array", `[1, 2]`, `[1, 2]`},
		{"text", `Paris`, `"Paris"`},
		{"number text", `42`, `"42"`},
		{"boolean text", `true`, `"true"`},
		{"null text", `null`, `"null"`},
		{"quoted text", `"Paris"`, `"\"Paris\""`},
		{"observation suffix", "{\"q\":\"x\"}\nObservation:", `{"q":"x"}`},
		{"text with observation suffix", "Paris\nObservation:", `"Paris"`},
		{"empty", ``, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stage, seen := newStage(t, "max_tool_calls: 10")
			ctx, run := stage.Start(context.Background())
			h := langchaingo.NewHandler(run)
			h.HandleAgentAction(ctx, schema.AgentAction{Tool: "search", ToolInput: tt.input, ToolID: "call_1", Log: "Invoking: search"})
			h.Finish(nil)
			var got []termination.Event
			for _, ev := range seen.All() {
				if ev.Kind == termination.KindToolCall {
					got = append(got, ev)
				}
			}
			if len(got) != 1 || string(got[0].Args) != tt.want || got[0].CallID != "call_1" {
				t.Fatalf("tool_call events %+v, want one with args %s and call id call_1", got, tt.want)
			}
		})
	}
}
