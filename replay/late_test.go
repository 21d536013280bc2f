package replay_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// lateParentLog is a planner whose first line comes after its analyst's
// and the analyst's own child's: it delegated before its first event was
// recorded. Its tree: limits allow two tool calls in the tree; it ends at
// its last line unless they end it sooner.
var lateParentLog = lines(
	`{"kind":"tool_call","run":"g","parent":"c","stage":"analyst","tool":"search"}`,
	`{"kind":"tool_call","run":"c","parent":"p","stage":"analyst","tool":"read"}`,
	`{"kind":"message","run":"p","stage":"planner","text":"delegated"}`,
	`{"kind":"tool_call","run":"g","tool":"search","args":{"page":2}}`,
	`{"kind":"tool_call","run":"c","tool":"read","args":{"page":2}}`,
	`{"kind":"final","run":"p","text":"done"}`,
)

func lateParentPolicies(stage string) (*termination.Policy, bool) {
	p := map[string]string{"planner": "tree: {max_tool_calls: 2}", "analyst": "max_iterations: 10"}[stage]
	if p == "" {
		return nil, false
	}
	pol := termination.MustParsePolicy(p)
	return &pol, true
}

// TestLateParent: a parent whose first line comes after its descendants'
// first lines starts at the first of them, as it had started live before
// them (§8): its tree limits count the descendants' events from their
// start, with Runs (which looks at the whole log), and with a Runner
// given the first pass's index; the third tool call of the tree ends it.
func TestLateParent(t *testing.T) {
	events := decodeAll(t, lateParentLog)
	want := map[string]string{
		"p": "MaxToolCallsReached", // the tree's third call
		"c": "Cancelled",           // by its parent's end
		"g": "Cancelled",
	}
	check := func(name string, results []termination.Result) {
		t.Helper()
		require.Len(t, results, 3, name)
		for _, res := range results {
			kind, err := codec.CauseType(res.Cause)
			require.NoError(t, err)
			assert.Equal(t, want[res.Run], kind, "%s: run %s: %v", name, res.Run, res.Cause)
		}
		byRun := map[string]termination.Result{}
		for _, res := range results {
			byRun[res.Run] = res
		}
		assert.Equal(t, "p", byRun["c"].Parent, name)
		assert.Equal(t, "c", byRun["g"].Parent, name)
		assert.Equal(t, 3, byRun["p"].Tree.ToolCalls, "%s: the tree's calls", name)
		assert.Equal(t, 2, byRun["g"].Events, "%s: g's own events, the one that crossed the limit included", name)
	}
	check("Runs", replay.Runs(nil, events, replay.WithPolicies(lateParentPolicies)))

	idx := codec.IndexRuns(strings.NewReader(lateParentLog))
	got, _, err := replay.NewRunner(nil, replay.WithIndex(&idx), replay.WithPolicies(lateParentPolicies)).Log(strings.NewReader(lateParentLog))
	require.NoError(t, err)
	check("Runner with the index", got)

	// Without a first pass nothing can tell that p comes later: c and g
	// are replayed as the children of a parent not in the log.
	got, _, err = replay.NewRunner(nil, replay.WithPolicies(lateParentPolicies)).Log(strings.NewReader(lateParentLog))
	require.NoError(t, err)
	for _, res := range got {
		if res.Run != "p" {
			assert.IsType(t, termination.NaturalCompletion{}, res.Cause, "without the index: run %s", res.Run)
		}
	}
}

// TestLateParentEndedBefore: a late parent's tree limits already spent by
// a first child end it there; a second child whose first line comes after
// that is Skipped{parent_ended}, as live.
func TestLateParentEndedBefore(t *testing.T) {
	log := lines(
		`{"kind":"tool_call","run":"c1","parent":"p","stage":"analyst","tool":"a"}`,
		`{"kind":"tool_call","run":"c1","tool":"b"}`,
		`{"kind":"tool_call","run":"c1","tool":"c"}`,
		`{"kind":"tool_call","run":"c2","parent":"p","stage":"analyst","tool":"a"}`,
		`{"kind":"message","run":"p","stage":"planner","text":"late"}`,
		`{"kind":"final","run":"p","text":"done"}`,
	)
	results := replay.Runs(nil, decodeAll(t, log), replay.WithPolicies(lateParentPolicies))
	kinds := map[string]string{}
	for _, res := range results {
		kinds[res.Run], _ = codec.CauseType(res.Cause)
	}
	assert.Equal(t, map[string]string{"p": "MaxToolCallsReached", "c1": "Cancelled", "c2": "Skipped"}, kinds)
}

func decodeAll(t *testing.T, log string) []termination.Event {
	t.Helper()
	var events []termination.Event
	dec := codec.NewDecoder(strings.NewReader(log))
	for {
		ev, err := dec.Next()
		if err != nil {
			break
		}
		events = append(events, ev)
	}
	return events
}

// TestLateParentCycle: two runs whose first lines name each other as
// parents (no live log can, but a hand-made one may) end, each once.
func TestLateParentCycle(t *testing.T) {
	log := lines(
		`{"kind":"input","run":"y","parent":"z","stage":"planner"}`,
		`{"kind":"tool_call","run":"y","tool":"a"}`,
		`{"kind":"input","run":"z","parent":"y","stage":"planner"}`,
		`{"kind":"message","run":"z","text":"thinking","usage":{"input_tokens":12,"output_tokens":1}}`,
		`{"kind":"tool_call","run":"z","tool":"b"}`,
		`{"kind":"tool_call","run":"y","tool":"c"}`,
	)
	// Tree limits with pressure, whose warnings go down the tree: a
	// cycle of children would never end.
	p := termination.MustParsePolicy("tree: {max_iterations: {limit: 3, pressure: 0.5}, token_budget: {total: 20, pressure: 0.5}}")
	want := replay.Runs(&p, decodeAll(t, log))
	require.Len(t, want, 2)
	idx := codec.IndexRuns(strings.NewReader(log))
	got, _, err := replay.NewRunner(&p, replay.WithIndex(&idx)).Log(strings.NewReader(log))
	require.NoError(t, err)
	assert.Equal(t, want, got)
}
