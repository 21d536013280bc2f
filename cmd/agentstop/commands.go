package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/agentstop/agentstop/importer"
	"github.com/agentstop/agentstop/termination"
)

// Exit statuses of every command.
const (
	exitOK   = 0 // done
	exitFail = 1 // done, and the result is one the caller asked to fail on
	exitBad  = 2 // bad input or usage: one line on stderr
)

// stdio is what a command may touch of its process.
type stdio struct {
	in     io.Reader
	out    io.Writer
	err    io.Writer
	getenv func(string) string
}

// command is one subcommand: its name, a one-line summary for
// "agentstop -h", and the function that runs it with the arguments after
// its name and returns the exit status.
type command struct {
	name    string
	summary string
	run     func(args []string, sio stdio) int
}

// commands is the dispatch table, in the order "agentstop -h" lists them.
// A command is one row here; its function can live in a file of its own
// (use newFlags, parseFlags and failf so that -h, bad flags and errors
// behave like every other command's).
var commands = append([]command{
	{"replay", "evaluate a termination policy over a recorded JSON Lines event log", runReplay},
	{"backtest", "evaluate policies over many recorded runs: what each would have stopped and saved", runBacktest},
	{"import", "convert other agents' logs (" + strings.Join(importer.Formats(), ", ") + ") to JSON Lines events", runImport},
	{"version", "print the agentstop module version", runVersion},
}, fleetRows()...) // fleet.go

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// run is main without the process: it returns the exit status.
func run(args []string, sio stdio) int {
	quietRedisLog() // fleet.go
	if len(args) == 0 {
		fmt.Fprintf(sio.err, "agentstop: want a command, one of %s (see agentstop -h)\n", commandNames())
		return exitBad
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(sio.out, usage())
		return exitOK
	case "-version", "--version":
		return runVersion(args[1:], sio)
	case "help":
		if len(args) == 1 {
			fmt.Fprint(sio.out, usage())
			return exitOK
		}
		if c, ok := lookup(args[1]); ok {
			return c.run([]string{"-h"}, sio)
		}
		return unknownCommand(args[1], sio)
	}
	if c, ok := lookup(args[0]); ok {
		return c.run(args[1:], sio)
	}
	return unknownCommand(args[0], sio)
}

func unknownCommand(name string, sio stdio) int {
	fmt.Fprintf(sio.err, "agentstop: unknown command %q (want one of %s; see agentstop -h)\n", name, commandNames())
	return exitBad
}

// commandNames lists the commands, comma-separated.
func commandNames() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// usage is the text of "agentstop -h": every command with its summary.
func usage() string {
	var b strings.Builder
	b.WriteString("agentstop answers \"why did this agent loop stop?\"\n\nUsage:\n  agentstop COMMAND [flags] [args]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-9s %s\n", c.name, c.summary)
	}
	b.WriteString("\nExample:\n  agentstop replay -policy testdata/policy.yaml testdata/runaway_search.jsonl\n\n")
	b.WriteString("Run \"agentstop COMMAND -h\" for the flags of a command.\n")
	return b.String()
}

// newFlags returns an empty flag set for command name, to be parsed with
// parseFlags.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package would print the usage itself (to stderr, even for
	// -h); parseFlags prints it instead: -h to stdout, a bad flag as one line.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args with fs, allowing flags before and after the
// positional arguments, which it returns. On -h it prints text and the
// flags to stdout; on a bad flag one line to stderr. Either way done is
// true and code is the exit status to return.
func parseFlags(fs *flag.FlagSet, args []string, text string, sio stdio) (positional []string, code int, done bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(sio.out, text)
				if hasFlags(fs) {
					fmt.Fprint(sio.out, "\nFlags:\n")
					fs.SetOutput(sio.out)
					fs.PrintDefaults()
					fs.SetOutput(io.Discard)
				}
				return nil, exitOK, true
			}
			return nil, failf(sio, fs.Name(), "%s (see agentstop %s -h)", oneLine(err), fs.Name()), true
		}
		if fs.NArg() == 0 {
			return positional, exitOK, false
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// failf prints "agentstop NAME: MESSAGE" as one line on stderr and returns
// exitBad.
func failf(sio stdio, name, format string, a ...any) int {
	fmt.Fprintf(sio.err, "agentstop %s: %s\n", name, oneLine(fmt.Errorf(format, a...)))
	return exitBad
}

// oneLine keeps a message on one line.
func oneLine(err error) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(err.Error())
}

// warnEmptyPolicy prints one warning line on stderr when the policy read
// from path is empty — no condition, no tree: limits, no fleet_budget (an
// empty file, {}, or only keys set to false): it is valid (§3), and the
// command goes on, but nothing can stop a run, which is seldom what was
// meant. A policy whose only key is fleet_budget gets the command's own
// line saying that it is ignored instead.
//
// A policy with hold: but no limit of its own to hold at gets a warning
// saying so instead: it holds only what a remote parent propagates (§8),
// which a replay never has.
func warnEmptyPolicy(sio stdio, name, path string, p termination.Policy) {
	switch {
	case p.HoldsNothingOfItsOwn():
		fmt.Fprintf(sio.err, "agentstop %s: %s: warning: hold: has no limit of this policy to hold at (max_iterations, max_tool_calls, token_budget, cost_budget): it holds only tree limits a remote parent propagates\n", name, path)
	case len(p.Conditions()) == 0 && p.Tree() == nil && p.FleetBudget() == nil:
		fmt.Fprintf(sio.err, "agentstop %s: %s: warning: the policy is empty (no condition, no limit): nothing can stop a run\n", name, path)
	}
}
