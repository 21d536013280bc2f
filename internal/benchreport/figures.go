package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The benchmarks the contract's §6 figures are taken from.
const (
	keyRaw          = "middleware BenchmarkForward/raw"
	keyWrapped      = "middleware BenchmarkForward/wrapped"
	keyUnsampled    = "middleware BenchmarkForward/instrumented_unsampled"
	keySampled      = "middleware BenchmarkForward/instrumented"
	keyObserve      = "middleware BenchmarkObserve/bare"
	keyShadow       = "middleware BenchmarkObserve/shadow"
	keyRangeRaw     = "middleware BenchmarkRange/raw"
	keyRangeGuarded = "middleware BenchmarkRange/guarded"
	keyTreeAlone    = "middleware BenchmarkTree/alone"
	keyTreeDepth3   = "middleware BenchmarkTree/depth3"
	keyReplay       = "replay BenchmarkReplay"
	keyReplayReal   = "replay BenchmarkReplayRealSized"
	keyPolicies1    = "backtest BenchmarkBacktest/policies=1"
	keyPolicies10   = "backtest BenchmarkBacktest/policies=10"
	keyWorkers1     = "backtest BenchmarkBacktest/workers=1"
	keyWorkers2     = "backtest BenchmarkBacktest/workers=2"
	keyLiveRun      = "middleware BenchmarkConcurrentRuns"
	keyImportChat10 = "importer BenchmarkImportOpenAIChat10MB"
	keyImportChat80 = "importer BenchmarkImportOpenAIChat80MB"
	keyImportOTLP10 = "importer BenchmarkImportOTLP10MB"
	keyImportOTLP80 = "importer BenchmarkImportOTLP80MB"
	keyReplayMemory = "agentstop BenchmarkManyRunsMemory/replay"
	keyBacktestMem  = "agentstop BenchmarkManyRunsMemory/backtest"
	unitPeakRSSMB   = "peak-RSS-MB"
	unitNs          = "ns/op"
	unitAllocs      = "allocs/op"
	unitEventsPerS  = "events/s"
	unitMBPerS      = "MB/s"
	unitLiveRun     = "B/live-run"
	unitLiveHeap    = "heap-B/live-run"
	unitLiveStack   = "stack-B/live-run"
	liveRunLimitKiB = 4.5
)

// Figure is one line of the contract's §6 table.
type Figure struct {
	Name  string // what is measured, in the contract's words
	Limit string // the limit, as the contract writes it
	check func(r *Results) (measured string, ok bool, err error)
}

// Outcome is a figure as measured.
type Outcome struct {
	Figure
	Measured string // the measured value, with what it is computed from
	Met      bool
	Err      error // a benchmark or unit the figure needs is not in the results
}

// Figures are the contract's §6 limits, in its order.
var Figures = []Figure{
	{
		Name:  "`Range`, consumer-side path, full policy, no SDK",
		Limit: "adds ≤ 2 × `Observe` to bare range, 0 allocs",
		check: rangeAdded,
	},
	{
		Name:  "`Forward`, full policy, no SDK",
		Limit: "≤ 1.6 × bare, 0 allocs",
		check: ratio(keyWrapped, 1.6, true),
	},
	{
		Name:  "`Forward`, real SDK, spans not sampled",
		Limit: "≤ 1.75 × bare, 0 allocs",
		check: ratio(keyUnsampled, 1.75, true),
	},
	{
		Name:  "`Forward`, real SDK, every span sampled",
		Limit: "≤ 2.6 × bare",
		check: ratio(keySampled, 2.6, false),
	},
	{
		Name:  "`Observe`, full policy, no SDK",
		Limit: "≤ 0.2 × bare, 0 allocs",
		check: ratio(keyObserve, 0.2, true),
	},
	{
		Name:  "`Observe` three levels below a `tree:` holder",
		Limit: "≤ 1.5 × the run alone, 0 allocs",
		check: treeDepth,
	},
	{
		Name:  "replay, decode + evaluate",
		Limit: "≥ 1 M events/s",
		check: replay,
	},
	{
		Name:  "replay of real-sized events, full policy with `text_mention`",
		Limit: "≥ 400 MB/s per core",
		check: replayRealSized,
	},
	{
		Name:  "`backtest`, 10 policies",
		Limit: "≤ 3 × 1 policy",
		check: backtestPolicies,
	},
	{
		Name:  "`backtest`, 2 workers",
		Limit: "≥ 1.7 × 1 worker",
		check: backtestWorkers,
	},
	{
		Name:  "`import` of OpenAI chat JSONL and of OTLP/JSON",
		Limit: "≥ 100 MB/s per core, 80 MB ≤ 10 × 10 MB",
		check: importThroughput,
	},
	{
		Name:  "one live `Forward` run",
		Limit: "≤ 4.5 KiB, heap + stack",
		check: liveRun,
	},
	{
		Name:  "replay / backtest memory, 200 MB log of 1,000 interleaved runs",
		Limit: "peak RSS ≤ 150 MB",
		check: manyRunsMemory,
	},
	{
		Name:  "a shadow policy (§5.2)",
		Limit: "adds ≤ 1 × `Observe` per event, 0 allocs",
		check: shadowAdded,
	},
}

