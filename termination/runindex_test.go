package termination

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
)

// TestLineRun: the run read from a line without decoding it is the run
// decoding gives, or lineRun says it cannot tell.
func TestLineRun(t *testing.T) {
	tests := []struct {
		line string
		run  string
		ok   bool
	}{
		{`{"kind":"message","run":"a"}`, "a", true},
		{`{"run":"a","kind":"message","text":"{\"run\":\"b\"}"}`, "a", true},
		{`{"kind":"message","text":"\"run\":\"b\""}`, "", true},
		{`{"kind":"message","args":{"run":"b"},"run":"a"}`, "a", true},
		{`{"kind":"message","run":"a","run":"c"}`, "c", true}, // the last one counts, as in decoding
		{` { "kind" : "message" , "run" : "a" } `, "a", true},
		{`{}`, "", true},
		{`{"kind":"message","run":"\u0061"}`, "", false}, // escapes: decoded whole
		{`{"kind":"message","r\u0075n":"a"}`, "", false},
		{`{"kind":"message","run":"é"}`, "", false},
		{`{"kind":"message","run":null}`, "", false},
		{`{"kind":"message","run":"a"`, "", false}, // truncated
		{`{"kind":"message","run":"a"} x`, "", false},
		{`[1]`, "", false},
	}
	for _, tc := range tests {
		run, ok := lineRun([]byte(tc.line))
		assert.Equal(t, tc.ok, ok, tc.line)
		if ok {
			assert.Equal(t, tc.run, string(run), tc.line)
		}
		if ev, err := DecodeEvent([]byte(tc.line)); ok && err == nil {
			assert.Equal(t, ev.Run, string(run), "%s: decoding reads another run", tc.line)
		}
	}
}

