// Command benchreport reads the output of `go test -bench` (as `make bench`
// runs it, with -count 5) and reports the contract's §6 performance figures:
// each computed from the medians of the runs, ratios to the bare forwarding
// goroutine taken within the same output, with its limit and a pass or fail
// mark.
//
// Usage:
//
//	go test -run '^$' -bench . -benchmem -count 5 ./... | benchreport [-strict] [-q]
//	benchreport -in bench.txt -readme README.md
//
// It prints every result line compactly as it arrives (unless -q), then the
// median of every benchmark, then the §6 table. With -readme FILE it also
// rewrites the part of FILE between the lines
//
//	<!-- benchreport:begin -->
//	<!-- benchreport:end -->
//
// with the §6 table in Markdown. It exits 1 when a figure's benchmark is
// missing from the input, and with -strict also when a limit is missed; 2 on
// bad usage or unreadable input.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "read the benchmark output from `FILE` (default stdin)")
	readme := fs.String("readme", "", "rewrite the benchreport part of `FILE` (a README) with the §6 table")
	strict := fs.Bool("strict", false, "exit 1 when a limit is missed")
	quiet := fs.Bool("q", false, "do not echo result lines as they are read")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "benchreport: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	r := stdin
	if *in != "" {
		f, err := os.Open(*in)
		if err != nil {
			fmt.Fprintf(stderr, "benchreport: %v\n", err)
			return 2
		}
		defer f.Close()
		r = f
	}
	var each func(string, Sample)
	if !*quiet {
		each = func(key string, s Sample) { fmt.Fprintln(stdout, compact(key, s, sampleUnits(s))) }
	}
	res, err := Parse(r, each)
	if err != nil {
		fmt.Fprintf(stderr, "benchreport: %v\n", err)
		return 2
	}
	if len(res.Order) == 0 {
		fmt.Fprintln(stderr, "benchreport: no benchmark results in the input")
		return 1
	}
	outcomes := Evaluate(res)
	fmt.Fprintf(stdout, "\nmedians (of %d runs each):\n", runs(res))
	for _, key := range res.Order {
		fmt.Fprintln(stdout, medians(res, key))
	}
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, Text(res, outcomes))
	if *readme != "" {
		if err := rewriteReadme(*readme, Markdown(res, outcomes, runtime.Version())); err != nil {
			fmt.Fprintf(stderr, "benchreport: %v\n", err)
			return 2
		}
		fmt.Fprintf(stdout, "rewrote the performance table of %s\n", *readme)
	}
	status := 0
	for _, o := range outcomes {
		if o.Err != nil {
			status = 1
		}
		if *strict && !o.Met {
			status = 1
		}
	}
	return status
}

// runs is how many samples the bare forwarding goroutine has (the -count),
// or the most any benchmark has when it is missing.
func runs(r *Results) int {
	if n := len(r.Samples[keyRaw]); n > 0 {
		return n
	}
	n := 0
	for _, s := range r.Samples {
		n = max(n, len(s))
	}
	return n
}

func sampleUnits(s Sample) []string {
	r := &Results{Samples: map[string][]Sample{"": {s}}}
	return r.Units("")
}

func compact(key string, s Sample, units []string) string {
	pkg, name, _ := strings.Cut(key, " ")
	line := fmt.Sprintf("%-13s %-44s", pkg, name)
	for _, u := range units {
		line += fmt.Sprintf("  %10s %s", trim(s[u], 2), u)
	}
	return line
}

func medians(r *Results, key string) string {
	m := Sample{}
	units := r.Units(key)
	for _, u := range units {
		m[u], _, _ = r.Median(key, u)
	}
	return compact(key, m, units)
}

// Text is the §6 table for a terminal.
func Text(r *Results, outcomes []Outcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "contract §6 (medians of %d runs; bare forwarding goroutine: %s)\n", runs(r), bare(r))
	met := 0
	for _, o := range outcomes {
		mark, measured := "✘ FAIL", o.Measured
		if o.Met {
			mark = "✔ ok"
			met++
		}
		if o.Err != nil {
			measured = "missing: " + o.Err.Error()
		}
		fmt.Fprintf(&b, "  %-58s %-72s %-46s %s\n", strings.ReplaceAll(o.Name, "`", ""), measured, strings.ReplaceAll(o.Limit, "`", ""), mark)
	}
	fmt.Fprintf(&b, "%d of %d limits met\n", met, len(outcomes))
	return b.String()
}

func bare(r *Results) string {
	ns, err := median(r, keyRaw, unitNs)
	if err != nil {
		return "missing"
	}
	return trim(ns, 0) + " ns/event"
}

// Markdown is the §6 table for the README, with a line saying where and how
// it was measured.
func Markdown(r *Results, outcomes []Outcome, goVersion string) string {
	var b strings.Builder
	cpu := r.CPU
	if cpu == "" {
		cpu = "an unnamed CPU"
	}
	fmt.Fprintf(&b, "`make bench` on %s, %s: medians of %d runs; ratios are to the bare forwarding\n", cpu, goVersion, runs(r))
	fmt.Fprintf(&b, "goroutine of the same run (`Forward/raw`, %s).\n\n", bare(r))
	b.WriteString("| §6 figure | measured | limit | met |\n|---|---|---|---|\n")
	for _, o := range outcomes {
		mark, measured := "✘", o.Measured
		if o.Met {
			mark = "✔"
		}
		if o.Err != nil {
			measured = "not measured"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", o.Name, measured, o.Limit, mark)
	}
	return b.String()
}

const (
	beginMarker = "<!-- benchreport:begin -->"
	endMarker   = "<!-- benchreport:end -->"
)

// rewriteReadme replaces what lies between the markers in path by table.
func rewriteReadme(path, table string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := replaceBetween(string(b), table)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(out), 0o644)
}

func replaceBetween(doc, table string) (string, error) {
	i := strings.Index(doc, beginMarker)
	j := strings.Index(doc, endMarker)
	switch {
	case i < 0 || j < 0:
		return "", fmt.Errorf("no %s ... %s lines", beginMarker, endMarker)
	case j < i:
		return "", fmt.Errorf("%s comes before %s", endMarker, beginMarker)
	case strings.Count(doc, beginMarker) > 1 || strings.Count(doc, endMarker) > 1:
		return "", fmt.Errorf("more than one %s ... %s part", beginMarker, endMarker)
	}
	head := doc[:i+len(beginMarker)]
	return head + "\n" + table + doc[j:], nil
}
