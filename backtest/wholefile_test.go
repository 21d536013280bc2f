package backtest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// This file keeps the backtest's previous evaluation, which read each file
// whole (ReadFile) and replayed each policy over the decoded events, as the
// reference the streamed evaluation (stream.go) must match result for
// result.

// amountsOf sums events, in order.
func amountsOf(events []termination.Event) termination.Totals {
	var a termination.Totals
	for i := range events {
		addEvent(&a, &events[i])
	}
	return a
}

// wholeFileEvaluate is Evaluate as it was: each file read whole, one
// worker.
func wholeFileEvaluate(sources []source, cfg Config) (*Report, error) {
	rep := &Report{}
	for _, src := range sources {
		f, err := readFile(src, cfg.Lenient)
		if err != nil {
			return nil, &fileError{Path: src.Path, Err: err}
		}
		rep.Outcomes = append(rep.Outcomes, wholeFileOutcomes(f, &cfg)...)
	}
	rep.Summaries = summarize(rep.Outcomes, cfg.Policies, cfg.Labels != nil)
	return rep, nil
}

func wholeFileOutcomes(f *decodedFile, cfg *Config) []Outcome {
	out := make([]Outcome, 0, len(f.Runs)*len(cfg.Policies))
	results := make([][]termination.Result, len(cfg.Policies))
	for j := range cfg.Policies {
		results[j] = wholeFileResults(&cfg.Policies[j].Policy, f)
	}
	for i, r := range f.Runs {
		for j := range cfg.Policies {
			res := results[j][i]
			res.Stage = "replay"
			o := Outcome{
				Run: r.ID, Parent: r.Parent, File: r.File, Policy: cfg.Policies[j].Name, Stage: "replay", // no stage in these logs
				Label: cfg.Labels[r.ID], Result: res, Spent: amountsOf(r.Events[:min(res.Events, len(r.Events))]),
			}
			o.Stopped = len(res.Fired) > 0 || res.Events < len(r.Events)
			if o.Stopped {
				o.Saved = amountsOf(r.Events[min(res.Events, len(r.Events)):])
			}
			if cfg.All {
				o.All = []Firing{}
				for _, c := range cfg.Policies[j].Policy.Conditions() {
					if res := replay.Events(c, r.Events); len(res.Fired) > 0 {
						o.All = append(o.All, Firing{Condition: c.String(), Cause: res.Cause, At: res.StoppedAt})
					}
				}
			}
			out = append(out, o)
		}
	}
	return out
}

func wholeFileResults(p *termination.Policy, f *decodedFile) []termination.Result {
	out := make([]termination.Result, len(f.Runs))
	if !f.Multi && p.Tree() == nil {
		r := f.Runs[0]
		res := replay.Events(p.Condition(), r.Events)
		res.Truncated = r.Truncated && res.Events == len(r.Events) && len(res.Fired) == 0
		out[0] = res
		return out
	}
	byRun := map[string]termination.Result{}
	for _, res := range replay.Runs(p, f.Events) {
		byRun[res.Run] = res
	}
	for i, r := range f.Runs {
		id := r.ID
		if !f.Multi {
			id = ""
		}
		res := byRun[id]
		res.Truncated = r.Truncated && len(res.Fired) == 0
		out[i] = res
	}
	return out
}

// TestStreamedEqualsWholeFile: over random corpora (files of one run,
// files of many interleaved runs with parents, some cut inside their last
// line) and random policies (timeouts and tree: limits included), with
// -all, labels and -lenient, the streamed backtest's report is the one the
// whole-file evaluation gave, outcome for outcome and summary for summary,
// with as many workers as files and with more (a file's policies split
// among goroutines).
func TestStreamedEqualsWholeFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 2026))
	dir := t.TempDir()
	for i := range 30 {
		writeRandomRun(t, rng, filepath.Join(dir, fmt.Sprintf("run-%02d.jsonl", i)))
	}
	for i := range 20 {
		writeRandomTree(t, rng, filepath.Join(dir, fmt.Sprintf("tree-%02d.jsonl", i)))
	}
	// Some files end inside their last line, as an agent killed while
	// writing leaves them.
	for _, name := range []string{"run-03", "run-07", "tree-02", "tree-05", "tree-11"} {
		path := filepath.Join(dir, name+".jsonl")
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		last := bytes.LastIndexByte(data[:len(data)-1], '\n')
		require.NoError(t, os.WriteFile(path, data[:last+1+(len(data)-last)/2], 0o644))
	}
	pols := randomPolicies(t, rng, 12)
	labels := Labels{}
	sources, err := find([]string{dir, "testdata/corpus", "testdata/multi.jsonl"})
	require.NoError(t, err)
	for _, o := range mustWhole(t, sources, Config{Policies: pols[:1], Lenient: true}).Outcomes {
		if rng.IntN(3) > 0 {
			labels[o.Run] = Label(1 + rng.IntN(2))
		}
	}
	for _, cfg := range []Config{
		{Policies: pols, Lenient: true, All: true, Labels: labels, Workers: 2},
		{Policies: pols[:3], Lenient: true, Workers: 1},
		{Policies: append(policies(t, "strict.yaml", "tree.yaml", "loose.yaml"), pols[5]), Lenient: true, All: true, Labels: labels},
	} {
		want := mustWhole(t, sources, cfg)
		got, err := evaluate(context.Background(), sources, cfg)
		require.NoError(t, err)
		require.Len(t, got.Outcomes, len(want.Outcomes))
		for k := range want.Outcomes {
			require.Equal(t, jsonOf(t, want.Outcomes[k]), jsonOf(t, got.Outcomes[k]), "outcome %d", k)
			require.Equal(t, want.Outcomes[k], got.Outcomes[k], "outcome %d", k)
		}
		assert.Equal(t, want.Summaries, got.Summaries)
	}
	// Fewer files than workers: each file's policies are split among
	// goroutines fed by one decoding (pipeline.go).
	for _, name := range []string{"tree-02", "tree-05", "tree-07", "run-03", "run-04"} {
		one, err := find([]string{filepath.Join(dir, name+".jsonl"), "testdata/multi.jsonl"})
		require.NoError(t, err)
		for _, cfg := range []Config{
			{Policies: pols, Lenient: true, All: true, Labels: labels, Workers: 4},
			{Policies: pols[:1], Lenient: true, Workers: 5},
			{Policies: pols[:5], Lenient: true, All: true, Workers: 16},
		} {
			want := mustWhole(t, one, cfg)
			got, err := evaluate(context.Background(), one, cfg)
			require.NoError(t, err)
			require.Equal(t, jsonOf(t, want.Outcomes), jsonOf(t, got.Outcomes), "%s, %d workers", name, cfg.Workers)
			assert.Equal(t, want.Summaries, got.Summaries)
		}
	}
	var truncated int
	for _, o := range mustWhole(t, sources, Config{Policies: pols[:1], Lenient: true}).Outcomes {
		if o.Result.Truncated {
			truncated++
		}
	}
	assert.Positive(t, truncated, "some runs reach the cut line")
}

