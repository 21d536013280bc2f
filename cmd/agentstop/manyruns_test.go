//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The contract's §6 memory figure: replay and backtest of a 200 MB log of
// 1,000 interleaved runs peak at most at this resident set size.
const (
	manyRunsLogMB    = 200
	manyRunsRuns     = 1000
	manyRunsPeakMB   = 150
	manyRunsPolicies = 10 // backtest's, half of them with tree: limits
	manyRunsPolicy   = `max_iterations: {limit: 500, pressure: 0.8}
max_tool_calls: {limit: 500, per_tool: {bash: 40}}
timeout: 2h
token_budget: {total: 10000000, pressure: 0.8, grace: 1}
cost_budget: {limit: 100}
stall: {repeats: 6, window: 8, cycle: 3, same_result: true}
errors: {consecutive: 3, total: 10}
text_mention: {text: TERMINATE}
function_call: [approve]
handoff: [user]
stop_message: true
`
	manyRunsTreePolicy = manyRunsPolicy + `tree: {token_budget: {total: 100000000}, max_tool_calls: 100000}
`
)

var manyRunsBin = flag.String("manyruns.bin", "", "the agentstop binary TestManyRunsMemory measures (default: built from this package)")

// TestManyRunsMemory measures the peak resident set size of agentstop
// replay (JSON, and -format table, which describes the evidence events as
// it reads) and agentstop backtest over a generated 200 MB log of 1,000
// interleaved runs (trees among them), each run as a process of its own,
// and holds them to the contract's 150 MB (§4, §6). It generates the log
// in a temporary directory and builds the command (without -race, whatever
// the test runs with); -short skips it. -manyruns.bin measures another
// build (an earlier one, for comparison).
func TestManyRunsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 200 MB log and builds the command")
	}
	bin, log, pols := manyRunsSetup(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"replay", manyRunsReplay(pols, log)},
		{"replay -format table", append([]string{"replay", "-format", "table"}, manyRunsReplay(pols, log)[1:]...)},
		{"backtest", manyRunsBacktest(pols, log)},
	} {
		peak, launcher, out := peakRSS(t, bin, c.args...)
		t.Logf("%s: peak RSS %.1f MB over a %d MB log (the launcher's own: %.1f MB)", c.name, float64(peak)/1e6, manyRunsLogMB, float64(launcher)/1e6)
		assert.LessOrEqual(t, peak, int64(manyRunsPeakMB*1e6), "%s: peak RSS %.1f MB", c.name, float64(peak)/1e6)
		// Every run has a result.
		want := manyRunsRuns
		if c.name == "backtest" {
			want = (manyRunsRuns + 1) * manyRunsPolicies // a result per run and policy, then a summary per policy
		}
		if c.name == "replay -format table" {
			// A row per run after the header; a row's other lines start
			// blank or with its parent.
			rows := 0
			for line := range bytes.Lines(out) {
				if line[0] != ' ' && line[0] != '(' {
					rows++
				}
			}
			assert.Equal(t, want+1, rows, c.name)
			continue
		}
		assert.Equal(t, want, bytes.Count(out, []byte("\n")), c.name)
	}
}

// manyRunsLaunch is the environment variable that makes
// TestManyRunsMemoryLauncher start a command: its value is the command
// line, as a JSON array, then a tab and the file for its stdout.
const manyRunsLaunch = "AGENTSTOP_MANYRUNS_LAUNCH"

// TestManyRunsMemoryLauncher is peakRSS's launcher, not a test of its own
// (it skips unless manyRunsLaunch is set). Linux counts in a child's peak
// the pages of its parent at the fork, so a command started from the test
// process itself would report at least the test process's size (over 300
// MB under -race, after the package's other tests). peakRSS runs the test
// binary again, fresh and small, and this starts the command from it and
// prints the command's peak and its own.
func TestManyRunsMemoryLauncher(t *testing.T) {
	spec, outPath, ok := strings.Cut(os.Getenv(manyRunsLaunch), "\t")
	if !ok {
		t.Skip("peakRSS's launcher: runs only under TestManyRunsMemory")
	}
	var args []string
	require.NoError(t, json.Unmarshal([]byte(spec), &args))
	out, err := os.Create(outPath)
	require.NoError(t, err)
	defer out.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = out, &stderr
	require.NoError(t, cmd.Run(), "%s", stderr.String())
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	require.True(t, ok, "no resource usage for the process")
	var self syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &self))
	fmt.Printf("peak-rss-kib %d %d\n", ru.Maxrss, self.Maxrss) // KiB on Linux
}

