package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/backtest"
)

const bt = "../../backtest/testdata/"

func TestBacktestFormats(t *testing.T) {
	args := []string{"backtest", "-policy", bt + "strict.yaml", "-policy", bt + "loose.yaml", "-labels", bt + "labels.csv", "-j", "2"}
	code, out, errOut := runCLI(t, "", append(args, bt+"corpus")...)
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut, "no progress line when stderr is not a terminal")
	assert.Contains(t, out, "strict.yaml  4     4        2 of 2       2 of 2")
	assert.Contains(t, out, "loose.yaml   4     2        2 of 2       0 of 2")

	code, out, errOut = runCLI(t, "", append(args, "-format", "json", "-all", bt+"corpus")...)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 8+2)
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	for _, k := range []string{"termination_cause", "stopped_at", "run", "file", "policy", "label", "saved", "all"} {
		assert.Contains(t, first, k)
	}
	var sum struct {
		Summary struct {
			Policy string
			Labels struct {
				GoodStopped int `json:"good_stopped"`
			}
		}
	}
	require.NoError(t, json.Unmarshal([]byte(lines[8]), &sum))
	assert.Equal(t, "strict.yaml", sum.Summary.Policy)
	assert.Equal(t, 2, sum.Summary.Labels.GoodStopped)

	code, out, errOut = runCLI(t, "", append(args, "-format", "csv", bt+"corpus")...)
	require.Equal(t, 0, code, errOut)
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 1+8)
	assert.Contains(t, rows[0], "saved_tokens_input")
}

