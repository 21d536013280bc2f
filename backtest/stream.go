package backtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// candidate is a policy under test, prepared once for every file.
type candidate struct {
	cond  termination.Condition
	conds []termination.Condition // its top-level conditions, with Config.All
	pol   *termination.Policy     // nil for a candidate of per-stage files only
	name  string
	tree  bool // it has tree: limits
	// stages are the per-stage policies of a -policies DIR candidate
	// (Policy.Stages), nil otherwise.
	stages map[string]*termination.Policy
	// stageConds are their top-level conditions, with Config.All.
	stageConds map[string][]termination.Condition
}

func prepare(cfg *Config) []candidate {
	out := make([]candidate, len(cfg.Policies))
	for j := range cfg.Policies {
		p := &cfg.Policies[j]
		if p.Stages != nil {
			out[j] = candidate{cond: termination.AnyOf(), name: p.Name, stages: map[string]*termination.Policy{}, stageConds: map[string][]termination.Condition{}}
			for stage := range p.Stages {
				sp := p.Stages[stage]
				out[j].stages[stage] = &sp
				if cfg.All {
					out[j].stageConds[stage] = sp.Conditions()
				}
			}
			continue
		}
		out[j] = candidate{cond: p.Policy.Condition(), pol: &p.Policy, name: p.Name, tree: p.Policy.Tree() != nil}
		if cfg.All {
			out[j].conds = p.Policy.Conditions()
		}
	}
	return out
}

// policyOf returns the candidate's policy for the runs of stage, false
// when it has none (a -policies DIR without the stage's file).
func (c *candidate) policyOf(stage string) (*termination.Policy, bool) {
	if c.stages == nil {
		return c.pol, true
	}
	p, ok := c.stages[stage]
	return p, ok
}

// conditionsOf returns the candidate's top-level conditions for the runs
// of stage (Config.All).
func (c *candidate) conditionsOf(stage string) []termination.Condition {
	if c.stages == nil {
		return c.conds
	}
	return c.stageConds[stage]
}

// fileEval is the evaluation of one file in progress. The file is read
// once, a line at a time, and each line's event evaluated by every policy
// as it comes (for a file of many runs, after a first pass that finds each
// run's last line: codec.IndexRuns). What it keeps is the live runs'
// evaluators and running totals and one Outcome per (run, policy), never
// the events.
type fileEval struct {
	src   source
	cfg   *Config
	cands []candidate
	multi bool        // the events name their runs
	index codec.Index // with multi: each run's last line
	// One of these per policy: a tree replay for a file of many runs or a
	// policy with tree: limits, else the one run's evaluator.
	trees []*replay.Runner
	evals []*termination.Evaluator
	runs  map[string]*runState // by the events' run ("" in a file of one run)
	order []*runState          // in the order of their first lines
	out   []Outcome            // run by run (order), policies in order
	cur   *runState            // the run of the line being evaluated
	ev    *termination.Event   // the line being evaluated
}

// runState is one run of the file while it is read.
type runState struct {
	id, parent string
	stage      string
	slot       int // its first Outcome is out[slot*len(cands)]
	events     int // its lines so far
	// total is what its lines so far spent, prev what all but the last
	// did: a policy's result counts the run's events up to this line or
	// the one before (a timeout's firing line is not evaluated).
	total, prev termination.Totals
	resulted    []bool                     // per policy: its result is in; later lines are saved
	all         [][]*termination.Evaluator // with Config.All: per policy, per top-level condition
	finished    bool
}

func newFileEval(src source, cfg *Config, cands []candidate, multi bool, index codec.Index) *fileEval {
	fe := &fileEval{src: src, cfg: cfg, cands: cands, multi: multi, index: index, runs: map[string]*runState{}}
	fe.trees = make([]*replay.Runner, len(cands))
	fe.evals = make([]*termination.Evaluator, len(cands))
	for j := range cands {
		switch c := &cands[j]; {
		case c.stages != nil:
			fe.trees[j] = replay.NewRunner(nil, replay.WithIndex(&fe.index), replay.WithPolicies(c.policyOf))
		case multi || c.tree:
			fe.trees[j] = replay.NewRunner(c.pol, replay.WithIndex(&fe.index))
		default:
			fe.evals[j] = termination.NewEvaluator(cands[j].cond, time.Time{})
		}
	}
	return fe
}

