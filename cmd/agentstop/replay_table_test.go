package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeTemp writes content to a file named name in a test directory and
// returns its path.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

// longText is 75 characters whose 60th and 61st are two-byte letters, so
// a cut by bytes would split one.
var longText = strings.Repeat("ab", 29) + "éé" + strings.Repeat("z", 15)

// centLog is a run whose costs add up in binary floating point to
// 0.30000000000000004 on the event that crosses the cost budget's
// pressure and to 0.4234567 (seven digits) on the one that exhausts it, and whose
// repeated long message is a stall's evidence.
var centLog = func() string {
	var b strings.Builder
	b.WriteString(`{"kind":"input","text":"go"}` + "\n")
	for _, cost := range []string{"0.1", "0.2", "0.1234567"} {
		fmt.Fprintf(&b, `{"kind":"message","text":%q,"cost":%s}`+"\n", longText+"\n\ttail", cost)
	}
	return b.String()
}()

// TestReplayTable: -format table prints one row per run for people, as
// in the golden files: a run of one log (its stall's evidence events), a
// tree of runs, a run with warnings, evidence text longer than 60
// characters cut on a character boundary, money rounded to 6 significant
// digits.
func TestReplayTable(t *testing.T) {
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"runaway_search.table", []string{"-policy", "../../testdata/policy.yaml", "../../testdata/runaway_search.jsonl"}},
		{"tree_planner.table", []string{"-policy", treePolicy, "../../testdata/tree_planner.jsonl"}},
		{"tree_evidence.table", []string{"-policy", writeTemp(t, "calls.yaml", "max_tool_calls: 1\n"), "../../testdata/tree_planner.jsonl"}},
		{"budget_burner.table", []string{"-policy", "../../testdata/policy.yaml", "../../testdata/budget_burner.jsonl"}},
		{"long_text.table", []string{"-policy", writeTemp(t, "stall.yaml", "stall: {repeats: 3}\n"), writeTemp(t, "run.jsonl", centLog)}},
		{"money.table", []string{"-policy", writeTemp(t, "cost.yaml", "cost_budget: {limit: 0.4, pressure: 0.5}\n"), writeTemp(t, "run.jsonl", centLog)}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			args := append([]string{"replay", "-format", "table"}, tc.args...)
			code, stdout, stderr := runCLI(t, "", args...)
			require.Equal(t, 0, code, stderr)
			assert.Empty(t, stderr)
			golden := filepath.Join("testdata", tc.golden)
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(stdout), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), stdout)
		})
	}
}

// TestReplayTableDetails checks what the golden files show: the cut text
// (60 characters, a whole letter, then "…"), the rounded money, nouns
// that agree.
func TestReplayTableDetails(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "replay", "-format", "table", "-policy", writeTemp(t, "stall.yaml", "stall: {repeats: 3}\n"), writeTemp(t, "run.jsonl", centLog))
	require.Equal(t, 0, code, stderr)
	cut := []rune(longText)[:60]
	assert.Equal(t, 'é', cut[59])
	assert.Contains(t, stdout, `#2 message "`+string(cut)+`…"`)
	assert.NotContains(t, stdout, string([]rune(longText)[:61]))
	assert.Contains(t, stdout, "4 of 4 events")

	code, stdout, stderr = runCLI(t, "", "replay", "-format", "table", "-policy", writeTemp(t, "cost.yaml", "cost_budget: {limit: 0.4, pressure: 0.5}\n"), writeTemp(t, "run.jsonl", centLog))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "cost budget exhausted (0.423457 of 0.4 used)")
	assert.Contains(t, stdout, "budget pressure on cost (0.3 of 0.4 used, threshold 0.5)")
	assert.NotContains(t, stdout, "0000")

	// A run held at a limit and raised: the limit is among its warnings,
	// and says the run was held there; it ends at the raised limit.
	msg := func(sec int) string {
		return fmt.Sprintf(`{"kind":"message","run":"a","stage":"s","time":"2026-11-28T10:00:0%dZ"}`, sec) + "\n"
	}
	held := msg(0) + msg(1) + `{"kind":"raise","run":"a","time":"2026-11-28T10:00:02Z","limits":{"iterations":1}}` + "\n" + msg(3) + msg(4)
	code, stdout, stderr = runCLI(t, "", "replay", "-format", "table", "-policy", writeTemp(t, "hold.yaml", "max_iterations: 1\nhold: {timeout: 1m}\n"), writeTemp(t, "held.jsonl", held))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "held at max iterations reached (2 > limit 1)")
	assert.Contains(t, stdout, "max_iterations")

	code, stdout, stderr = runCLI(t, `{"kind":"input","text":"hi"}`+"\n", "replay", "-format", "table", "-policy", "../../testdata/policy.yaml", "-")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "- of 1 event\n")

	// -lenient over a cut log says so under where the run stopped.
	code, stdout, stderr = runCLI(t, `{"kind":"input","text":"hi"}`+"\n"+`{"kind":"mess`, "replay", "-lenient", "-format", "table", "-policy", "../../testdata/policy.yaml", "-")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "RUN  STAGE   CAUSE               STOPPED          EVIDENCE  WARNINGS\n"+
		"-    replay  natural_completion  - of 1 event\n"+
		"                                 (log truncated)\n", stdout)
}

// TestReplayFormat: -format json is the default output, byte for byte; an
// unknown -format is bad input, one line, exit 2.
func TestReplayFormat(t *testing.T) {
	for _, log := range []string{"../../testdata/runaway_search.jsonl", "../../testdata/tree_planner.jsonl"} {
		_, def, _ := runCLI(t, "", "replay", "-policy", treePolicy, log)
		code, js, stderr := runCLI(t, "", "replay", "-format", "json", "-policy", treePolicy, log)
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, def, js, log)
	}
	want, err := os.ReadFile("testdata/runaway_search.golden")
	require.NoError(t, err)
	_, js, _ := runCLI(t, "", "replay", "-format", "json", "-policy", "../../testdata/policy.yaml", "../../testdata/runaway_search.jsonl")
	assert.Equal(t, string(want), js)

	for _, log := range []string{"../../testdata/runaway_search.jsonl", "../../testdata/tree_planner.jsonl"} {
		code, stdout, stderr := runCLI(t, "", "replay", "-format", "yaml", "-policy", "../../testdata/policy.yaml", log)
		assert.Equal(t, 2, code)
		assert.Empty(t, stdout)
		assert.Equal(t, "agentstop replay: -format: unknown format \"yaml\" (want json or table)\n", stderr)
	}
}

// TestReplayTableFailOn: -fail-on applies under -format table too, and the
// table is printed.
func TestReplayTableFailOn(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "replay", "-format", "table", "-fail-on", "skipped", "-policy", treePolicy, "../../testdata/tree_planner.jsonl")
	assert.Equal(t, 1, code)
	assert.Contains(t, stdout, "res-c")
	assert.Equal(t, "agentstop replay: 1 of 5 runs has an outcome listed in -fail-on\n", stderr)
}

// TestReplayTableREADME: the README shows the table of runaway_search.jsonl
// as replay prints it.
func TestReplayTableREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, stdout, _ := runCLI(t, "", "replay", "-format", "table", "-policy", "../../testdata/policy.yaml", "../../testdata/runaway_search.jsonl")
	assert.Contains(t, string(readme), "```text\n$ go run ./cmd/agentstop replay -format table -policy testdata/policy.yaml testdata/runaway_search.jsonl\n"+stdout+"```\n")
}
