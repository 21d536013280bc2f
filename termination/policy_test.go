package termination

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func TestParsePolicyValid(t *testing.T) {
	cases := []struct {
		name, policy, want string
	}{
		{"empty", ``, `any: []`},
		{"whitespace", "  \n\n", `any: []`},
		{"comment only", "# nothing yet\n", `any: []`},
		{"empty mapping", `{}`, `any: []`},
		{"null", `null`, `any: []`},
		{"tilde", `~`, `any: []`},
		{"document marker", "---\n", `any: []`},
		{"max_iterations", `max_iterations: 25`, `max_iterations: 25`},
		{"max_iterations written as a whole float (JSON)", `{"max_iterations": 25.0}`, `max_iterations: 25`},
		{"max_iterations written with an exponent", `max_iterations: 1e6`, `max_iterations: 1000000`},
		{"max_tool_calls", `max_tool_calls: 50`, `max_tool_calls: 50`},
		{"timeout", `timeout: 2m`, `timeout: 2m0s`},
		{"timeout compound", `timeout: 1h30m`, `timeout: 1h30m0s`},
		{"token_budget total", "token_budget:\n  total: 100000\n", `token_budget: {total: 100000}`},
		{"token_budget all", `token_budget: {total: 100, input: 80, output: 20, pressure: 0.8, grace: 1}`,
			`token_budget: {total: 100, input: 80, output: 20, pressure: 0.8, grace: 1}`},
		{"token_budget grace 0", `token_budget: {output: 5, pressure: 0.5, grace: 0}`, `token_budget: {output: 5, pressure: 0.5, grace: 0}`},
		{"cost_budget", `cost_budget: {limit: 2.50, pressure: 0.8, grace: 1}`, `cost_budget: {limit: 2.5, pressure: 0.8, grace: 1}`},
		{"cost_budget int limit", `cost_budget: {limit: 3}`, `cost_budget: {limit: 3}`},
		{"stall", `stall: {repeats: 3, token_tolerance: 0.1}`, `stall: {repeats: 3, token_tolerance: 0.1}`},
		{"stall tolerance 0", `stall: {repeats: 2, token_tolerance: 0}`, `stall: {repeats: 2, token_tolerance: 0}`}, // 0 is a tolerance (exact plateau), not "off" (spec §3: tolerance in [0,1))
		{"max_iterations with pressure", `max_iterations: {limit: 25, pressure: 0.8}`, `max_iterations: {limit: 25, pressure: 0.8}`},
		{"max_iterations long form", `max_iterations: {limit: 25}`, `max_iterations: {limit: 25}`},
		{"max_tool_calls every key", `max_tool_calls: {limit: 50, pressure: 0.8, per_tool: {search: 10, fetch: 5}}`,
			`max_tool_calls: {limit: 50, pressure: 0.8, per_tool: {fetch: 5, search: 10}}`},
		{"max_tool_calls per_tool only", "max_tool_calls:\n  per_tool:\n    web.fetch: 5\n", `max_tool_calls: {per_tool: {web.fetch: 5}}`},
		{"max_tool_calls JSON", `{"max_tool_calls": {"limit": 5.0, "per_tool": {"search": 2}}}`, `max_tool_calls: {limit: 5, per_tool: {search: 2}}`},
		{"stall every key", `stall: {repeats: 3, window: 8, warn_at: 2, cycle: 3, token_tolerance: 0.1}`,
			`stall: {repeats: 3, window: 8, warn_at: 2, cycle: 3, token_tolerance: 0.1}`},
		{"stall cycle only", `stall: {cycle: 2}`, `stall: {cycle: 2}`},
		{"stall window = repeats", `stall: {repeats: 3, window: 3}`, `stall: {repeats: 3, window: 3}`},
		{"errors", `errors: {consecutive: 3, total: 10}`, `errors: {consecutive: 3, total: 10}`},
		{"errors total only", `errors: {total: 10}`, `errors: {total: 10}`},
		{"text_mention", `text_mention: {text: TERMINATE, sources: [critic]}`, `text_mention: {text: "TERMINATE", sources: ["critic"]}`},
		{"text_mention one source", `text_mention: {text: DONE, sources: critic}`, `text_mention: {text: "DONE", sources: ["critic"]}`},
		{"text_mention no sources", `text_mention: {text: DONE}`, `text_mention: {text: "DONE"}`},
		{"function_call name", `function_call: approve`, `function_call: ["approve"]`},
		{"function_call list", `function_call: [approve, publish]`, `function_call: ["approve" "publish"]`},
		{"handoff", `handoff: [user]`, `handoff: ["user"]`},
		{"source_match", `source_match: critic`, `source_match: ["critic"]`},
		{"stop_message true", `stop_message: true`, `stop_message: true`},
		{"stop_message false is no condition", `stop_message: false`, `any: []`},
		{"flat policy is any", "max_iterations: 5\nmax_tool_calls: 3\n", `any: [{max_iterations: 5}, {max_tool_calls: 3}]`},
		{"any", `any: [{max_iterations: 5}, {stop_message: true}]`, `any: [{max_iterations: 5}, {stop_message: true}]`},
		{"all", `all: [{text_mention: {text: A}}, {source_match: critic}]`, `all: [{text_mention: {text: "A"}}, {source_match: ["critic"]}]`},
		{"nested", "max_iterations: 9\nall:\n  - any: [{handoff: user}, {stop_message: true}]\n  - max_tool_calls: 2\n",
			`any: [{max_iterations: 9}, {all: [{any: [{handoff: ["user"]}, {stop_message: true}]}, {max_tool_calls: 2}]}]`},
		{"JSON", `{"max_iterations": 25, "token_budget": {"total": 100000, "pressure": 0.8, "grace": 1}, "any": [{"handoff": ["user"]}]}`,
			`any: [{max_iterations: 25}, {token_budget: {total: 100000, pressure: 0.8, grace: 1}}, {any: [{handoff: ["user"]}]}]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(tc.policy))
			require.NoError(t, err)
			assert.Equal(t, tc.want, p.String())
			assert.NoError(t, p.Condition().Validate())
		})
	}
}

func TestParsePolicySpecExample(t *testing.T) {
	// Spec §3's example, every key at once (any/all filled in).
	p, err := ParsePolicy([]byte(`
max_iterations: 25          # positive int, or {limit: 25, pressure: 0.8}
max_tool_calls: {limit: 50, pressure: 0.8, per_tool: {search: 10}}
                            # (limits and per_tool values positive ints; pressure in (0,1) needs limit)
timeout: 2m                 # Go duration, > 0
token_budget:               # at least one of total/input/output, each > 0
  total: 100000
  pressure: 0.8             # optional, in (0,1)
  grace: 1                  # optional, int >= 0; needs pressure
cost_budget: {limit: 2.50, pressure: 0.8, grace: 1}
stall: {repeats: 3, window: 8, warn_at: 2, cycle: 3, token_tolerance: 0.1}
                            # repeats int >= 2; window int >= repeats; warn_at int in [2, repeats);
                            # cycle int >= 2; at least one of repeats/cycle; window, warn_at and
                            # token_tolerance need repeats; tolerance in [0,1)
errors: {consecutive: 3, total: 10}          # each optional, positive int
text_mention: {text: TERMINATE, sources: [critic]}   # sources optional
function_call: [approve]    # a name or a list of names
handoff: [user]             # a target or a list of targets
source_match: [critic]
stop_message: true
any: [ {max_iterations: 10}, {stop_message: true} ]
all: [ {text_mention: {text: LGTM}}, {source_match: reviewer} ]
`))
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{2 * time.Minute}, timeoutsOf(p.Condition()))
	// It behaves: the critic's TERMINATE completes the run; the writer's does not.
	res := replayEvents(t, p.Condition(), input("TERMINATE"), msg("writer", "TERMINATE"), msg("critic", "TERMINATE"))
	assert.Equal(t, Completed{Condition: conditionTextMention, Detail: "TERMINATE"}, res.Cause)
	assert.Equal(t, 3, res.StoppedAt)
	// The nested any fires its max_iterations before the outer one.
	var many []Event
	for i := range 12 {
		many = append(many, msg("writer", strings.Repeat("x", i+1)))
	}
	res = replayEvents(t, p.Condition(), many...)
	assert.Equal(t, MaxIterationsReached{Limit: 10, Count: 11}, res.Cause)
	res = replayEvents(t, p.Condition(), msg("a", "LGTM"), msg("reviewer", "ok"))
	assert.IsType(t, All{}, res.Cause)
}

func TestParsePolicyInvalid(t *testing.T) {
	cases := []struct {
		policy string
		path   string
		msg    string
	}{
		// max_iterations / max_tool_calls
		{`max_iterations: 0`, "policy.max_iterations", "must be a positive int, got 0"},
		{`max_iterations: -1`, "policy.max_iterations", "must be a positive int, got -1"},
		{`max_iterations: "25"`, "policy.max_iterations", `must be an int or a mapping (limit, pressure), got "25"`},
		{`max_iterations: 2.5`, "policy.max_iterations", "must be an int or a mapping (limit, pressure), got a number with a fraction (2.5)"},
		{`max_iterations: true`, "policy.max_iterations", "must be an int or a mapping (limit, pressure), got a bool (true)"},
		{`max_iterations: [1]`, "policy.max_iterations", "must be an int or a mapping (limit, pressure), got a list"},
		{`max_iterations: {n: 1}`, "policy.max_iterations.n", "unknown key"},
		{`max_iterations:`, "policy.max_iterations", "must be an int or a mapping (limit, pressure), got null"},
		{`max_iterations: 99999999999999999999`, "policy.max_iterations", "is too large: must be an int of at most 9223372036854775807, got 99999999999999999999"},
		{`max_tool_calls: 18446744073709551616`, "policy.max_tool_calls", "is too large: must be an int of at most 9223372036854775807, got 18446744073709551616"},
		{`max_tool_calls: {limit: 1e19}`, "policy.max_tool_calls.limit", "is too large: must be an int of at most 9223372036854775807, got 1e19"},
		{`max_iterations: -1e30`, "policy.max_iterations", "is too small: must be an int of at least -9223372036854775808, got -1e30"},
		{`max_iterations: .nan`, "policy.max_iterations", "must be an int or a mapping (limit, pressure), got NaN (.nan, not a number)"},
		{`token_budget: {total: .inf}`, "policy.token_budget.total", "is too large: must be an int of at most 9223372036854775807, got .inf"},
		{`max_tool_calls: 0`, "policy.max_tool_calls", "must be a positive int, got 0"},
		{`max_tool_calls: many`, "policy.max_tool_calls", `must be an int or a mapping (limit, pressure, per_tool), got "many"`},
		{`max_iterations: {limit: 0}`, "policy.max_iterations.limit", "must be a positive int, got 0"},
		{`max_iterations: {pressure: 0.8}`, "policy.max_iterations.limit", "is required"},
		{`max_iterations: {limit: 10, pressure: 1}`, "policy.max_iterations.pressure", "must be in (0,1), got 1"},
		{`max_iterations: {limit: 10, pressure: 0}`, "policy.max_iterations.pressure", "must be in (0,1), got 0"},
		{`max_iterations: {limit: 10, pressure: high}`, "policy.max_iterations.pressure", `must be a number, got "high"`},
		{`max_iterations: {limit: 10, per_tool: {a: 1}}`, "policy.max_iterations.per_tool", "unknown key"},
		{`max_iterations: {limt: 10}`, "policy.max_iterations.limt", `unknown key (did you mean "limit"?)`},
		{`max_iterations: {limit: 2.5}`, "policy.max_iterations.limit", "must be an int, got a number with a fraction (2.5)"},
		{`max_tool_calls: {}`, "policy.max_tool_calls", "needs limit or per_tool"},
		{`max_tool_calls: {pressure: 0.5, per_tool: {a: 1}}`, "policy.max_tool_calls.pressure", "needs limit"},
		{`max_tool_calls: {limit: 0, per_tool: {a: 1}}`, "policy.max_tool_calls.limit", "must be a positive int, got 0"},
		{`max_tool_calls: {per_tool: {}}`, "policy.max_tool_calls.per_tool", "must not be empty"},
		{`max_tool_calls: {per_tool: {search: 0}}`, "policy.max_tool_calls.per_tool.search", "must be a positive int, got 0"},
		{`max_tool_calls: {per_tool: {web.fetch: -1, web: 2}}`, `policy.max_tool_calls.per_tool."web.fetch"`, "must be a positive int, got -1"},
		{`max_tool_calls: {per_tool: {"web search": x}}`, `policy.max_tool_calls.per_tool."web search"`, `must be an int, got "x"`},
		{`{"max_iterations\n": 1}`, `policy."max_iterations\n"`, `unknown key`},
		{"{0\r\r0}", `policy."0\n0"`, `unknown key`},
		{`max_tool_calls: {per_tool: {search: x}}`, "policy.max_tool_calls.per_tool.search", `must be an int, got "x"`},
		{`max_tool_calls: {per_tool: [search]}`, "policy.max_tool_calls.per_tool", "must be a mapping, got a list"},
		{`max_tool_calls: {per_tool: {"": 2}}`, "policy.max_tool_calls.per_tool", "tool names must not be empty"},
		{`max_tool_calls: {per_tool: {a: 1, a: 2}}`, "policy.max_tool_calls.per_tool.a", "duplicate key"},
		{`max_tool_calls: {limit: 5, per_tol: {a: 1}}`, "policy.max_tool_calls.per_tol", `unknown key (did you mean "per_tool"?)`},
		// timeout
		{`timeout: 0s`, "policy.timeout", "must be > 0, got 0s"},
		{`timeout: -1m`, "policy.timeout", "must be > 0, got -1m0s"},
		{`timeout: 120`, "policy.timeout", `must be a Go duration string such as "2m", got an int (120)`},
		{`timeout: soon`, "policy.timeout", `must be a Go duration such as "2m" or "90s", got "soon"`},
		{`timeout: 2 minutes`, "policy.timeout", `must be a Go duration such as "2m" or "90s", got "2 minutes"`},
		// token_budget
		{`token_budget: 100`, "policy.token_budget", "must be a mapping such as {total: 100}, got an int (100)"},
		{`token_budget: lots`, "policy.token_budget", `must be a mapping, got "lots"`},
		{`token_budget: {}`, "policy.token_budget", "needs at least one of total, input, output"},
		{`token_budget: {pressure: 0.5}`, "policy.token_budget", "needs at least one of total, input, output"},
		{`token_budget: {total: 0}`, "policy.token_budget.total", "must be a positive int, got 0"},
		{`token_budget: {input: -5}`, "policy.token_budget.input", "must be a positive int, got -5"},
		{`token_budget: {output: x}`, "policy.token_budget.output", `must be an int, got "x"`},
		{`token_budget: {total: 10, pressure: 1}`, "policy.token_budget.pressure", "must be in (0,1), got 1"},
		{`token_budget: {total: 10, pressure: 0}`, "policy.token_budget.pressure", "must be in (0,1), got 0"},
		{`token_budget: {total: 10, pressure: 1.5}`, "policy.token_budget.pressure", "must be in (0,1), got 1.5"},
		{`token_budget: {total: 10, pressure: -0.2}`, "policy.token_budget.pressure", "must be in (0,1), got -0.2"},
		{`token_budget: {total: 10, pressure: .nan}`, "policy.token_budget.pressure", "must be a number, got NaN (.nan): NaN is not allowed"},
		{`cost_budget: {limit: .nan}`, "policy.cost_budget.limit", "must be a number, got NaN (.nan): NaN is not allowed"},
		{`cost_budget: {limit: .NaN}`, "policy.cost_budget.limit", "must be a number, got NaN (.NaN): NaN is not allowed"},
		{`token_budget: {total: 10, pressure: high}`, "policy.token_budget.pressure", `must be a number, got "high"`},
		{`token_budget: {total: 10, grace: 1}`, "policy.token_budget.grace", "needs pressure"},
		{`token_budget: {total: 10, pressure: 0.5, grace: -1}`, "policy.token_budget.grace", "must be an int >= 0, got -1"},
		{`token_budget: {total: 10, pressure: 0.5, grace: 1.5}`, "policy.token_budget.grace", "must be an int, got a number with a fraction (1.5)"},
		{`token_budget: {totl: 5}`, "policy.token_budget.totl", `unknown key (did you mean "total"?)`},
		{`token_budget: {limit: 5}`, "policy.token_budget.limit", `unknown key`},
		// cost_budget
		{`cost_budget: 2.5`, "policy.cost_budget", "must be a mapping such as {limit: 2.5}, got a number with a fraction (2.5)"},
		{`cost_budget: {pressure: 0.5}`, "policy.cost_budget.limit", "is required"},
		{`cost_budget: {limit: 0}`, "policy.cost_budget.limit", "must be > 0, got 0"},
		{`cost_budget: {limit: -1}`, "policy.cost_budget.limit", "must be > 0, got -1"},
		{`cost_budget: {limit: .inf}`, "policy.cost_budget.limit", "must be a finite number, got .inf"},
		{`cost_budget: {limit: 1, pressure: -.inf}`, "policy.cost_budget.pressure", "must be a finite number, got -.inf"},
		{`cost_budget: {limit: "$2"}`, "policy.cost_budget.limit", `must be a number, got "$2"`},
		{`cost_budget: {limit: 1, grace: 0}`, "policy.cost_budget.grace", "needs pressure"},
		{`cost_budget: {limit: 1, pressure: 1}`, "policy.cost_budget.pressure", "must be in (0,1), got 1"},
		{`cost_budget: {limit: 1, pressure: 0.8, grace: -2}`, "policy.cost_budget.grace", "must be an int >= 0, got -2"},
		{`cost_budget: {limt: 1}`, "policy.cost_budget.limt", `unknown key (did you mean "limit"?)`},
		// stall
		{`stall: 3`, "policy.stall", "must be a mapping, got an int (3)"},
		{`stall: {}`, "policy.stall", "needs repeats or cycle"},
		{`stall: {token_tolerance: 0.1}`, "policy.stall", "needs repeats or cycle"},
		{`stall: {repeats: 1}`, "policy.stall.repeats", "must be an int >= 2, got 1"},
		{`stall: {repeats: three}`, "policy.stall.repeats", `must be an int, got "three"`},
		{`stall: {repeats: 3, token_tolerance: 1}`, "policy.stall.token_tolerance", "must be in [0,1), got 1"},
		{`stall: {repeats: 3, token_tolerance: -0.1}`, "policy.stall.token_tolerance", "must be in [0,1), got -0.1"},
		{`stall: {repeats: 3, token_tolerance: "10%"}`, "policy.stall.token_tolerance", `must be a number, got "10%"`},
		{`stall: {repeat: 3}`, "policy.stall.repeat", `unknown key (did you mean "repeats"?)`},
		{`stall: {repeats: 0}`, "policy.stall.repeats", "must be an int >= 2, got 0"},
		{`stall: {repeats: 3, window: 2}`, "policy.stall.window", "must be an int >= repeats (3), got 2"},
		{`stall: {repeats: 3, window: 0}`, "policy.stall.window", "must be an int >= repeats (3), got 0"},
		{`stall: {cycle: 3, window: 5}`, "policy.stall.window", "needs repeats"},
		{`stall: {repeats: 3, warn_at: 3}`, "policy.stall.warn_at", "must be an int >= 2 and < repeats (3), got 3"},
		{`stall: {repeats: 3, warn_at: 1}`, "policy.stall.warn_at", "must be an int >= 2 and < repeats (3), got 1"},
		{`stall: {cycle: 2, warn_at: 2}`, "policy.stall.warn_at", "needs repeats"},
		{`stall: {cycle: 1}`, "policy.stall.cycle", "must be an int >= 2, got 1"},
		{`stall: {repeats: 3, cycle: 2.5}`, "policy.stall.cycle", "must be an int, got a number with a fraction (2.5)"},
		{`stall: {cycle: 2, token_tolerance: 0.1}`, "policy.stall.token_tolerance", "needs repeats"},
		{`stall: {repeats: 3, warn: 2}`, "policy.stall.warn", `unknown key (did you mean "warn_at"?)`},
		{`stall: {cylce: 3}`, "policy.stall.cylce", `unknown key (did you mean "cycle"?)`},
		{`stall: {windw: 3}`, "policy.stall.windw", `unknown key (did you mean "window"?)`},
		// errors
		{`errors: 3`, "policy.errors", "must be a mapping, got an int (3)"},
		{`errors: {}`, "policy.errors", "needs consecutive or total"},
		{`errors: {consecutive: 0}`, "policy.errors.consecutive", "must be a positive int, got 0"},
		{`errors: {total: -1}`, "policy.errors.total", "must be a positive int, got -1"},
		{`errors: {consecutive: 1.5}`, "policy.errors.consecutive", "must be an int, got a number with a fraction (1.5)"},
		{`errors: {consecutve: 3}`, "policy.errors.consecutve", `unknown key (did you mean "consecutive"?)`},
		// text_mention
		{`text_mention: TERMINATE`, "policy.text_mention", `must be a mapping, got "TERMINATE"`},
		{`text_mention: {}`, "policy.text_mention.text", "is required"},
		{`text_mention: {sources: [critic]}`, "policy.text_mention.text", "is required"},
		{`text_mention: {text: ""}`, "policy.text_mention.text", "must not be empty"},
		{`text_mention: {text: 5}`, "policy.text_mention.text", "must be a string, got an int (5)"},
		{`text_mention: {text: X, sources: []}`, "policy.text_mention.sources", "must not be empty"},
		{`text_mention: {text: X, sources: [a, ""]}`, "policy.text_mention.sources[1]", "must not be empty"},
		{`text_mention: {text: X, sources: [a, 7]}`, "policy.text_mention.sources[1]", "must be a string, got an int (7)"},
		{`text_mention: {text: X, sources: {a: b}}`, "policy.text_mention.sources", "must be a name or a list of names, got a mapping"},
		{`text_mention: {text: X, source: [a]}`, "policy.text_mention.source", `unknown key (did you mean "sources"?)`},
		// function_call / handoff / source_match / stop_message
		{`function_call: []`, "policy.function_call", "must not be empty"},
		{`function_call: ""`, "policy.function_call", "must not be empty"},
		{`all: [{max_iterations: 3}, {}]`, "policy.all[1]", "an empty policy never fires, so all: could not"},
		{`function_call: [approve, 3]`, "policy.function_call[1]", "must be a string, got an int (3)"},
		{`function_call: {name: approve}`, "policy.function_call", "must be a name or a list of names, got a mapping"},
		{`function_call: true`, "policy.function_call", "must be a string, got a bool (true)"},
		{`handoff: ""`, "policy.handoff", "must not be empty"},
		{`handoff: [[user]]`, "policy.handoff[0]", "must be a string, got a list"},
		{`source_match: [""]`, "policy.source_match[0]", "must not be empty"},
		{`source_match: []`, "policy.source_match", "must not be empty"},
		{`stop_message: yes`, "policy.stop_message", `must be true or false, got "yes"`},
		{`stop_message: 1`, "policy.stop_message", "must be true or false, got an int (1)"},
		{`stop_message: "true"`, "policy.stop_message", `must be true or false, got "true"`},
		// any / all and nesting
		{`any: []`, "policy.any", "must not be empty"},
		{`all: []`, "policy.all", "must not be empty"},
		{`any: {max_iterations: 1}`, "policy.any", "must be a list of policies, got a mapping"},
		{`all: max_iterations`, "policy.all", `must be a list of policies, got "max_iterations"`},
		{`any: [5]`, "policy.any[0]", "must be a mapping, got an int (5)"},
		{`any: [{max_iterations: 1}, {max_tool_calls: 0}]`, "policy.any[1].max_tool_calls", "must be a positive int, got 0"},
		{`all: [{any: [{stall: {repeats: 1}}]}]`, "policy.all[0].any[0].stall.repeats", "must be an int >= 2, got 1"},
		{`all: [{max_iterations: 1}, {any: [{stop_message: true}, {handof: user}]}]`, "policy.all[1].any[1].handof", `unknown key (did you mean "handoff"?)`},
		{"any:\n  - max_iterations: 1\n  - token_budget: {total: 5, pressure: 2}\n", "policy.any[1].token_budget.pressure", "must be in (0,1), got 2"},
		{`all: [{max_iterations: 1}, {any: [{stall: {repeats: 3, window: 2}}]}]`, "policy.all[1].any[0].stall.window", "must be an int >= repeats (3), got 2"},
		{`any: [{max_tool_calls: {per_tool: {search: 0}}}]`, "policy.any[0].max_tool_calls.per_tool.search", "must be a positive int, got 0"},
		{`function_call: [approve, ""]`, "policy.function_call[1]", "must not be empty"},
		{`text_mention: {text: X, sources: ""}`, "policy.text_mention.sources", "must not be empty"},
		// unknown keys, duplicates, wrong document shapes
		{`max_iteratons: 5`, "policy.max_iteratons", `unknown key (did you mean "max_iterations"?)`},
		{`maxIterations: 5`, "policy.maxIterations", `unknown key`},
		{`timout: 2m`, "policy.timout", `unknown key (did you mean "timeout"?)`},
		{`foo: 1`, "policy.foo", "unknown key"},
		{"max_iterations: 1\nmax_iterations: 2\n", "policy.max_iterations", "duplicate key"},
		{`[1, 2]`, "policy", "must be a mapping, got a list"},
		{`25`, "policy", "must be a mapping, got an int (25)"},
		{`max_iterations`, "policy", `must be a mapping, got "max_iterations"`},
		// JSON
		{`{"max_iterations": 0}`, "policy.max_iterations", "must be a positive int, got 0"},
		{`{"token_budget": {"total": 100, "pressure": 1.2}}`, "policy.token_budget.pressure", "must be in (0,1), got 1.2"},
		{`{"any": [{"max_tool_calls": 3}, {"max_tool_calls": "3"}]}`, "policy.any[1].max_tool_calls", `must be an int or a mapping (limit, pressure, per_tool), got "3"`},
		{`{"max_iterations": 25`, "policy", "not valid YAML or JSON"},
		{"max_iterations: 5\n  bad: [", "policy", "not valid YAML or JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.policy, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tc.policy))
			var pe *policyError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tc.path, pe.Path)
			if strings.HasPrefix(tc.msg, "unknown key") && !strings.Contains(tc.msg, "did you mean") {
				assert.Equal(t, "unknown key", strings.SplitN(pe.Msg, " (", 2)[0])
			} else if tc.msg == "not valid YAML or JSON" {
				assert.True(t, strings.HasPrefix(pe.Msg, tc.msg), pe.Msg)
			} else {
				assert.Equal(t, tc.msg, pe.Msg)
			}
			assert.True(t, strings.HasPrefix(err.Error(), tc.path+": "+tc.msg), "%q", err.Error())
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

func TestPolicyErrorLine(t *testing.T) {
	_, err := ParsePolicy([]byte("max_iterations: 5\ntoken_budget:\n  total: 100\n  pressure: 1.5\n"))
	assert.EqualError(t, err, "policy.token_budget.pressure: must be in (0,1), got 1.5 (line 4)")
	assert.EqualError(t, &policyError{Path: "policy.x", Msg: "bad"}, "policy.x: bad")
	_, err = ParsePolicy([]byte("max_iterations: 5\nmax_tool_calls:\n  limit: 9\n  per_tool:\n    search: 0\n"))
	assert.EqualError(t, err, "policy.max_tool_calls.per_tool.search: must be a positive int, got 0 (line 5)")
	_, err = ParsePolicy([]byte("any:\n  - stall:\n      cycle: 2\n      window: 4\n"))
	assert.EqualError(t, err, "policy.any[0].stall.window: needs repeats (line 4)")
	_, err = ParsePolicy([]byte("max_iterations: 5\ncost_budget:\n  pressure: 0.5\n"))
	assert.EqualError(t, err, "policy.cost_budget.limit: is required (line 3)", "a key left out is named at its mapping")
}

func TestPolicyDidYouMeanOnlyWhenClose(t *testing.T) {
	_, err := ParsePolicy([]byte(`completely_unrelated: 1`))
	assert.EqualError(t, err, "policy.completely_unrelated: unknown key (the keys here: max_iterations, max_tool_calls, timeout, idle, token_budget, cost_budget, stall, errors, text_mention, function_call, handoff, source_match, stop_message, any, all, fleet_budget, tree, hold) (line 1)",
		"no suggestion that is not close: the keys allowed there instead")
}

// The repository's sample policy file parses.
func TestSamplePolicyFile(t *testing.T) {
	data, err := os.ReadFile("../testdata/policy.yaml")
	require.NoError(t, err)
	p, err := ParsePolicy(data)
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{5 * time.Minute}, timeoutsOf(p.Condition()))
}

func TestZeroPolicy(t *testing.T) {
	var p Policy
	assert.Equal(t, "any: []", p.String())
	res := replayEvents(t, p.Condition(), msg("a", "TERMINATE"), stopEv("x"))
	assert.Equal(t, NaturalCompletion{}, res.Cause)
	assert.Panics(t, func() { MustParsePolicy("max_iterations: 0") })
	assert.Equal(t, "max_iterations: 3", MustParsePolicy("max_iterations: 3").String())
}

// A second YAML document would silently disable its guards: it is an error.
func TestParsePolicyMultipleDocuments(t *testing.T) {
	_, err := ParsePolicy([]byte("max_iterations: 5\n---\nmax_tool_calls: 1\n"))
	var pe *policyError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "policy: more than one YAML document; put every condition in one (line 2)", err.Error())
	_, err = ParsePolicy([]byte("---\nmax_iterations: 5\n"))
	assert.NoError(t, err, "one document with a leading marker")
}

// Limits written huge cost nothing until the run needs them. A stall with
// repeats 1e9 used to allocate its rings up front (gigabytes at
// NewEvaluator), which is what took the policy fuzzer to 0 execs/s and
// could take a process down on a hostile policy.
func TestHugeSettingsAllocateWithTheStream(t *testing.T) {
	p := MustParsePolicy(`
max_iterations: {limit: 9000000000000000000, pressure: 0.5}
max_tool_calls: {limit: 9000000000000000000, per_tool: {search: 9000000000000000000}}
stall: {repeats: 1000000000, window: 9000000000000000000, warn_at: 999999999, cycle: 4000000000000000000, token_tolerance: 0.5}
`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := replayEvents(t, p.Condition(), seq(repeat(50, call("search", `{"q":1}`)), repeat(50, msg("a", "x").used(10, 0)))...)
	runtime.ReadMemStats(&after)
	assert.Equal(t, NaturalCompletion{}, res.Cause)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated by a 100-event run")
}

// The README's policy section shows only policies that parse.
func TestReadmePolicies(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## Policies\n")
	require.True(t, ok, "README has a Policies section")
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := 0
	for rest := section; ; {
		var block string
		if _, rest, ok = strings.Cut(rest, "```yaml\n"); !ok {
			break
		}
		block, rest, _ = strings.Cut(rest, "```")
		_, err := ParsePolicy([]byte(block))
		assert.NoError(t, err, "README policy:\n%s", block)
		blocks++
	}
	assert.GreaterOrEqual(t, blocks, 5)
}

// A key allowed only at the top level (fleet_budget) is refused under any:
// and all:, naming where it was found.
func TestTopLevelOnlyKeys(t *testing.T) {
	saved := policyKeys
	t.Cleanup(func() { policyKeys = saved })
	var read int
	policyKeys = append(slices.Clone(saved), policyKey{name: "top_only", topLevel: true,
		read: func(string, *yaml.Node, *Policy) (Condition, error) { read++; return nil, nil }})
	p, err := ParsePolicy([]byte("max_iterations: 3\ntop_only: {x: 1}\n"))
	require.NoError(t, err)
	assert.Equal(t, "max_iterations: 3", p.String(), "a key may set no condition")
	assert.Equal(t, 1, read)
	_, err = ParsePolicy([]byte("any:\n  - top_only: {x: 1}\n"))
	assert.EqualError(t, err, "policy.any[0].top_only: allowed only at the top level of a policy (line 2)")
	_, err = ParsePolicy([]byte("top_onyl: 1"))
	assert.EqualError(t, err, `policy.top_onyl: unknown key (did you mean "top_only"?) (line 1)`)
}

// YAML aliases are never expanded: a "billion laughs" document is refused
// at once (an alias is not a policy value), whatever it would expand to.
func TestParsePolicyAliasBomb(t *testing.T) {
	var doc strings.Builder
	doc.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 12; i++ {
		fmt.Fprintf(&doc, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	start := time.Now()
	_, err := ParsePolicy([]byte(doc.String()))
	var pe *policyError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "policy.a0", pe.Path)
	_, err = ParsePolicy([]byte("x: &x {max_iterations: 1}\nany: [*x, *x]\n"))
	assert.Error(t, err)
	_, err = ParsePolicy([]byte("any: &x [{max_iterations: 1}]\nall: *x\n"))
	assert.EqualError(t, err, "policy.all: must be a list of policies, got an alias (line 2)")
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestPolicyHashIsCanonical(t *testing.T) {
	a := MustParsePolicy("max_iterations: 8\ntree: {token_budget: {total: 8000, pressure: 0.75}}\n")
	b := MustParsePolicy(`{"tree": {"token_budget": {"pressure": 0.75, "total": 8000}}, "max_iterations": 8}`)
	require.Equal(t, a.Hash(), b.Hash())
	require.True(t, strings.HasPrefix(a.Hash(), "sha256:"))
	require.Len(t, a.Hash(), len("sha256:")+64)
	require.NotEqual(t, a.Hash(), MustParsePolicy("max_iterations: 9").Hash())
	// sha256 of {} for the empty policy.
	require.Equal(t, "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", Policy{}.Hash())
}
