//go:build linux

package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The contract's §6 memory figure: replay and backtest of a 200 MB log of
// 1,000 interleaved runs peak at most at this resident set size.
const (
	manyRunsLogMB  = 200
	manyRunsRuns   = 1000
	manyRunsPeakMB = 150
	manyRunsPolicy = `max_iterations: {limit: 500, pressure: 0.8}
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
// replay and agentstop backtest over a generated 200 MB log of 1,000
// interleaved runs (trees among them), each run as a process of its own,
// and holds them to the contract's 150 MB (§4, §6). It generates the log
// in a temporary directory and builds the command (not under -race, whose
// shadow memory would be measured too); -short skips it.
// -manyruns.bin measures another build (an earlier one, for comparison).
func TestManyRunsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 200 MB log and builds the command")
	}
	bin, log, pols := manyRunsSetup(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"replay", []string{"replay", "-policy", pols[1], log}},
		{"backtest", []string{"backtest", "-policy", pols[0], "-policy", pols[1], "-format", "json", log}},
	} {
		peak, out := peakRSS(t, bin, c.args...)
		t.Logf("%s: peak RSS %.1f MB over a %d MB log", c.name, float64(peak)/1e6, manyRunsLogMB)
		assert.LessOrEqual(t, peak, int64(manyRunsPeakMB*1e6), "%s: peak RSS %.1f MB", c.name, float64(peak)/1e6)
		// Every run has a result.
		want := manyRunsRuns
		if c.name == "backtest" {
			want = 2*manyRunsRuns + 2 // a result per run and policy, then a summary per policy
		}
		assert.Equal(t, want, bytes.Count(out, []byte("\n")), c.name)
	}
}

// BenchmarkManyRunsMemory is TestManyRunsMemory as a benchmark, for make
// bench's §6 table: the peak resident set size of each command, in MB
// (peak-RSS-MB, 10⁶ bytes), over the same generated log.
func BenchmarkManyRunsMemory(b *testing.B) {
	bin, log, pols := manyRunsSetup(b)
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			peak, _ := peakRSS(b, bin, "replay", "-policy", pols[1], log)
			b.ReportMetric(float64(peak)/1e6, "peak-RSS-MB")
		}
	})
	b.Run("backtest", func(b *testing.B) {
		for b.Loop() {
			peak, _ := peakRSS(b, bin, "backtest", "-policy", pols[0], "-policy", pols[1], "-format", "json", log)
			b.ReportMetric(float64(peak)/1e6, "peak-RSS-MB")
		}
	})
}

// manyRunsSetup builds the command (or takes -manyruns.bin), writes the
// log and the two policies (without and with tree: limits).
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
	for i, text := range []string{manyRunsPolicy, manyRunsTreePolicy} {
		p := filepath.Join(dir, fmt.Sprintf("policy%d.yaml", i))
		require.NoError(tb, os.WriteFile(p, []byte(text), 0o644))
		pols = append(pols, p)
	}
	return bin, log, pols
}

// peakRSS runs the command and returns its peak resident set size in
// bytes and its stdout.
func peakRSS(tb testing.TB, bin string, args ...string) (int64, []byte) {
	tb.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		tb.Fatalf("agentstop %s: exit %d: %s", args[0], exit.ExitCode(), stderr.String())
	}
	require.NoError(tb, err)
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	require.True(tb, ok, "no resource usage for the process")
	return ru.Maxrss << 10, stdout.Bytes() // Maxrss is in KiB on Linux
}
