// Command agentstop answers "why did this agent loop stop?" for recorded
// event logs.
//
//	agentstop replay -policy POLICY.yaml [-stage NAME] [-lenient] [-format json|table] [-fail-on failed[,skipped]] EVENTS.jsonl|-
//	agentstop version
//
// replay evaluates a termination policy over a JSON Lines event log exactly
// as the live middleware would, stops at the first cause (it does not read
// the rest of the log), and prints one JSON object: the stage's
// termination_cause, outcome, typed cause, the causes that fired, warnings
// and the run's counts and duration. Bad input prints one line on stderr
// naming the file, line or policy key, and exits 2; -lenient replays a log
// whose last line was cut off by a crash up to that line. With -fail-on, an outcome in the
// list exits 1 (for CI jobs that replay recorded runs).
//
// backtest evaluates several policies over many recorded runs, each run
// decoded once and every policy evaluated as replay would, and reports what
// each policy would have stopped, where, and what that saves; with labels,
// the bad runs it stops and the good runs it kills (package backtest does
// the work). import converts other agents' logs to event logs (package
// importer).
//
// version prints the module version from the binary's build information
// (runtime/debug.ReadBuildInfo): the tagged version for a binary installed
// with "go install github.com/agentstop/agentstop/cmd/agentstop@VERSION",
// the version Go derives from git for a build in a checkout, and "(devel)"
// when the build records none (go run, -buildvcs=false, no git).
//
// Every command takes -h, which lists its flags. Commands are rows of the
// commands table (commands.go).
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr, getenv: os.Getenv}))
}
