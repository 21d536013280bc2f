package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

const replayUsage = `Usage: agentstop replay -policy POLICY.yaml [-policies DIR] [-stage NAME] [-lenient] [-format json|table] [-fail-on failed[,skipped]] EVENTS.jsonl|-

Evaluates POLICY over the events (JSON Lines: one object per line; "-" reads
stdin) exactly as the live middleware would, stops at the first cause without
reading the rest of the log, and prints one JSON object on stdout, with
"duration" (first to last evaluated event that carries a time) when the events
carry times.

A log whose last line ends inside an event, with no newline after it (an agent
killed while writing), is truncated: an error, unless -lenient, which evaluates
the events before that line and adds "truncated": true to the result. A JSON
document (a pretty-printed object, an array of events or runs) is not an event
log: convert it with agentstop import.

A log whose events carry "run" holds many runs, and a run's first event may
name its "parent": it is replayed as a tree (as is any log when the policy has
tree: limits). Each run is evaluated with the policy, each run's tree: limits
over its descendants, in the order of the lines, and one result per run is
printed, one JSON object per line with "run" (and "parent"), in the order the
runs ended. -fail-on then applies to every run. With -lenient, "truncated": true
marks only the runs no cause stopped (the cut line's run cannot be read; a
run that stopped never reads that far). Such a log is read twice (first
to find where each run ends) and never held in memory: memory grows with the
runs live at one point of the log, not with the log. From stdin or a pipe it is
first copied to a temporary file (in $TMPDIR).
Every event of a log names its run, or none does: the first line that breaks
the pattern the first event set is an error naming it, as in backtest (a log
of one run is read up to its first cause, so a line after it is not checked).

-format table prints the results for people instead: one row per run with
its run, stage, cause, where it stopped ("stopped_at of events"), the
evidence events (their index, kind, tool and first 60 characters of text)
and the warnings; money is rounded to 6 significant digits. The events are
described as they are read (each live run keeps those its policy's windows
still hold), so memory stays bounded.

Recorded runs: -policies DIR gives each stage its own policy, DIR/STAGE.yaml
(what the quickstart's -record writes); -policy beside it is the policy of the
stages without a file. A run's stage is the "stage" of its first line, or
-stage for a log that names none. Runs left without a policy are left out
(one line on stderr names their stages; exit 2 when none is left), and still
end at their end record for their descendants' sake. A run with an end record
(one line {"kind":"end",...} the recorder writes when the run ends) ends
there: when the policy does not stop it before, its result is the recorded
end (cause, stopped_at, events) with "from_record": true, and every result of
such a run carries "live", the recorded cause's tag. Raise records are
ignored under a policy without hold. A run the recorder dropped lines of has
"incomplete": true.

An empty policy (an empty file, {}) is valid, but nothing can stop a run: the
replay runs, with one warning line on stderr naming the file.

Every flag is given at most once: replay takes one policy (to compare several
over the same runs, use agentstop backtest -policy A -policy B). -stage is a
stage name as middleware.New takes it: 1 to 128 of A-Z a-z 0-9 . _ -,
starting with a letter or digit.

Exit status: 0 when the replay ran; 1 when its outcome is listed in -fail-on;
2 on bad input (unreadable file, malformed line, unknown kind, invalid policy,
a log with no events: empty, blank lines, or only a truncated line),
with one line on stderr naming the file, line or key.

Example:
  agentstop replay -policy testdata/policy.yaml testdata/runaway_search.jsonl
  agentstop replay -policy policy.yaml -fail-on failed run.jsonl   # in CI
  agentstop replay -policy policy.yaml -lenient crashed-run.jsonl
  agentstop replay -policy policy.yaml -format table run.jsonl
  agentstop replay -policies rec/policies rec/events.jsonl   # a quickstart -record rec
`

