package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/agentstop/agentstop/internal/human"
	"github.com/agentstop/agentstop/termination"
)

// stop is one finished run in the feed of latest stops.
type stop struct {
	seq       int
	at        time.Duration // since the start
	stage     string
	behaviour string
	tag       string
	detail    string
}

// tally counts results by stage and termination_cause, keeps the latest
// stops with their cause details, and keeps apart the runs the shutdown cut
// short.
type tally struct {
	mu     sync.Mutex
	counts map[string]map[string]int
	start  time.Time
	// feed holds the latest stops, oldest first, at most cap(feed).
	feed    []stop
	seq     int // stops so far
	printed int // seq of the last stop printed as a plain line
	active  int // runs in flight
	// stopping is set when the shutdown begins: no new runs from then on.
	stopping bool
	// drained counts the runs that finished by their own cause after the
	// shutdown began (they are in counts).
	drained int
	// interrupted counts, by stage, the runs still in flight after the
	// drain timeout: they are not in counts.
	interrupted map[string]int
}

func newTally(feed int) *tally {
	return &tally{counts: map[string]map[string]int{}, start: time.Now(), feed: make([]stop, 0, max(feed, 0)),
		interrupted: map[string]int{}}
}

// begin notes that a run starts.
func (t *tally) begin() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.active++
}

// shutdown notes that no new run starts from now on.
func (t *tally) shutdown() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopping = true
}

// add counts a finished run.
func (t *tally) add(r termination.Result, info runInfo) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.active--
	if info.interrupted {
		t.interrupted[r.Stage]++
		return
	}
	if t.stopping {
		t.drained++
	}
	m := t.counts[r.Stage]
	if m == nil {
		m = map[string]int{}
		t.counts[r.Stage] = m
	}
	m[r.Tag()]++
	t.seq++
	if cap(t.feed) == 0 {
		return
	}
	if len(t.feed) == cap(t.feed) {
		t.feed = append(t.feed[:0], t.feed[1:]...)
	}
	t.feed = append(t.feed, stop{seq: t.seq, at: time.Since(t.start), stage: r.Stage, behaviour: info.behaviour,
		tag: r.Tag(), detail: describe(r, info)})
}

// describe says why a run stopped, with its cause's details: which limit,
// which budget, which tool, which condition; then the warnings it had and
// the limits it was held at (a policy's hold:), and whether a person
// raised them.
func describe(r termination.Result, info runInfo) string {
	s := describeCause(r.Cause, info)
	var ws, held []string
	for _, w := range r.Warnings {
		if (termination.Hold{}).Holds(w) {
			held = append(held, describeCause(w, info))
		} else {
			ws = append(ws, describeCause(w, info))
		}
	}
	if len(ws) > 0 {
		s += " (after warning: " + strings.Join(ws, "; ") + ")"
	}
	switch {
	case len(held) > 0 && info.raised: // raiseWhenHeld raises a run once
		s += " (held at " + held[0] + ", then raised by 2 turns"
		if len(held) > 1 {
			s += "; held again at " + strings.Join(held[1:], "; ")
		}
		s += ")"
	case len(held) > 0:
		s += " (held at " + strings.Join(held, "; ") + ")"
	}
	return s
}

