package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Sample is one result line of one benchmark: value by unit ("ns/op",
// "B/op", "allocs/op", "events/s", ...).
type Sample map[string]float64

// Results is what a `go test -bench` output holds: the samples of every
// benchmark (one per -count run), keyed by "pkg Name" where pkg is the last
// element of the package path and Name the benchmark's full name without
// its -GOMAXPROCS suffix (middleware BenchmarkForward/raw).
type Results struct {
	CPU     string              // the "cpu:" line, when present
	Order   []string            // keys in order of first appearance
	Samples map[string][]Sample // every sample of a key, in order
}

// Key is the Results key of benchmark name in package pkg (its path).
func Key(pkg, name string) string {
	return pkg[strings.LastIndexByte(pkg, '/')+1:] + " " + name
}

var procSuffix = regexp.MustCompile(`-[0-9]+$`)

// Parse reads `go test -bench` output. Lines that are not benchmark results
// (PASS, ok, logs) are skipped; a benchmark whose name and result are split
// by log lines (a benchmark that logs) is still read. each, when not nil, is
// called with every sample as it is read, for progress output.
func Parse(r io.Reader, each func(key string, s Sample)) (*Results, error) {
	res := &Results{Samples: map[string][]Sample{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	pkg, pending := "", ""
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		fields := strings.Fields(text)
		switch {
		case len(fields) == 0:
			continue
		case fields[0] == "pkg:" && len(fields) == 2:
			pkg, pending = fields[1], ""
			continue
		case fields[0] == "cpu:" && res.CPU == "":
			res.CPU = strings.TrimSpace(strings.TrimPrefix(text, "cpu:"))
			continue
		}
		name, values := "", fields
		if strings.HasPrefix(fields[0], "Benchmark") {
			name, values = procSuffix.ReplaceAllString(fields[0], ""), fields[1:]
			if len(values) == 0 {
				pending = name // the result follows the benchmark's log lines
				continue
			}
		} else if pending != "" && isCount(fields[0]) {
			name = pending
		} else {
			continue
		}
		s, err := parseValues(values)
		if err != nil {
			if strings.HasPrefix(fields[0], "Benchmark") && len(values) > 0 && !isCount(values[0]) {
				// "BenchmarkX-2 --- FAIL" and the like: not a result.
				pending = ""
				continue
			}
			return nil, fmt.Errorf("line %d: %s: %w", line, name, err)
		}
		pending = ""
		if pkg == "" {
			return nil, fmt.Errorf("line %d: %s: result before any pkg: line", line, name)
		}
		key := Key(pkg, name)
		if _, seen := res.Samples[key]; !seen {
			res.Order = append(res.Order, key)
		}
		res.Samples[key] = append(res.Samples[key], s)
		if each != nil {
			each(key, s)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

func isCount(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// parseValues reads "N v1 unit1 v2 unit2 ...": the iteration count, then
// value and unit pairs.
func parseValues(f []string) (Sample, error) {
	if len(f) < 3 || len(f)%2 != 1 || !isCount(f[0]) {
		return nil, fmt.Errorf("want an iteration count and value-unit pairs, got %q", strings.Join(f, " "))
	}
	s := Sample{}
	for i := 1; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return nil, fmt.Errorf("value of %s: %w", f[i+1], err)
		}
		s[f[i+1]] = v
	}
	return s, nil
}

// Median returns the median of key's samples in unit, and how many samples
// had it; ok is false when none had.
func (r *Results) Median(key, unit string) (m float64, n int, ok bool) {
	var vs []float64
	for _, s := range r.Samples[key] {
		if v, has := s[unit]; has {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0, 0, false
	}
	slices.Sort(vs)
	mid := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[mid], len(vs), true
	}
	return (vs[mid-1] + vs[mid]) / 2, len(vs), true
}

// Units returns the units key's samples carry, in a fixed order: ns/op,
// B/op, allocs/op first, then the custom metrics sorted.
func (r *Results) Units(key string) []string {
	seen := map[string]bool{}
	for _, s := range r.Samples[key] {
		for u := range s {
			seen[u] = true
		}
	}
	var out, rest []string
	for _, u := range []string{"ns/op", "B/op", "allocs/op"} {
		if seen[u] {
			out = append(out, u)
			delete(seen, u)
		}
	}
	for u := range seen {
		rest = append(rest, u)
	}
	slices.Sort(rest)
	return append(out, rest...)
}
