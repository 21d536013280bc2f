package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/agentstop/agentstop/internal/human"
	"github.com/agentstop/agentstop/termination"
)

// peekRuns reads the log's first event and reports whether the log is to
// be replayed as a tree of runs (§8): its first event carries "run" or
// "stage" (a recorded log), or the policy has tree: limits. The returned reader still yields every
// byte of in. A first line that does not decode is left for the
// single-run replay to report.
func peekRuns(in io.Reader, p termination.Policy) (io.Reader, bool) {
	if p.Tree() != nil {
		return in, true
	}
	br := bufio.NewReader(in)
	var head bytes.Buffer
	for {
		line, err := br.ReadBytes('\n')
		head.Write(line)
		b := bytes.TrimSpace(bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")))
		if len(b) > 0 {
			ev, derr := termination.DecodeEvent(b)
			// A recorded log (its first line names its stage) is read as
			// runs too, so that its end records count (§4).
			return io.MultiReader(&head, br), derr == nil && (ev.Run != "" || ev.Stage != "")
		}
		if err != nil {
			return io.MultiReader(&head, br), false
		}
	}
}

// replayRuns replays a log of many runs one line at a time
// (termination.RunsReplay) and prints one result per run, one JSON object
// per line, in the order the runs ended. It reads the log twice: a first
// pass finds each run's last line (termination.IndexRuns), the second
// decodes and evaluates each line as it comes, so memory holds the live
// runs' state and the results, never the events. A log that cannot be read
// twice (stdin, a pipe) is first copied to a temporary file. The results
// are printed once the whole log has been read, so that a bad line
// anywhere prints only its error, as before.
func replayRuns(sio stdio, p *termination.Policy, stages *stagePolicies, f *os.File, in io.Reader, name, stage string, lenient bool, failOn []termination.Outcome) int {
	fail := func(format string, a ...any) int { return failf(sio, "replay", format, a...) }
	log, cleanup, err := rereadable(f, in)
	if err != nil {
		return fail("%s: %v", name, err)
	}
	defer cleanup()
	idx := termination.IndexRuns(log)
	if _, err := log.Seek(0, io.SeekStart); err != nil {
		return fail("%s: cannot read the events again: %v", name, pathErrorText(err))
	}
	var (
		results   []termination.Result
		truncated bool
	)
	opts := []termination.ReplayOption{termination.ReplayStage(stage), termination.ReplayIndex(&idx)}
	if stages != nil {
		opts = append(opts, termination.ReplayPolicies(stages.of))
	}
	rp := termination.NewRunsReplay(p, opts...)
	dec := termination.NewDecoder(log)
	for {
		e, err := dec.NextEntry()
		if errors.Is(err, io.EOF) {
			break
		}
		if lenient && errors.Is(err, termination.ErrTruncated) {
			truncated = true
			break
		}
		if errors.Is(err, termination.ErrTruncated) {
			return fail("%s: %v; -lenient evaluates the events before it", name, err)
		}
		if err != nil {
			return fail("%s: %v", name, err)
		}
		if rec := e.Record; rec != nil {
			results = append(results, rp.Record(rec, idx.IsLast(rec.Run, dec.Line()))...)
			continue
		}
		results = append(results, rp.Line(&e.Event, idx.IsLast(e.Event.Run, dec.Line()))...)
	}
	results = append(results, rp.End()...)
	if left := rp.LeftOut(); len(left) > 0 {
		fmt.Fprintf(sio.err, "agentstop replay: %s\n", leftOutLine(left))
		if len(results) == 0 {
			return fail("%s: no run left to replay: no policy for any stage of the log", name)
		}
	}
	return printRuns(sio, results, truncated, failOn)
}

// printRuns prints the results of a log of many runs, one JSON object per
// line, and applies -fail-on to every run.
func printRuns(sio stdio, results []termination.Result, truncated bool, failOn []termination.Outcome) int {
	w := bufio.NewWriter(sio.out)
	failed := 0
	for _, res := range results {
		res.Truncated = truncated
		out, err := json.Marshal(res)
		if err != nil {
			return failf(sio, "replay", "cannot write the result of run %q: %v", res.Run, err)
		}
		w.Write(out)
		w.WriteByte('\n')
		if slices.Contains(failOn, res.Outcome) {
			failed++
		}
	}
	if err := w.Flush(); err != nil {
		return failf(sio, "replay", "cannot write the results: %v", err)
	}
	if failed > 0 {
		fmt.Fprintf(sio.err, "agentstop replay: %d of %s %s an outcome listed in -fail-on\n", failed, human.Count(len(results), "run"), human.Agree(failed, "has", "have"))
		return exitFail
	}
	return exitOK
}

// rereadable returns the events file f, when it can be read again from
// its start, or else a temporary file holding what in yields (in is what
// is left to read of stdin or of a pipe, its first line included), which
// cleanup removes. The copy goes to disk, not memory: a log of many runs
// is read twice.
func rereadable(f *os.File, in io.Reader) (io.ReadSeeker, func(), error) {
	if f != nil {
		if _, err := f.Seek(0, io.SeekStart); err == nil {
			return f, func() {}, nil
		}
	}
	tmp, err := os.CreateTemp("", "agentstop-replay-*.jsonl")
	if err != nil {
		return nil, nil, fmt.Errorf("cannot keep a copy of the events to read them twice: %v", pathErrorText(err))
	}
	cleanup := func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}
	if _, err := io.Copy(tmp, in); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("cannot keep a copy of the events to read them twice: %v", pathErrorText(err))
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("cannot keep a copy of the events to read them twice: %v", pathErrorText(err))
	}
	return tmp, cleanup, nil
}
