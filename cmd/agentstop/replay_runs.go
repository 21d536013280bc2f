package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/agentstop/agentstop/internal/human"
	"github.com/agentstop/agentstop/termination"
)

// peekRuns reads the log's first event and reports whether the log is to
// be replayed as a tree of runs (§8): its first event carries "run", or
// the policy has tree: limits. The returned reader still yields every
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
			return io.MultiReader(&head, br), derr == nil && ev.Run != ""
		}
		if err != nil {
			return io.MultiReader(&head, br), false
		}
	}
}

// replayRuns replays a log of many runs with termination.ReplayRuns and
// prints one result per run, one JSON object per line, in the order the
// runs ended.
func replayRuns(sio stdio, p termination.Policy, in io.Reader, name, stage string, lenient bool, failOn []termination.Outcome) int {
	fail := func(format string, a ...any) int { return failf(sio, "replay", format, a...) }
	var (
		events    []termination.Event
		truncated bool
	)
	dec := termination.NewDecoder(in)
	for {
		ev, err := dec.Next()
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
		events = append(events, ev)
	}
	results := termination.ReplayRuns(&p, events, termination.ReplayStage(stage))
	failed := 0
	for _, res := range results {
		res.Truncated = truncated
		out, err := json.Marshal(res)
		if err != nil {
			return fail("cannot write the result of run %q: %v", res.Run, err)
		}
		fmt.Fprintf(sio.out, "%s\n", out)
		if slices.Contains(failOn, res.Outcome) {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(sio.err, "agentstop replay: %d of %s %s an outcome listed in -fail-on\n", failed, human.Count(len(results), "run"), human.Agree(failed, "has", "have"))
		return exitFail
	}
	return exitOK
}
