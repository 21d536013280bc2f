package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/redisfleet"
	"github.com/agentstop/agentstop/internal/human"
	"github.com/agentstop/agentstop/internal/operator"
	"github.com/agentstop/agentstop/termination"
)

const raiseSynopsis = "[-redis URL] -run ID [-iterations +N] [-tool-calls +N] [-tokens +N] [-input-tokens +N] [-output-tokens +N] [-cost +X] [-wait 2s] [-by WHO] [-json]"

const raiseDoc = `Raises the limits of a run held at a limit (a policy's hold:) by the given
amounts and releases it, in whichever process it lives (-tokens raises
total_tokens). The run's process confirms it, as it confirms a stop; raise
waits up to -wait. Exit status 0 when the run was raised; 1 when it is
unknown or has ended, is not held, or its process did not confirm in time
(nothing changed, and raise says which); 2 for bad usage.`

// raiseAmounts are the raise flags: name, the Limits field, and how to read it.
var raiseAmounts = []struct {
	flag, usage string
	bit         termination.LimitMask
}{
	{"iterations", "raise max_iterations by N (+N)", termination.LimitIterations},
	{"tool-calls", "raise max_tool_calls (and per-tool limits) by N", termination.LimitToolCalls},
	{"tokens", "raise the total_tokens budget by N", termination.LimitTotalTokens},
	{"input-tokens", "raise the input_tokens budget by N", termination.LimitInputTokens},
	{"output-tokens", "raise the output_tokens budget by N", termination.LimitOutputTokens},
	{"cost", "raise the cost budget by X", termination.LimitCost},
}

// raiseRow is raise's row of the dispatch table (commands.go), after stop.
var raiseRow = command{"raise", "raise the limits of a run held at a limit (hold:), fleet-wide", runRaise}

// runRaise is agentstop raise.
func runRaise(args []string, sio stdio) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(sio.err, "agentstop raise: %s\n", strings.SplitN(fmt.Sprintf(format, a...), "\n", 2)[0])
		return exitBad
	}
	fs := flag.NewFlagSet("raise", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	url := fs.String("redis", "", "Redis URL (default $AGENTSTOP_REDIS_URL), as for agentstop stop")
	prefix := fs.String("prefix", redisfleet.DefaultPrefix, "key and channel prefix the fleet uses")
	asJSON := fs.Bool("json", false, "print JSON instead of a line")
	runID := fs.String("run", "", "the held run's id (required)")
	by := fs.String("by", operator.Name(), "who raises it")
	wait := human.Duration(fs, "wait", operator.Wait, "how long to wait for the run's process to confirm")
	vals := make([]*string, len(raiseAmounts))
	for i, a := range raiseAmounts {
		vals[i] = fs.String(a.flag, "", a.usage)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(sio.out, "Usage: agentstop raise %s\n\n%s\n\nFlags:\n", raiseSynopsis, raiseDoc)
			fs.SetOutput(sio.out)
			fs.PrintDefaults()
			return exitOK
		}
		return fail("%s (see agentstop raise -h)", err)
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q (see agentstop raise -h)", fs.Arg(0))
	}
	l, err := raiseLimits(vals)
	if err != nil {
		return fail("%s", err)
	}
	if *url == "" {
		*url = sio.getenv("AGENTSTOP_REDIS_URL")
	}
	switch {
	case strings.TrimSpace(*url) == "":
		return fail("-redis URL (or AGENTSTOP_REDIS_URL) is required")
	case *runID == "":
		return fail("-run ID is required")
	case *wait < 0:
		return fail("-wait must be >= 0, got %s", *wait)
	}
	req := fleet.RaiseRequest{RunID: *runID, Limits: l, By: *by, Wait: max(*wait, time.Millisecond)}
	if err := req.Validate(); err != nil {
		return fail("%s", trimInvalid(err))
	}
	c, err := redisfleet.NewControl(*url, redisfleet.WithPrefix(*prefix), redisfleet.WithTimeout(fleetTimeout))
	if err != nil {
		return fail("%s", strings.TrimPrefix(err.Error(), "redisfleet: "))
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second+*wait)
	defer cancel()
	rep, err := c.Raise(ctx, req)
	if err != nil {
		return fail("%s", trimInvalid(err))
	}
	if *asJSON {
		enc := json.NewEncoder(sio.out)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		fmt.Fprintln(sio.out, raiseLine(*runID, l, rep, *wait))
	}
	if rep.Outcome != fleet.RaiseRaised {
		return exitFail
	}
	return exitOK
}

