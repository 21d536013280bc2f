package termination

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// undispatch makes every AnyOf under c call all its children for every
// event and tick, as before dispatch by kind (settled budgets included).
func undispatch(c check) {
	switch c := c.(type) {
	case *anyCheck:
		for k := range c.byKind {
			c.byKind[k] = 1<<min(len(c.children), maxDispatched) - 1
		}
		c.quiet = 0
		for _, ch := range c.children {
			if b, ok := ch.(*budgetCheck); ok {
				b.quiet = nil
			}
			undispatch(ch)
		}
	case *allCheck:
		for _, ch := range c.children {
			undispatch(ch)
		}
	}
}

// TestDispatchByKindChangesNothing: on random streams of every kind of
// event, an Evaluator whose AnyOfs dispatch by kind and one whose AnyOfs
// call every child for everything reach the same result, warnings and
// budgets included, for policies with every condition, nested in any and
// all and past maxDispatched children. A kinds() that left out a kind its
// check acts on shows up here.
func TestDispatchByKindChangesNothing(t *testing.T) {
	policies := []string{
		`max_iterations: 6
max_tool_calls: {limit: 7, pressure: 0.5, per_tool: {search: 3}}
token_budget: {total: 4000, pressure: 0.5, grace: 2}
cost_budget: {limit: 0.05, pressure: 0.5}
stall: {repeats: 3, window: 5, warn_at: 2, cycle: 2, token_tolerance: 0.05}
errors: {consecutive: 2, total: 4}
text_mention: {text: DONE, sources: [critic]}
function_call: [approve]
handoff: [user]
source_match: [reviewer]
stop_message: true
timeout: 40s`,
		`all: [{max_iterations: 2}, {max_tool_calls: 2}, {errors: {total: 1}}]`,
		`any: [{all: [{text_mention: {text: DONE}}, {stop_message: true}]}, {handoff: [user, other]}, {stall: {cycle: 2}}]`,
		`max_iterations: {limit: 9, pressure: 0.3}
any: [{function_call: [search]}, {all: [{timeout: 5s}, {source_match: [critic]}]}]`,
	}
	// Each condition alone (beside one that never fires, so that the root
	// is an AnyOf), then the mixes above.
	for _, one := range []string{
		`max_iterations: {limit: 12, pressure: 0.5}`,
		`max_tool_calls: {limit: 9, pressure: 0.5, per_tool: {search: 4}}`,
		`token_budget: {total: 9000, pressure: 0.5, grace: 3}`,
		`token_budget: {input: 9000, output: 300, pressure: 0.6}`,
		`cost_budget: {limit: 0.08, pressure: 0.5, grace: 1}`,
		`stall: {repeats: 3, window: 6, warn_at: 2}`,
		`stall: {repeats: 4, token_tolerance: 0.2}`,
		`stall: {cycle: 2}`,
		`errors: {consecutive: 3}`,
		`errors: {total: 5}`,
		`text_mention: {text: DONE}`,
		`text_mention: {text: DONE, sources: [critic]}`,
		`function_call: [approve]`,
		`handoff: [user]`,
		`source_match: [reviewer]`,
		`stop_message: true`,
		`timeout: 70s`,
	} {
		partner := "\nmax_iterations: 100000"
		if strings.HasPrefix(one, "max_iterations") {
			partner = "\nmax_tool_calls: 100000"
		}
		policies = append(policies, one+partner)
	}
	var conds []Condition
	for _, p := range policies {
		conds = append(conds, MustParsePolicy(p).Condition())
	}
	// Past maxDispatched children: the last ones are called for everything.
	var many []Condition
	for i := range maxDispatched + 3 {
		switch i % 4 {
		case 0:
			many = append(many, ToolCallLimits{Limit: 5 + i})
		case 1:
			many = append(many, ErrorLimits{Consecutive: 3})
		case 2:
			many = append(many, TimeLimits{Timeout: time.Duration(10+i) * time.Second})
		default:
			many = append(many, predicate(fmt.Sprint("p", i), func(e Event) bool { return e.Kind == KindHandoff && e.Target == "x" }))
		}
	}
	conds = append(conds, AnyOf(many...))

	tools := []string{"search", "approve", "fetch"}
	args := []string{`{"q":1}`, `{"q": 1}`, `{"q":2}`, ``}
	texts := []string{"", "thinking", "DONE", "thinking "}
	sources := []string{"assistant", "critic", "reviewer"}
	randomEvent := func(r *rand.Rand, i int) Event {
		ev := Event{Kind: Kind(1 + r.IntN(int(KindFinal))), Source: sources[r.IntN(len(sources))], Text: texts[r.IntN(len(texts))],
			Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 3 * time.Second)}
		switch ev.Kind {
		case KindToolCall:
			ev.Tool, ev.Args = tools[r.IntN(len(tools))], []byte(args[r.IntN(len(args))])
		case KindToolResult:
			ev.Tool = tools[r.IntN(len(tools))]
			if r.IntN(3) == 0 {
				ev.Err = "boom"
			}
		case KindHandoff:
			ev.Target = []string{"user", "x", "other"}[r.IntN(3)]
		}
		if r.IntN(2) == 0 {
			ev.Usage = Usage{InputTokens: int64(r.IntN(400)), OutputTokens: int64(r.IntN(50))}
			ev.Cost = float64(r.IntN(5)) / 1000
		}
		return ev
	}
	for seed := range uint64(3000) {
		r := rand.New(rand.NewPCG(seed, 7))
		cond := conds[seed%uint64(len(conds))]
		stream := make([]Event, 1+r.IntN(60))
		for i := range stream {
			stream[i] = randomEvent(r, i)
		}
		a, b := NewEvaluator(cond, time.Time{}), NewEvaluator(cond, time.Time{})
		undispatch(b.root)
		for i, ev := range stream {
			ca, sa := a.Observe(ev)
			cb, sb := b.Observe(ev)
			require.Equal(t, sb, sa, "seed %d event %d", seed, i)
			require.Equal(t, cb, ca, "seed %d event %d", seed, i)
			if i%5 == 4 { // a clock tick now and then
				ca, _ = a.Tick(ev.Time)
				cb, _ = b.Tick(ev.Time)
				require.Equal(t, cb, ca, "seed %d tick after event %d", seed, i)
			}
		}
		require.Equal(t, b.Result(), a.Result(), "seed %d", seed)
	}
}

