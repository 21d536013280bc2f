package backtest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/internal/testutil"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func policies(t testing.TB, names ...string) []Policy {
	t.Helper()
	var out []Policy
	for _, n := range names {
		p, err := LoadPolicy(filepath.Join("testdata", n))
		require.NoError(t, err)
		out = append(out, p)
	}
	return out
}

// mustEvaluate is Evaluate over paths, failing t on an error.
func mustEvaluate(t testing.TB, paths []string, cfg Config) *Report {
	t.Helper()
	rep, err := Evaluate(context.Background(), paths, cfg)
	require.NoError(t, err)
	return rep
}

func TestFind(t *testing.T) {
	tests := []struct {
		name  string
		paths []string
		want  []string // run names
		err   string
	}{
		{"directory, recursively, lexical", []string{"testdata/corpus"}, []string{"bad/burn", "bad/loop", "good/edit-test", "good/long"}, ""},
		{"a subdirectory names runs below it", []string{"testdata/corpus/good"}, []string{"edit-test", "long"}, ""},
		{"file", []string{"testdata/corpus/bad/loop.jsonl"}, []string{"loop"}, ""},
		{"glob", []string{"testdata/corpus/*/l*.jsonl"}, []string{"long", "loop"}, ""},
		{"glob of directories", []string{"testdata/corpus/g*"}, []string{"edit-test", "long"}, ""},
		{"a file found twice is read once", []string{"testdata/corpus/good", "testdata/corpus/good/long.jsonl"}, []string{"edit-test", "long"}, ""},
		{"none", nil, nil, "no corpus"},
		{"missing file", []string{"testdata/nope.jsonl"}, nil, "cannot read testdata/nope.jsonl: no such file or directory"},
		{"glob matching nothing", []string{"testdata/*.nope"}, nil, "testdata/*.nope: no file matches"},
		{"bad glob", []string{"testdata/[.jsonl"}, nil, "not a valid glob"},
		{"directory without runs", []string{t.TempDir()}, nil, "a directory with no *.jsonl file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := find(tt.paths)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			var names []string
			for _, s := range src {
				names = append(names, s.Name)
			}
			if tt.name == "glob" { // a glob's matches are files, each named by its base name
				assert.ElementsMatch(t, tt.want, names)
				return
			}
			assert.Equal(t, tt.want, names)
		})
	}
}

// TestOutputsGolden runs two policies over the labelled corpus and compares
// each output format with its golden file.
func TestOutputsGolden(t *testing.T) {
	labels, err := ReadLabels("testdata/labels.csv")
	require.NoError(t, err)
	rep := mustEvaluate(t, []string{"testdata/corpus"}, Config{Policies: policies(t, "strict.yaml", "loose.yaml"), Labels: labels, All: true})
	for _, f := range []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{"report.table", func(b *bytes.Buffer) error { return rep.WriteTable(b) }},
		{"report.jsonl", func(b *bytes.Buffer) error { return rep.WriteJSON(b) }},
		{"report.csv", func(b *bytes.Buffer) error { return rep.WriteCSV(b) }},
	} {
		t.Run(f.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, f.write(&b))
			golden := filepath.Join("testdata", f.name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(golden, b.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), b.String())
		})
	}
}