// raiseLimits reads the amount flags: each given one positive, "+N" or
// "N" (a cost may be a decimal).
func raiseLimits(vals []*string) (termination.Limits, error) {
	var l termination.Limits
	for i, a := range raiseAmounts {
		v := strings.TrimSpace(*vals[i])
		if v == "" {
			continue
		}
		bad := fmt.Errorf("-%s: want a positive amount such as +10, got %q", a.flag, v)
		l.Has |= a.bit
		if a.bit == termination.LimitCost {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0) || math.IsInf(f, 0) {
				return l, bad
			}
			l.Cost = f
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return l, bad
		}
		switch a.bit {
		case termination.LimitIterations:
			l.Iterations = int(min(n, math.MaxInt32))
		case termination.LimitToolCalls:
			l.ToolCalls = int(min(n, math.MaxInt32))
		case termination.LimitTotalTokens:
			l.TotalTokens = n
		case termination.LimitInputTokens:
			l.InputTokens = n
		case termination.LimitOutputTokens:
			l.OutputTokens = n
		}
	}
	if l.Has == 0 {
		return l, errors.New("give at least one amount: -iterations, -tool-calls, -tokens, -input-tokens, -output-tokens or -cost")
	}
	return l, nil
}

// raiseLine says what a raise did.
func raiseLine(id string, l termination.Limits, rep fleet.RaiseReport, wait time.Duration) string {
	switch rep.Outcome {
	case fleet.RaiseRaised:
		s := "raised run " + id + " by " + strings.ReplaceAll(l.String(), ";", ", ")
		if rep.Held != nil {
			s += " (held at " + rep.Held.Limit + " for " + time.Since(rep.Held.Since).Round(time.Second).String() + ")"
		}
		return s
	case fleet.RaiseNotHeld:
		if rep.Held != nil && l.Has&heldResources(rep.Held.Limit) != 0 {
			// The raise names the limit the registry showed: the run was
			// released in the moment before (the registry lags a little).
			return "run " + id + " is no longer held: nothing raised (the fleet showed it held at " +
				rep.Held.Limit + " a moment ago; a raise, a stop or its end has released it since)"
		}
		if rep.Held != nil {
			// The registry showed it held: the raise names no amount of
			// the limit's resource, or the run was released meanwhile.
			return "run " + id + " is not held at a limit this raise names: nothing raised (the fleet showed it held at " +
				rep.Held.Limit + ", " + rep.Held.Cause + ": a raise must name the resource of every limit that holds the run, unless it was released meanwhile)"
		}
		return "run " + id + " is not held at a limit: nothing raised"
	case fleet.RaiseUnknown:
		return "no live run " + id + " (unknown, or it has ended): nothing raised"
	}
	return fmt.Sprintf("run %s: its process did not confirm the raise within %s", id, wait)
}

// heldResources are the amounts that raise a limit held at with the
// termination_cause tag: a raise of one of them names that limit.
func heldResources(tag string) termination.LimitMask {
	switch tag {
	case termination.TagMaxIterations:
		return termination.LimitIterations
	case termination.TagMaxToolCalls:
		return termination.LimitToolCalls
	case termination.TagBudgetExhausted:
		return termination.LimitTotalTokens | termination.LimitInputTokens | termination.LimitOutputTokens | termination.LimitCost
	}
	return 0
}

// heldTable writes the held runs (runs -held): what each waits on and for
// how long.
func heldTable(w io.Writer, rs []fleet.RunInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTAGE\tLABELS\tHOST\tPID\tHELD AT\tLIMIT\tWAITING")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, cell(r.Stage), cell(labelsString(r.Labels)), cell(r.Host), r.PID,
			cell(r.Held.Limit), cell(r.Held.Cause), time.Since(r.Held.Since).Round(time.Second))
	}
	tw.Flush()
	fmt.Fprintf(w, "%s\n", human.Count(len(rs), "held run"))
}

// onlyHeld keeps the runs that are held at a limit.
func onlyHeld(rs []fleet.RunInfo) []fleet.RunInfo {
	out := rs[:0:0]
	for _, r := range rs {
		if r.Held != nil {
			out = append(out, r)
		}
	}
	return out
}