// parseOutcomes parses the value of -fail-on: failed, skipped, or both,
// comma-separated. An empty value is an empty list.
func parseOutcomes(s string) ([]termination.Outcome, error) {
	var list []termination.Outcome
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for name := range strings.SplitSeq(s, ",") {
		switch name = strings.TrimSpace(name); name {
		case "failed":
			list = append(list, termination.OutcomeFailed)
		case "skipped":
			list = append(list, termination.OutcomeSkipped)
		case "":
			return nil, fmt.Errorf("empty outcome in %q (want failed, skipped, or failed,skipped)", s)
		default:
			return nil, fmt.Errorf("unknown outcome %q (want failed, skipped, or failed,skipped)", name)
		}
	}
	return list, nil
}

func runReplay(args []string, sio stdio) int {
	fs := newFlags("replay")
	policyPath := fs.String("policy", "", "termination policy `FILE`, YAML or JSON (required without -policies; with it, the policy of the stages it has no file for)")
	policiesDir := fs.String("policies", "", "a `DIR` of per-stage policies, STAGE.yaml each (what the quickstart's -record writes)")
	stage := fs.String("stage", "replay", "the stage `NAME` of runs whose log names none: reported in the result, and their file under -policies")
	failOnFlag := fs.String("fail-on", "", "exit 1 when the outcome is one of these `OUTCOMES`: failed, skipped, or failed,skipped (for CI)")
	lenient := fs.Bool("lenient", false, "evaluate the events before a truncated last line and mark the result \"truncated\": true, instead of failing")
	format := fs.String("format", "json", "output `FORMAT`: json (one object per run, for scripts) or table (one row per run, for people)")
	once := countFlags(fs, "policy", "policies", "stage", "fail-on", "format")
	files, code, done := parseFlags(fs, args, replayUsage, sio)
	if done {
		return code
	}
	fail := func(format string, a ...any) int { return failf(sio, "replay", format, a...) }
	if err := replayRepeats(once); err != nil {
		return fail("%v", err)
	}
	if err := checkStage(*stage); err != nil {
		return fail("%v", err)
	}
	if *policyPath == "" && *policiesDir == "" {
		return fail("-policy or -policies is required (see agentstop replay -h)")
	}
	if len(files) != 1 {
		return fail("want exactly one events file (or - for stdin), got %d", len(files))
	}
	if *format != "json" && *format != "table" {
		return fail("-format: unknown format %q (want json or table)", *format)
	}
	table := *format == "table"
	failOn, err := parseOutcomes(*failOnFlag)
	if err != nil {
		return fail("-fail-on: %v", err)
	}
	var stages *stagePolicies
	if *policiesDir != "" {
		if stages, err = loadStagePolicies(*policiesDir); err != nil {
			return fail("%v", err)
		}
	}
	var policy *termination.Policy
	if *policyPath != "" {
		if policy, err = loadReplayPolicy(sio, *policyPath); err != nil {
			return fail("%v", err)
		}
	}

	name := files[0]
	var (
		in   io.Reader = sio.in
		file *os.File
	)
	if name == "-" {
		name = "stdin"
	} else {
		f, err := openEvents(name)
		if err != nil {
			return fail("%v", err)
		}
		defer f.Close()
		in, file = f, f
	}
	in, head := peekLog(in)
	if head.empty {
		// An empty log is what a recorder that crashed before its first
		// event leaves: bad input, as in backtest, not a run that
		// completed (a CI job with -fail-on failed must not pass it).
		return fail("%s: no events", name)
	}
	// A log of many runs (§8), a recorded log, or a policy with tree:
	// limits is replayed as a tree, one line at a time (replay_runs.go).
	o := runsOutput{*stage, *lenient, table, failOn}
	if stages != nil || head.runs || policy.Tree() != nil {
		return replayRuns(sio, policy, stages, file, in, name, o)
	}
	return replayOne(sio, policy, in, name, o)
}