// Evaluate measures every figure on r.
func Evaluate(r *Results) []Outcome {
	out := make([]Outcome, len(Figures))
	for i, f := range Figures {
		m, ok, err := f.check(r)
		out[i] = Outcome{Figure: f, Measured: m, Met: ok && err == nil, Err: err}
	}
	return out
}

// median is Results.Median with an error naming what is missing.
func median(r *Results, key, unit string) (float64, error) {
	m, _, ok := r.Median(key, unit)
	if !ok {
		if len(r.Samples[key]) == 0 {
			return 0, fmt.Errorf("no %s in the benchmark output", key)
		}
		return 0, fmt.Errorf("%s reports no %s", key, unit)
	}
	return m, nil
}

// stat names a benchmark's metric: the benchmark's key and the unit.
type stat struct{ key, unit string }

// mediansOf is median of each stat, in order, up to the first error.
func mediansOf(r *Results, stats ...stat) ([]float64, error) {
	m := make([]float64, len(stats))
	for i, st := range stats {
		v, err := median(r, st.key, st.unit)
		if err != nil {
			return nil, err
		}
		m[i] = v
	}
	return m, nil
}

// ratio compares key's median ns/op with the bare forwarding goroutine's,
// both per event; zeroAllocs also requires a median of 0 allocs/op.
func ratio(key string, limit float64, zeroAllocs bool) func(*Results) (string, bool, error) {
	return func(r *Results) (string, bool, error) {
		m, err := mediansOf(r, stat{keyRaw, unitNs}, stat{key, unitNs}, stat{key, unitAllocs})
		if err != nil {
			return "", false, err
		}
		raw, ns, allocs := m[0], m[1], m[2]
		x := ns / raw
		s := fmt.Sprintf("%s × (%s ns), %s allocs", trim(x, 3), trim(ns, 0), trim(allocs, 1))
		ok := x <= limit
		if zeroAllocs && allocs != 0 {
			ok = false
		}
		return s, ok, nil
	}
}

func replay(r *Results) (string, bool, error) {
	eps, err := median(r, keyReplay, unitEventsPerS)
	if err != nil {
		return "", false, err
	}
	return fmt.Sprintf("%s M events/s", trim(eps/1e6, 3)), eps >= 1e6, nil
}

// replayRealSized is BenchmarkReplayRealSized's throughput: replay reads
// one log in one goroutine, so its MB/s is per core.
func replayRealSized(r *Results) (string, bool, error) {
	mbs, err := median(r, keyReplayReal, unitMBPerS)
	if err != nil {
		return "", false, err
	}
	s := fmt.Sprintf("%s MB/s", trim(mbs, 0))
	if eps, err := median(r, keyReplayReal, unitEventsPerS); err == nil {
		s += fmt.Sprintf(" (%s events/s)", trim(eps, 0))
	}
	return s, mbs >= 400, nil
}

// manyRunsMemory is the larger of replay's and backtest's peak resident
// set size over the 200 MB log of many runs.
func manyRunsMemory(r *Results) (string, bool, error) {
	m, err := mediansOf(r, stat{keyReplayMemory, unitPeakRSSMB}, stat{keyBacktestMem, unitPeakRSSMB})
	if err != nil {
		return "", false, err
	}
	replay, backtest := m[0], m[1]
	return fmt.Sprintf("%s MB (replay %s MB, backtest %s MB)", trim(max(replay, backtest), 1), trim(replay, 1), trim(backtest, 1)),
		max(replay, backtest) <= 150, nil
}

// rangeAdded is what Range adds per event to a bare range loop over the
// same producer, against twice Observe's per-event cost, all in one run.
func rangeAdded(r *Results) (string, bool, error) {
	m, err := mediansOf(r, stat{keyRangeRaw, unitNs}, stat{keyRangeGuarded, unitNs}, stat{keyRangeGuarded, unitAllocs}, stat{keyObserve, unitNs})
	if err != nil {
		return "", false, err
	}
	raw, guarded, allocs, observe := m[0], m[1], m[2], m[3]
	added := guarded - raw
	s := fmt.Sprintf("+%s ns = %s × Observe (%s − %s ns; Observe %s ns), %s allocs",
		trim(added, 0), trim(added/observe, 2), trim(guarded, 0), trim(raw, 0), trim(observe, 0), trim(allocs, 1))
	return s, added <= 2*observe && allocs == 0, nil
}

