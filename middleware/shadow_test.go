package middleware_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

func shadowOpt(t testing.TB, name, src string) middleware.Option {
	t.Helper()
	return middleware.WithShadowPolicy(name, termination.MustParsePolicy(src))
}

func TestWithShadowPolicyErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []middleware.Option
		want string // "" for valid
	}{
		{"valid", []middleware.Option{shadowOpt(t, "strict", "stall: {repeats: 2}"), shadowOpt(t, "lenient.v2", "max_tool_calls: 100")}, ""},
		{"empty policy", []middleware.Option{shadowOpt(t, "nothing", "{}")}, ""},
		{"empty name", []middleware.Option{shadowOpt(t, "", "max_iterations: 3")}, `WithShadowPolicy(""): the name follows the rules of a stage name`},
		{"path name", []middleware.Option{shadowOpt(t, "../x", "max_iterations: 3")}, `WithShadowPolicy("../x"): the name follows the rules of a stage name (it is a label value and a directory name): stage name "../x" starts with '.'`},
		{"duplicate", []middleware.Option{shadowOpt(t, "strict", "max_iterations: 3"), shadowOpt(t, "strict", "max_iterations: 4")}, `WithShadowPolicy("strict"): a second shadow policy with this name`},
		{"timeout", []middleware.Option{shadowOpt(t, "t", "{max_iterations: 3, timeout: 1m}")}, `WithShadowPolicy("t"): the policy holds timeout: a shadow policy judges the run's own events`},
		{"nested timeout", []middleware.Option{shadowOpt(t, "t", "any: [{max_iterations: 3}, {all: [{timeout: 1m}]}]")}, `WithShadowPolicy("t"): the policy holds timeout`},
		{"idle", []middleware.Option{shadowOpt(t, "i", "idle: 30s")}, `WithShadowPolicy("i"): the policy holds idle`},
		{"tree", []middleware.Option{shadowOpt(t, "tr", "tree: {max_iterations: 30}")}, `WithShadowPolicy("tr"): the policy holds tree`},
		{"fleet_budget", []middleware.Option{shadowOpt(t, "f", "fleet_budget: {key: stage, window: 1h, cost: 5}")}, `WithShadowPolicy("f"): the policy holds fleet_budget`},
		{"hold", []middleware.Option{shadowOpt(t, "h", "max_iterations: 5\nhold: {timeout: 1m}")}, `WithShadowPolicy("h"): the policy holds hold`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := middleware.New("shadowed", tc.opts...)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), `middleware: New("shadowed"): `+tc.want)
		})
	}
}

// shadowEvents repeat one tool call: a stall of 2 repeats would stop the
// run at event 3, the enforced max_tool_calls: 3 stops it at event 7.
var shadowEvents = []termination.Event{
	{Kind: termination.KindMessage, Text: "look", Usage: termination.Usage{InputTokens: 100, OutputTokens: 10}},
	{Kind: termination.KindToolCall, Tool: "search", Args: json.RawMessage(`{"q":"x"}`)},
	{Kind: termination.KindToolCall, Tool: "search", Args: json.RawMessage(`{"q":"x"}`)},
	{Kind: termination.KindMessage, Text: "again", Usage: termination.Usage{InputTokens: 100, OutputTokens: 10}},
	{Kind: termination.KindToolCall, Tool: "search", Args: json.RawMessage(`{"q":"y"}`)},
	{Kind: termination.KindMessage, Text: "more", Usage: termination.Usage{InputTokens: 100, OutputTokens: 10}},
	{Kind: termination.KindToolCall, Tool: "search", Args: json.RawMessage(`{"q":"z"}`)},
	{Kind: termination.KindMessage, Text: "done?"},
}

// runShadowWay runs items through stage one of five ways: runWay's four
// and Range.
func runShadowWay(stage *middleware.Stage, way int, items []item) termination.Result {
	if way < 4 {
		run, _ := runWay(stage, way, items)
		return run.Wait()
	}
	ctx, run := stage.Start(context.Background())
	for range middleware.Range(run, produce(ctx, items), decodeItem) {
	}
	return run.Wait()
}