// TestDispatchSkipsUninterestedChildren: an event reaches only the
// conditions that act on its kind.
func TestDispatchSkipsUninterestedChildren(t *testing.T) {
	e := NewEvaluator(MustParsePolicy("max_iterations: 5\nfunction_call: [approve]\nhandoff: [user]\nerrors: {total: 9}").Condition(), time.Time{})
	a := e.root.(*anyCheck)
	for k, want := range map[Kind]uint16{
		KindMessage:    0b1001, // max_iterations, errors
		KindToolResult: 0b1010, // function_call, errors
		KindHandoff:    0b0100,
		KindInput:      0,
	} {
		require.Equal(t, want, a.byKind[k], "kind %v", k)
	}
	require.Zero(t, a.byKind[0], "no child acts on clock ticks")
}

// TestCallKeysOnlyForStall: a tool call's canonical key is computed by the
// Evaluator only when a stall check, anywhere in the tree, needs it.
func TestCallKeysOnlyForStall(t *testing.T) {
	for policy, want := range map[string]bool{
		"max_tool_calls: 3":                                           false,
		"max_tool_calls: 3\nerrors: {total: 2}":                       false,
		"stall: {repeats: 2}":                                         true,
		"all: [{max_tool_calls: 3}, {stall: {cycle: 2}}]":             true,
		"any: [{errors: {total: 2}}, {all: [{stall: {repeats: 3}}]}]": true,
	} {
		e := NewEvaluator(MustParsePolicy(policy).Condition(), time.Time{})
		require.Equal(t, want, e.callKeys, policy)
		e.Observe(call("search", `{"q": 1}`))
		require.Equal(t, want, e.sink.callKey != 0, policy) // computed, or 0
		if want {
			require.Equal(t, callKey(&Event{Kind: KindToolCall, Tool: "search", Args: []byte(`{"q":1}`)}), e.sink.callKey, policy)
		}
	}
}
