package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentstop/agentstop/backtest"
	"github.com/agentstop/agentstop/internal/human"
)

const backtestUsage = `Usage: agentstop backtest -policy A.yaml [-policy B.yaml ...] [-policies DIR ...] [-labels LABELS] [-all]
                          [-lenient] [-format table|json|csv] [-j N] [-max-false-stops N] PATH...

Evaluates each policy over recorded runs, exactly as replay would, and reports
which runs each policy would have stopped, where, and what the stop saves.
PATH is a JSON Lines file, a directory (every *.jsonl below it) or a glob. A
file whose events carry "run" holds many runs; otherwise a file is one run,
named by its path relative to PATH without .jsonl. An empty policy (an empty
file, {}) is evaluated, with one warning line on stderr naming the file:
nothing can stop a run. A candidate is named by its file name (-policy) or
directory's last element (-policies); candidates whose names collide are
named by the shortest path suffix that tells them apart (x1/p.yaml,
x2/p.yaml), the same file given twice by a number (p.yaml (2)).

Recorded runs: -policies DIR (repeatable) is one candidate made of per-stage
policies, DIR/STAGE.yaml each (what the quickstart's -record writes), named by
DIR's last element; runs whose stage has no file are left out of it (one line
on stderr names their stages; exit 2 when no run is left). A run with an end
record ends there, as in replay: a policy that does not stop it before gives
the recorded end ("from_record": true), every such result carries "live" (the
recorded cause's tag), a recorded end is no stop of the policy's, and "saved"
counts from stopped_at to the recorded end. The table says, per candidate, how
many runs it ends differently from live and how (LIVE → CAUSE).

-labels FILE is a JSON object {"RUN": "good"|"bad"|true|false, ...} or a CSV
run,label (a first row run,label is a header). Labels naming no run of the
corpus are ignored, with one warning line on stderr naming a few and their
count.

Exit status: 0 when the backtest ran; 1 when a policy stops more good runs
than -max-false-stops; 2 on bad input (a malformed line, a bad policy, a bad
labels file), with one line on stderr naming the file and line.

Example:
  agentstop backtest -policy strict.yaml -policy loose.yaml -labels labels.csv runs/
  agentstop backtest -policies rec/policies -policies candidates/ rec/events.jsonl
`

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func runBacktest(args []string, sio stdio) int {
	fs := newFlags("backtest")
	var policyPaths stringList
	fs.Var(&policyPaths, "policy", "a termination policy `FILE`, YAML or JSON (repeatable; at least one -policy or -policies)")
	var policyDirs stringList
	fs.Var(&policyDirs, "policies", "a `DIR` of per-stage policies, STAGE.yaml each: one candidate named by DIR's last element (repeatable)")
	labelsPath := fs.String("labels", "", "a labels `FILE`: a JSON object {\"RUN\": \"good\"|\"bad\"|true|false} or a CSV run,label")
	all := fs.Bool("all", false, "also list every condition that would fire over the whole run, each with the event where it first fires (table, json and csv)")
	lenient := fs.Bool("lenient", false, "skip a truncated last line of a file and mark its run truncated, instead of failing")
	format := fs.String("format", "table", "output `FORMAT`: table (for people), json (one object per line) or csv")
	workers := fs.Int("j", runtime.NumCPU(), "`N` workers: files evaluated at once (with fewer files than workers, a file's policies in parallel)")
	var maxFalseStops optionalInt
	fs.Var(&maxFalseStops, "max-false-stops", "exit 1 when a policy stops more than `N` good runs (needs -labels; for CI)")
	paths, code, done := parseFlags(fs, args, backtestUsage, sio)
	if done {
		return code
	}
	fail := func(format string, a ...any) int { return failf(sio, "backtest", format, a...) }
	switch {
	case len(policyPaths) == 0 && len(policyDirs) == 0:
		return fail("-policy or -policies is required (see agentstop backtest -h)")
	case len(paths) == 0:
		return fail("want at least one PATH: a JSON Lines file, a directory or a glob")
	case *format != "table" && *format != "json" && *format != "csv":
		return fail("-format %q: want table, json or csv", *format)
	case *workers < 1:
		return fail("-j %d: want at least 1 worker", *workers)
	case maxFalseStops.set && maxFalseStops.n < 0:
		return fail("-max-false-stops %d: want a number of runs, 0 or more", maxFalseStops.n)
	case maxFalseStops.set && *labelsPath == "":
		return fail("-max-false-stops needs -labels: without labels no run is known to be good")
	}
	cfg := backtest.Config{All: *all, Lenient: *lenient, Workers: *workers}
	var err error
	if cfg.Policies, err = loadCandidates(sio, policyPaths, policyDirs); err != nil {
		return fail("%v", err)
	}
	if *labelsPath != "" {
		l, err := backtest.ReadLabels(*labelsPath)
		if err != nil {
			return fail("%v", err)
		}
		cfg.Labels = l
	}
	setBatchGC()
	var progress *progressLine
	if human.IsTerminal(sio.err) {
		progress = &progressLine{w: sio.err}
		cfg.Progress = progress.update
	}
	rep, err := backtest.Evaluate(context.Background(), paths, cfg)
	progress.clear()
	if err != nil {
		return fail("%v", err)
	}
	if code := reportLeftOut(sio, rep); code != exitOK {
		return code
	}
	warnUnmatchedLabels(sio, *labelsPath, cfg.Labels.Unmatched(rep), rep)
	switch *format {
	case "json":
		err = rep.WriteJSON(sio.out)
	case "csv":
		err = rep.WriteCSV(sio.out)
	default:
		err = rep.WriteTable(sio.out)
	}
	if err != nil {
		return fail("cannot write the report: %v", err)
	}
	if maxFalseStops.set && tooManyFalseStops(sio, rep, maxFalseStops.n) {
		return exitFail
	}
	return exitOK
}

