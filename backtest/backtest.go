package backtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// The garbage collector's settings for a backtest, a batch job: the
// agentstop backtest command runs with each when its environment variable
// is not set.
const (
	// BatchGCPercent is the collector's target percentage (GOGC): a
	// backtest's live heap (the live runs' evaluators, the outcomes) is
	// usually small beside what decoding allocates, so at the default of
	// 100 the collector runs several times per file and takes the cores
	// the workers need (two workers then go 1.2 × as fast as one instead
	// of 1.8 ×). BenchmarkBacktest runs with it too.
	BatchGCPercent = 400

	// BatchMemoryLimit is the soft memory limit (GOMEMLIMIT), beside
	// BatchGCPercent. At GOGC=400 the heap may grow to five times the live
	// heap, and with many runs live at once and many policies the live
	// heap is tens of MB (1,000 live runs and 10 policies: about 30 MB):
	// the limit makes the collector run more often then, and only then, so
	// that the process stays under the contract's 150 MB (§6). A live heap
	// above it is still collected as needed, at a higher CPU cost.
	BatchMemoryLimit = 100 << 20
)

// Policy is a policy under test and the name the report gives it (the
// policy file's name).
type Policy struct {
	Name   string
	Policy termination.Policy
	// Source is the file or directory the policy was read from
	// (LoadPolicy, LoadStagePolicies), or empty. When candidates share a
	// Name, the report names them by their Sources (uniqueNames).
	Source string
	// Stages, when not nil, make the candidate one of per-stage policies
	// (agentstop backtest -policies DIR, LoadStagePolicies): each run is
	// evaluated with its stage's policy, and runs whose stage has none are
	// left out of this candidate (Outcome.LeftOut). Policy is then unused.
	Stages map[string]termination.Policy
}

// LoadPolicy reads the policy file at path and names it by the file's base
// name. Errors name the file and, for an invalid policy, the key.
func LoadPolicy(path string) (Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Policy{}, fmt.Errorf("cannot read the policy file %s: %v", path, pathErrorText(err))
	}
	p, err := termination.ParsePolicy(data)
	if err != nil {
		return Policy{}, fmt.Errorf("%s: %w", path, err)
	}
	return Policy{Name: filepath.Base(path), Policy: p, Source: path}, nil
}

// Config is what a backtest evaluates and how.
type Config struct {
	// Policies are evaluated over every run, each in the same pass. The
	// report names them as uniqueNames does: candidates that share a name
	// are told apart by their Sources.
	Policies []Policy
	// Labels, when not nil, say which runs were good and which bad.
	Labels Labels
	// All asks, for each run and policy, for every top-level condition
	// that would fire over the whole run had it gone on (Outcome.All).
	All bool
	// Lenient skips a truncated last line of a file instead of failing.
	Lenient bool
	// Workers is how many goroutines evaluate at once; 0 means
	// runtime.NumCPU(). Each takes a file at a time; with fewer files than
	// workers, a file's share of them evaluate its policies while it is
	// decoded (one decoding goroutine, the policies split among the
	// others), so one large file of many runs uses them too.
	Workers int
	// Progress, when not nil, is called after each file with the counts
	// so far, one call at a time.
	Progress func(Progress)
}

// Progress is how far a backtest has come.
type Progress struct {
	Files, FilesDone int
	Runs             int   // runs evaluated so far
	Events           int64 // events decoded so far
	Elapsed          time.Duration
}

// addEvent adds what ev spent. Sums are taken event by event in the
// order of the lines, so a running total is the sum of its events.
func addEvent(a *termination.Totals, ev *termination.Event) {
	a.Events++
	switch ev.Kind {
	case termination.KindMessage, termination.KindFinal:
		a.Iterations++
	case termination.KindToolCall:
		a.ToolCalls++
	}
	a.Tokens = a.Tokens.Add(ev.Usage)
	a.Cost += ev.Cost
}

// Firing is one top-level condition of a policy that fires over a whole
// run when evaluated on its own (Config.All).
type Firing struct {
	Condition string            // the condition, as the policy states it
	Cause     termination.Cause // what it fires
	At        int               // the 1-based index of the event where it first fires (stopped_at)
}