// TestReportMeaning pins what the goldens say, so that -update cannot
// bless a regression: the strict policy kills the good edit-and-test run
// and the long run, the loose one stops only the bad runs.
func TestReportMeaning(t *testing.T) {
	labels, err := ReadLabels("testdata/labels.json")
	require.NoError(t, err)
	rep := mustEvaluate(t, []string{"testdata/corpus"}, Config{Policies: policies(t, "strict.yaml", "loose.yaml"), Labels: labels})
	require.Len(t, rep.Outcomes, 8)
	require.Len(t, rep.Summaries, 2)
	strict, loose := rep.Summaries[0], rep.Summaries[1]
	assert.Equal(t, "strict.yaml", strict.Policy)
	assert.Equal(t, 4, strict.Runs)
	assert.Equal(t, LabelSummary{Good: 2, Bad: 2, BadStopped: 2, GoodStopped: 2,
		SavedOnBad: strict.Labels.SavedOnBad, LostOnGood: strict.Labels.LostOnGood}, *strict.Labels)
	assert.Equal(t, map[string]int{"stall": 2, "budget_exhausted": 1, "max_iterations": 1}, strict.ByCause)
	assert.Equal(t, 2, loose.Labels.BadStopped)
	assert.Equal(t, 0, loose.FalseStops())
	assert.Equal(t, termination.Totals{}, loose.Labels.LostOnGood)

	byRun := map[string]Outcome{}
	for _, o := range rep.Outcomes {
		byRun[o.Policy+" "+o.Run] = o
	}
	loop := byRun["strict.yaml bad/loop"]
	assert.Equal(t, "stall", loop.Result.Tag())
	assert.Equal(t, 8, loop.Result.StoppedAt, "the third identical message is event 8")
	assert.Equal(t, Bad, loop.Label)
	assert.Equal(t, termination.Totals{Events: 12, Iterations: 3, ToolCalls: 4, Tokens: termination.Usage{InputTokens: 2700, OutputTokens: 90}, Cost: 0.015}, roundCost(loop.Saved))
	long := byRun["loose.yaml good/long"]
	assert.False(t, long.Stopped)
	assert.Equal(t, termination.Totals{}, long.Saved)
	assert.Equal(t, "natural_completion", long.Result.Tag())
	// What a stop saves and what it spent add up to the run.
	for _, o := range rep.Outcomes {
		total := o.Spent
		total.Add(o.Saved)
		f, err := readFile(source{Path: o.File, Name: o.Run}, false)
		require.NoError(t, err)
		assert.Equal(t, roundCost(amountsOf(f.Events)), roundCost(total), "%s %s", o.Policy, o.Run)
	}
	// The summary's saved is the sum over the stopped runs.
	var saved termination.Totals
	for _, o := range rep.Outcomes {
		if o.Policy == "strict.yaml" {
			saved.Add(o.Saved)
		}
	}
	assert.Equal(t, roundCost(saved), roundCost(strict.Saved))
}

// roundCost rounds a's cost to 4 decimals, so that sums taken in another
// order compare equal.
func roundCost(a termination.Totals) termination.Totals {
	a.Cost, _ = strconv.ParseFloat(strconv.FormatFloat(a.Cost, 'f', 4, 64), 64)
	return a
}

func TestAll(t *testing.T) {
	rep := mustEvaluate(t, []string{"testdata/corpus/bad/burn.jsonl"}, Config{Policies: policies(t, "strict.yaml"), All: true})
	o := rep.Outcomes[0]
	assert.Equal(t, "budget_exhausted", o.Result.Tag())
	require.Len(t, o.All, 2, "max_iterations and token_budget fire over the whole run; stall does not")
	assert.Equal(t, "max_iterations: 6", o.All[0].Condition)
	assert.Equal(t, termination.MaxIterationsReached{Limit: 6, Count: 7}, o.All[0].Cause)
	assert.Equal(t, 20, o.All[0].At, "the seventh message is event 20, after the budget's stop at 5")
	assert.Equal(t, 5, o.All[1].At)
	assert.Equal(t, o.Result.StoppedAt, o.All[1].At, "the first signal is the one that stopped the run")

	rep = mustEvaluate(t, []string{"testdata/corpus/bad/burn.jsonl"}, Config{Policies: policies(t, "strict.yaml")})
	assert.Nil(t, rep.Outcomes[0].All, "without All nothing is listed")
}

func TestWorkersGiveTheSameReport(t *testing.T) {
	cfg := Config{Policies: policies(t, "strict.yaml", "loose.yaml"), All: true}
	var want []byte
	for _, workers := range []int{1, 2, 7} {
		cfg.Workers = workers
		var b bytes.Buffer
		require.NoError(t, mustEvaluate(t, []string{"testdata/corpus", "testdata/multi.jsonl"}, cfg).WriteJSON(&b))
		if want == nil {
			want = b.Bytes()
			continue
		}
		assert.Equal(t, string(want), b.String(), "workers=%d", workers)
	}
}

func TestProgress(t *testing.T) {
	var calls []Progress
	cfg := Config{Policies: policies(t, "strict.yaml"), Workers: 2, Progress: func(p Progress) { calls = append(calls, p) }}
	mustEvaluate(t, []string{"testdata/corpus"}, cfg)
	require.Len(t, calls, 4)
	last := calls[len(calls)-1]
	assert.Equal(t, 4, last.Files)
	assert.Equal(t, 4, last.FilesDone)
	assert.Equal(t, 4, last.Runs)
	assert.Equal(t, int64(14+26+20+22), last.Events)
}