// FuzzLineRun: whenever lineRun reads a run and the line decodes, the run
// is the decoded event's.
func FuzzLineRun(f *testing.F) {
	for _, s := range []string{`{"kind":"message","run":"a"}`, `{"run":"a","run":"b","kind":"final"}`,
		`{"kind":"tool_call","args":{"run":"x"},"run":"r1","parent":"p"}`, `{"kind":"message","Run":"a","run":"b"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		run, ok := lineRun(line)
		ev, err := DecodeEvent(line)
		if ok && err == nil && ev.Run != string(run) {
			t.Fatalf("%q: lineRun reads %q, decoding %q", line, run, ev.Run)
		}
	})
}

// TestIndexRuns: each run's last line, numbered as the Decoder numbers
// lines (blank lines and a byte-order mark included); lines that do not
// decode name no run; the pass stops at a line it cannot read.
func TestIndexRuns(t *testing.T) {
	log := "\xef\xbb\xbf" + `{"kind":"input","run":"a"}` + "\n" +
		"\n" +
		`{"kind":"input","run":"b","parent":"a"}` + "\n" +
		`{"kind":"message","run":"a"}` + "\n" +
		`{"kind":"nope","run":"b"}` + "\n" + // bad: the replay reports it
		`{"kind":"message","r\u0075n":"b"}` + "\n" + // decoded whole
		`{"kind":"message","run":"a","te` // truncated
	x := IndexRuns(strings.NewReader(log))
	assert.Equal(t, 2, x.Runs())
	for _, c := range []struct {
		run  string
		line int
		last bool
	}{{"a", 1, false}, {"a", 4, true}, {"b", 3, false}, {"b", 5, false}, {"b", 6, true}, {"a", 7, false}, {"c", 1, false}, {"", 2, false}} {
		assert.Equal(t, c.last, x.IsLast(c.run, c.line), "run %q line %d", c.run, c.line)
	}
	// The Decoder numbers the lines alike.
	dec := NewDecoder(strings.NewReader(log))
	var lines, bad []int
	for {
		ev, err := dec.Next()
		if errors.Is(err, io.EOF) || errors.Is(err, ErrTruncated) {
			break
		}
		if err != nil {
			bad = append(bad, dec.Line())
			continue
		}
		lines = append(lines, dec.Line())
		assert.True(t, x.IsLast(ev.Run, dec.Line()) == (dec.Line() >= 4), "line %d", dec.Line())
	}
	assert.Equal(t, []int{1, 3, 4, 6}, lines)
	assert.Equal(t, []int{5}, bad)

	long := `{"kind":"input","run":"a"}` + "\n" + `{"kind":"input","run":"b","text":"` + strings.Repeat("x", maxLineBytes) + `"}` + "\n" + `{"kind":"input","run":"a"}` + "\n"
	x = IndexRuns(strings.NewReader(long))
	assert.True(t, x.IsLast("a", 1), "the pass stops at the line too long to read")
	assert.Equal(t, 1, x.Runs())
}

// TestRunsReplayStreamed: a log replayed a line at a time, with the last
// lines from IndexRuns over its JSON Lines, gives the results ReplayRuns
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
		p, err := ParsePolicy(pols[k%len(pols)])
		require.NoError(t, err)
		log := randomTreeLog(rng, 2+rng.IntN(12), 3+rng.IntN(25))
		var data bytes.Buffer
		for _, ev := range log {
			b, err := json.Marshal(ev)
			require.NoError(t, err)
			data.Write(b)
			data.WriteByte('\n')
		}
		want := ReplayRuns(&p, log, ReplayStage("s"))

		x := IndexRuns(bytes.NewReader(data.Bytes()))
		rp := NewRunsReplay(&p, ReplayStage("s"))
		dec := NewDecoder(bytes.NewReader(data.Bytes()))
		var got []Result
		for {
			ev, err := dec.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			got = append(got, rp.Line(&ev, x.IsLast(ev.Run, dec.Line()))...)
		}
		assert.Empty(t, rp.End(), "every run ended at its last line")
		require.Equal(t, jsonLines(t, want), jsonLines(t, got), "log %d, policy %q", k, pols[k%len(pols)])
		for _, r := range rp.rp.runs {
			assert.True(t, r.ended && r.eval == nil && r.limits == nil && r.children == nil, "run %s keeps its state after it ended", r.id)
		}
		assert.LessOrEqual(t, len(rp.rp.order), 64, "ended runs are dropped from the live list")
	}
}

// TestRunsReplayEnd: runs still live at the end of the log (no last line
// marked) end there, in the order they started, descendants with them.
func TestRunsReplayEnd(t *testing.T) {
	rp := NewRunsReplay(nil)
	for _, ev := range []Event{{Run: "a", Kind: KindInput}, {Run: "b", Parent: "a", Kind: KindInput}, {Run: "c", Kind: KindInput}} {
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
func randomTreeLog(rng *rand.Rand, n, m int) []Event {
	kinds := []Kind{KindMessage, KindToolCall, KindToolResult, KindError, KindMessage, KindToolCall}
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	left := make([]int, n)
	var live []int
	started := 0
	var log []Event
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
		ev := Event{Run: fmt.Sprint("r", k), Kind: kinds[rng.IntN(len(kinds))], Tool: fmt.Sprint("t", rng.IntN(2)),
			Text: []string{"working", "done", "same"}[rng.IntN(3)], Usage: Usage{InputTokens: int64(rng.IntN(700))},
			Cost: float64(rng.IntN(3)) / 100, Time: t0.Add(time.Duration(i) * 700 * time.Millisecond)}
		if ev.Kind == KindToolCall {
			ev.Args = json.RawMessage(fmt.Sprintf(`{"q":%d}`, rng.IntN(2)))
		}
		if ev.Kind != KindToolCall && ev.Kind != KindToolResult {
			ev.Tool = ""
		}
		if first && k > 0 {
			ev.Parent = fmt.Sprint("r", rng.IntN(k)) // its first line names an earlier run
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

func jsonLines(t *testing.T, results []Result) string {
	var b strings.Builder
	for _, r := range results {
		line, err := json.Marshal(r)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}