func mustWhole(t *testing.T, sources []source, cfg Config) *Report {
	t.Helper()
	rep, err := wholeFileEvaluate(sources, cfg)
	require.NoError(t, err)
	return rep
}

// randomPolicies returns n random policies of one to four conditions,
// tree: limits and timeouts among them.
func randomPolicies(t *testing.T, rng *rand.Rand, n int) []Policy {
	snippets := []string{
		"max_iterations: %d", "max_tool_calls: %d", "stall: {repeats: %d}", "token_budget: {total: %d00}",
		"cost_budget: {limit: 0.0%d}", "errors: {consecutive: %d}", "timeout: %ds", "text_mention: {text: done%d}",
		"token_budget: {total: %d000, pressure: 0.5, grace: 1}", "stall: {repeats: 2, window: %d}", "function_call: [tool%d]",
		"stall: {repeats: %d, same_result: true}", "tree: {max_iterations: %d}", "tree: {token_budget: {total: %d000}}",
		"tree: {max_tool_calls: %d, timeout: 40s}", "tree: {timeout: %ds}",
	}
	var pols []Policy
	for k := range n {
		var lines []string
		for range 1 + rng.IntN(4) {
			s := snippets[rng.IntN(len(snippets))]
			v := 2 + rng.IntN(6)
			if strings.HasPrefix(s, "tree:") || strings.HasPrefix(s, "timeout") {
				v = 4 + rng.IntN(40)
			}
			line := fmt.Sprintf(s, v)
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
	return pols
}

// TestStreamedErrorsEqualWholeFile: a bad file gives the error the
// whole-file evaluation gave, strict and lenient.
func TestStreamedErrorsEqualWholeFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		return path
	}
	ev := func(run, kind string) string {
		if run == "" {
			return fmt.Sprintf(`{"kind":%q,"text":"x"}`, kind)
		}
		return fmt.Sprintf(`{"kind":%q,"run":%q,"text":"x"}`, kind, run)
	}
	paths := []string{
		"testdata/bad/malformed.jsonl", "testdata/bad/mixed.jsonl", "testdata/bad/pretty.jsonl", "testdata/bad/truncated.jsonl",
		write("empty.jsonl", "\n\n"),
		write("only-truncated.jsonl", `{"kind":"mess`),
		write("named-late.jsonl", ev("", "input")+"\n"+ev("a", "message")+"\n"),
		write("unnamed-late.jsonl", ev("a", "input")+"\n"+ev("", "message")+"\n"),
		write("unnamed-then-bad.jsonl", ev("a", "input")+"\n"+ev("", "message")+"\n{bad\n"),
		write("bad-kind-in-tree.jsonl", ev("a", "input")+"\n"+ev("b", "nope")+"\n"),
		write("truncated-tree.jsonl", ev("a", "input")+"\n"+ev("b", "input")+"\n"+`{"kind":"message","run":"a","te`),
	}
	pols := policies(t, "strict.yaml", "tree.yaml")
	for _, path := range paths {
		for _, lenient := range []bool{false, true} {
			src := []source{{Path: path, Name: "r"}}
			cfg := Config{Policies: pols, Lenient: lenient}
			want, wantErr := wholeFileEvaluate(src, cfg)
			got, err := evaluate(context.Background(), src, cfg)
			if wantErr != nil {
				assert.EqualError(t, err, wantErr.Error(), "%s lenient=%v", path, lenient)
				continue
			}
			require.NoError(t, err, "%s lenient=%v", path, lenient)
			assert.Equal(t, jsonOf(t, want.Outcomes), jsonOf(t, got.Outcomes), "%s lenient=%v", path, lenient)
		}
	}
}