func TestCancelled(t *testing.T) {
	src, err := find([]string{"testdata/corpus"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = evaluate(ctx, src, Config{Policies: policies(t, "strict.yaml")})
	assert.ErrorIs(t, err, context.Canceled)
	_, err = evaluate(context.Background(), src, Config{})
	assert.ErrorContains(t, err, "no policy")
}

func TestBadFiles(t *testing.T) {
	tests := []struct {
		file    string
		lenient bool
		err     string
	}{
		{"malformed.jsonl", false, "testdata/bad/malformed.jsonl: line 2: usage.input_tokens"},
		{"malformed.jsonl", true, "testdata/bad/malformed.jsonl: line 2: usage.input_tokens"},
		{"truncated.jsonl", false, "testdata/bad/truncated.jsonl:"},
		{"pretty.jsonl", false, "testdata/bad/pretty.jsonl: line 1"},
		{"pretty.jsonl", true, "testdata/bad/pretty.jsonl: line 1"},
		// The first line that breaks the first event's pattern, either way
		// round, in the words replay uses (codec.Decoder's check).
		{"mixed.jsonl", false, `testdata/bad/mixed.jsonl: line 2: this event names no run, but the first event (line 1) names run "a": every event of a log names its run, or none does`},
		{"mixed-first-none.jsonl", false, `testdata/bad/mixed-first-none.jsonl: line 3: this event names run "b", but the first event (line 1) names none: every event of a log names its run, or none does`},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s lenient=%v", tt.file, tt.lenient), func(t *testing.T) {
			src, err := find([]string{"testdata/bad/" + tt.file})
			require.NoError(t, err)
			_, err = evaluate(context.Background(), src, Config{Policies: policies(t, "strict.yaml"), Lenient: tt.lenient})
			require.ErrorContains(t, err, tt.err)
			var fe *fileError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, "testdata/bad/"+tt.file, fe.Path)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
	// Of several bad files, the first in the corpus's order is reported.
	src, err := find([]string{"testdata/corpus", "testdata/bad/malformed.jsonl", "testdata/bad/mixed.jsonl"})
	require.NoError(t, err)
	_, err = evaluate(context.Background(), src, Config{Policies: policies(t, "strict.yaml"), Workers: 1})
	require.ErrorContains(t, err, "malformed.jsonl")

	empty := filepath.Join(t.TempDir(), "empty.jsonl")
	require.NoError(t, os.WriteFile(empty, []byte("\n\n"), 0o644))
	_, err = evaluate(context.Background(), []source{{Path: empty, Name: "empty"}}, Config{Policies: policies(t, "strict.yaml")})
	require.ErrorContains(t, err, "empty.jsonl: no events")
}

func TestLenientTruncated(t *testing.T) {
	rep := mustEvaluate(t, []string{"testdata/bad/truncated.jsonl"}, Config{Policies: policies(t, "strict.yaml", "stop-early.yaml"), Lenient: true})
	require.Len(t, rep.Outcomes, 2)
	assert.True(t, rep.Outcomes[0].Result.Truncated, "the replay reached the truncated line")
	assert.Equal(t, 3, rep.Outcomes[0].Result.Events, "the events before it are evaluated")
	assert.False(t, rep.Outcomes[1].Result.Truncated, "a replay that stops before the truncated line never reads it")
	var b bytes.Buffer
	require.NoError(t, rep.WriteJSON(&b))
	first, _, _ := strings.Cut(b.String(), "\n")
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(first), &m))
	assert.Equal(t, "truncated", m["run"])
}

// TestLenientTruncatedRuns: in a file of many runs cut inside its last
// line, only the runs that reached the cut line carry truncated (§4.1, as
// in replay): those no cause stopped, not the run stop-early.yaml stopped.
func TestLenientTruncatedRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.jsonl")
	log := `{"run":"a","kind":"input","text":"go"}
{"run":"b","kind":"input","text":"go"}
{"run":"a","kind":"message","text":"working on it"}
{"run":"b","kind":"message","text":"still"}
{"run":"b","kind":"message","te`
	require.NoError(t, os.WriteFile(path, []byte(log), 0o644))
	rep := mustEvaluate(t, []string{path}, Config{Policies: policies(t, "stop-early.yaml"), Lenient: true})
	truncated := map[string]bool{}
	for _, o := range rep.Outcomes {
		truncated[o.Run] = o.Result.Truncated
	}
	assert.Equal(t, map[string]bool{"a": false, "b": true}, truncated)
}