func describeCause(c termination.Cause, info runInfo) string {
	switch c := c.(type) {
	case termination.Completed:
		return fmt.Sprintf("%s matched %q", c.Condition, c.Detail)
	case termination.NaturalCompletion:
		return "the loop ended by itself"
	case termination.HandoffRequested:
		return fmt.Sprintf("%s handed off to %s", c.Source, c.Target)
	case termination.MaxIterationsReached:
		return fmt.Sprintf("%s, limit %d", human.Count(c.Count, "turn"), c.Limit)
	case termination.MaxToolCallsReached:
		if c.Tool != "" {
			return fmt.Sprintf("%s of %s, limit %d", human.Count(c.Count, "call"), c.Tool, c.Limit)
		}
		return fmt.Sprintf("%s, limit %d", human.Count(c.Count, "tool call"), c.Limit)
	case termination.BudgetPressure:
		return fmt.Sprintf("%s%s at %s of %s, past the %.0f%% pressure mark%s", scope(c.Scope), c.Resource,
			amount(c.Resource, c.Used), amount(c.Resource, c.Limit), c.Threshold*100, sharedBy(c.Scope, info))
	case termination.BudgetExhausted:
		return fmt.Sprintf("%s%s budget spent: %s of %s%s", scope(c.Scope), c.Resource,
			amount(c.Resource, c.Used), amount(c.Resource, c.Limit), sharedBy(c.Scope, info))
	case termination.StallDetected:
		s := fmt.Sprintf("%s, %s", c.Signal, human.Count(c.Repeats, "repeat"))
		switch {
		case c.Signal == termination.SignalRepeatedToolCall && info.lastTool != "":
			s = fmt.Sprintf("%s repeated %s with the same arguments (%s)", info.lastTool, human.Count(c.Repeats, "time"), c.Signal)
		case c.Signal == termination.SignalRepeatedResult && info.lastTool != "":
			s = fmt.Sprintf("%s gave the same result %s (%s)", info.lastTool, human.Count(c.Repeats, "time"), c.Signal)
		}
		if c.Period > 0 {
			s += fmt.Sprintf(", period %d", c.Period)
		}
		return s
	case termination.Timeout:
		if c.Idle {
			return fmt.Sprintf("no event for %s (idle limit)", c.Limit)
		}
		if c.Elapsed == c.Limit { // a timer's (a log recorded before 2026-11-29 may have the time measured)
			return fmt.Sprintf("ran for its %s limit", c.Limit)
		}
		return fmt.Sprintf("ran %s, limit %s", c.Elapsed.Round(time.Millisecond), c.Limit)
	case termination.Cancelled:
		if c.Detail != "" {
			return fmt.Sprintf("%s: %s", c.Reason, c.Detail)
		}
		return string(c.Reason)
	case termination.Failed:
		return fmt.Sprintf("%s: %s", c.Reason, c.Err)
	case termination.Skipped:
		if c.Detail != "" {
			return fmt.Sprintf("%s: %s", c.Reason, c.Detail)
		}
		return string(c.Reason)
	case termination.Custom:
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(c.Properties)) {
			kv = append(kv, fmt.Sprintf("%s=%v", k, c.Properties[k]))
		}
		return strings.TrimSpace(c.Reason + " " + strings.Join(kv, " "))
	case termination.All:
		var parts []string
		for _, cc := range c.Causes {
			parts = append(parts, termination.Tag(cc, nil)+": "+describeCause(cc, info))
		}
		return "all of: " + strings.Join(parts, "; ")
	case nil:
		return "no cause"
	}
	return fmt.Sprintf("%+v", c)
}

func scope(s string) string {
	if s == "" {
		return ""
	}
	return s + " "
}

// sharedBy names whose shared budget a fleet-scoped budget cause is about:
// the quickstart keys its fleet budget by the tenant label.
func sharedBy(scope string, info runInfo) string {
	if scope != termination.ScopeFleet || info.tenant == "" {
		return ""
	}
	return " shared by tenant " + info.tenant
}

func amount(r termination.Resource, v float64) string {
	if r == termination.ResourceCost {
		return "$" + human.Money(v)
	}
	return fmt.Sprintf("%.0f", v)
}

// tableWriter prints the tally: redrawn in place on a terminal, as plain
// summary lines otherwise.
type tableWriter struct {
	out   io.Writer
	live  bool
	width int // columns the output may use (human.Width); 0 means 80
	tally *tally
}

// scenarios prints one entry per stage: its name, how its loop is wrapped
// and what its runs do, the description folded to the output's width
// (the terminal's, from COLUMNS, or 80: human.Width) under its first line.
func (w *tableWriter) scenarios() {
	width := w.width
	if width <= 0 {
		width = human.DefaultWidth
	}
	for _, line := range human.Wrap("Stages (two workers each, taking turns at these scenarios; the analysts are the planner's sub-agents):", width) {
		fmt.Fprintln(w.out, line)
	}
	nameW, wrapW := 0, 0
	for _, s := range stages {
		nameW, wrapW = max(nameW, len(s.name)), max(wrapW, len(wrapName(s.wrap)))
	}
	indent := 2 + nameW + 2 + wrapW + 2
	if width-indent < minDescription {
		// Too narrow for a column: each description under its stage.
		indent = 6
	}
	pad := strings.Repeat(" ", indent)
	for _, s := range stages {
		lines := human.Wrap(s.scenario, max(width-indent, 1))
		head := fmt.Sprintf("  %-*s  %-*s  ", nameW, s.name, wrapW, wrapName(s.wrap))
		if indent != len(head) {
			fmt.Fprintln(w.out, strings.TrimRight(head, " "))
			head = pad
		}
		for i, line := range lines {
			if i > 0 {
				head = pad
			}
			fmt.Fprintln(w.out, head+line)
		}
	}
}

