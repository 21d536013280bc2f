package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/termination"
)

const treePolicy = "../../testdata/tree_policy.yaml"

// TestReplayTree: a log whose events carry run and parent is replayed as a
// tree (§8): one result per run, one JSON object per line, in the order the
// runs ended, with run and parent.
func TestReplayTree(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "replay", "-policy", treePolicy, "../../testdata/tree_planner.jsonl")
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr)
	golden := filepath.Join("testdata", "tree_planner.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(stdout), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), stdout)

	var runs, causes []string
	for line := range strings.Lines(stdout) {
		var res termination.Result
		require.NoError(t, json.Unmarshal([]byte(line), &res), line)
		runs = append(runs, res.Run+"<"+res.Parent)
		causes = append(causes, termination.Tag(res.Cause, nil))
	}
	// fetch-a ends at its last line; the fifth tool call of the tree (res-b's)
	// ends the planner, then its live descendants in the order they started;
	// res-c starts after the planner ended.
	assert.Equal(t, []string{"fetch-a<res-a", "planner<", "res-a<planner", "res-b<planner", "res-c<planner"}, runs)
	assert.Equal(t, []string{"natural_completion", "max_tool_calls", "cancelled", "cancelled", "skipped"}, causes)

	// -fail-on applies to every run.
	code, stdout2, stderr := runCLI(t, "", "replay", "-policy", treePolicy, "-fail-on", "skipped", "../../testdata/tree_planner.jsonl")
	assert.Equal(t, 1, code)
	assert.Equal(t, stdout, stdout2)
	assert.Equal(t, "agentstop replay: 1 of 5 runs has an outcome listed in -fail-on\n", stderr)

	// From stdin, with -stage.
	log, err := os.ReadFile("../../testdata/tree_planner.jsonl")
	require.NoError(t, err)
	code, stdout, stderr = runCLI(t, string(log), "replay", "-policy", treePolicy, "-stage", "research", "-")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, `"detail":"research ended: max_tool_calls"`)
	assert.Equal(t, 5, strings.Count(stdout, `{"stage":"research",`))
}

// TestReplayTreeSingleRun: a log without run ids under a policy with tree:
// limits is a tree of one run: its tree limits count its own events.
func TestReplayTreeSingleRun(t *testing.T) {
	log := `{"kind":"tool_call","tool":"a"}` + "\n" + `{"kind":"tool_call","tool":"b"}` + "\n"
	dir := t.TempDir()
	pol := filepath.Join(dir, "p.yaml")
	require.NoError(t, os.WriteFile(pol, []byte("tree: {max_tool_calls: 1}\n"), 0o644))
	code, stdout, stderr := runCLI(t, log, "replay", "-policy", pol, "-")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, 1, strings.Count(stdout, "\n"))
	assert.Contains(t, stdout, `"cause":{"$kind":"MaxToolCallsReached","limit":1,"count":2,"scope":"tree"}`)
	assert.Contains(t, stdout, `"stopped_at":2`)
	assert.NotContains(t, stdout, `"run"`)
}

// TestReplayTreeBadInput: a bad line of a multi-run log is one line on
// stderr naming it, exit 2, as for one run.
func TestReplayTreeBadInput(t *testing.T) {
	log := `{"run":"a","kind":"input"}` + "\n" + `{"run":"b","parent":"a","kind":"nap"}` + "\n"
	code, stdout, stderr := runCLI(t, log, "replay", "-policy", treePolicy, "-")
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "agentstop replay: stdin: line 2: unknown kind \"nap\" (want one of input, message, tool_call, tool_result, handoff, stop, error, final)\n", stderr)

	// A truncated last line: an error, or with -lenient every result says so.
	log = `{"run":"a","kind":"input"}` + "\n" + `{"run":"a","kind":"mess`
	code, _, stderr = runCLI(t, log, "replay", "-policy", treePolicy, "-")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "-lenient")
	code, stdout, stderr = runCLI(t, log, "replay", "-policy", treePolicy, "-lenient", "-")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, `"truncated":true,"run":"a"`)
}

