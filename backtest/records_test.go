package backtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentstop/agentstop/termination"
	"github.com/stretchr/testify/require"
)

// The recording: a planner with a tree token budget whose two
// analysts burn tokens; live the planner ended on the tree budget
// (budget_exhausted, scope tree) and the analysts Cancelled{parent}. A
// coder run was stopped live at its 3rd event by a fleet stop.
const recording = `{"kind":"message","run":"p","stage":"planner","time":"2026-11-28T10:00:00Z","usage":{"input_tokens":100}}
{"kind":"message","run":"c1","parent":"p","stage":"analyst","time":"2026-11-28T10:00:01Z","usage":{"input_tokens":7000}}
{"kind":"message","run":"c2","parent":"p","stage":"analyst","time":"2026-11-28T10:00:02Z","usage":{"input_tokens":7000}}
{"kind":"message","run":"c1","time":"2026-11-28T10:00:03Z","usage":{"input_tokens":1000}}
{"kind":"end","run":"p","stage":"planner","time":"2026-11-28T10:00:03Z","cause":{"$kind":"BudgetExhausted","resource":"total_tokens","used":15100,"limit":15000,"scope":"tree"},"outcome":"failed","stopped_at":0,"events":1,"policy":"code"}
{"kind":"end","run":"c1","parent":"p","stage":"analyst","time":"2026-11-28T10:00:03Z","cause":{"$kind":"Cancelled","reason":"parent","detail":"planner ended: budget_exhausted"},"outcome":"failed","stopped_at":0,"events":2,"policy":"code"}
{"kind":"end","run":"c2","parent":"p","stage":"analyst","time":"2026-11-28T10:00:03Z","cause":{"$kind":"Cancelled","reason":"parent","detail":"planner ended: budget_exhausted"},"outcome":"failed","stopped_at":0,"events":1,"policy":"code"}
{"kind":"message","run":"k","stage":"coder","time":"2026-11-28T10:00:00Z","usage":{"input_tokens":10}}
{"kind":"message","run":"k","time":"2026-11-28T10:00:01Z","usage":{"input_tokens":10}}
{"kind":"message","run":"k","time":"2026-11-28T10:00:02Z","usage":{"input_tokens":10}}
{"kind":"end","run":"k","stage":"coder","time":"2026-11-28T10:00:02Z","cause":{"$kind":"Cancelled","reason":"external","detail":"drill (by ops)"},"outcome":"failed","stopped_at":0,"events":3,"policy":"code"}
`

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	}
	return dir
}