// minDescription is the narrowest column a stage's description is folded
// into beside its name; narrower, it goes under the name.
const minDescription = 30

func wrapName(wrap string) string {
	switch wrap {
	case "channel":
		return "Forward"
	case "seq":
		return "ForwardSeq"
	}
	return "Observe"
}

func (w *tableWriter) loop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.live {
			fmt.Fprint(w.out, "\033[H\033[2J")
			w.table()
			w.latest(false)
			fmt.Fprintln(w.out, "\nCtrl-C to stop.")
		} else if n%5 == 0 {
			w.line()
			w.latest(true)
		}
	}
}

func (w *tableWriter) final() {
	fmt.Fprintln(w.out, "\nWhy the stages stopped:")
	w.table()
	w.latest(false)
	w.shutdownReport()
}

// line prints the per-stage table as plain lines, one per stage.
func (w *tableWriter) line() {
	w.tally.mu.Lock()
	defer w.tally.mu.Unlock()
	elapsed := time.Since(w.tally.start).Round(time.Second)
	for _, stage := range slices.Sorted(maps.Keys(w.tally.counts)) {
		m := w.tally.counts[stage]
		parts := []string{fmt.Sprintf("t=%s stage=%s", elapsed, stage)}
		for _, tag := range termination.TagValues() {
			if m[tag] > 0 {
				parts = append(parts, fmt.Sprintf("%s=%d", tag, m[tag]))
			}
		}
		fmt.Fprintln(w.out, strings.Join(parts, " "))
	}
}

// latest prints the feed of latest stops. With onlyNew, plain output prints
// each stop once.
func (w *tableWriter) latest(onlyNew bool) {
	w.tally.mu.Lock()
	defer w.tally.mu.Unlock()
	var feed []stop
	for _, s := range w.tally.feed {
		if !onlyNew || s.seq > w.tally.printed {
			feed = append(feed, s)
		}
	}
	if len(feed) == 0 {
		return
	}
	w.tally.printed = feed[len(feed)-1].seq
	if !onlyNew {
		fmt.Fprintln(w.out, "\nLatest stops:")
	}
	tw := tabwriter.NewWriter(w.out, 0, 0, 2, ' ', 0)
	for _, s := range feed {
		fmt.Fprintf(tw, "  stop t=%s\t%s\t%s\t→ %s: %s\n", s.at.Round(100*time.Millisecond), s.stage, s.behaviour, s.tag, s.detail)
	}
	tw.Flush()
}

// shutdownReport says what happened to the runs in flight at shutdown.
func (w *tableWriter) shutdownReport() {
	w.tally.mu.Lock()
	defer w.tally.mu.Unlock()
	if !w.tally.stopping {
		return
	}
	fmt.Fprintf(w.out, "\nAt shutdown: %s in flight finished by %s own cause (counted above)", human.Count(w.tally.drained, "run"),
		human.Agree(w.tally.drained, "its", "their"))
	if len(w.tally.interrupted) == 0 {
		fmt.Fprintln(w.out, "; none was interrupted.")
		return
	}
	var parts []string
	cut := 0
	for _, stage := range slices.Sorted(maps.Keys(w.tally.interrupted)) {
		parts = append(parts, fmt.Sprintf("%s=%d", stage, w.tally.interrupted[stage]))
		cut += w.tally.interrupted[stage]
	}
	fmt.Fprintf(w.out, "; %d still running after -drain %s interrupted (not counted above): %s\n", cut, human.Agree(cut, "was", "were"),
		strings.Join(parts, " "))
}

// table prints causes as rows and stages as columns.
func (w *tableWriter) table() {
	w.tally.mu.Lock()
	defer w.tally.mu.Unlock()
	names := slices.Sorted(maps.Keys(w.tally.counts))
	tw := tabwriter.NewWriter(w.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "termination_cause\t%s\ttotal\t\n", strings.Join(names, "\t"))
	for _, tag := range termination.TagValues() {
		row := []string{tag}
		total := 0
		for _, s := range names {
			n := w.tally.counts[s][tag]
			total += n
			row = append(row, fmt.Sprint(n))
		}
		row = append(row, fmt.Sprint(total))
		fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	tw.Flush()
	fmt.Fprintf(w.out, "(%s elapsed)\n", time.Since(w.tally.start).Round(time.Second))
}