func TestShadowPolicyVerdicts(t *testing.T) {
	const enforced = "max_tool_calls: 3"
	// The shadows also warn (pressure, warn_at): none of that may reach the run.
	stall := termination.StallDetected{Signal: termination.SignalRepeatedToolCall, Repeats: 2}
	for way, name := range []string{"Forward", "ForwardEach", "ForwardSeq", "Observe", "Range"} {
		t.Run(name, func(t *testing.T) {
			var warned []termination.Cause
			onWarning := middleware.WithOnWarning(func(_ context.Context, _ *middleware.Run, c termination.Cause) { warned = append(warned, c) })
			plain := mustStage(t, "shadowed", policy(t, enforced), shortDrain)
			shadowed := mustStage(t, "shadowed", policy(t, enforced), shortDrain, onWarning,
				shadowOpt(t, "strict", "{stall: {repeats: 2}, token_budget: {total: 150, pressure: 0.5}}"),
				shadowOpt(t, "never", "{max_iterations: {limit: 50, pressure: 0.01}, stall: {repeats: 4, window: 6, warn_at: 2}}"),
				shadowOpt(t, "iterations", "max_iterations: 2"),
				shadowOpt(t, "after", "max_iterations: 3")) // would fire on event 8, never evaluated
			want := runShadowWay(plain, way, itemsOf(shadowEvents))
			got := runShadowWay(shadowed, way, itemsOf(shadowEvents))
			require.Equal(t, termination.MaxToolCallsReached{Limit: 3, Count: 4}, got.Cause, "the enforced policy decides")
			assert.Equal(t, 7, got.StoppedAt)
			assert.Empty(t, got.Warnings, "shadows never warn")
			assert.Empty(t, warned, "shadows never call the warning hook")
			assert.Equal(t, map[string]*termination.ShadowVerdict{
				"strict":     {Cause: stall, StoppedAt: 3}, // fed no more after event 3: its budget never fires
				"never":      nil,
				"iterations": {Cause: termination.MaxIterationsReached{Limit: 2, Count: 3}, StoppedAt: 6},
				"after":      nil, // the enforced policy stopped the run first
			}, got.Shadow)
			// Drained depends on how far the producer got: not the policy's doing.
			got.Shadow, got.Duration, want.Duration, got.Run, want.Run, got.Drained, want.Drained = nil, 0, 0, "", "", 0, 0
			assert.Equal(t, want, got, "the enforced result is the same as without shadows")
		})
	}
}

func TestShadowPolicyNeverActs(t *testing.T) {
	stage := mustStage(t, "quiet", shadowOpt(t, "strict", "max_iterations: 1"))
	ctx, run := stage.Start(context.Background())
	msg := termination.Event{Kind: termination.KindMessage, Text: "hi"}
	for range 3 {
		_, stop := run.Observe(msg)
		require.False(t, stop)
	}
	require.NoError(t, ctx.Err(), "a shadow's stop does not cancel the run")
	_, stopped := run.Cause()
	assert.False(t, stopped)
	res := run.Finish(nil)
	assert.Equal(t, termination.NaturalCompletion{}, res.Cause)
	assert.Equal(t, map[string]*termination.ShadowVerdict{"strict": {Cause: termination.MaxIterationsReached{Limit: 1, Count: 2}, StoppedAt: 2}}, res.Shadow)

	// A stage without shadows has no verdicts; a skipped run of a stage with
	// shadows has a null verdict for each.
	assert.Nil(t, mustStage(t, "plain").Skip(context.Background(), "x").Shadow)
	assert.Equal(t, map[string]*termination.ShadowVerdict{"strict": nil}, stage.Skip(context.Background(), "x").Shadow)
}

func TestShadowPolicyAllocs(t *testing.T) {
	full := termination.MustParsePolicy(benchPolicy)
	stage := mustStage(t, "allocs", middleware.WithPolicy(full), middleware.WithShadowPolicy("candidate", full))
	_, run := stage.Start(context.Background())
	defer run.Finish(nil)
	evs := benchEvents()
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		if _, stop := run.Observe(evs[i%len(evs)]); stop {
			t.Fatalf("fired at event %d", i)
		}
		i++
	})
	assert.Zero(t, allocs, "allocations per event with a shadow policy")
}