func TestLabels(t *testing.T) {
	want := Labels{"good/edit-test": Good, "good/long": Good, "bad/loop": Bad, "bad/burn": Bad}
	for _, f := range []string{"labels.json", "labels.csv"} {
		l, err := ReadLabels(filepath.Join("testdata", f))
		require.NoError(t, err)
		assert.Equal(t, want, l, f)
	}
	dir := t.TempDir()
	tests := []struct {
		name, text string
		want       Labels
		err        string
	}{
		{"csv without header", "a,good\nb, false\n", Labels{"a": Good, "b": Bad}, ""},
		{"json booleans", `{"a": true, "b": false}`, Labels{"a": Good, "b": Bad}, ""},
		{"json bad value", "{\n\"a\": \"good\",\n\"b\": \"meh\"\n}", nil, `line 3: run "b": label "meh" is not one of good, bad, true, false`},
		{"json number", `{"a": 1}`, nil, `line 1: run "a": the label must be "good", "bad", true or false`},
		{"json malformed", "{\n\"a\": \"good\",,\n}", nil, "line 2: malformed JSON"},
		{"json unclosed", "{\"a\": \"good\"", nil, "not closed"},
		{"json twice", `{"a": "good", "a": "bad"}`, nil, `run "a" is labelled twice`},
		{"json trailing", `{"a": "good"} {}`, nil, "more after the labels object"},
		{"csv bad value", "run,label\na,good\nb,maybe\n", nil, `line 3: run "b": label "maybe" is not one of good, bad, true, false`},
		{"csv columns", "run,label\na,good,extra\n", nil, "line 2: want two columns run,label, got 3"},
		{"csv quotes", "a,\"good\n", nil, "malformed CSV"},
		{"csv twice", "a,good\na,bad\n", nil, `line 2: run "a" is labelled twice`},
		{"json array", "\n [1,2]\n", nil, `line 2: the JSON form of labels is one object, {"RUN": "good"|"bad"|true|false, ...}, not an array`},
		{"json array of records", `[{"run": "a", "label": "good"}]`, nil, "line 1: the JSON form of labels is one object"},
		{"json records", "{\"run\": \"a\", \"label\": \"good\"}\n", nil,
			`line 1: run "run": label "a" is not one of good, bad, true, false (the JSON form is one object mapping each run to its label`},
		{"csv header with other names", "id,label\na,good\n", nil, `line 1: the first row "id,label" is neither the header run,label nor a run with a label (good, bad, true or false)`},
		{"csv header with a misspelt column", "run,lbl\na,good\n", nil, `line 1: the first row "run,lbl" is neither the header run,label`},
		{"csv first run with a bad label", "a,godo\n", nil, `line 1: the first row "a,godo" is neither the header run,label nor a run with a label`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_"))
			require.NoError(t, os.WriteFile(path, []byte(tt.text), 0o644))
			l, err := ReadLabels(path)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				assert.Contains(t, err.Error(), path, "the error names the file")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, l)
		})
	}
	_, err := ReadLabels(filepath.Join(dir, "missing"))
	assert.ErrorContains(t, err, "cannot read the labels file")
}

// TestLabelsUnmatched: the labels whose run is not in the corpus (a typo
// in a run's name) are listed, sorted, for the command's warning.
func TestLabelsUnmatched(t *testing.T) {
	rep := mustEvaluate(t, []string{"testdata/corpus"}, Config{Policies: policies(t, "strict.yaml")})
	l := Labels{"good/long": Good, "good/lonng": Good, "bad/lop": Bad, "bad/burn": Bad, "a": Bad}
	assert.Equal(t, []string{"a", "bad/lop", "good/lonng"}, l.Unmatched(rep))
	assert.Empty(t, Labels{"good/long": Good}.Unmatched(rep))
	assert.Empty(t, Labels(nil).Unmatched(rep))
}

