package replay_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// TestRunsReplayStreamed: a log replayed a line at a time, with the last
// lines from IndexRuns over its JSON Lines, gives the results replay.Runs
// gives over its events held whole, in the same order, over random trees
// of interleaved runs and random policies (tree: limits and timeouts).
func TestRunsReplayStreamed(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 31))
	pols := []string{
		"max_iterations: 4\ntree: {max_tool_calls: 9}",
		"stall: {repeats: 2}\ntree: {token_budget: {total: 4000, pressure: 0.5}, timeout: 20s}",
		"timeout: 9s\nerrors: {consecutive: 2}",
		"tree: {max_iterations: {limit: 12, pressure: 0.5}, cost_budget: {limit: 0.05}}",
		"text_mention: {text: done}",
	}
	for k := range 60 {
		p, err := termination.ParsePolicy(pols[k%len(pols)])
		require.NoError(t, err)
		log := randomTreeLog(rng, 2+rng.IntN(12), 3+rng.IntN(25))
		var data bytes.Buffer
		for _, ev := range log {
			b, err := json.Marshal(ev)
			require.NoError(t, err)
			data.Write(b)
			data.WriteByte('\n')
		}
		want := replay.Runs(&p, log, replay.WithStage("s"))

		x := codec.IndexRuns(bytes.NewReader(data.Bytes()))
		rp := replay.NewRunner(&p, replay.WithStage("s"))
		dec := codec.NewDecoder(bytes.NewReader(data.Bytes()))
		var got []termination.Result
		for {
			ev, err := dec.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			got = append(got, rp.Line(&ev, x.IsLast(ev.Logged().Run, dec.Line()))...)
		}
		assert.Empty(t, rp.End(), "every run ended at its last line")
		require.Equal(t, jsonLines(t, want), jsonLines(t, got), "log %d, policy %q", k, pols[k%len(pols)])
		run, kept, order := replay.KeptState(rp)
		assert.False(t, kept, "run %s keeps its state after it ended", run)
		assert.LessOrEqual(t, order, 64, "ended runs are dropped from the live list")
	}
}

// TestRunsReplayEnd: runs still live at the end of the log (no last line
// marked) end there, in the order they started, descendants with them.
func TestRunsReplayEnd(t *testing.T) {
	rp := replay.NewRunner(nil)
	for _, ev := range []termination.Event{{Kind: termination.KindInput, Log: &termination.LogFields{Run: "a"}}, {Kind: termination.KindInput, Log: &termination.LogFields{Run: "b", Parent: "a"}}, {Kind: termination.KindInput, Log: &termination.LogFields{Run: "c"}}} {
		assert.Empty(t, rp.Line(&ev, false))
	}
	var got []string
	for _, r := range rp.End() {
		got = append(got, r.Run+" "+r.TerminationCause)
	}
	assert.Equal(t, []string{"a natural_completion", "b cancelled", "c natural_completion"}, got)
	assert.Empty(t, rp.End())
}

// randomTreeLog returns the interleaved lines of n runs of up to m events,
// each run but the first started by an earlier one after its first line.
func randomTreeLog(rng *rand.Rand, n, m int) []termination.Event {
	kinds := []termination.Kind{termination.KindMessage, termination.KindToolCall, termination.KindToolResult, termination.KindError, termination.KindMessage, termination.KindToolCall}
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	left := make([]int, n)
	var live []int
	started := 0
	var log []termination.Event
	for i := 0; started < n || len(live) > 0; i++ {
		k, first := 0, false
		if started < n && (len(live) == 0 || rng.IntN(3) == 0) {
			k, first = started, true
			started++
			left[k] = 1 + rng.IntN(m)
			live = append(live, k)
		} else {
			k = live[rng.IntN(len(live))]
		}
		ev := termination.Event{Kind: kinds[rng.IntN(len(kinds))], Tool: fmt.Sprint("t", rng.IntN(2)),
			Text: []string{"working", "done", "same"}[rng.IntN(3)], Usage: termination.Usage{InputTokens: int64(rng.IntN(700))},
			Cost: float64(rng.IntN(3)) / 100, Time: t0.Add(time.Duration(i) * 700 * time.Millisecond),
			Log: &termination.LogFields{Run: fmt.Sprint("r", k)},
		}
		if ev.Kind == termination.KindToolCall {
			ev.Args = json.RawMessage(fmt.Sprintf(`{"q":%d}`, rng.IntN(2)))
		}
		if ev.Kind != termination.KindToolCall && ev.Kind != termination.KindToolResult {
			ev.Tool = ""
		}
		if first && k > 0 {
			ev.Log.Parent = fmt.Sprint("r", rng.IntN(k)) // its first line names an earlier run
		}
		log = append(log, ev)
		if left[k]--; left[k] == 0 {
			for j, l := range live {
				if l == k {
					live = append(live[:j], live[j+1:]...)
					break
				}
			}
		}
	}
	return log
}

func jsonLines(t *testing.T, results []termination.Result) string {
	var b strings.Builder
	for _, r := range results {
		line, err := json.Marshal(r)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}