// TestBacktestUnmatchedLabels: labels that name no run of the corpus (a
// typo gave "0 good, 0 bad" in silence) are one warning line on stderr
// naming a few of them and their count; the backtest goes on (exit 0).
func TestBacktestUnmatchedLabels(t *testing.T) {
	dir := t.TempDir()
	typos := writeFile(t, dir, "labels.csv", "good/lonng,good\nbad/lop,bad\nx,bad\ny,bad\nbad/burn,bad\n")
	one := writeFile(t, dir, "one.json", `{"good/long": "good", "goodlong": "good"}`)
	for _, tc := range []struct {
		name, labels, want string
	}{
		{"four typos", typos, typos + `: warning: 4 labels name no run of the corpus, ignored: "bad/lop", "good/lonng", "x" and 1 more (the corpus names its runs like "bad/burn")`},
		{"one typo", one, one + `: warning: 1 label names no run of the corpus, ignored: "goodlong" (the corpus names its runs like "bad/burn")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", "backtest", "-policy", bt+"strict.yaml", "-labels", tc.labels, bt+"corpus")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "agentstop backtest: "+tc.want+"\n", errOut)
			assert.Contains(t, out, "strict.yaml")
		})
	}
	code, _, errOut := runCLI(t, "", "backtest", "-policy", bt+"strict.yaml", "-labels", bt+"labels.csv", bt+"corpus")
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut, "every label names a run: no warning")
}

// TestBacktestAllTable: -all changes the table too (it used to change only
// json and csv): each policy's section lists the conditions that would
// fire over each whole run, each with the event where it first fires.
func TestBacktestAllTable(t *testing.T) {
	args := []string{"backtest", "-policy", bt + "strict.yaml", bt + "corpus/bad/burn.jsonl"}
	code, without, errOut := runCLI(t, "", args...)
	require.Equal(t, 0, code, errOut)
	code, with, errOut := runCLI(t, "", append(args, "-all")...)
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, without, "FIRES AT")
	assert.True(t, strings.HasPrefix(with, without), "-all adds to the table:\n%s", with)
	assert.Equal(t, "\n  every condition that would fire over the whole run (-all), the first to fire first:\n"+
		"  RUN   FIRES AT  CONDITION                     CAUSE\n"+
		"  burn  event 5   token_budget: {total: 60000}  budget_exhausted\n"+
		"        event 20  max_iterations: 6             max_iterations\n", strings.TrimPrefix(with, without))
}

func TestBacktestMaxFalseStops(t *testing.T) {
	base := []string{"backtest", "-labels", bt + "labels.json", "-format", "json"}
	code, _, errOut := runCLI(t, "", append(base, "-policy", bt+"strict.yaml", "-max-false-stops", "1", bt+"corpus")...)
	assert.Equal(t, 1, code)
	assert.Equal(t, "agentstop backtest: strict.yaml stops 2 good runs, more than -max-false-stops 1\n", errOut)
	code, _, errOut = runCLI(t, "", append(base, "-policy", bt+"strict.yaml", "-max-false-stops", "2", bt+"corpus")...)
	assert.Equal(t, 0, code, errOut)
	code, _, errOut = runCLI(t, "", append(base, "-policy", bt+"loose.yaml", "-max-false-stops", "0", bt+"corpus")...)
	assert.Equal(t, 0, code, errOut)
}

func TestBacktestLenient(t *testing.T) {
	code, _, errOut := runCLI(t, "", "backtest", "-policy", bt+"strict.yaml", bt+"bad/truncated.jsonl")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "truncated.jsonl")
	code, out, errOut := runCLI(t, "", "backtest", "-format", "json", "-lenient", "-policy", bt+"strict.yaml", bt+"bad/truncated.jsonl")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"truncated":true`)
}

func TestBacktestBadInput(t *testing.T) {
	dir := t.TempDir()
	badPolicy := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(badPolicy, []byte("stall: {repeats: 1}\n"), 0o644))
	badLabels := filepath.Join(dir, "labels.csv")
	require.NoError(t, os.WriteFile(badLabels, []byte("run,label\nx,perhaps\n"), 0o644))
	fleet := filepath.Join(dir, "fleet.yaml")
	require.NoError(t, os.WriteFile(fleet, []byte("max_iterations: 3\nfleet_budget: {key: stage, window: 1h, cost: 5}\n"), 0o644))
	p := "-policy=" + bt + "strict.yaml"
	tests := []struct {
		name string
		args []string
		err  string
	}{
		{"no policy", []string{bt + "corpus"}, "-policy or -policies is required"},
		{"no path", []string{p}, "want at least one PATH"},
		{"bad format", []string{p, "-format", "xml", bt + "corpus"}, `-format "xml": want table, json or csv`},
		{"bad workers", []string{p, "-j", "0", bt + "corpus"}, "-j 0: want at least 1 worker"},
		{"bad max", []string{p, "-labels", bt + "labels.csv", "-max-false-stops", "-2", bt + "corpus"}, "-max-false-stops -2"},
		{"max not a number", []string{p, "-labels", bt + "labels.csv", "-max-false-stops", "few", bt + "corpus"}, `want a whole number of runs, got "few"`},
		{"max without labels", []string{p, "-max-false-stops", "0", bt + "corpus"}, "-max-false-stops needs -labels"},
		{"unknown flag", []string{p, "-bogus", bt + "corpus"}, "flag provided but not defined: -bogus"},
		{"bad policy", []string{"-policy", badPolicy, bt + "corpus"}, "bad.yaml: policy.stall.repeats"},
		{"missing policy", []string{"-policy", filepath.Join(dir, "none.yaml"), bt + "corpus"}, "cannot read the policy file"},
		{"bad labels", []string{p, "-labels", badLabels, bt + "corpus"}, `labels.csv: line 2: run "x": label "perhaps"`},
		{"missing path", []string{p, filepath.Join(dir, "none")}, "cannot read"},
		{"malformed line", []string{p, bt + "bad/malformed.jsonl"}, "malformed.jsonl: line 2: usage.input_tokens"},
		{"pretty-printed JSON", []string{p, bt + "bad/pretty.jsonl"}, "pretty.jsonl: line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", append([]string{"backtest"}, tt.args...)...)
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			assert.Contains(t, errOut, tt.err)
			assert.True(t, strings.HasPrefix(errOut, "agentstop backtest: "), errOut)
			assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
		})
	}
	code, _, errOut := runCLI(t, "", "backtest", "-policy", fleet, bt+"corpus")
	assert.Equal(t, 0, code)
	assert.Contains(t, errOut, "fleet_budget is valid but ignored")

	code, out, _ := runCLI(t, "", "backtest", "-h")
	assert.Equal(t, 0, code)
	for _, f := range []string{"-policy", "-labels", "-all", "-lenient", "-format", "-j", "-max-false-stops"} {
		assert.Contains(t, out, f)
	}
}

