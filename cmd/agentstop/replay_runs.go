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

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/internal/human"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// logHead is what peekLog learnt from a log's first non-blank line.
type logHead struct {
	empty bool // no line but blank ones: no events, no records
	runs  bool // its first line decodes and names its run or its stage
}

// peekLog reads the log up to its first non-blank line and says whether
// there is one and, if so, whether it names its run or stage (a log of
// many runs, or a recorded log, whose end records count, §4; its first
// line may be a record). The
// returned reader still yields every byte of in. A first line that does
// not decode is left for the replay to report.
func peekLog(in io.Reader) (io.Reader, logHead) {
	br := bufio.NewReader(in)
	var head bytes.Buffer
	for {
		line, err := br.ReadBytes('\n')
		head.Write(line)
		b := bytes.TrimSpace(bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")))
		if len(b) > 0 {
			return io.MultiReader(&head, br), logHead{runs: namesRun(b)}
		}
		if err != nil {
			// An unreadable log is the replay's to report, as any.
			return io.MultiReader(&head, br), logHead{empty: errors.Is(err, io.EOF)}
		}
	}
}

// namesRun reports whether the log line b — an event, or a record (a run
// whose only line is its end record, blocked at its start, may come
// first) — names its run or its stage.
func namesRun(b []byte) bool {
	e, err := codec.NewDecoder(bytes.NewReader(b)).NextEntry()
	switch {
	case err != nil:
		return false
	case e.Record != nil:
		return e.Record.Run != "" || e.Record.Stage != ""
	}
	return e.Event.Logged().Run != "" || e.Event.Logged().Stage != ""
}

// replayRuns replays a log of many runs one line at a time
// (replay.Runner) and prints one result per run, one JSON object
// per line, in the order the runs ended. It reads the log twice: a first
// pass finds each run's last line (codec.IndexRuns), the second
// decodes and evaluates each line as it comes, so memory holds the live
// runs' state and the results, never the events. A log that cannot be read
// twice (stdin, a pipe) is first copied to a temporary file. The results
// are printed once the whole log has been read, so that a bad line
// anywhere prints only its error, as before.
// runsOutput is what the flags of replay ask of the results (of one run
// or of many).
type runsOutput struct {
	stage   string
	lenient bool
	table   bool // -format table
	failOn  []termination.Outcome
}

func replayRuns(sio stdio, p *termination.Policy, stages *stagePolicies, f *os.File, in io.Reader, name string, o runsOutput) int {
	fail := func(format string, a ...any) int { return failf(sio, "replay", format, a...) }
	log, cleanup, err := rereadable(f, in)
	if err != nil {
		return fail("%s: %v", name, err)
	}
	defer cleanup()
	idx := codec.IndexRuns(log)
	if _, err := log.Seek(0, io.SeekStart); err != nil {
		return fail("%s: cannot read the events again: %v", name, pathErrorText(err))
	}
	opts := []replay.Option{replay.WithStage(o.stage), replay.WithIndex(&idx)}
	if stages != nil {
		opts = append(opts, replay.WithPolicies(stages.of))
	}
	var evidence [][]replay.EvidenceEvent // evidence[i]: results[i]'s, in the order WithEvidence hands them out
	if o.table {
		opts = append(opts, replay.WithEvidence(func(_ termination.Result, events []replay.EvidenceEvent) { evidence = append(evidence, events) }))
	}
	if o.lenient {
		opts = append(opts, replay.WithLenient())
	}
	rp := replay.NewRunner(p, opts...)
	results, truncated, err := rp.Log(log)
	if errors.Is(err, codec.ErrTruncated) {
		return fail("%s: %v; -lenient evaluates the events before it", name, err)
	}
	if err != nil {
		return fail("%s: %v", name, err)
	}
	if len(results) == 0 && truncated {
		return fail("%s: no complete event: the file's only line is truncated", name)
	}
	if left := rp.LeftOut(); len(left) > 0 {
		fmt.Fprintf(sio.err, "agentstop replay: %s\n", leftOutLine(left))
		if len(results) == 0 {
			return fail("%s: no run left to replay: no policy for any stage of the log", name)
		}
	}
	return printRuns(sio, results, evidence, truncated, o)
}

// printRuns prints the results of a log of many runs, one JSON object per
// line (or a table, with evidence[i] describing the evidence events of
// results[i]), and applies -fail-on to every run.
func printRuns(sio stdio, results []termination.Result, evidence [][]replay.EvidenceEvent, truncated bool, o runsOutput) int {
	w := bufio.NewWriter(sio.out)
	failed := 0
	for i := range results {
		res := &results[i]
		// Only a run whose evaluation reached the cut line says so (§4):
		// one that no cause stopped, which would have read the cut line
		// had it been its own (the line's run cannot be read). A run that
		// stopped, or that an ancestor's end cancelled or skipped, read
		// none of its lines after that, as a single run's replay that stops
		// before the cut line never reads it.
		res.Truncated = truncated && len(res.Fired) == 0
		if slices.Contains(o.failOn, res.Outcome) {
			failed++
		}
		if o.table {
			continue
		}
		out, err := json.Marshal(res)
		if err != nil {
			return failf(sio, "replay", "cannot write the result of run %q: %v", res.Run, err)
		}
		w.Write(out)
		w.WriteByte('\n')
	}
	if o.table {
		if err := writeReplayTable(w, results, evidence); err != nil {
			return failf(sio, "replay", "cannot write the results: %v", err)
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
