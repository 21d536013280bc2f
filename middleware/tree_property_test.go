package middleware_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/middleware"
	replaylog "github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// randomTreePart returns a random tree: key (never empty).
func randomTreePart(r *rand.Rand) string {
	var parts []string
	for len(parts) == 0 {
		if r.IntN(2) == 0 {
			parts = append(parts, fmt.Sprintf("max_iterations: {limit: %d, pressure: 0.%d}", 2+r.IntN(20), 3+r.IntN(6)))
		}
		if r.IntN(2) == 0 {
			parts = append(parts, fmt.Sprintf("max_tool_calls: %d", 1+r.IntN(12)))
		}
		if r.IntN(2) == 0 {
			parts = append(parts, fmt.Sprintf("token_budget: {total: %d, pressure: 0.%d}", 200+r.IntN(3000), 3+r.IntN(6)))
		}
		if r.IntN(3) == 0 {
			parts = append(parts, fmt.Sprintf("cost_budget: {limit: %g, pressure: 0.5}", float64(1+r.IntN(30))/100))
		}
	}
	return "tree: {" + strings.Join(parts, ", ") + "}"
}

// treeLog is a random log of a tree of runs: each line is one event of one
// run; a run's first line names its parent (an earlier run, or none). In
// one log of three, a parent may be a later run, whose first line comes
// after its child's (a planner that delegated before its first event):
// live, it started before its child.
func treeLog(r *rand.Rand) []termination.Event {
	nRuns := 1 + r.IntN(7)
	ids := make([]string, nRuns)
	parents := make([]string, nRuns)
	order := make([]int, nRuns) // parents come before their children in order
	for i := range order {
		order[i] = i
	}
	if r.IntN(3) == 0 {
		order = r.Perm(nRuns)
	}
	for i := range ids {
		ids[i] = fmt.Sprintf("r%d", i)
	}
	for k, i := range order {
		if k > 0 && r.IntN(5) > 0 {
			parents[i] = ids[order[r.IntN(k)]]
		}
	}
	var log []termination.Event
	started := 0
	for n := 4 + r.IntN(40); n > 0 || started < nRuns; n-- {
		// Start the next run now and then; otherwise a line of a started run.
		var i int
		if started < nRuns && (started == 0 || r.IntN(4) == 0 || n <= 0) {
			i = started
			started++
		} else {
			i = r.IntN(started)
		}
		ev := randomEvents(r, 1)[0]
		if ev.Kind == termination.KindFinal && r.IntN(2) == 0 {
			ev.Kind = termination.KindMessage // keep runs going now and then
		}
		ev.Log = &termination.LogFields{Run: ids[i]}
		if !seenRun(log, ids[i]) {
			ev.Log.Parent = parents[i]
		}
		log = append(log, ev)
	}
	return log
}

func seenRun(log []termination.Event, id string) bool {
	for _, ev := range log {
		if ev.Logged().Run == id {
			return true
		}
	}
	return false
}

// liveTree runs the log live, in the order of its lines: a run starts at
// its first line under its parent's context, observes its lines, and is
// finished at its last line. It returns the results by log run id.
func liveTree(t *testing.T, stage *middleware.Stage, log []termination.Event) (map[string]termination.Result, map[string]string) {
	t.Helper()
	last := map[string]int{}
	for i, ev := range log {
		last[ev.Logged().Run] = i
	}
	runs := map[string]*middleware.Run{}
	ctxs := map[string]context.Context{}
	logID := map[string]string{} // live id -> log id
	first := map[string]termination.LogFields{}
	for _, ev := range log {
		if _, ok := first[ev.Logged().Run]; !ok {
			first[ev.Logged().Run] = ev.Logged()
		}
	}
	// start starts run id, after its parent when the parent's first line
	// comes later: it had started before its child.
	var start func(id string) *middleware.Run
	start = func(id string) *middleware.Run {
		if run := runs[id]; run != nil {
			return run
		}
		parent := context.Background()
		if p := first[id].Parent; p != "" {
			start(p)
			parent = ctxs[p]
		}
		ctx, run := stage.Start(parent)
		ctxs[id], runs[id], logID[run.ID()] = ctx, run, id
		return run
	}
	for i, ev := range log {
		run := start(ev.Logged().Run)
		run.Observe(ev)
		if last[ev.Logged().Run] == i {
			run.Finish(nil)
		}
	}
	out := map[string]termination.Result{}
	for id, run := range runs {
		out[id] = run.Wait()
	}
	return out, logID
}

