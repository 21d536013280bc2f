package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/termination"
)

// costly is what 0.00029 and 0.00145 add up to in float64 (not in Go's
// exact constant arithmetic): what a run's cost looks like after a few
// events.
var costly = func() float64 { a, b := 0.00029, 0.00145; return a + b }()

// TestTablesRoundMoney: the tables for people round money to 6 significant
// digits (contract, Names); -json keeps the full value. And "1 live run",
// not "1 live runs".
func TestTablesRoundMoney(t *testing.T) {
	require.Equal(t, "0.0017399999999999998", strings.TrimSpace(mustJSON(t, costly)))
	now := time.Now()
	run := fleet.RunInfo{ID: "r1", Stage: "coder", Host: "h", PID: 1, Started: now, Updated: now, Iterations: 2, Cost: costly}
	var b bytes.Buffer
	runsTable(&b, []fleet.RunInfo{run})
	assert.Contains(t, b.String(), " 0.00174 ")
	assert.NotContains(t, b.String(), "0.0017399")
	assert.True(t, strings.HasSuffix(b.String(), "\n1 live run\n"), b.String())
	assert.Contains(t, mustJSON(t, run), `"cost":0.0017399999999999998`, "JSON keeps the full value")

	b.Reset()
	budgetsTable(&b, []fleet.Budget{{Key: "stage", Value: "coder", WindowStart: now, WindowEnd: now.Add(time.Hour),
		Policy: termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 2000, Cost: 1234567.891},
		Used:   termination.Usage{InputTokens: 1000, OutputTokens: 1}, Cost: costly, Runs: 1}})
	assert.Contains(t, b.String(), "total_tokens 1001/2000, cost 0.00174/1234570")
	assert.True(t, strings.HasSuffix(b.String(), "\n1 shared budget\n"), b.String())

	b.Reset()
	blocksTable(&b, []fleet.Block{{Selector: fleet.Selector{Stage: "coder"}, Reason: "r", By: "me", Created: now}})
	assert.True(t, strings.HasSuffix(b.String(), "\n1 active block\n"), b.String())
	b.Reset()
	blocksTable(&b, nil)
	assert.Equal(t, "0 active blocks", strings.TrimSpace(b.String()[strings.LastIndexByte(strings.TrimSpace(b.String()), '\n')+1:]))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestBacktestProgressPlural: the progress line agrees its nouns.
func TestBacktestProgressPlural(t *testing.T) {
	var b strings.Builder
	p := &progressLine{w: &b}
	p.update(backtestProgress(1, 1))
	assert.Contains(t, b.String(), "backtest: 1 run done (1 of 1 file),")
}