// line evaluates the event of line n of the file with every policy. It
// only reads ev (fileRead fingerprinted its args), so that several
// fileEvals may evaluate one event at once (pipeline.go).
func (fe *fileEval) line(ev *termination.Event, n int) {
	l := ev.Logged()
	r := fe.run(l.Run, l.Parent, l.Stage)
	r.prev = r.total
	addEvent(&r.total, ev)
	r.events++
	fe.cur, fe.ev = r, ev
	for j, done := range r.resulted {
		if done {
			addEvent(&fe.out[r.slot*len(fe.cands)+j].Saved, ev)
		}
	}
	for j := range r.all {
		for _, e := range r.all[j] {
			e.Observe(*ev) // a stopped evaluator returns at once
		}
	}
	for j := range fe.cands {
		if t := fe.trees[j]; t != nil {
			for _, res := range t.Line(ev, fe.multi && fe.index.IsLast(ev.Logged().Run, n)) {
				fe.result(fe.runs[res.Run], j, res)
			}
		} else if e := fe.evals[j]; !r.resulted[j] {
			if _, stop := e.Observe(*ev); stop {
				fe.result(r, j, e.Result())
			}
		}
	}
	if fe.multi && fe.index.IsLast(ev.Logged().Run, n) {
		fe.finish(r)
	}
}

// record takes the end or raise record of line n (§1): every policy's
// replay of a file of many runs ends the run there (or applies the
// raise). A file of one run without run ends at its last line, records
// or not.
func (fe *fileEval) record(rec *codec.Record, n int) {
	r := fe.run(rec.Run, rec.Parent, rec.Stage)
	fe.cur, fe.ev = r, nil
	last := fe.multi && fe.index.IsLast(rec.Run, n)
	for j := range fe.cands {
		if t := fe.trees[j]; t != nil {
			for _, res := range t.Record(rec, last) {
				fe.result(fe.runs[res.Run], j, res)
			}
		}
	}
	if last {
		fe.finish(r)
	}
}

// entry takes line n of the file: an event or a record.
func (fe *fileEval) entry(ev *termination.Event, rec *codec.Record, n int) {
	if rec != nil {
		fe.record(rec, n)
		return
	}
	fe.line(ev, n)
}

// run returns the state of the run id, starting it at its first line
// (of the stage stage, the child of parent).
func (fe *fileEval) run(id, parent, stage string) *runState {
	if r := fe.runs[id]; r != nil {
		if r.parent == "" {
			r.parent = parent // as readFile: the first parent the run's lines name
		}
		return r
	}
	if stage == "" {
		stage = "replay" // as replay's default -stage
	}
	r := &runState{id: id, parent: parent, slot: len(fe.order), resulted: make([]bool, len(fe.cands))}
	if !fe.multi {
		r.id, r.parent = fe.src.Name, "" // a one-run file's run is named by the file
	}
	r.stage = stage
	if fe.cfg.All {
		r.all = make([][]*termination.Evaluator, len(fe.cands))
		for j := range fe.cands {
			for _, c := range fe.cands[j].conditionsOf(stage) {
				r.all[j] = append(r.all[j], termination.NewEvaluator(c, time.Time{}))
			}
		}
	}
	fe.runs[id] = r
	fe.order = append(fe.order, r)
	for j := range fe.cands {
		o := Outcome{Run: r.id, File: fe.src.Path, Policy: fe.cands[j].name, Label: fe.cfg.Labels[r.id], Stage: stage}
		if _, ok := fe.cands[j].policyOf(stage); !ok {
			// Left out of this candidate: its replay gives no result.
			o.LeftOut, r.resulted[j] = true, true
		}
		fe.out = append(fe.out, o)
	}
	return r
}