// shadowAdded is what one shadow policy (the full policy again) adds to
// Observe's per-event cost, against Observe's own cost, in one run.
func shadowAdded(r *Results) (string, bool, error) {
	m, err := mediansOf(r, stat{keyObserve, unitNs}, stat{keyShadow, unitNs}, stat{keyShadow, unitAllocs})
	if err != nil {
		return "", false, err
	}
	observe, shadow, allocs := m[0], m[1], m[2]
	added := shadow - observe
	s := fmt.Sprintf("+%s ns = %s × Observe (%s − %s ns), %s allocs",
		trim(added, 0), trim(added/observe, 2), trim(shadow, 0), trim(observe, 0), trim(allocs, 1))
	return s, added <= observe && allocs == 0, nil
}

// treeDepth compares Observe of a run three levels below the holder of
// tree limits with Observe of the same run alone.
func treeDepth(r *Results) (string, bool, error) {
	m, err := mediansOf(r, stat{keyTreeAlone, unitNs}, stat{keyTreeDepth3, unitNs}, stat{keyTreeDepth3, unitAllocs})
	if err != nil {
		return "", false, err
	}
	alone, deep, allocs := m[0], m[1], m[2]
	x := deep / alone
	s := fmt.Sprintf("%s × (%s vs %s ns), %s allocs", trim(x, 3), trim(deep, 0), trim(alone, 0), trim(allocs, 1))
	return s, x <= 1.5 && allocs == 0, nil
}

// backtestPolicies compares a backtest with 10 policies with one with 1,
// same corpus and workers.
func backtestPolicies(r *Results) (string, bool, error) {
	m, err := mediansOf(r, stat{keyPolicies1, unitNs}, stat{keyPolicies10, unitNs})
	if err != nil {
		return "", false, err
	}
	one, ten := m[0], m[1]
	x := ten / one
	return fmt.Sprintf("%s × (%s vs %s ms)", trim(x, 3), trim(ten/1e6, 1), trim(one/1e6, 1)), x <= 3, nil
}

// backtestWorkers is the speed-up of 2 workers over 1 on the same corpus.
func backtestWorkers(r *Results) (string, bool, error) {
	m, err := mediansOf(r, stat{keyWorkers1, unitNs}, stat{keyWorkers2, unitNs})
	if err != nil {
		return "", false, err
	}
	one, two := m[0], m[1]
	x := one / two
	return fmt.Sprintf("%s × (%s vs %s ms)", trim(x, 3), trim(two/1e6, 1), trim(one/1e6, 1)), x >= 1.7, nil
}

// importThroughput is the import benchmarks' MB/s (one goroutine reads a
// file, so it is per core) and, per format, the time of the 80 MB file
// over the 10 MB one.
func importThroughput(r *Results) (string, bool, error) {
	var parts []string
	ok := true
	for _, f := range []struct{ name, k10, k80 string }{
		{"openai-chat", keyImportChat10, keyImportChat80},
		{"otlp", keyImportOTLP10, keyImportOTLP80},
	} {
		m, err := mediansOf(r, stat{f.k10, unitMBPerS}, stat{f.k80, unitMBPerS}, stat{f.k10, unitNs}, stat{f.k80, unitNs})
		if err != nil {
			return "", false, err
		}
		mb10, mb80, ns10, ns80 := m[0], m[1], m[2], m[3]
		x := ns80 / ns10
		parts = append(parts, fmt.Sprintf("%s %s / %s MB/s, 80/10 MB %s ×", f.name, trim(mb10, 0), trim(mb80, 0), trim(x, 2)))
		ok = ok && mb10 >= 100 && mb80 >= 100 && x <= 10
	}
	return strings.Join(parts, "; "), ok, nil
}

func liveRun(r *Results) (string, bool, error) {
	total, err := median(r, keyLiveRun, unitLiveRun)
	if err != nil {
		return "", false, err
	}
	kib := total / 1024
	s := fmt.Sprintf("%s KiB (%s B", trim(kib, 2), trim(total, 0))
	heap, herr := median(r, keyLiveRun, unitLiveHeap)
	stack, serr := median(r, keyLiveRun, unitLiveStack)
	if herr == nil && serr == nil {
		s += fmt.Sprintf(": heap %s + stack %s", trim(heap, 0), trim(stack, 0))
	}
	s += ")"
	return s, kib <= liveRunLimitKiB, nil
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// trim formats v with at most digits decimals, thousands separated, no
// trailing zeros.
func trim(v float64, digits int) string {
	s := strconv.FormatFloat(round(v, digits), 'f', digits, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	intPart, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	for i := len(intPart) - 3; i > 0; i -= 3 {
		intPart = intPart[:i] + "," + intPart[i:]
	}
	if neg {
		intPart = "-" + intPart
	}
	if frac != "" {
		return intPart + "." + frac
	}
	return intPart
}