// BenchmarkManyRunsMemory is TestManyRunsMemory as a benchmark, for make
// bench's §6 table: the peak resident set size of each command, in MB
// (peak-RSS-MB, 10⁶ bytes), over the same generated log.
func BenchmarkManyRunsMemory(b *testing.B) {
	bin, log, pols := manyRunsSetup(b)
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			peak, _, _ := peakRSS(b, bin, manyRunsReplay(pols, log)...)
			b.ReportMetric(float64(peak)/1e6, "peak-RSS-MB")
		}
	})
	b.Run("backtest", func(b *testing.B) {
		for b.Loop() {
			peak, _, _ := peakRSS(b, bin, manyRunsBacktest(pols, log)...)
			b.ReportMetric(float64(peak)/1e6, "peak-RSS-MB")
		}
	})
}

// manyRunsSetup builds the command (or takes -manyruns.bin), writes the
// log and the policies (without and with tree: limits, in turn).
func manyRunsSetup(tb testing.TB) (bin, log string, pols []string) {
	tb.Helper()
	dir := tb.TempDir()
	bin = *manyRunsBin
	if bin == "" {
		bin = filepath.Join(dir, "agentstop")
		out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
		require.NoError(tb, err, "%s", out)
	}
	log = filepath.Join(dir, "runs.jsonl")
	f, err := os.Create(log)
	require.NoError(tb, err)
	size, err := writeManyRuns(f, 200, manyRunsRuns, manyRunsLogMB*1e6*1.04)
	require.NoError(tb, err)
	require.NoError(tb, f.Close())
	require.Greater(tb, size, int64(manyRunsLogMB)*1e6)
	for i := range manyRunsPolicies {
		text := manyRunsPolicy
		if i%2 == 1 {
			text = manyRunsTreePolicy
		}
		p := filepath.Join(dir, fmt.Sprintf("policy%d.yaml", i))
		require.NoError(tb, os.WriteFile(p, []byte(text), 0o644))
		pols = append(pols, p)
	}
	return bin, log, pols
}

// manyRunsReplay is the replay command measured: the policy with tree:
// limits.
func manyRunsReplay(pols []string, log string) []string {
	return []string{"replay", "-policy", pols[1], log}
}

// manyRunsBacktest is the backtest command measured: every policy (ten,
// as the contract's backtest figures), JSON output.
func manyRunsBacktest(pols []string, log string) []string {
	args := []string{"backtest", "-format", "json"}
	for _, p := range pols {
		args = append(args, "-policy", p)
	}
	return append(args, log)
}

// peakRSS runs the command from a fresh test process
// (TestManyRunsMemoryLauncher) and returns its peak resident set size and
// the launcher's own, in bytes, and its stdout.
func peakRSS(tb testing.TB, bin string, args ...string) (peak, launcher int64, stdout []byte) {
	tb.Helper()
	spec, err := json.Marshal(append([]string{bin}, args...))
	require.NoError(tb, err)
	outPath := filepath.Join(tb.TempDir(), "stdout")
	cmd := exec.Command(os.Args[0], "-test.run=^TestManyRunsMemoryLauncher$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), manyRunsLaunch+"="+string(spec)+"\t"+outPath)
	report, err := cmd.CombinedOutput()
	require.NoError(tb, err, "agentstop %s: %s", args[0], report)
	var child, self int64
	at := bytes.Index(report, []byte("peak-rss-kib "))
	require.GreaterOrEqual(tb, at, 0, "the launcher reports no peak: %s", report)
	_, err = fmt.Sscanf(string(report[at:]), "peak-rss-kib %d %d", &child, &self)
	require.NoError(tb, err, "%s", report)
	// The figure bounds the command's own peak from above: the launcher's
	// pages at the fork count too, and they are few (its own peak, self).
	out, err := os.ReadFile(outPath)
	require.NoError(tb, err)
	return child << 10, self << 10, out
}