// loadCandidates reads the candidates: each -policy file (with a warning
// for an empty one and an ignored fleet_budget), then each -policies
// directory.
func loadCandidates(sio stdio, files, dirs []string) ([]backtest.Policy, error) {
	var out []backtest.Policy
	for _, p := range files {
		pol, err := backtest.LoadPolicy(p)
		if err != nil {
			return nil, err
		}
		warnEmptyPolicy(sio, "backtest", p, pol.Policy)
		if pol.Policy.FleetBudget() != nil {
			fmt.Fprintf(sio.err, "agentstop backtest: %s: fleet_budget is valid but ignored: a backtest evaluates runs without a fleet\n", p)
		}
		out = append(out, pol)
	}
	for _, dir := range dirs {
		pol, err := backtest.LoadStagePolicies(dir)
		if err != nil {
			return nil, err
		}
		out = append(out, pol)
	}
	return out, nil
}

// setBatchGC tunes the collector for a batch job, unless the user set
// GOMEMLIMIT or GOGC.
func setBatchGC() {
	if os.Getenv("GOMEMLIMIT") == "" {
		// Collect more often only when the heap nears the limit.
		debug.SetMemoryLimit(backtest.BatchMemoryLimit)
	}
	if os.Getenv("GOGC") == "" {
		// A batch job with a small live heap: collect less often, so that
		// the collector leaves the cores to the workers.
		debug.SetGCPercent(backtest.BatchGCPercent)
	}
}

// tooManyFalseStops reports, one line each, the candidates that stop more
// than max good runs (-max-false-stops), and whether any did.
func tooManyFalseStops(sio stdio, rep *backtest.Report, max int) bool {
	failed := false
	for _, s := range rep.Summaries {
		if n := s.FalseStops(); n > max {
			fmt.Fprintf(sio.err, "agentstop backtest: %s stops %s, more than -max-false-stops %d\n", s.Policy, human.Count(n, "good run"), max)
			failed = true
		}
	}
	return failed
}

// optionalInt is an int flag that knows whether it was given.
type optionalInt struct {
	n   int
	set bool
}

func (o *optionalInt) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.Itoa(o.n)
}

func (o *optionalInt) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("want a whole number of runs, got %q", v)
	}
	o.n, o.set = n, true
	return nil
}

// progressLine redraws one line on a terminal: runs done, files done of
// total, events per second; at most ten times a second.
type progressLine struct {
	w     interface{ Write([]byte) (int, error) }
	mu    sync.Mutex
	last  time.Time
	drawn bool
}

func (p *progressLine) update(pr backtest.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(p.last) >= 100*time.Millisecond || pr.FilesDone == pr.Files {
		p.last = now
		rate := 0.0
		if s := pr.Elapsed.Seconds(); s > 0 {
			rate = float64(pr.Events) / s
		}
		fmt.Fprintf(p.w, "\r\033[Kbacktest: %s done (%d of %s), %.0f events/s", human.Count(pr.Runs, "run"), pr.FilesDone, human.Count(pr.Files, "file"), rate)
		p.drawn = true
	}
}

// clear erases the progress line, if one was drawn. A nil p does nothing.
func (p *progressLine) clear() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// shownUnmatched is how many of the labels that name no run the warning
// names.
const shownUnmatched = 3

// warnUnmatchedLabels writes one warning line on stderr when labels name
// runs the corpus does not have: they are ignored (a typo would otherwise
// read as "0 good, 0 bad"), so the line names a few of them, says how
// many, and shows how the corpus names its runs.
func warnUnmatchedLabels(sio stdio, path string, unmatched []string, rep *backtest.Report) {
	if len(unmatched) == 0 {
		return
	}
	names := make([]string, 0, shownUnmatched)
	for _, run := range unmatched[:min(len(unmatched), shownUnmatched)] {
		names = append(names, strconv.Quote(run))
	}
	list := strings.Join(names, ", ")
	if more := len(unmatched) - len(names); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	like := ""
	if len(rep.Outcomes) > 0 {
		like = fmt.Sprintf(" (the corpus names its runs like %q)", rep.Outcomes[0].Run)
	}
	fmt.Fprintf(sio.err, "agentstop backtest: %s: warning: %s %s no run of the corpus, ignored: %s%s\n",
		path, human.Count(len(unmatched), "label"), human.Agree(len(unmatched), "names", "name"), list, like)
}

// reportLeftOut writes one stderr line per candidate that left runs out
// (no policy for their stage); exit 2 when no run is left at all.
func reportLeftOut(sio stdio, rep *backtest.Report) int {
	kept := 0
	for _, s := range rep.Summaries {
		kept += s.Runs
	}
	for j, left := range rep.LeftOut() {
		if left != nil {
			fmt.Fprintf(sio.err, "agentstop backtest: %s: %s\n", rep.Summaries[j].Policy, leftOutLine(left))
		}
	}
	if kept == 0 && len(rep.Outcomes) > 0 {
		return failf(sio, "backtest", "no run left to backtest: no candidate has a policy for any stage of the runs")
	}
	return exitOK
}