// TestTreePropertyLiveEqualsReplay: random trees of runs under random
// policies with random tree: limits give the same result per run live
// (middleware) and replayed (replaylog.Runs), the cascade's
// causes, the tree limits' causes and warnings included.
func TestTreePropertyLiveEqualsReplay(t *testing.T) {
	seed := uint64(20261124)
	r := rand.New(rand.NewPCG(seed, 22))
	seen := map[string]int{} // what the cases exercised
	for n := range 400 {
		pol := randomPolicy(r, 0)
		tp := randomTreePart(r)
		if pol == "{}" {
			pol = "{" + tp + "}"
		} else {
			pol = pol[:len(pol)-1] + ", " + tp + "}"
		}
		p, err := termination.ParsePolicy(pol)
		if err != nil {
			t.Fatalf("case %d: policy %s: %v", n, pol, err)
		}
		log := treeLog(r)
		stage := mustStage(t, "replay", middleware.WithPolicy(p))
		got, logID := liveTree(t, stage, log)
		want := replaylog.Runs(&p, log)
		if len(want) != len(got) {
			t.Fatalf("case %d: %d live runs, %d replayed", n, len(got), len(want))
		}
		// The same log read twice (an index, then one line at a time)
		// replays as it does held whole.
		text := logJSON(t, log)
		idx := codec.IndexRuns(strings.NewReader(text))
		streamed, _, err := replaylog.NewRunner(&p, replaylog.WithIndex(&idx)).Log(strings.NewReader(text))
		if err != nil || !reflect.DeepEqual(streamed, want) {
			t.Fatalf("case %d: the Runner with the index gives %v (%v), Runs %v\nlog:\n%s", n, streamed, err, want, text)
		}
		firstLine := map[string]int{}
		for i, ev := range log {
			if _, ok := firstLine[ev.Logged().Run]; !ok {
				firstLine[ev.Logged().Run] = i
			}
		}
		for _, w := range want {
			g, ok := got[w.Run]
			if !ok {
				t.Fatalf("case %d: run %s not live", n, w.Run)
			}
			if d := sameCounts(g, w); d != "" {
				t.Fatalf("case %d: policy %s\nrun %s: %s\nlog:\n%s", n, pol, w.Run, d, logText(log))
			}
			if fmt.Sprint(g.Evidence) != fmt.Sprint(w.Evidence) {
				t.Fatalf("case %d: policy %s\nrun %s: evidence %v, want %v\nlog:\n%s", n, pol, w.Run, g.Evidence, w.Evidence, logText(log))
			}
			if logID[g.Parent] != w.Parent && g.Parent != w.Parent {
				t.Fatalf("case %d: run %s: parent %q, want %q", n, w.Run, logID[g.Parent], w.Parent)
			}
			seen[treeKind(w)]++
			if w.Parent != "" && firstLine[w.Parent] > firstLine[w.Run] {
				seen["late parent"]++
			}
			for _, c := range w.Warnings {
				if bp, ok := c.(termination.BudgetPressure); ok && bp.Scope == termination.ScopeTree {
					seen["tree warning"]++
				}
			}
		}
	}
	// The cases must exercise every rule they compare, or the test proves
	// little.
	t.Log(seen)
	for _, k := range []string{"tree limit", "cancelled by parent", "parent_ended", "tree warning", "own", "late parent"} {
		if seen[k] < 10 {
			t.Errorf("only %d runs ended by %q: %v", seen[k], k, seen)
		}
	}
}

// treeKind classifies a result for the property test's coverage check.
func treeKind(r termination.Result) string {
	switch c := r.Cause.(type) {
	case termination.Cancelled:
		if c.Reason == termination.CancelParent {
			return "cancelled by parent"
		}
	case termination.Skipped:
		return string(c.Reason)
	case termination.MaxIterationsReached:
		if c.Scope == termination.ScopeTree {
			return "tree limit"
		}
	case termination.MaxToolCallsReached:
		if c.Scope == termination.ScopeTree {
			return "tree limit"
		}
	case termination.BudgetExhausted:
		if c.Scope == termination.ScopeTree {
			return "tree limit"
		}
	}
	return "own"
}

// logJSON is log as JSON Lines.
func logJSON(t *testing.T, log []termination.Event) string {
	t.Helper()
	var b strings.Builder
	for _, ev := range log {
		line, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func logText(log []termination.Event) string {
	var b strings.Builder
	for i, ev := range log {
		fmt.Fprintf(&b, "%3d %s(parent %s) %s tool=%s text=%q usage=%v cost=%g err=%q\n", i+1, ev.Logged().Run, ev.Logged().Parent, ev.Kind, ev.Tool, ev.Text, ev.Usage, ev.Cost, ev.Err)
	}
	return b.String()
}