func TestLoadPolicy(t *testing.T) {
	_, err := LoadPolicy("testdata/missing.yaml")
	assert.ErrorContains(t, err, "cannot read the policy file testdata/missing.yaml")
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("max_iteration: 3\n"), 0o644))
	_, err = LoadPolicy(bad)
	assert.EqualError(t, err, bad+": policy.max_iteration: unknown key (did you mean \"max_iterations\"?) (line 1)")
	require.NoError(t, os.WriteFile(bad, []byte("max_tool_calls: 0\n"), 0o644))
	_, err = LoadPolicy(bad)
	assert.EqualError(t, err, bad+": policy.max_tool_calls: must be a positive int, got 0 (line 1)")
	p, err := LoadPolicy("testdata/strict.yaml")
	require.NoError(t, err)
	assert.Equal(t, "strict.yaml", p.Name)
}

// TestBacktestEqualsReplay is the property test: over random runs (files
// of one run, and files of many interleaved runs with parent links) and
// random policies (tree: limits included), each backtest result is the
// result replay gives for that run and policy: replay.Log for a
// one-run file, replay.Runs for a log of many runs or a policy
// with tree: limits, as agentstop replay chooses.
func TestBacktestEqualsReplay(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 2026))
	dir := t.TempDir()
	const single, multi = 40, 15
	for i := range single {
		writeRandomRun(t, rng, filepath.Join(dir, fmt.Sprintf("run-%02d.jsonl", i)))
	}
	for i := range multi {
		writeRandomTree(t, rng, filepath.Join(dir, fmt.Sprintf("tree-%02d.jsonl", i)))
	}
	snippets := []string{
		"max_iterations: %d", "max_tool_calls: %d", "stall: {repeats: %d}", "token_budget: {total: %d00}",
		"cost_budget: {limit: 0.0%d}", "errors: {consecutive: %d}", "timeout: %ds", "text_mention: {text: done%d}",
		"token_budget: {total: %d000, pressure: 0.5, grace: 1}", "stall: {repeats: 2, window: %d}", "function_call: [tool%d]",
		"stall: {repeats: %d, same_result: true}", "tree: {max_iterations: %d}", "tree: {token_budget: {total: %d000}}",
		"tree: {max_tool_calls: %d, timeout: 40s}",
	}
	var pols []Policy
	for k := range 14 {
		var lines []string
		for range 1 + rng.IntN(4) {
			s := snippets[rng.IntN(len(snippets))]
			n := 2 + rng.IntN(6)
			if strings.HasPrefix(s, "tree:") {
				n = 4 + rng.IntN(20)
			}
			line := fmt.Sprintf(s, n)
			key, _, _ := strings.Cut(line, ":")
			if !strings.Contains(strings.Join(lines, "\n"), key+":") {
				lines = append(lines, line)
			}
		}
		text := strings.Join(lines, "\n")
		p, err := termination.ParsePolicy(text)
		require.NoError(t, err, text)
		pols = append(pols, Policy{Name: fmt.Sprintf("p%d", k), Policy: p})
	}
	rep := mustEvaluate(t, []string{dir}, Config{Policies: pols, Workers: 3})
	files := map[string][]termination.Event{}
	runs := 0
	for _, o := range rep.Outcomes {
		if _, ok := files[o.File]; !ok {
			files[o.File] = testutil.DecodeFile(t, o.File)
		}
		if o.Policy == "p0" {
			runs++
		}
	}
	require.Greater(t, runs, single+2*multi)
	require.Len(t, rep.Outcomes, runs*len(pols))
	for _, o := range rep.Outcomes {
		pol := pols[slices.IndexFunc(pols, func(p Policy) bool { return p.Name == o.Policy })].Policy
		events := files[o.File]
		var want termination.Result
		if events[0].Logged().Run == "" && pol.Tree() == nil {
			f, err := os.Open(o.File)
			require.NoError(t, err)
			want, err = replay.Log(pol.Condition(), f)
			f.Close()
			require.NoError(t, err)
			want.Stage = "replay"
		} else {
			id := o.Run
			if events[0].Logged().Run == "" {
				id = ""
			}
			for _, r := range replay.Runs(&pol, events) {
				if r.Run == id {
					want = r
				}
			}
		}
		require.Equal(t, jsonOf(t, want), jsonOf(t, o.Result), "run %s, policy %s (%s)", o.Run, o.Policy, pol)
		assert.Equal(t, want.Evidence, o.Result.Evidence)
		assert.Equal(t, want.Duration, o.Result.Duration)
	}
}

