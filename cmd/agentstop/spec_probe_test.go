package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSpecProbeReplayShape checks the exact §4 JSON of edge runs: the
// per-tool `tool` field next to the overall limit (overall first), the
// cycle's `period`, warnings of several resources in the contract's order,
// a stream that ends by itself (stopped_at 0, fired [], evidence []), the
// evidence of a limit and of a cycle, and -fail-on.
func TestSpecProbeReplayShape(t *testing.T) {
	cases := []struct {
		name, policy, events, want string
	}{
		{"overall and per-tool on one event", "max_tool_calls: {limit: 2, per_tool: {a: 2}}\n",
			`{"kind":"tool_call","tool":"a"}` + "\n" + `{"kind":"tool_call","tool":"a"}` + "\n" + `{"kind":"tool_call","tool":"a"}` + "\n",
			`{"stage":"replay","termination_cause":"max_tool_calls","outcome":"failed",` +
				`"cause":{"$kind":"MaxToolCallsReached","limit":2,"count":3},` +
				`"fired":[{"$kind":"MaxToolCallsReached","limit":2,"count":3},{"$kind":"MaxToolCallsReached","limit":2,"count":3,"tool":"a"}],` +
				`"warnings":[],"stopped_at":3,"events":3,"iterations":0,"tool_calls":3,"tokens":{"input":0,"output":0},"cost":0,"evidence":[3]}` + "\n"},
		{"cycle with its period", "stall: {cycle: 2}\n",
			"{\"kind\":\"tool_call\",\"tool\":\"a\"}\n{\"kind\":\"tool_call\",\"tool\":\"b\"}\n" +
				"{\"kind\":\"tool_call\",\"tool\":\"a\"}\n{\"kind\":\"tool_call\",\"tool\":\"b\"}\n{\"kind\":\"final\"}\n",
			`{"stage":"replay","termination_cause":"stall","outcome":"failed",` +
				`"cause":{"$kind":"StallDetected","signal":"cycle","repeats":2,"period":2},` +
				`"fired":[{"$kind":"StallDetected","signal":"cycle","repeats":2,"period":2}],` +
				`"warnings":[],"stopped_at":4,"events":4,"iterations":0,"tool_calls":4,"tokens":{"input":0,"output":0},"cost":0,"evidence":[1,2,3,4]}` + "\n"},
		{"warnings in order, natural end", "max_iterations: {limit: 4, pressure: 0.5}\ncost_budget: {limit: 1, pressure: 0.5}\ntoken_budget: {output: 10, pressure: 0.5}\n",
			"{\"kind\":\"message\"}\n\n{\"kind\":\"message\",\"cost\":0.5,\"usage\":{\"input_tokens\":1,\"output_tokens\":5},\"extra\":true}\n",
			`{"stage":"replay","termination_cause":"natural_completion","outcome":"succeeded","cause":{"$kind":"NaturalCompletion"},` +
				`"fired":[],"warnings":[{"$kind":"BudgetPressure","resource":"output_tokens","threshold":0.5,"used":5,"limit":10},` +
				`{"$kind":"BudgetPressure","resource":"cost","threshold":0.5,"used":0.5,"limit":1},` +
				`{"$kind":"BudgetPressure","resource":"iterations","threshold":0.5,"used":2,"limit":4}],` +
				`"stopped_at":0,"events":2,"iterations":2,"tool_calls":0,"tokens":{"input":1,"output":5},"cost":0.5,"evidence":[]}` + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := writeFile(t, dir, "policy.yaml", tc.policy)
			code, stdout, stderr := runCLI(t, tc.events, "replay", "-policy", p, "-")
			require.Equal(t, 0, code, stderr)
			assert.Empty(t, stderr)
			assert.Equal(t, tc.want, stdout)
		})
	}
	t.Run("fail-on", func(t *testing.T) {
		p := writeFile(t, t.TempDir(), "policy.yaml", "max_iterations: 1\n")
		two := "{\"kind\":\"message\"}\n{\"kind\":\"message\"}\n"
		code, _, stderr := runCLI(t, two, "replay", "-policy", p, "-fail-on", "failed", "-")
		assert.Equal(t, 1, code, stderr)
		code, _, stderr = runCLI(t, two, "replay", "-policy", p, "-fail-on", "skipped", "-")
		assert.Equal(t, 0, code, stderr)
		code, _, stderr = runCLI(t, "{\"kind\":\"message\",\"usage\":{\"input_token\":1}}\n", "replay", "-policy", p, "-")
		assert.Equal(t, 2, code)
		assert.Contains(t, stderr, `line 1`)
		assert.Contains(t, stderr, `"input_token"`)
	})
}