// Outcome is what one policy did to one run.
type Outcome struct {
	Run, Parent, File string
	// Stage is the run's stage (its first line's, or "replay").
	Stage string
	// LeftOut is set when the candidate has no policy for the run's stage
	// (a -policies DIR without its file): the run is in no summary and no
	// output of this candidate (Report.LeftOut counts it).
	LeftOut bool
	Policy  string
	Label   Label
	// Result is the replay result: what agentstop replay prints for this
	// run and policy (stage "replay").
	Result termination.Result
	// Stopped is set when the policy ended the run: a condition fired, or
	// the run was ended before its last event (a tree's cancellation).
	Stopped bool
	// Saved is what the run spent after the stop (zero when not stopped).
	Saved termination.Totals
	// Spent is what the run spent up to the stop (the events evaluated).
	Spent termination.Totals
	// All is set when Config.All is: every top-level condition that fires
	// over the whole run, in the policy's order (empty, not nil, when none
	// does).
	All []Firing
}

// Report is a backtest's result: one Outcome per (run, policy), runs in
// the order of the files and, within a file of many runs, of their first
// lines, policies in the order given; then one Summary per policy.
type Report struct {
	Outcomes  []Outcome
	Summaries []Summary
}

// LeftOut returns, for each policy in order, how many runs it left out
// by stage (a -policies DIR without the stage's file); nil entries for
// policies that left none out.
func (r *Report) LeftOut() []map[string]int {
	out := make([]map[string]int, len(r.Summaries))
	for k := range r.Outcomes {
		o := &r.Outcomes[k]
		if !o.LeftOut {
			continue
		}
		j := k % len(r.Summaries)
		if out[j] == nil {
			out[j] = map[string]int{}
		}
		out[j][o.Stage]++
	}
	return out
}

// fileError is a file of the corpus that could not be read or decoded;
// its message names the file and the line.
type fileError struct {
	Path string
	Err  error
}

func (e *fileError) Error() string { return e.Err.Error() }
func (e *fileError) Unwrap() error { return e.Err }

// Evaluate backtests cfg.Policies over the corpus at paths, each a JSON
// Lines file, a directory (every *.jsonl below it, recursively, in lexical
// order) or a glob (each match a file or a directory as above). A file
// whose events carry "run" holds many runs; any other file is one run,
// named by its path relative to the directory it was found under, without
// .jsonl (a file given as a PATH or matched by a glob: by its base name). A PATH that matches
// nothing, and a directory that holds no *.jsonl file, are errors: a
// backtest over no runs is a mistake, not a report of zeros. A file found
// twice is read once.
//
// Every file is read a line at a time, and every policy evaluated over its
// runs in that pass, exactly as agentstop replay would evaluate them (a
// file of many runs is read once more before, to find where each run
// ends). Memory holds the live runs' evaluators and the outcomes, never a
// file's events. It stops at the first file that cannot be read or decoded
// (an error naming the file and the line; the earliest such file of the
// corpus when several fail at once), or when ctx is done.
func Evaluate(ctx context.Context, paths []string, cfg Config) (*Report, error) {
	sources, err := find(paths)
	if err != nil {
		return nil, err
	}
	return evaluate(ctx, sources, cfg)
}

// evaluate is Evaluate over the files found.
func evaluate(ctx context.Context, sources []source, cfg Config) (*Report, error) {
	if len(cfg.Policies) == 0 {
		return nil, errors.New("no policy: give at least one")
	}
	cfg.Policies = uniqueNames(cfg.Policies)
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	// Workers beyond one per file help with the files they would not
	// get: each file gets its share (pipeline.go).
	spare := max(1, workers/max(1, len(sources)))
	workers = min(workers, len(sources))
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	per := make([][]Outcome, len(sources))
	errs := make([]error, len(sources))
	next := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		progress = Progress{Files: len(sources)}
		start    = time.Now()
	)
	cands := prepare(&cfg)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fe, err := evaluateSource(sources[i], &cfg, cands, spare)
				if err != nil {
					errs[i] = &fileError{Path: sources[i].Path, Err: err}
					cancel()
					continue
				}
				per[i] = fe.out
				if cfg.Progress != nil {
					mu.Lock()
					progress.FilesDone++
					progress.Runs += fe.runs
					progress.Events += fe.events
					progress.Elapsed = time.Since(start)
					cfg.Progress(progress)
					mu.Unlock()
				}
			}
		}()
	}
feed:
	for i := range sources {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if err := parent.Err(); err != nil {
		return nil, err
	}
	rep := &Report{}
	for _, o := range per {
		rep.Outcomes = append(rep.Outcomes, o...)
	}
	rep.Summaries = summarize(rep.Outcomes, cfg.Policies, cfg.Labels != nil)
	return rep, nil
}
