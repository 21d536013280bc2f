// Command agentstop works with recorded agent event logs.
//
//	agentstop replay -policy POLICY.yaml [-stage NAME] EVENTS.jsonl
//
// replay evaluates a termination policy over a JSON Lines event log exactly
// as the live middleware would, stops at the first cause, and prints one JSON
// object: the stage's termination_cause, outcome, typed cause, the causes
// that fired, budget-pressure warnings and the run's counts. Bad input
// prints one line on stderr naming the file, line or policy key, and exits 2.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentstop/agentstop/termination"
)

const (
	exitOK    = 0
	exitBad   = 2
	usageText = `agentstop answers "why did this agent loop stop?" for recorded event logs.

Usage:
  agentstop replay -policy POLICY.yaml [-stage NAME] EVENTS.jsonl|-

Commands:
  replay   evaluate a termination policy over a JSON Lines event log

Example:
  agentstop replay -policy testdata/policy.yaml testdata/runaway_search.jsonl

Run "agentstop replay -h" for the flags of replay.
`
	replayUsage = `Usage: agentstop replay -policy POLICY.yaml [-stage NAME] EVENTS.jsonl|-

Evaluates POLICY over the events (one JSON object per line; "-" reads stdin)
exactly as the live middleware would, stops at the first cause and prints one
JSON object on stdout. Bad input prints one line on stderr and exits 2.

Example:
  agentstop replay -policy testdata/policy.yaml testdata/runaway_search.jsonl

Flags:
`
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return exitBad
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usageText)
		return exitOK
	case "replay":
		return replay(args[1:], stdin, stdout, stderr)
	case "runs", "stop", "block", "unblock", "blocks", "budgets": // fleet.go
		return runFleet(args[0], args[1:], stdout, stderr, os.Getenv)
	}
	fmt.Fprintf(stderr, "agentstop: unknown command %q (want replay; see agentstop -h)\n", args[0])
	return exitBad
}

func replay(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	// The flag package would print the usage on its own (to stderr, even for
	// -h); print it here instead: -h to stdout, a bad flag as one line.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	policyPath := fs.String("policy", "", "termination policy, YAML or JSON (required)")
	stage := fs.String("stage", "replay", "stage name reported in the result")
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "agentstop replay: "+format+"\n", a...)
		return exitBad
	}
	// Flags may come before or after the events file: parse, set aside one
	// positional argument, parse the rest again.
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, replayUsage)
				fs.SetOutput(stdout)
				fs.PrintDefaults()
				return exitOK
			}
			return fail("%s (see agentstop replay -h)", oneLine(err))
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if *policyPath == "" {
		return fail("-policy is required (see agentstop replay -h)")
	}
	if len(files) != 1 {
		return fail("want exactly one events file (or - for stdin), got %d", len(files))
	}
	if strings.TrimSpace(*stage) == "" {
		return fail("-stage must not be empty")
	}
	policy, err := termination.LoadPolicy(*policyPath)
	if err != nil {
		return fail("%s", oneLine(err))
	}
	name := files[0]
	var in io.Reader = stdin
	if name == "-" {
		name = "stdin"
	} else {
		f, err := os.Open(name)
		if err != nil {
			return fail("%s", oneLine(err))
		}
		defer f.Close()
		in = f
	}
	res, err := termination.Replay(policy.Condition(), in)
	if err != nil {
		return fail("%s: %s", name, oneLine(err))
	}
	res.Stage = *stage
	out, err := json.Marshal(res)
	if err != nil {
		return fail("%s", oneLine(err))
	}
	fmt.Fprintf(stdout, "%s\n", out)
	return exitOK
}

func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", " ")
}