// result records policy j's replay result for run r: what the run spent
// up to its stop, and the line of the stop itself when the result did not
// evaluate it (a timeout that fired before it).
func (fe *fileEval) result(r *runState, j int, res termination.Result) {
	if r == nil || r.resulted[j] {
		return // not a run of this file's lines (cannot happen), or already in
	}
	r.resulted[j] = true
	if res.Stage == "" {
		res.Stage = "replay"
	}
	o := &fe.out[r.slot*len(fe.cands)+j]
	o.Result = res
	switch {
	case res.Events >= r.events:
		o.Spent = r.total
	case res.Events == r.events-1 && fe.cur == r && fe.ev != nil:
		o.Spent = r.prev
		addEvent(&o.Saved, fe.ev)
	}
	// A result never leaves more than the line in hand unevaluated: a run
	// ends on its own line, or on another's (its lines so far evaluated).
}

// finish completes run r's outcomes once its last line is read: whether
// each policy stopped it, and with Config.All the conditions that fire.
func (fe *fileEval) finish(r *runState) {
	if r.finished {
		return
	}
	for _, done := range r.resulted {
		if !done {
			return // a policy has not ended it yet: at the end of the file
		}
	}
	r.finished = true
	for j := range fe.cands {
		o := &fe.out[r.slot*len(fe.cands)+j]
		o.Parent = r.parent
		// A recorded end is how the run ended live, not a stop of the
		// policy's; nor is a parent's cascade that ends the run as live
		// ended it (from an ancestor's recorded end).
		o.Stopped = !o.Result.FromRecord && (len(o.Result.Fired) > 0 || o.Result.Events < r.events)
		if c, ok := o.Result.Cause.(termination.Cancelled); ok && c.Reason == termination.CancelParent &&
			o.Result.Tag() == o.Result.Live && o.Result.Events >= r.events {
			o.Stopped = false
		}
		if !o.Stopped {
			o.Saved = termination.Totals{}
		}
		if fe.cfg.All {
			o.All = firings(fe.cands[j].conds, r.all[j])
		}
	}
	r.all = nil
}

// end completes the file at its end: the runs still live end there (in a
// file of one run, its only run), and truncated marks the results as
// replay -lenient marks them.
func (fe *fileEval) end(truncated bool) {
	fe.cur, fe.ev = nil, nil
	for j := range fe.cands {
		if t := fe.trees[j]; t != nil {
			for _, res := range t.End() {
				fe.result(fe.runs[res.Run], j, res)
			}
		} else if r := fe.order[0]; !r.resulted[j] {
			fe.result(r, j, fe.evals[j].Result())
		}
	}
	for _, r := range fe.order {
		fe.finish(r)
	}
	if !truncated {
		return
	}
	for k := range fe.out {
		o := &fe.out[k]
		if fe.trees[k%len(fe.cands)] != nil {
			// The cut line's run cannot be read: every run that no cause
			// stopped would have read it had it been its own; a run that
			// stopped (or was cancelled or skipped) read no further.
			o.Result.Truncated = len(o.Result.Fired) == 0
			continue
		}
		// A lenient replay that reached the truncated last line says so
		// (§4); one that stopped before it never read it.
		o.Result.Truncated = o.Result.Events == fe.order[0].events && len(o.Result.Fired) == 0
	}
}

// firings returns the conditions whose evaluators (fed the whole run)
// fired, each with the event where it first fires.
func firings(conds []termination.Condition, evals []*termination.Evaluator) []Firing {
	out := []Firing{} // with Config.All, an empty list says that nothing fires
	for k, e := range evals {
		res := e.Result()
		if len(res.Fired) == 0 {
			continue
		}
		out = append(out, Firing{Condition: conds[k].String(), Cause: res.Cause, At: res.StoppedAt})
	}
	return out
}

