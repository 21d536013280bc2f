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
	keyReplay       = "termination BenchmarkReplay"
	keyLiveRun      = "middleware BenchmarkConcurrentRuns"
	unitNs          = "ns/op"
	unitAllocs      = "allocs/op"
	unitEventsPerS  = "events/s"
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
		Name:  "`Forward`, full policy, no SDK",
		Limit: "≤ 1.4 × bare, 0 allocs",
		check: ratio(keyWrapped, 1.4, true),
	},
	{
		Name:  "`Forward`, real SDK, spans not sampled",
		Limit: "≤ 1.45 × bare, 0 allocs",
		check: ratio(keyUnsampled, 1.45, true),
	},
	{
		Name:  "`Forward`, real SDK, every span sampled",
		Limit: "≤ 2.5 × bare",
		check: ratio(keySampled, 2.5, false),
	},
	{
		Name:  "`Observe`, full policy, no SDK",
		Limit: "≤ 0.2 × bare, 0 allocs",
		check: ratio(keyObserve, 0.2, true),
	},
	{
		Name:  "replay, decode + evaluate",
		Limit: "≥ 1 M events/s",
		check: replay,
	},
	{
		Name:  "one live `Forward` run",
		Limit: "≤ 4.5 KiB, heap + stack",
		check: liveRun,
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

// ratio compares key's median ns/op with the bare forwarding goroutine's,
// both per event; zeroAllocs also requires a median of 0 allocs/op.
func ratio(key string, limit float64, zeroAllocs bool) func(*Results) (string, bool, error) {
	return func(r *Results) (string, bool, error) {
		raw, err := median(r, keyRaw, unitNs)
		if err != nil {
			return "", false, err
		}
		ns, err := median(r, key, unitNs)
		if err != nil {
			return "", false, err
		}
		allocs, err := median(r, key, unitAllocs)
		if err != nil {
			return "", false, err
		}
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