// TestMixedRunsReplayAndBacktest: a log in which some events carry run and
// others do not is an error naming the first line that breaks the first
// event's pattern, exit 2, in replay and backtest alike (§4), with the same
// message: replay neither invents a run with no id (first line has run)
// nor ignores run (first line has none).
func TestMixedRunsReplayAndBacktest(t *testing.T) {
	const tail = ": every event of a log names its run, or none does\n"
	for file, want := range map[string]string{
		"mixed.jsonl":            `: line 2: this event names no run, but the first event (line 1) names run "a"` + tail,
		"mixed-first-none.jsonl": `: line 3: this event names run "b", but the first event (line 1) names none` + tail,
	} {
		t.Run(file, func(t *testing.T) {
			path := bt + "bad/" + file
			code, stdout, stderr := runCLI(t, "", "replay", "-policy", policy, path)
			assert.Equal(t, exitBad, code, stdout)
			assert.Empty(t, stdout)
			assert.Equal(t, "agentstop replay: "+path+want, stderr)

			code, stdout, stderr = runCLI(t, "", "backtest", "-policy", policy, path)
			assert.Equal(t, exitBad, code, stdout)
			assert.Empty(t, stdout)
			assert.Equal(t, "agentstop backtest: "+path+want, stderr)
		})
	}
}

// TestEmptyPolicyWarns: an empty policy is valid (§3) and the replay or
// backtest runs, but nothing can stop a run: one warning line on stderr
// names the file. A policy that sets anything gets no warning.
func TestEmptyPolicyWarns(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"empty.yaml": "", "braces.json": "{}\n", "off.yaml": "# all off\nstop_message: false\n"} {
		t.Run(name, func(t *testing.T) {
			pol := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(pol, []byte(text), 0o644))
			want := "agentstop replay: " + pol + ": warning: the policy is empty (no condition, no limit): nothing can stop a run\n"

			code, stdout, stderr := runCLI(t, "", "replay", "-policy", pol, "../../testdata/runaway_search.jsonl")
			assert.Equal(t, exitOK, code, stderr)
			assert.Equal(t, want, stderr)
			assert.Contains(t, stdout, `"termination_cause":"natural_completion"`, "the run still replays")

			code, stdout, stderr = runCLI(t, "", "backtest", "-policy", pol, "-policy", policy, bt+"corpus")
			assert.Equal(t, exitOK, code, stderr)
			assert.Equal(t, strings.Replace(want, "replay", "backtest", 1), stderr)
			assert.Contains(t, stdout, name+": stopped 0 of 4 runs")
		})
	}
	for _, pol := range []string{policy, treePolicy} {
		_, _, stderr := runCLI(t, "", "replay", "-policy", pol, "../../testdata/runaway_search.jsonl")
		assert.NotContains(t, stderr, "warning", pol)
	}
	// A hold: with no limit of its own holds only what a remote parent
	// propagates (§8): it loads, and the warning says so.
	holdOnly := filepath.Join(dir, "hold.yaml")
	require.NoError(t, os.WriteFile(holdOnly, []byte("stall: {repeats: 3}\nhold: {timeout: 1m}\n"), 0o644))
	code, _, stderr := runCLI(t, "", "replay", "-policy", holdOnly, "../../testdata/runaway_search.jsonl")
	assert.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "agentstop replay: "+holdOnly+": warning: hold: has no limit of this policy to hold at (max_iterations, max_tool_calls, token_budget, cost_budget): it holds only tree limits a remote parent propagates\n", stderr)
}

// TestReplayTreeLenientTruncated: with -lenient, a log of many runs whose
// last line is cut marks only the results whose evaluation reached the cut
// line (§4): the runs no cause stopped, not the planner its tree limit
// stopped nor the researchers its end cancelled or skipped.
func TestReplayTreeLenientTruncated(t *testing.T) {
	log, err := os.ReadFile("../../testdata/tree_planner.jsonl")
	require.NoError(t, err)
	cut := string(log) + `{"run":"res-c","kind":"message","text":"Vendor C co`
	code, stdout, stderr := runCLI(t, cut, "replay", "-policy", treePolicy, "-lenient", "-")
	require.Equal(t, 0, code, stderr)
	truncated := map[string]bool{}
	for line := range strings.Lines(stdout) {
		var res termination.Result
		require.NoError(t, json.Unmarshal([]byte(line), &res), line)
		truncated[res.Run] = res.Truncated
	}
	assert.Equal(t, map[string]bool{"fetch-a": true, "planner": false, "res-a": false, "res-b": false, "res-c": false}, truncated)
}