func TestBacktestProgressLine(t *testing.T) {
	var b strings.Builder
	p := &progressLine{w: &b}
	p.update(backtestProgress(1, 4))
	p.update(backtestProgress(2, 4)) // within 100 ms: not drawn
	p.update(backtestProgress(4, 4)) // the last is always drawn
	p.clear()
	assert.Equal(t, 2, strings.Count(b.String(), "backtest: "), b.String())
	assert.Contains(t, b.String(), "4 runs done (4 of 4 files)")
	assert.True(t, strings.HasSuffix(b.String(), "\r\033[K"))
	var none *progressLine
	none.clear()
}

func backtestProgress(done, files int) backtest.Progress {
	return backtest.Progress{Files: files, FilesDone: done, Runs: done, Events: int64(10 * done), Elapsed: time.Second}
}

// TestBacktestSameFileNames: candidates whose file names collide (two
// p.yaml, two -policies dirs named policies) are told apart by the
// shortest path suffix that differs, in the table, the JSON summaries and
// the stderr lines that name a candidate.
func TestBacktestSameFileNames(t *testing.T) {
	dir := t.TempDir()
	for sub, src := range map[string]string{"x1": "strict.yaml", "x2": "loose.yaml"} {
		b, err := os.ReadFile(bt + src)
		require.NoError(t, err)
		require.NoError(t, os.Mkdir(filepath.Join(dir, sub), 0o700))
		writeFile(t, filepath.Join(dir, sub), "p.yaml", string(b))
	}
	x1, x2 := filepath.Join(dir, "x1", "p.yaml"), filepath.Join(dir, "x2", "p.yaml")
	args := []string{"backtest", "-policy", x1, "-policy", x2, "-labels", bt + "labels.csv", "-max-false-stops", "0"}

	code, out, errOut := runCLI(t, "", append(args, bt+"corpus")...)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, out, "x1/p.yaml  4     4        2 of 2       2 of 2")
	assert.Contains(t, out, "x2/p.yaml  4     2        2 of 2       0 of 2")
	assert.Equal(t, "agentstop backtest: x1/p.yaml stops 2 good runs, more than -max-false-stops 0\n", errOut)

	code, out, _ = runCLI(t, "", append(args, "-format", "json", bt+"corpus")...)
	assert.Equal(t, exitFail, code)
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var v struct {
			Policy  string
			Summary *struct{ Policy string }
		}
		require.NoError(t, json.Unmarshal([]byte(line), &v))
		if v.Summary != nil {
			names = append(names, v.Summary.Policy)
		} else {
			assert.Contains(t, []string{"x1/p.yaml", "x2/p.yaml"}, v.Policy, "each outcome names its candidate")
		}
	}
	assert.Equal(t, []string{"x1/p.yaml", "x2/p.yaml"}, names)

	// Two -policies dirs of one name, each without a policy for the
	// corpus's stage: the lines that say so tell them apart.
	a, b := filepath.Join(dir, "a", "policies"), filepath.Join(dir, "b", "policies")
	require.NoError(t, os.MkdirAll(a, 0o700))
	require.NoError(t, os.MkdirAll(b, 0o700))
	writeFile(t, a, "other.yaml", "max_iterations: 3\n")
	writeFile(t, b, "other.yaml", "max_iterations: 4\n")
	code, _, errOut = runCLI(t, "", "backtest", "-policies", a, "-policies", b, bt+"corpus")
	assert.Equal(t, exitBad, code)
	assert.Contains(t, errOut, "agentstop backtest: a/policies: ")
	assert.Contains(t, errOut, "agentstop backtest: b/policies: ")
}