func TestBacktestRecordedRuns(t *testing.T) {
	dir := writeDir(t, map[string]string{"events.jsonl": recording,
		"live/planner.yaml": "tree: {token_budget: {total: 15000}}\n", "live/analyst.yaml": "max_iterations: 20\n", "live/coder.yaml": "max_iterations: 20\n",
		"strict/analyst.yaml": "max_iterations: 1\n", "strict/coder.yaml": "max_iterations: 1\n",
		"notree.yaml": "max_iterations: 50\n"})
	live, err := LoadStagePolicies(filepath.Join(dir, "live"))
	require.NoError(t, err)
	strict, err := LoadStagePolicies(filepath.Join(dir, "strict"))
	require.NoError(t, err)
	notree, err := LoadPolicy(filepath.Join(dir, "notree.yaml"))
	require.NoError(t, err)
	for _, workers := range []int{1, 4} {
		rep := mustEvaluate(t, []string{filepath.Join(dir, "events.jsonl")}, Config{Policies: []Policy{live, strict, notree}, Workers: workers})
		require.Equal(t, "live", rep.Summaries[0].Policy)
		require.Equal(t, "strict", rep.Summaries[1].Policy)
		out := map[string]map[string]Outcome{}
		for _, o := range rep.Outcomes {
			if out[o.Policy] == nil {
				out[o.Policy] = map[string]Outcome{}
			}
			out[o.Policy][o.Run] = o
		}
		// The policies it ran under: every run as live, nothing saved,
		// nothing stopped that live did not.
		s := rep.Summaries[0]
		require.Equal(t, 4, s.Runs)
		require.Equal(t, termination.Totals{}, s.Saved, "no policy saves what live already stopped")
		require.Equal(t, LiveSummary{Recorded: 4, Differ: 0, Changes: map[string]int{}}, s.Live)
		require.Equal(t, "budget_exhausted", out["live"]["p"].Result.Tag())
		require.Equal(t, 2, out["live"]["c1"].Result.Events)
		require.True(t, out["live"]["p"].Stopped, "the live policy stops the planner where live did")
		require.Equal(t, "budget_exhausted", out["live"]["p"].Result.Live)
		require.False(t, out["live"]["c1"].Stopped, "a cascade as live is not the policy's stop")
		require.True(t, out["live"]["k"].Result.FromRecord)
		require.False(t, out["live"]["k"].Stopped, "a recorded end is not the policy's stop")

		// A policy without tree: saves nothing either: the runs end at
		// their recorded ends.
		s = rep.Summaries[2]
		require.Equal(t, 0, s.Stopped)
		require.Equal(t, termination.Totals{}, s.Saved)
		require.True(t, out["notree.yaml"]["p"].Result.FromRecord)
		require.Equal(t, "budget_exhausted", out["notree.yaml"]["p"].Result.Tag())

		// A stricter candidate: the planner is left out (no file), the
		// analysts and the coder stop at their 2nd iteration; saved
		// counts to the recorded end.
		s = rep.Summaries[1]
		require.Equal(t, 3, s.Runs)
		require.Equal(t, []map[string]int{nil, {"planner": 1}, nil}, rep.LeftOut())
		k := out["strict"]["k"]
		require.True(t, k.Stopped)
		require.Equal(t, 2, k.Result.StoppedAt)
		require.Equal(t, 1, k.Saved.Events, "the 3rd event, the last before the recorded end")
		require.Equal(t, "cancelled", k.Result.Live)
		require.Equal(t, 2, s.Live.Differ)
		require.Equal(t, map[string]int{"cancelled → max_iterations": 2}, s.Live.Changes)

		var table bytes.Buffer
		require.NoError(t, rep.WriteTable(&table))
		require.Contains(t, table.String(), "vs live: ends 2 of 3 runs with an end record differently (cancelled → max_iterations 2)")
		var js bytes.Buffer
		require.NoError(t, rep.WriteJSON(&js))
		require.Contains(t, js.String(), `"from_record":true`)
		require.Contains(t, js.String(), `"live":"budget_exhausted"`)
		require.NotContains(t, js.String(), `"run":"p","file":"`+filepath.Join(dir, "events.jsonl")+`","policy":"strict"`)
		require.Equal(t, 4*3-1+3, strings.Count(js.String(), `"saved":`), "one object per (run, candidate) kept, and a summary per candidate")
	}
}

func TestLoadStagePoliciesErrors(t *testing.T) {
	dir := writeDir(t, map[string]string{"bad/planner.yaml": "max_iteration: 3\n", "dup/a.yaml": "{}\n", "dup/a.yml": "{}\n",
		"name/x y.yaml": "{}\n", "ok/a.yaml": "max_iterations: 2\n", "ok/notes.txt": "ignored"})
	for _, tc := range []struct{ dir, err string }{
		{"missing", "-policies " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{"bad", filepath.Join(dir, "bad", "planner.yaml") + ": policy.max_iteration"},
		{"dup", `a second policy file for stage "a"`},
		{"name", "x y.yaml: the file's name is not STAGE.yaml"},
	} {
		_, err := LoadStagePolicies(filepath.Join(dir, tc.dir))
		require.ErrorContains(t, err, tc.err, tc.dir)
	}
	p, err := LoadStagePolicies(filepath.Join(dir, "ok") + "/")
	require.NoError(t, err)
	require.Equal(t, "ok", p.Name)
	require.Len(t, p.Stages, 1)
}