// writeRandomTree writes a log of 2 to 5 runs whose lines interleave, each
// run but the first started by an earlier one.
func writeRandomTree(t *testing.T, rng *rand.Rand, path string) {
	n := 2 + rng.IntN(4)
	var runs [][]termination.Event
	for k := range n {
		tmp := filepath.Join(t.TempDir(), "r.jsonl")
		writeRandomRun(t, rng, tmp)
		events := testutil.DecodeFile(t, tmp)
		for i := range events {
			events[i].Log = &termination.LogFields{Run: fmt.Sprintf("r%d", k)}
		}
		if k > 0 {
			events[0].Log.Parent = fmt.Sprintf("r%d", rng.IntN(k))
		}
		runs = append(runs, events)
	}
	// Interleave: a child's lines start after its parent's first line.
	var out bytes.Buffer
	next := make([]int, n)
	started := []int{0}
	for len(started) > 0 {
		i := rng.IntN(len(started))
		k := started[i]
		ev := runs[k][next[k]]
		line, err := json.Marshal(ev)
		require.NoError(t, err)
		out.Write(line)
		out.WriteByte('\n')
		next[k]++
		if next[k] == len(runs[k]) {
			started = slices.Delete(started, i, i+1)
		}
		if next[k] == 1 {
			for c := range n {
				if c > k && next[c] == 0 && !slices.Contains(started, c) && runs[c][0].Logged().Parent == fmt.Sprintf("r%d", k) {
					started = append(started, c)
				}
			}
		}
	}
	require.NoError(t, os.WriteFile(path, out.Bytes(), 0o644))
}

