package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestReplayEmptyLog: a log with no events (an empty file, blank lines,
// empty stdin, one truncated line under -lenient) is bad input naming the
// file, exit 2, as in backtest — not a run that completed, which a CI job
// with -fail-on failed would pass. A log whose first line is a run's end
// record (a run that ended before its first event) is a recorded log: it
// prints that run's recorded end, and with a second run one result each.
func TestReplayEmptyLog(t *testing.T) {
	dir := t.TempDir()
	empty := writeFile(t, dir, "empty.jsonl", "")
	blank := writeFile(t, dir, "blank.jsonl", "\n  \n\xef\xbb\xbf\n")
	cut := writeFile(t, dir, "cut.jsonl", "{\"kind\":\"mess")
	records := writeFile(t, dir, "records.jsonl", `{"kind":"end","run":"r1","stage":"critic","cause":{"$kind":"NaturalCompletion"},"outcome":"succeeded","stopped_at":0,"events":2}`+"\n")
	tree := writeFile(t, dir, "tree.yaml", "tree: {max_iterations: 3}\n")
	policies := t.TempDir()
	writeFile(t, policies, "replay.yaml", "max_tool_calls: 3\n")

	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"empty file", []string{"-policy", policy, empty}, empty + ": no events"},
		{"empty file, -fail-on failed", []string{"-policy", policy, "-fail-on", "failed", empty}, empty + ": no events"},
		{"blank lines", []string{"-policy", policy, "-format", "table", blank}, blank + ": no events"},
		{"empty stdin", []string{"-policy", policy, "-"}, "stdin: no events"},
		{"empty file, tree policy", []string{"-policy", tree, empty}, empty + ": no events"},
		{"empty file, -policies", []string{"-policies", policies, empty}, empty + ": no events"},
		{"one truncated line, -lenient", []string{"-policy", policy, "-lenient", cut},
			cut + ": no complete event: the file's only line is truncated"},
		{"one truncated line, -lenient, tree policy", []string{"-policy", tree, "-lenient", cut},
			cut + ": no complete event: the file's only line is truncated"},
		{"one truncated line, -lenient, -policies", []string{"-policies", policies, "-lenient", cut},
			cut + ": no complete event: the file's only line is truncated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", append([]string{"replay"}, tc.args...)...)
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout)
			assert.Equal(t, "agentstop replay: "+tc.stderr+"\n", stderr)
			assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line on stderr")
		})
	}
	two := writeFile(t, dir, "two.jsonl", strings.TrimSpace(readFileString(t, records))+"\n"+`{"kind":"message","run":"r2","stage":"critic","text":"hi"}`+"\n")
	for file, want := range map[string]int{records: 1, two: 2} {
		code, stdout, stderr := runCLI(t, "", "replay", "-policy", policy, file)
		assert.Equal(t, exitOK, code, stderr)
		assert.Equal(t, want, strings.Count(stdout, "\n"), "one result per run: %s", stdout)
		assert.Contains(t, stdout, `"run":"r1"`)
		assert.Contains(t, stdout, `"from_record":true`)
	}
}

func readFileString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
