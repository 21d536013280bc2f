package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/termination"
)

// evidencePolicies cover every check that keeps event indices for its
// evidence (heldEvents): stall windows, cycles, results and plateaus,
// error streaks and totals, a final past an iteration limit, a grace stop,
// and all:.
var evidencePolicies = []string{
	`stall: {repeats: 3, window: 8}`,
	`stall: {repeats: 3, window: 40}`,
	`stall: {cycle: 2}`,
	`stall: {repeats: 3, same_result: true}`,
	`stall: {repeats: 3, token_tolerance: 0.05}`,
	`errors: {consecutive: 3}`,
	`errors: {total: 7}`,
	`max_iterations: 6`,
	`token_budget: {total: 30000, pressure: 0.5, grace: 3}`,
	`all: [{errors: {total: 3}}, {stall: {repeats: 3, window: 30}}, {max_tool_calls: 20}]`,
}

// randomEvents is a random stream of a loop that repeats itself now and
// then: few tools, args and texts, some failures, long and multi-byte
// texts.
func randomEvents(rng *rand.Rand, n int) []termination.Event {
	texts := []string{"", "ok", "same answer", "déjà vu — " + strings.Repeat("é", 70), "line one\n\tline two", strings.Repeat("word ", 30)}
	kinds := []termination.Kind{termination.KindMessage, termination.KindToolCall, termination.KindToolCall, termination.KindToolResult, termination.KindToolResult, termination.KindError, termination.KindFinal}
	out := make([]termination.Event, n)
	for i := range out {
		ev := termination.Event{Kind: kinds[rng.IntN(len(kinds))], Text: texts[rng.IntN(len(texts))]}
		switch ev.Kind {
		case termination.KindToolCall:
			ev.Tool = []string{"search", "fetch"}[rng.IntN(2)]
			ev.Args = json.RawMessage(fmt.Sprintf(`{"q":%d}`, rng.IntN(2)))
		case termination.KindToolResult:
			ev.Tool = []string{"search", "fetch"}[rng.IntN(2)]
			if rng.IntN(3) == 0 {
				ev.Err = "timed out"
			}
		case termination.KindMessage, termination.KindFinal:
			ev.Usage = termination.Usage{InputTokens: int64(100 + rng.IntN(3)), OutputTokens: 10}
		}
		out[i] = ev
	}
	return out
}

// described is one call of WithEvidence's describe.
type described struct {
	res    termination.Result
	events []EvidenceEvent
}

// describeInto is a WithEvidence that appends each call to *calls.
func describeInto(calls *[]described) Option {
	return WithEvidence(func(res termination.Result, events []EvidenceEvent) {
		*calls = append(*calls, described{res, events})
	})
}

// checkNotes asserts that described describes each event of res's
// evidence, from events (the run's own, in order).
func checkNotes(t *testing.T, res termination.Result, described []EvidenceEvent, events []termination.Event, msg string) {
	t.Helper()
	require.Len(t, described, len(res.Evidence), msg)
	if len(res.Evidence) == 0 {
		assert.Nil(t, described, msg)
	}
	for i, at := range res.Evidence {
		x, ev := described[i], events[at-1]
		text := ev.Text
		if strings.TrimSpace(text) == "" {
			text = ev.ErrorText()
		}
		want, cut := textStart(text, evidenceTextLen)
		assert.Equal(t, EvidenceEvent{At: at, Kind: ev.Kind, Tool: ev.Tool, Text: want, Cut: cut}, x, msg)
	}
}

// TestEvidenceEventsDescribeEvidence: over random streams and every policy
// whose evidence names held events, a replay with WithEvidence
// describes each event of each result's evidence (one run, and many runs
// interleaved), while pruning its notes as it goes; it calls describe
// once for each result, in the order of the results, and changes none.
func TestEvidenceEventsDescribeEvidence(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	stopped := 0
	for _, src := range evidencePolicies {
		p := termination.MustParsePolicy(src)
		for trial := range 30 {
			events := randomEvents(rng, 50+rng.IntN(600))
			var log bytes.Buffer
			for _, ev := range events {
				b, err := json.Marshal(ev)
				require.NoError(t, err)
				log.Write(append(b, '\n'))
			}
			data := log.Bytes()
			var calls []described
			res, err := Log(p.Condition(), bytes.NewReader(data), describeInto(&calls))
			require.NoError(t, err)
			msg := fmt.Sprintf("%s trial %d: %v", src, trial, res.Cause)
			require.Len(t, calls, 1, msg)
			assert.Equal(t, res, calls[0].res, msg)
			checkNotes(t, res, calls[0].events, events, msg)
			if len(res.Evidence) > 1 {
				stopped++
			}
			plain, err := Log(p.Condition(), bytes.NewReader(data))
			require.NoError(t, err)
			assert.Equal(t, plain, res, msg)

			// The same events spread over three runs.
			byRun := map[string][]termination.Event{}
			for i := range events {
				events[i].Log = &termination.LogFields{Run: fmt.Sprint("r", rng.IntN(3))}
				byRun[events[i].Logged().Run] = append(byRun[events[i].Logged().Run], events[i])
			}
			calls = nil
			results := Runs(&p, events, describeInto(&calls))
			require.Len(t, calls, len(results), msg)
			for i, res := range results {
				assert.Equal(t, res, calls[i].res, msg)
				checkNotes(t, res, calls[i].events, byRun[res.Run], msg+" run "+res.Run)
			}
			assert.Equal(t, Runs(&p, events), results, msg)
		}
	}
	assert.Greater(t, stopped, 50, "the streams must stop with evidence of several events")
}