func writeRandomRun(t *testing.T, rng *rand.Rand, path string) {
	var b bytes.Buffer
	at := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	emit := func(ev termination.Event) {
		at = at.Add(time.Duration(rng.IntN(4000)) * time.Millisecond)
		ev.Time = at
		line, err := json.Marshal(ev)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	emit(termination.Event{Kind: termination.KindInput, Text: "task"})
	n := 5 + rng.IntN(30)
	for range n {
		switch rng.IntN(7) {
		case 0, 1:
			emit(termination.Event{Kind: termination.KindMessage, Source: "agent", Text: fmt.Sprintf("step %d", rng.IntN(3)),
				Usage: termination.Usage{InputTokens: int64(rng.IntN(500)), OutputTokens: int64(rng.IntN(100))}, Cost: float64(rng.IntN(5)) / 1000})
		case 2, 3:
			tool := fmt.Sprintf("tool%d", 2+rng.IntN(3))
			emit(termination.Event{Kind: termination.KindToolCall, Tool: tool, Args: json.RawMessage(fmt.Sprintf(`{"q":%d}`, rng.IntN(2)))})
			res := termination.Event{Kind: termination.KindToolResult, Tool: tool, Text: "ok"}
			if rng.IntN(3) == 0 {
				res.Err = "exit code 1"
			}
			emit(res)
		case 4:
			emit(termination.Event{Kind: termination.KindMessage, Source: "agent", Text: fmt.Sprintf("done%d", 2+rng.IntN(6))})
		case 5:
			emit(termination.Event{Kind: termination.KindError, Text: "malformed response"})
		default:
			emit(termination.Event{Kind: termination.KindToolResult, Tool: "tool2", Text: "late"})
		}
	}
	if rng.IntN(2) == 0 {
		emit(termination.Event{Kind: termination.KindFinal, Source: "agent", Text: "answer"})
	}
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
}

// TestManyRunsInOneFile backtests a file whose events carry run and
// parent: one outcome per run, in the order of their first lines, named by
// their run; a policy's tree: limits count the planner and its researchers.
func TestManyRunsInOneFile(t *testing.T) {
	rep := mustEvaluate(t, []string{"testdata/multi.jsonl"}, Config{Policies: policies(t, "strict.yaml", "tree.yaml")})
	require.Len(t, rep.Outcomes, 6)
	var got []string
	for _, o := range rep.Outcomes {
		got = append(got, fmt.Sprintf("%s %s<-%s %s", o.Policy, o.Run, o.Parent, o.Result.Tag()))
	}
	assert.Equal(t, []string{
		"strict.yaml planner<- natural_completion",
		"tree.yaml planner<- max_iterations",
		"strict.yaml research-1<-planner stall",
		"tree.yaml research-1<-planner cancelled",
		"strict.yaml research-2<-planner natural_completion",
		"tree.yaml research-2<-planner cancelled",
	}, got)
	planner := rep.Outcomes[1]
	assert.Equal(t, termination.MaxIterationsReached{Limit: 6, Count: 7, Scope: termination.ScopeTree}, planner.Result.Cause)
	assert.True(t, planner.Stopped)
	assert.Equal(t, "planner", planner.Result.Run)
	r1 := rep.Outcomes[3]
	assert.True(t, r1.Stopped, "a cancelled descendant is stopped")
	assert.Positive(t, r1.Saved.Events, "its lines after the cancellation are saved")
	total := r1.Spent
	total.Add(r1.Saved)
	assert.Equal(t, 10, total.Events, "research-1 has 10 lines")

	// Each result is the one replay gives for the log.
	f, err := os.Open("testdata/multi.jsonl")
	require.NoError(t, err)
	defer f.Close()
	var events []termination.Event
	dec := codec.NewDecoder(f)
	for {
		ev, err := dec.Next()
		if err != nil {
			break
		}
		events = append(events, ev)
	}
	tree := policies(t, "tree.yaml")[0].Policy
	for _, want := range replay.Runs(&tree, events) {
		for _, o := range rep.Outcomes {
			if o.Policy == "tree.yaml" && o.Run == want.Run {
				assert.Equal(t, jsonOf(t, want), jsonOf(t, o.Result), want.Run)
			}
		}
	}
}

func jsonOf(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestTreePolicyOnOneRun: tree: limits over a one-run file count the run
// alone, as replay does.
func TestTreePolicyOnOneRun(t *testing.T) {
	rep := mustEvaluate(t, []string{"testdata/corpus/good/long.jsonl"}, Config{Policies: policies(t, "tree.yaml")})
	o := rep.Outcomes[0]
	assert.Equal(t, "long", o.Run)
	assert.Equal(t, termination.MaxIterationsReached{Limit: 6, Count: 7, Scope: termination.ScopeTree}, o.Result.Cause)
	assert.Equal(t, 20, o.Result.StoppedAt)
	assert.Equal(t, 6, o.Saved.Events, "stopped at event 20 of 26")
}

// TestTableWithoutLabels: without labels the table has no label columns
// and lists the stopped runs by where they stopped.
func TestTableWithoutLabels(t *testing.T) {
	rep := mustEvaluate(t, []string{"testdata/corpus"}, Config{Policies: policies(t, "loose.yaml")})
	var b bytes.Buffer
	require.NoError(t, rep.WriteTable(&b))
	out := b.String()
	first, _, _ := strings.Cut(out, "\n")
	assert.Equal(t, "POLICY      RUNS  STOPPED  SAVED", strings.TrimSpace(first))
	assert.NotContains(t, out, "LABEL")
	assert.NotContains(t, out, "labels:")
	assert.Contains(t, out, "  RUN       CAUSE             STOPPED AT      SAVED\n")
	assert.Contains(t, out, "  bad/loop  stall             event 10 of 20")
	assert.Nil(t, rep.Summaries[0].Labels)
	assert.Zero(t, rep.Summaries[0].FalseStops())
}

// TestTableAll: with -all the table lists, per policy, every condition that
// would fire over each whole run, the first to fire first, and how many
// runs nothing fires on; without it, none of that.
func TestTableAll(t *testing.T) {
	cfg := Config{Policies: policies(t, "strict.yaml", "loose.yaml"), All: true}
	rep := mustEvaluate(t, []string{"testdata/corpus"}, cfg)
	var b bytes.Buffer
	require.NoError(t, rep.WriteTable(&b))
	out := b.String()
	_, loose, ok := strings.Cut(out, "\nloose.yaml: ")
	require.True(t, ok, out)
	strict := strings.TrimSuffix(out, loose)
	assert.Contains(t, strict, "  every condition that would fire over the whole run (-all), the first to fire first:\n")
	assert.Contains(t, strict, "  bad/burn        event 5   token_budget: {total: 60000}  budget_exhausted\n"+
		"                  event 20  max_iterations: 6             max_iterations\n",
		"the budget fires first, then max_iterations (the second-best signal), though the policy lists it first")
	assert.NotContains(t, strict, "no condition would fire", "something fires on every run")
	assert.Contains(t, loose, "  bad/loop  event 10  stall: {repeats: 3, same_result: true}  stall\n")
	assert.Contains(t, loose, "  no condition would fire on the 2 other runs\n")

	cfg.Policies = []Policy{{Name: "never.yaml", Policy: termination.MustParsePolicy("max_iterations: 1000")}}
	rep = mustEvaluate(t, []string{"testdata/corpus/good"}, cfg)
	b.Reset()
	require.NoError(t, rep.WriteTable(&b))
	assert.Contains(t, b.String(), "never.yaml: stopped 0 of 2 runs\n")
	assert.Contains(t, b.String(), "  -all: no condition would fire on any of the 2 runs\n")
	assert.NotContains(t, b.String(), "FIRES AT")

	cfg.All = false
	cfg.Policies = policies(t, "strict.yaml")
	rep = mustEvaluate(t, []string{"testdata/corpus"}, cfg)
	b.Reset()
	require.NoError(t, rep.WriteTable(&b))
	assert.NotContains(t, b.String(), "-all")
	assert.NotContains(t, b.String(), "FIRES AT")
}

// TestTableForPeople: the table rounds money to 6 significant digits (JSON
// keeps the full value) and agrees nouns with their numbers ("1 event").
func TestTableForPeople(t *testing.T) {
	dir := t.TempDir()
	// 0.00029 + 0.00145 is 0.0017399999999999998 in float64.
	log := `{"kind":"message"}` + "\n" + `{"kind":"message"}` + "\n" + `{"kind":"message","cost":0.00029}` + "\n" +
		`{"kind":"message","cost":0.00145}` + "\n" + `{"kind":"final","usage":{"input_tokens":0,"output_tokens":1}}` + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.jsonl"), []byte(log), 0o644))
	cfg := Config{Policies: []Policy{
		{Name: "one.yaml", Policy: termination.MustParsePolicy("max_iterations: 1")},
		{Name: "three.yaml", Policy: termination.MustParsePolicy("max_iterations: 3")},
	}}
	rep := mustEvaluate(t, []string{dir}, cfg)
	require.Equal(t, 0.0017399999999999998, rep.Outcomes[0].Saved.Cost, "the three events after the stop")
	var b bytes.Buffer
	require.NoError(t, rep.WriteTable(&b))
	out := b.String()
	assert.Contains(t, out, "one.yaml: stopped 1 of 1 run (max_iterations 1)\n")
	assert.Contains(t, out, "  saved: 3 events, 3 iterations, 0 tool calls, 0 input + 1 output token, cost 0.00174\n")
	assert.Contains(t, out, "  saved: 1 event, 1 iteration, 0 tool calls, 0 input + 1 output token, cost 0\n")
	assert.Contains(t, out, "  run  max_iterations  event 4 of 5  1 event, 1 token, cost 0\n")
	assert.NotContains(t, out, "0.0017399")
	b.Reset()
	require.NoError(t, rep.WriteJSON(&b))
	assert.Contains(t, b.String(), `"cost":0.0017399999999999998`, "JSON keeps the full value")
}

// TestEvaluatePaths: Evaluate resolves its PATHs first, so that a PATH
// that names no run is the error whatever else is wrong, and evaluates
// the files they name as find lists them.
func TestEvaluatePaths(t *testing.T) {
	_, err := Evaluate(context.Background(), []string{"testdata/nope.jsonl"}, Config{})
	require.ErrorContains(t, err, "cannot read testdata/nope.jsonl: no such file or directory")
	_, err = Evaluate(context.Background(), nil, Config{Policies: policies(t, "strict.yaml")})
	require.ErrorContains(t, err, "no corpus")
	_, err = Evaluate(context.Background(), []string{"testdata/corpus"}, Config{})
	require.ErrorContains(t, err, "no policy")

	rep := mustEvaluate(t, []string{"testdata/corpus/good", "testdata/corpus/bad/loop.jsonl"}, Config{Policies: policies(t, "strict.yaml")})
	var runs []string
	for _, o := range rep.Outcomes {
		runs = append(runs, o.Run)
	}
	assert.Equal(t, []string{"edit-test", "long", "loop"}, runs)
}
