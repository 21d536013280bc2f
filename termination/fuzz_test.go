package termination

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, fuzzPolicy, `max_iterations: 0`, `max_iterations: "3"`, `timeout: soon`,
		`token_budget: {total: 10, pressure: 1}`, `token_budget: {total: 10, grace: 1}`, `cost_budget: {limit: .inf}`,
		`stall: {repeats: 1}`, `errors: {}`, `text_mention: X`, `function_call: []`, `stop_message: yes`,
		`any: [{max_iterations: 1}, {max_tool_calls: 0}]`, `all: [{any: [{stall: {repeats: 1}}]}]`, `max_iteratons: 5`,
		`{"max_iterations": 25, "any": [{"handoff": ["user"]}]}`, "a: &x 1\nb: *x", `[1,2]`, "max_iterations: 1\nmax_iterations: 2",
		`{"max_iterations": 25`, "\t- x", `max_iterations: 1e300`, `max_iterations: -0.0`, `cost_budget: {limit: 1e-320}`,
		`max_iterations: {limit: 25, pressure: 0.8}`, `max_iterations: {pressure: 0.8}`, `max_tool_calls: {per_tool: {search: 10}}`,
		`max_tool_calls: {limit: 5, pressure: 1, per_tool: {a.b: 0, "": 1}}`, `max_tool_calls: {per_tool: {}}`,
		`stall: {repeats: 3, window: 8, warn_at: 2, cycle: 3}`, `stall: {cycle: 2}`, `stall: {repeats: 3, window: 2, warn_at: 3}`,
		`stall: {repeats: 1e9, window: 4e18, cycle: 9e18}`, `any: [{stall: {cycle: 2, window: 4}}]`,
		"a: &a [*a, *a]\nb: &b [*a, *a]\nc: [*b, *b]", "any: &x [{max_iterations: 1}]\nall: *x",
		`stall: {repeats: 3, window: 8, same_result: true}`, `stall: {cycle: 2, same_result: true}`, `stall: {repeats: 2, same_result: 1}`,
		`errors: {consecutive: 3, ignore_tools: [grep]}`, `errors: {ignore_tools: grep}`, `errors: {total: 2, ignore_tools: []}`,
		`errors: {total: 2, ignore_tools: [""]}`,
		`idle: 90s`, `idle: 0s`, `idle: -1m`, `idle: 90`, `{timeout: 1m, idle: 1m}`, `tree: {idle: 1m}`,
		`stall: {repeats: 3, same_result: true, any_args: true}`, `stall: {repeats: 3, any_args: true}`,
		`stall: {repeats: 3, any_args: 1}`, `stall: {cycle: 2, ignore_tools: [poll_job]}`, `stall: {repeats: 2, ignore_tools: []}`,
		`stall: {repeats: 2, ignore_tools: poll}`, `max_tool_calls: {limit: 2, per_tool: {a: 3}}`,
		`max_tool_calls: {limit: 2, per_tool: {a: 2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		if err != nil {
			var pe *policyError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *policyError", err, err)
			}
			if pe.Path != "policy" && !strings.HasPrefix(pe.Path, "policy.") {
				t.Fatalf("error path %q does not start with policy", pe.Path)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		// An accepted policy is valid and can be evaluated.
		if err := p.Condition().Validate(); err != nil {
			t.Fatalf("ParsePolicy accepted %q but Validate says %v", data, err)
		}
		_ = p.String()
		ev := NewEvaluator(p.Condition(), time.Time{})
		for _, e := range []Event{input("x").at(0), msg("a", "DONE").used(10, 10).costs(0.5), call("t", `{}`), result("t", "e"),
			call("grep", `1`), result("grep", "exit 1"), call("grep", `1`), result("grep", "exit 1"),
			call("search", `1`), call("t", `{}`), call("search", `1`), msg("a", "DONE"),
			errEv("x"), handoffEv("a", "user"), stopEv("s"), final("critic", "x").at(time.Hour)} {
			if _, stop := ev.Observe(e); stop {
				break
			}
		}
		_ = ev.Result()
	})
}

const fuzzPolicy = `
max_iterations: {limit: 3, pressure: 0.5}
max_tool_calls: {limit: 3, pressure: 0.5, per_tool: {t: 1, search: 2}}
timeout: 1m
idle: 30s
token_budget: {total: 1000, pressure: 0.5, grace: 0}
cost_budget: {limit: 1, pressure: 0.5}
stall: {repeats: 3, window: 5, warn_at: 2, cycle: 2, token_tolerance: 0.1, ignore_tools: [poll]}
any: [{stall: {repeats: 2, same_result: true, any_args: true, ignore_tools: [t]}}]
errors: {consecutive: 1}
text_mention: {text: DONE}
function_call: approve
handoff: user
source_match: critic
stop_message: true
all: [{max_iterations: 1}, {any: [{text_mention: {text: x}}]}]
`