// TestEvidenceNotesBounded: the notes of a long run hold the events the
// conditions hold, not the run: a 20000-event loop keeps at most a prune's
// worth.
func TestEvidenceNotesBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	e := termination.NewEvaluator(termination.MustParsePolicy(`{stall: {repeats: 8, window: 8}, errors: {consecutive: 100}}`).Condition(), time.Time{})
	var n evidenceNotes
	most := 0
	for i := range 20000 {
		ev := termination.Event{Kind: termination.KindToolCall, Tool: "t", Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Text: strings.Repeat("x", 500)}
		if rng.IntN(2) == 0 {
			ev = termination.Event{Kind: termination.KindMessage, Text: fmt.Sprint("m", i)}
		}
		_, stop := e.Observe(ev)
		require.False(t, stop)
		n.note(e, &ev)
		most = max(most, len(n.notes))
	}
	assert.LessOrEqual(t, most, minNotes+1)
	for _, x := range n.notes {
		assert.LessOrEqual(t, len(x.Text), evidenceTextLen)
	}
}

// TestTextStart: the start of a text is cut on a character boundary, with
// white space folded.
func TestTextStart(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		n        int
		cut      bool
	}{
		{"", "", 5, false},
		{"  hello  ", "hello", 5, false},
		{"hello world", "hello", 5, true},
		{"hello world", "hello", 6, true},
		{"hello world", "hello w", 7, true},
		{"a\n\tb", "a b", 5, false},
		{"éééééé", "ééééé", 5, true},
		{"日本語のテキスト", "日本語", 3, true},
		{"ok\xffok", "ok\uFFFDok", 10, false},
	} {
		got, cut := textStart(tc.in, tc.n)
		assert.Equal(t, tc.want, got, tc.in)
		assert.Equal(t, tc.cut, cut, tc.in)
	}
}

// TestWithEvidenceDescribesReturnedResults: describe sees each result as
// the replay returns it — a holder's Tree set, a lenient log's Truncated
// set — and no result the replay leaves out (a stage without a policy).
func TestWithEvidenceDescribesReturnedResults(t *testing.T) {
	policies := func(stage string) (*termination.Policy, bool) {
		if stage != "planner" {
			return nil, false
		}
		p := termination.MustParsePolicy("tree: {max_tool_calls: 2}\nstall: {repeats: 2}")
		return &p, true
	}
	const log = `{"kind":"tool_call","run":"p","stage":"planner","tool":"search","args":{"q":1}}
{"kind":"tool_call","run":"c","parent":"p","stage":"analyst","tool":"read"}
{"kind":"message","run":"q","stage":"planner","text":"hello"}
{"kind":"tool_call","run":"p","tool":"search","args":{"q":1}}
{"kind":"tool_call","run":"c","tool":"read"}
{"kind":"final","run":"q","text":"done"}
`
	var calls []described
	results, _, err := NewRunner(nil, WithPolicies(policies), describeInto(&calls)).Log(strings.NewReader(log))
	require.NoError(t, err)
	require.Len(t, results, 2, "the analyst's run is left out")
	require.Len(t, calls, len(results))
	for i, res := range results {
		assert.Equal(t, res, calls[i].res)
	}
	assert.Equal(t, "p", results[0].Run)
	require.NotNil(t, calls[0].res.Tree, "the holder's tree totals are in the result describe sees")
	assert.Equal(t, []EvidenceEvent{
		{At: 1, Kind: termination.KindToolCall, Tool: "search"},
		{At: 2, Kind: termination.KindToolCall, Tool: "search"},
	}, calls[0].events)
	assert.Nil(t, calls[1].events, "a natural completion has no evidence")

	calls = nil
	truncated := "{\"kind\":\"tool_call\",\"tool\":\"search\",\"text\":\"  looking\\n\\tfor it  \"}\n{\"kind\":\"message\",\"te"
	res, err := Log(termination.MustParsePolicy("max_tool_calls: 3").Condition(), strings.NewReader(truncated), WithLenient(), describeInto(&calls))
	require.NoError(t, err)
	require.True(t, res.Truncated)
	require.Len(t, calls, 1)
	assert.Equal(t, res, calls[0].res, "describe sees the result with Truncated set")

	assert.Nil(t, WithEvidence(nil), "a nil describe is ignored")
	res, err = Log(termination.MustParsePolicy("max_tool_calls: 3").Condition(), strings.NewReader(truncated), WithLenient(), WithEvidence(nil))
	require.NoError(t, err)
	assert.Equal(t, calls[0].res, res)
}