// fileResult is what evaluating one file gives: its outcomes, run by run
// in the order of their first lines, policies in order, and its counts.
type fileResult struct {
	out    []Outcome
	runs   int
	events int64
}

// evaluateSource reads the file src, a line at a time, and evaluates every
// policy over its runs in that pass (a file of many runs is read once more
// before, to find each run's last line). With spare workers (2 or more
// for this file), the policies are evaluated by goroutines of their own
// while the file is decoded (pipeline.go). Errors name the file and the
// line, as readFile's do.
func evaluateSource(src source, cfg *Config, cands []candidate, spare int) (*fileResult, error) {
	f, err := os.Open(src.Path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", src.Path, pathErrorText(err))
	}
	defer f.Close()
	dec := codec.NewDecoder(f)
	first, ferr := dec.Next()
	multi := ferr == nil && first.Logged().Run != ""
	var index codec.Index
	if multi {
		// Back to the start, twice: once to find where each run ends, once
		// to evaluate.
		if _, err = f.Seek(0, io.SeekStart); err == nil {
			index = codec.IndexRuns(f)
			_, err = f.Seek(0, io.SeekStart)
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read %s: %v", src.Path, pathErrorText(err))
		}
		dec = codec.NewDecoder(f)
	}
	fr := &fileRead{path: src.Path, lenient: cfg.Lenient, dec: dec, first: first, firstErr: ferr, haveFirst: !multi}
	newEval := func(cands []candidate) *fileEval { return newFileEval(src, cfg, cands, multi, index) }
	if spare >= 2 {
		return pipelined(fr, cands, min(spare-1, len(cands)), newEval)
	}
	fe := newEval(cands)
	truncated, err := fr.each(fe.entry)
	if err != nil {
		return nil, err
	}
	fe.end(truncated)
	return &fileResult{out: fe.out, runs: len(fe.order), events: fr.events}, nil
}

// fileRead is one reading of a file's events, and what it learns of them.
type fileRead struct {
	path    string
	lenient bool
	dec     *codec.Decoder
	// With haveFirst, first and firstErr are what dec.Next returned first.
	first     termination.Event
	firstErr  error
	haveFirst bool

	events int64
	rec    *codec.Record // the record next read, nil for an event
	logs   logArena      // the fingerprinted calls' log fields
}

// next reads the next line: an event, or a record (fr.rec).
func (fr *fileRead) next() (termination.Event, error) {
	e, err := fr.dec.NextEntry()
	fr.rec = e.Record
	return e.Event, err
}

// each hands f every event of the file, in order, with its line, its
// args fingerprinted (fingerprintArgs). It returns whether a truncated
// last line was skipped (with lenient), or the file's error.
func (fr *fileRead) each(f func(ev *termination.Event, rec *codec.Record, line int)) (truncated bool, _ error) {
	path := fr.path
	ev, err := fr.first, fr.firstErr
	for ; ; ev, err = fr.next() {
		if !fr.haveFirst {
			fr.haveFirst = true
			continue
		}
		if err == nil && fr.rec != nil {
			f(nil, fr.rec, fr.dec.Line())
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, codec.ErrTruncated) {
			if fr.lenient {
				truncated = true
				break
			}
			return false, fmt.Errorf("%s: %w; -lenient evaluates the events before it", path, err)
		}
		if err != nil {
			return false, fmt.Errorf("%s: %w", path, err)
		}
		fr.events++ // the Decoder checks that every event names its run or none does
		fingerprintArgs(&ev, &fr.logs)
		f(&ev, nil, fr.dec.Line())
	}
	switch {
	case fr.events == 0 && truncated:
		return false, fmt.Errorf("%s: no complete event: the file's only line is truncated", path)
	case fr.events == 0:
		return false, fmt.Errorf("%s: no events", path)
	}
	return truncated, nil
}
