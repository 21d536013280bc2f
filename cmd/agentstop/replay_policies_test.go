package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const recordedLog = `{"kind":"message","run":"p","stage":"planner","time":"2026-11-28T10:00:00Z"}
{"kind":"message","run":"c","parent":"p","stage":"analyst","time":"2026-11-28T10:00:01Z"}
{"kind":"end","run":"p","stage":"planner","time":"2026-11-28T10:00:02Z","cause":{"$kind":"Cancelled","reason":"external","detail":"drill (by ops)"},"outcome":"failed","stopped_at":0,"events":1,"policy":"code"}
{"kind":"end","run":"c","parent":"p","stage":"analyst","time":"2026-11-28T10:00:02Z","cause":{"$kind":"Cancelled","reason":"parent","detail":"planner ended: cancelled"},"outcome":"failed","stopped_at":0,"events":1,"policy":"code"}
`

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	return dir
}

func TestReplayPolicies(t *testing.T) {
	dir := writeTree(t, map[string]string{"events.jsonl": recordedLog,
		"pol/planner.yaml": "max_iterations: 5\n", "pol/analyst.yaml": "max_iterations: 5\n",
		"half/analyst.yaml": "max_iterations: 5\n", "bad/planner.yaml": "max_iteration: 5\n",
		"none/other.yaml": "max_iterations: 5\n", "badname/my stage.yaml": "{}\n"})
	log := filepath.Join(dir, "events.jsonl")
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		out, errIn []string
	}{
		{"each stage its policy", []string{"-policies", filepath.Join(dir, "pol")}, 0,
			[]string{`"run":"p"`, `"from_record":true`, `"live":"cancelled"`, `"detail":"planner ended: cancelled"`, `"stage":"analyst"`}, nil},
		{"a stage without a file is left out", []string{"-policies", filepath.Join(dir, "half")}, 0,
			[]string{`"run":"c"`}, []string{"1 run left out: no policy for stage planner"}},
		{"-policy for the rest", []string{"-policies", filepath.Join(dir, "half"), "-policy", filepath.Join(dir, "pol", "planner.yaml")}, 0,
			[]string{`"run":"p"`, `"run":"c"`}, nil},
		{"no run left", []string{"-policies", filepath.Join(dir, "none")}, 2, nil,
			[]string{"2 runs left out: no policy for stage analyst, planner", "no run left to replay"}},
		{"missing directory", []string{"-policies", filepath.Join(dir, "nope")}, 2, nil, []string{"-policies " + filepath.Join(dir, "nope")}},
		{"invalid policy named", []string{"-policies", filepath.Join(dir, "bad")}, 2, nil, []string{filepath.Join(dir, "bad", "planner.yaml"), "max_iteration"}},
		{"a file that is no stage name", []string{"-policies", filepath.Join(dir, "badname")}, 2, nil, []string{"my stage.yaml", "stage name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", append(append([]string{"replay"}, tc.args...), log)...)
			require.Equal(t, tc.code, code, stderr)
			for _, s := range tc.out {
				require.Contains(t, stdout, s)
			}
			for _, s := range tc.errIn {
				require.Contains(t, stderr, s)
			}
			if tc.code == 0 && len(tc.errIn) == 0 {
				require.Empty(t, strings.TrimSpace(stderr))
			}
		})
	}
}

// TestReplayRecordedOneRun: a recorded log of one run without run ids
// (its first line names its stage) ends at its end record too.
func TestReplayRecordedOneRun(t *testing.T) {
	dir := writeTree(t, map[string]string{"p.yaml": "max_iterations: 5\n", "ev.jsonl": `{"kind":"message","stage":"coder","time":"2026-11-28T10:00:00Z"}
{"kind":"message","time":"2026-11-28T10:00:01Z"}
{"kind":"end","stage":"coder","time":"2026-11-28T10:00:02Z","cause":{"$kind":"Cancelled","reason":"external","detail":"x"},"outcome":"failed","stopped_at":0,"events":2,"policy":"code"}
`})
	code, stdout, stderr := runCLI(t, "", "replay", "-policy", filepath.Join(dir, "p.yaml"), filepath.Join(dir, "ev.jsonl"))
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"stage":"coder"`)
	require.Contains(t, stdout, `"from_record":true,"live":"cancelled"`)
	require.Contains(t, stdout, `"duration":"2s"`)
}
