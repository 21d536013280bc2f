package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentstop/agentstop/importer"
)

// TestMalformedStage: every command that takes -stage rejects a name that
// breaks the stage name rules (which middleware.New applies, so no run can
// have it) with exit 2 and one line naming the flag, the value and the
// rule, before it reads a file or dials Redis.
func TestMalformedStage(t *testing.T) {
	const rule = "a stage name is 1 to 128 of the characters A-Z a-z 0-9 . _ - (a safe file name), starting with a letter or digit"
	log := "../../testdata/react_complete.jsonl"
	for _, tc := range []struct {
		name, stage, why string
		args             []string
	}{
		{"block", "bad name!", `has ' ' at byte 3`, []string{"block", "-reason", "x"}},
		{"unblock", "bad name!", `has ' ' at byte 3`, []string{"unblock"}},
		{"stop", "bad name!", `has ' ' at byte 3`, []string{"stop", "-reason", "x"}},
		{"runs", "bad name!", `has ' ' at byte 3`, []string{"runs"}},
		{"runs, a path", "../x", `starts with '.'`, []string{"runs", "-json"}},
		{"stop, blank", " ", `starts with ' '`, []string{"stop", "-reason", "x"}},
		{"block, a device", "nul", "is a device name on Windows, not a file name", []string{"block", "-reason", "x"}},
		{"replay", "bad name!", `has ' ' at byte 3`, []string{"replay", "-policy", policy, log}},
		{"replay, empty", "", "is empty", []string{"replay", "-policy", policy, log}},
		{"replay, blank", " ", `starts with ' '`, []string{"replay", "-policy", policy, log}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{}, tc.args...), "-stage", tc.stage)
			code, stdout, stderr := runCLI(t, "", args...)
			assert.Equal(t, exitBad, code)
			assert.Empty(t, stdout)
			want := "agentstop " + tc.args[0] + ": -stage " + strconv.Quote(tc.stage) + " " + tc.why + ": " + rule + "\n"
			assert.Equal(t, want, stderr)
		})
	}
}

// TestGoodStageFlag: a well-formed -stage goes through, and a fleet
// command's -stage ” is still no selector (the next check speaks).
func TestGoodStageFlag(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "replay", "-policy", policy, "-stage", "billing.v2", "../../testdata/react_complete.jsonl")
	assert.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, `"stage":"billing.v2"`)
	code, _, stderr = runCLI(t, "", "block", "-stage", "", "-reason", "x")
	assert.Equal(t, exitBad, code)
	assert.Equal(t, "agentstop block: -redis URL (or AGENTSTOP_REDIS_URL) is required\n", stderr)
	code, _, stderr = runFleetCLI(t, map[string]string{"AGENTSTOP_REDIS_URL": "redis://127.0.0.1:1"}, "block", "-stage", "", "-reason", "x")
	assert.Equal(t, exitBad, code)
	assert.Contains(t, stderr, "a selector is required")
}

// TestReplayRepeatedFlag: replay's single-valued flags given twice are an
// error (the flag package would keep the last silently); a repeated
// -policy points to backtest, which compares several.
func TestReplayRepeatedFlag(t *testing.T) {
	log := "../../testdata/react_complete.jsonl"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"policy", []string{"-policy", policy, "-policy", "other.yaml"},
			`-policy given 2 times ("` + policy + `", "other.yaml"): replay takes one policy; to compare several, use agentstop backtest -policy A -policy B LOG`},
		{"policies", []string{"-policies", "a", "-policies", "b"},
			`-policies given 2 times ("a", "b"): replay takes one -policies DIR; to compare several, use agentstop backtest -policies A -policies B LOG`},
		{"stage", []string{"-policy", policy, "-stage", "a", "-stage", "b"},
			`-stage given 2 times ("a", "b"): replay takes one -stage NAME`},
		{"fail-on", []string{"-policy", policy, "-fail-on", "failed", "-fail-on", "skipped"},
			`-fail-on given 2 times ("failed", "skipped"): replay takes one -fail-on; give both outcomes as -fail-on failed,skipped`},
		{"format, same value", []string{"-policy", policy, "-format", "json", "-format", "json"},
			`-format given 2 times ("json", "json"): replay takes one -format`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", append(append([]string{"replay"}, tc.args...), log)...)
			assert.Equal(t, exitBad, code)
			assert.Empty(t, stdout)
			assert.Equal(t, "agentstop replay: "+tc.want+"\n", stderr)
		})
	}
}

// TestUsageNamesEveryImportFormat: "agentstop -h" names every format
// import takes, in importer.Formats' order (the list is built from it).
func TestUsageNamesEveryImportFormat(t *testing.T) {
	code, stdout, _ := runCLI(t, "", "-h")
	assert.Equal(t, exitOK, code)
	var line string
	for l := range strings.Lines(stdout) {
		if strings.HasPrefix(strings.TrimSpace(l), "import ") {
			line = l
		}
	}
	assert.Contains(t, line, "("+strings.Join(importer.Formats(), ", ")+")")
	for _, f := range importer.Formats() {
		assert.Contains(t, line, f)
	}
}