// replayRepeats rejects a single-valued flag of replay given more than
// once (the flag package would keep the last value silently); backtest is
// where several policies are compared.
func replayRepeats(once map[string]*counted) error {
	for _, r := range []struct{ flag, why string }{
		{"policy", "replay takes one policy; to compare several, use agentstop backtest -policy A -policy B LOG"},
		{"policies", "replay takes one -policies DIR; to compare several, use agentstop backtest -policies A -policies B LOG"},
		{"stage", "replay takes one -stage NAME"},
		{"fail-on", "replay takes one -fail-on; give both outcomes as -fail-on failed,skipped"},
		{"format", "replay takes one -format"},
	} {
		if err := once[r.flag].repeated(r.flag, r.why); err != nil {
			return err
		}
	}
	return nil
}

// replayOne replays a log of one run (no run ids, no stage) under p and
// prints its result.
func replayOne(sio stdio, p *termination.Policy, in io.Reader, name string, o runsOutput) int {
	fail := func(format string, a ...any) int { return failf(sio, "replay", format, a...) }
	var opts []replay.Option
	if o.lenient {
		opts = append(opts, replay.WithLenient())
	}
	var evidence []replay.EvidenceEvent
	if o.table {
		opts = append(opts, replay.WithEvidence(func(_ termination.Result, events []replay.EvidenceEvent) { evidence = events }))
	}
	res, err := replay.Log(p.Condition(), in, opts...)
	if errors.Is(err, codec.ErrTruncated) {
		return fail("%s: %v; -lenient evaluates the events before it", name, err)
	}
	if err != nil {
		return fail("%s: %v", name, err)
	}
	if res.Events == 0 {
		// Only a log without events evaluates none (the first event is
		// always evaluated): records alone, or one truncated line.
		if res.Truncated {
			return fail("%s: no complete event: the file's only line is truncated", name)
		}
		return fail("%s: no events", name)
	}
	res.Stage = o.stage
	return printReplay(sio, res, evidence, o.table, o.failOn)
}

// printReplay prints the result of a log of one run, as JSON or as a
// table (with its evidence events described), and applies -fail-on.
func printReplay(sio stdio, res termination.Result, evidence []replay.EvidenceEvent, table bool, failOn []termination.Outcome) int {
	fail := func(format string, a ...any) int { return failf(sio, "replay", format, a...) }
	if table {
		if err := writeReplayTable(sio.out, []termination.Result{res}, [][]replay.EvidenceEvent{evidence}); err != nil {
			return fail("cannot write the result: %v", err)
		}
	} else {
		out, err := json.Marshal(res)
		if err != nil {
			return fail("cannot write the result: %v", err)
		}
		fmt.Fprintf(sio.out, "%s\n", out)
	}
	if slices.Contains(failOn, res.Outcome) {
		tag := res.TerminationCause
		if tag == "" {
			tag = termination.Tag(res.Cause, nil)
		}
		fmt.Fprintf(sio.err, "agentstop replay: outcome %s (termination_cause %s) is listed in -fail-on\n", res.Outcome, tag)
		return exitFail
	}
	return exitOK
}

// loadReplayPolicy reads the -policy file, with replay's notes on stderr
// (an empty policy, an ignored fleet_budget).
func loadReplayPolicy(sio stdio, path string) (*termination.Policy, error) {
	data, err := readFile(path, "policy")
	if err != nil {
		return nil, err
	}
	policy, err := termination.ParsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	warnEmptyPolicy(sio, "replay", path, policy)
	if policy.FleetBudget() != nil {
		// A shared budget needs the fleet's other runs; one recorded run
		// cannot replay them.
		fmt.Fprintf(sio.err, "agentstop replay: %s: fleet_budget is valid but ignored: replay evaluates one run without a fleet\n", path)
	}
	return &policy, nil
}

// readFile reads the file at path, with an error that says what is wrong
// with it in the user's terms; what names the file's role ("policy").
func readFile(path, what string) ([]byte, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory, not a %s file", path, what)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the %s file %s: %v", what, path, pathErrorText(err))
	}
	return data, nil
}

// openEvents opens the events file at path.
func openEvents(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open the events file %s: %v", path, pathErrorText(err))
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is a directory, not an events file (give a JSON Lines file, or - for stdin)", path)
	}
	return f, nil
}

// pathErrorText is what went wrong with a file, without the operation and
// path that the caller's message already names.
func pathErrorText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
