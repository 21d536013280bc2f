package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/agentstop/agentstop/termination"
)

// tally counts results by stage and termination_cause.
type tally struct {
	mu     sync.Mutex
	counts map[string]map[string]int
	start  time.Time
}

func newTally() *tally { return &tally{counts: map[string]map[string]int{}, start: time.Now()} }

func (t *tally) add(r termination.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.counts[r.Stage]
	if m == nil {
		m = map[string]int{}
		t.counts[r.Stage] = m
	}
	m[r.Tag()]++
}

// tableWriter prints the tally: redrawn in place on a terminal, as plain
// summary lines otherwise.
type tableWriter struct {
	out   io.Writer
	live  bool
	tally *tally
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
			fmt.Fprintln(w.out, "\nCtrl-C to stop.")
		} else if n%5 == 0 {
			w.line()
		}
	}
}

func (w *tableWriter) final() {
	fmt.Fprintln(w.out, "\nWhy the stages stopped:")
	w.table()
}

// line prints the per-stage table as plain lines, one per stage.
func (w *tableWriter) line() {
	w.tally.mu.Lock()
	defer w.tally.mu.Unlock()
	elapsed := time.Since(w.tally.start).Round(time.Second)
	names := make([]string, 0, len(w.tally.counts))
	for s := range w.tally.counts {
		names = append(names, s)
	}
	slices.Sort(names)
	for _, stage := range names {
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

// table prints causes as rows and stages as columns.
func (w *tableWriter) table() {
	w.tally.mu.Lock()
	defer w.tally.mu.Unlock()
	var names []string
	for s := range w.tally.counts {
		names = append(names, s)
	}
	slices.Sort(names)
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
