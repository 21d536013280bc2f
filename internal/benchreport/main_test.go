package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func parseFile(t *testing.T, path string) *Results {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := Parse(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParse(t *testing.T) {
	r := parseFile(t, "testdata/bench.txt")
	if r.CPU != "Intel(R) Xeon(R) Processor @ 2.10GHz" {
		t.Errorf("CPU = %q", r.CPU)
	}
	wantOrder := []string{keyRaw, keyWrapped, keySampled, keyUnsampled, keyObserve, keyShadow, keyLiveRun,
		keyRangeRaw, keyRangeGuarded, keyTreeAlone, keyTreeDepth3, keyReplay, keyReplayReal,
		keyPolicies1, keyPolicies10, keyWorkers1, keyWorkers2,
		keyImportChat10, keyImportChat80, keyImportOTLP10, keyImportOTLP80, keyReplayMemory, keyBacktestMem}
	if strings.Join(r.Order, "|") != strings.Join(wantOrder, "|") {
		t.Errorf("Order = %q, want %q", r.Order, wantOrder)
	}
	for key, n := range map[string]int{keyRaw: 5, keySampled: 3, keyReplay: 3} {
		if got := len(r.Samples[key]); got != n {
			t.Errorf("%s: %d samples, want %d", key, got, n)
		}
	}
	// The third replay sample's name and result are split by a log line.
	if got := r.Samples[keyReplay][2]["events/s"]; got != 1111111 {
		t.Errorf("split replay sample: events/s = %v", got)
	}
	if got := r.Samples[keyLiveRun][0]["stack-B/live-run"]; got != 2408 {
		t.Errorf("custom metric: stack-B/live-run = %v", got)
	}
}

func TestMedian(t *testing.T) {
	r := &Results{Samples: map[string][]Sample{
		"odd":   {{"ns/op": 3}, {"ns/op": 1}, {"ns/op": 100}},
		"even":  {{"ns/op": 4}, {"ns/op": 1}, {"ns/op": 2}, {"ns/op": 100}},
		"other": {{"B/op": 1}},
	}}
	for _, tc := range []struct {
		key  string
		want float64
		n    int
		ok   bool
	}{
		{"odd", 3, 3, true},
		{"even", 3, 4, true},
		{"other", 0, 0, false},
		{"absent", 0, 0, false},
	} {
		m, n, ok := r.Median(tc.key, "ns/op")
		if m != tc.want || n != tc.n || ok != tc.ok {
			t.Errorf("Median(%s) = %v, %d, %v; want %v, %d, %v", tc.key, m, n, ok, tc.want, tc.n, tc.ok)
		}
	}
}

func TestEvaluate(t *testing.T) {
	outcomes := Evaluate(parseFile(t, "testdata/bench.txt"))
	want := []struct {
		measured string
		met      bool
	}{
		{"+155 ns = 1.91 × Observe (360 − 205 ns; Observe 81 ns), 0 allocs", true},
		{"1.35 × (540 ns), 0 allocs", true},
		{"1.75 × (700 ns), 0 allocs", true}, // exactly at the limit
		{"2.625 × (1,050 ns), 1 allocs", false},
		{"0.203 × (81 ns), 0 allocs", false},
		{"1.524 × (125 vs 82 ns), 0 allocs", false},
		{"1.053 M events/s", true},
		{"410 MB/s (250,000 events/s)", true},
		{"2.476 × (260 vs 105 ms)", true},
		{"1.577 × (130 vs 205 ms)", false},
		{"openai-chat 105 / 99 MB/s, 80/10 MB 8.5 ×; otlp 131 / 120 MB/s, 80/10 MB 8.75 ×", false}, // 99 < 100
		{"4.5 KiB (4,608 B: heap 2,200 + stack 2,408)", true},                                      // exactly at the limit
		{"150.2 MB (replay 24.8 MB, backtest 150.2 MB)", false},                                    // the larger one is over
		{"+77 ns = 0.95 × Observe (158 − 81 ns), 0 allocs", true},
	}
	if len(outcomes) != len(want) {
		t.Fatalf("%d outcomes, want %d", len(outcomes), len(want))
	}
	for i, o := range outcomes {
		if o.Err != nil {
			t.Errorf("%s: %v", o.Name, o.Err)
		}
		if o.Measured != want[i].measured || o.Met != want[i].met {
			t.Errorf("%s: %q met=%v, want %q met=%v", o.Name, o.Measured, o.Met, want[i].measured, want[i].met)
		}
	}
}

func TestEvaluateAllocsFail(t *testing.T) {
	r := &Results{Samples: map[string][]Sample{
		keyRaw:     {{"ns/op": 100, "allocs/op": 0}},
		keyWrapped: {{"ns/op": 110, "allocs/op": 1}},
	}}
	o := Evaluate(r)[1]
	if o.Met || o.Err != nil {
		t.Errorf("1.1 × with 1 alloc: met=%v err=%v, want a miss", o.Met, o.Err)
	}
}

func TestEvaluateImport(t *testing.T) {
	results := func(chat80ns float64) *Results {
		return &Results{Samples: map[string][]Sample{
			keyImportChat10: {{"ns/op": 100, "MB/s": 120}},
			keyImportChat80: {{"ns/op": chat80ns, "MB/s": 110}},
			keyImportOTLP10: {{"ns/op": 100, "MB/s": 150}},
			keyImportOTLP80: {{"ns/op": 800, "MB/s": 150}},
		}}
	}
	imp := slices.IndexFunc(Figures, func(f Figure) bool { return strings.HasPrefix(f.Name, "`import`") })
	for _, tc := range []struct {
		ns80 float64
		met  bool
	}{{1000, true}, {1001, false}} {
		o := Evaluate(results(tc.ns80))[imp]
		if o.Err != nil || o.Met != tc.met {
			t.Errorf("80 MB in %v ns, 10 MB in 100: met=%v err=%v, want met=%v (%s)", tc.ns80, o.Met, o.Err, tc.met, o.Measured)
		}
	}
	r := results(800)
	delete(r.Samples, keyImportOTLP80)
	if o := Evaluate(r)[imp]; o.Met || o.Err == nil || o.Err.Error() != "no importer BenchmarkImportOTLP80MB in the benchmark output" {
		t.Errorf("without the OTLP benchmark: met=%v err=%v", o.Met, o.Err)
	}
}

func TestEvaluateMissing(t *testing.T) {
	r := &Results{Samples: map[string][]Sample{
		keyRaw:     {{"ns/op": 100}},
		keyWrapped: {{"ns/op": 110}}, // no -benchmem
	}}
	outcomes := Evaluate(r)
	for i, want := range []string{
		"no middleware BenchmarkRange/raw in the benchmark output",
		"middleware BenchmarkForward/wrapped reports no allocs/op",
		"no middleware BenchmarkForward/instrumented_unsampled in the benchmark output",
	} {
		if o := outcomes[i]; o.Met || o.Err == nil || o.Err.Error() != want {
			t.Errorf("%s: met=%v err=%v, want %q", o.Name, o.Met, o.Err, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for name, in := range map[string]string{
		"bad value":  "pkg: x/middleware\nBenchmarkA-2  10  abc ns/op\n",
		"odd fields": "pkg: x/middleware\nBenchmarkA-2  10  5 ns/op 7\n",
		"no pkg":     "BenchmarkA-2  10  5 ns/op\n",
	} {
		if _, err := Parse(strings.NewReader(in), nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// A failed benchmark's marker line is not a result.
	r, err := Parse(strings.NewReader("pkg: x/m\nBenchmarkA-2 --- FAIL: BenchmarkA-2\nBenchmarkB-2 10 5 ns/op\n"), nil)
	if err != nil || len(r.Order) != 1 || r.Order[0] != "m BenchmarkB" {
		t.Errorf("FAIL line: %v, %v", r, err)
	}
}

func TestTrim(t *testing.T) {
	for _, tc := range []struct {
		v      float64
		digits int
		want   string
	}{
		{1.35, 3, "1.35"},
		{1.4049, 3, "1.405"},
		{1234567, 0, "1,234,567"},
		{2.0, 2, "2"},
		{-1234.5, 1, "-1,234.5"},
		{999, 0, "999"},
	} {
		if got := trim(tc.v, tc.digits); got != tc.want {
			t.Errorf("trim(%v, %d) = %q, want %q", tc.v, tc.digits, got, tc.want)
		}
	}
}

func TestReplaceBetween(t *testing.T) {
	doc := "# T\n\n## Performance\n\n" + beginMarker + "\nold table\n" + endMarker + "\n\nWhy.\n"
	got, err := replaceBetween(doc, "new table\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# T\n\n## Performance\n\n" + beginMarker + "\nnew table\n" + endMarker + "\n\nWhy.\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	for name, bad := range map[string]string{
		"no markers": "# T\n",
		"reversed":   endMarker + "\n" + beginMarker + "\n",
		"twice":      beginMarker + endMarker + beginMarker + endMarker,
	} {
		if _, err := replaceBetween(bad, "x"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRun(t *testing.T) {
	readme := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(readme, []byte("## Performance\n\n"+beginMarker+"\n"+endMarker+"\nrest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run([]string{"-in", "testdata/bench.txt", "-readme", readme, "-q"}, nil, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut.String())
	}
	for _, want := range []string{
		"medians (of 5 runs each):",
		"middleware    BenchmarkForward/raw",
		"contract §6 (medians of 5 runs; bare forwarding goroutine: 400 ns/event)",
		"Forward, full policy, no SDK",
		"✔ ok",
		"✘ FAIL",
		"8 of 14 limits met",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"`make bench` on Intel(R) Xeon(R) Processor @ 2.10GHz, go",
		"medians of 5 runs",
		"(`Forward/raw`, 400 ns/event)",
		"| `Forward`, full policy, no SDK | 1.35 × (540 ns), 0 allocs | ≤ 1.6 × bare, 0 allocs | ✔ |",
		"| replay of real-sized events, full policy with `text_mention` | 410 MB/s (250,000 events/s) | ≥ 400 MB/s per core | ✔ |",
		"| `Observe`, full policy, no SDK | 0.203 × (81 ns), 0 allocs | ≤ 0.2 × bare, 0 allocs | ✘ |",
		"\n" + endMarker + "\nrest\n",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("README lacks %q:\n%s", want, b)
		}
	}

	// -strict fails on a missed limit; the echo is on without -q.
	out.Reset()
	if code := run([]string{"-in", "testdata/bench.txt", "-strict"}, nil, &out, &errOut); code != 1 {
		t.Errorf("-strict: exit %d, want 1", code)
	}
	if !strings.Contains(out.String(), "replay        BenchmarkReplay") {
		t.Errorf("no echoed result line:\n%s", out.String())
	}

	// A figure's benchmark missing fails without -strict; bad input is 2.
	out.Reset()
	code = run([]string{"-q"}, strings.NewReader("pkg: x/middleware\nBenchmarkForward/raw-2 10 5 ns/op 0 B/op 0 allocs/op\n"), &out, &errOut)
	if code != 1 {
		t.Errorf("missing figures: exit %d, want 1", code)
	}
	// A figure whose benchmark is absent prints as missing, never as met.
	for _, want := range []string{"missing: no backtest BenchmarkBacktest/workers=1 in the benchmark output", "0 of 14 limits met"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("partial input: output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "✔") {
		t.Errorf("partial input: a figure marked met:\n%s", out.String())
	}
	for name, args := range map[string][]string{
		"no such file": {"-in", filepath.Join(t.TempDir(), "nope")},
		"extra arg":    {"x"},
		"bad flag":     {"-nope"},
	} {
		if code := run(args, strings.NewReader(""), &out, &errOut); code != 2 {
			t.Errorf("%s: exit %d, want 2", name, code)
		}
	}
	if code := run(nil, strings.NewReader("PASS\n"), &out, &errOut); code != 1 {
		t.Errorf("no results: exit %d, want 1", code)
	}
}

// TestReadmeHasMarkers: make bench-readme can rewrite the project's README.
func TestReadmeHasMarkers(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replaceBetween(string(b), "table\n"); err != nil {
		t.Errorf("README.md: %v", err)
	}
}
