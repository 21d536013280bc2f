package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/agentstop/agentstop/internal/human"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// writeReplayTable writes replay's results for people (-format table): one
// row per run, its cells one item per line — run, stage, cause, where it
// stopped ("stopped_at of events"), the evidence events (index, kind,
// tool, the first 60 characters of text) and the warnings. Money is
// rounded to 6 significant digits (human.Money). evidence[i] describes
// the evidence events of results[i], as replay.WithEvidence handed them
// out (in the order of the results); an event it does not describe shows
// its index alone.
func writeReplayTable(w io.Writer, results []termination.Result, evidence [][]replay.EvidenceEvent) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTAGE\tCAUSE\tSTOPPED\tEVIDENCE\tWARNINGS")
	for i, res := range results {
		var described []replay.EvidenceEvent
		if i < len(evidence) {
			described = evidence[i]
		}
		cells := [][]string{
			runCell(res),
			{res.Stage},
			causeCell(res),
			stoppedCell(res),
			evidenceCell(res, described),
			warningsCell(res.Warnings),
		}
		rows := 0
		for _, c := range cells {
			rows = max(rows, len(c))
		}
		for i := range rows {
			line := make([]string, len(cells))
			for j, c := range cells {
				if i < len(c) {
					line[j] = c[i]
				}
			}
			fmt.Fprintln(tw, strings.Join(line, "\t"))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	for line := range strings.Lines(buf.String()) {
		bw.WriteString(strings.TrimRight(line, " \n")) // the padding of empty last cells
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// causeCell is the run's termination_cause and, below it, what happened.
func causeCell(res termination.Result) []string {
	tag := res.TerminationCause
	if tag == "" {
		tag = termination.Tag(res.Cause, nil)
	}
	if what := causeText(res.Cause); what != "" {
		return []string{tag, what}
	}
	return []string{tag}
}

// runCell is the run's id and, in a tree, its parent's; "-" for a log of
// one run, whose events name none.
func runCell(res termination.Result) []string {
	if res.Run == "" {
		return []string{"-"}
	}
	if res.Parent != "" {
		return []string{res.Run, "(child of " + res.Parent + ")"}
	}
	return []string{res.Run}
}

// stoppedCell is "stopped_at of events" ("-" for stopped_at 0: nothing
// fired on an event), and whether the log was cut.
func stoppedCell(res termination.Result) []string {
	at := "-"
	if res.StoppedAt > 0 {
		at = strconv.Itoa(res.StoppedAt)
	}
	out := []string{at + " of " + human.Count(res.Events, "event")}
	if res.Truncated {
		out = append(out, "(log truncated)")
	}
	return out
}

// evidenceCell describes the evidence events, one a line: "#12 tool_call
// search "first 60 characters…"", from described (WithEvidence's, in
// Evidence's order).
func evidenceCell(res termination.Result, described []replay.EvidenceEvent) []string {
	var out []string
	for i, at := range res.Evidence {
		if i >= len(described) || described[i].At != at || !described[i].Kind.Valid() {
			out = append(out, "#"+strconv.Itoa(at))
			continue
		}
		x := described[i]
		parts := []string{"#" + strconv.Itoa(at), x.Kind.String()}
		if x.Tool != "" {
			parts = append(parts, x.Tool)
		}
		if x.Text != "" {
			text := x.Text
			if x.Cut {
				text += "…"
			}
			parts = append(parts, strconv.Quote(text))
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out
}

// warningsCell describes the warnings, one a line. A limit among them
// (max_iterations, max_tool_calls, a budget's exhaustion) is one the run
// was held at (a policy's hold:): without hold it would have stopped it.
func warningsCell(ws []termination.Cause) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		if (termination.Hold{}).Holds(w) {
			out = append(out, "held at "+causeText(w))
			continue
		}
		out = append(out, causeText(w))
	}
	return out
}

// causeText says what a cause is, for people ("" for a natural
// completion, which its tag says). Budgets write money rounded to 6
// significant digits.
func causeText(c termination.Cause) string {
	switch c := c.(type) {
	case nil, termination.NaturalCompletion:
		return ""
	case termination.BudgetExhausted:
		return fmt.Sprintf("%s budget exhausted (%s of %s used%s)", c.Resource, amount(c.Resource, c.Used), amount(c.Resource, c.Limit), scopeText(c.Scope))
	case termination.BudgetPressure:
		return fmt.Sprintf("budget pressure on %s (%s of %s used, threshold %s%s)", c.Resource, amount(c.Resource, c.Used), amount(c.Resource, c.Limit),
			strconv.FormatFloat(c.Threshold, 'f', -1, 64), scopeText(c.Scope))
	default:
		return strings.TrimPrefix(c.Error(), "agentstop: ")
	}
}

// amount writes a budgeted quantity: money rounded to 6 significant
// digits, counts in full.
func amount(r termination.Resource, v float64) string {
	if r == termination.ResourceCost {
		return human.Money(v)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// scopeText is the end of a scoped cause's text: ", scope tree".
func scopeText(scope string) string {
	if scope == "" {
		return ""
	}
	return ", scope " + scope
}
