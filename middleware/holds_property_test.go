package middleware_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/eventlog"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// holdCounts counts what TestRecordedHoldsReplayAsLive's driver did to
// held runs, so that the test can say the generator reached every path.
type holdCounts struct {
	held, raised, stopped, waited, blocked int
}

// TestRecordedHoldsReplayAsLive: random policies with hold: {timeout: D}
// over their own count and token limits (with random other conditions,
// and on some a timeout, which keeps counting while a run is held), in
// trees under a holder of tree: limits that holds its tree too (its hold
// lasts longer than its descendants'), interleaved; each
// held run is raised by random amounts (enough or not), stopped, left to
// its hold timeout, or observed on (Observe blocks until the hold
// timeout), all recorded through eventlog: replaying the log with each
// stage's policy gives every run exactly its live cause, stopped_at and
// events. A raise of a run held by its tree's limit raises the holder's
// tree limits (a raise record naming the holder), which replay applies.
//
// It failed about 1 run in 4 under load (-race, a CPU hog per core) while
// a run's end record was written after the lock that decided its cause
// was let go, and while a second stop of a holder could cancel its
// context before its cascade reached every child (TestEndRecordedWhenDecided,
// TestChildEndBeforeConcurrentParentEnd, TestParentContextEndsAfterCascade).
func TestRecordedHoldsReplayAsLive(t *testing.T) {
	r := rand.New(rand.NewPCG(seed(t), 33))
	var n holdCounts
	for c := range 24 {
		dir := t.TempDir()
		log, err := eventlog.New(filepath.Join(dir, "events.jsonl"))
		require.NoError(t, err)
		hold := time.Duration(20+r.IntN(80)) * time.Millisecond
		srcs := map[string]string{
			"holder": fmt.Sprintf("{tree: {token_budget: {total: %d}, max_iterations: %d}, max_iterations: %d, hold: {timeout: %s}}", 1500+r.IntN(3000), 12+r.IntN(20), 6+r.IntN(10), hold+90*time.Millisecond),
			"held":   heldPolicy(r, hold, ""),
			"timed":  heldPolicy(r, hold, fmt.Sprintf("timeout: %dms", 60+r.IntN(120))),
			"worker": nonEmpty(r, 1),
			// Grandchildren hold as long as their parents, and timed ones
			// are among them: a parent's and a child's timers fire at
			// once, late under load, and the log must still end each run
			// where it ended live (a run's end is recorded and cascaded
			// with its descendants locked: lineage.go decidedLocked).
			"inner": heldPolicy(r, hold, ""),
		}
		stages := map[string]*middleware.Stage{}
		pols := map[string]*termination.Policy{}
		for name, src := range srcs {
			p := termination.MustParsePolicy(src)
			pols[name] = &p
			stages[name] = mustStage(t, name, middleware.WithPolicy(p), middleware.WithParticipant(log))
		}
		live := startHeldTree(r, stages)
		driveHolds(r, live, hold, &n)
		want := map[string]termination.Result{}
		for _, lr := range live {
			want[lr.run.ID()] = lr.run.Finish(nil)
		}
		require.NoError(t, log.Close())

		got := replayRecorded(t, filepath.Join(dir, "events.jsonl"), pols)
		require.Len(t, got, len(want), "case %d: one result per run", c)
		for _, res := range got {
			w := want[res.Run]
			wc, _ := codec.MarshalCause(w.Cause)
			gc, _ := codec.MarshalCause(res.Cause)
			require.JSONEq(t, string(wc), string(gc), "case %d: run %s (%s): cause; policies %v", c, res.Run, res.Stage, srcs)
			require.Equal(t, w.StoppedAt, res.StoppedAt, "case %d: run %s (%s): stopped_at", c, res.Run, res.Stage)
			require.Equal(t, w.Events, res.Events, "case %d: run %s (%s): events", c, res.Run, res.Stage)
			require.Equal(t, termination.Tag(w.Cause, nil), res.Live)
		}
	}
	t.Logf("held %d times: raised %d, stopped %d, left to the hold timeout %d, blocked in Observe %d", n.held, n.raised, n.stopped, n.waited, n.blocked)
	require.Positive(t, n.raised, "the generator should raise held runs")
	require.Positive(t, n.stopped, "the generator should stop held runs")
	require.Positive(t, n.waited+n.blocked, "the generator should leave held runs to their hold timeout")
}

// heldPolicy returns a policy with hold: {timeout: hold}, one to three of
// its own count and token limits, maybe a random policy beside them, and
// extra (a timeout) when not empty.
func heldPolicy(r *rand.Rand, hold time.Duration, extra string) string {
	parts := []string{fmt.Sprintf("hold: {timeout: %s}", hold)}
	if r.IntN(2) == 0 {
		parts = append(parts, fmt.Sprintf("max_iterations: %d", 1+r.IntN(6)))
	}
	if r.IntN(2) == 0 {
		parts = append(parts, fmt.Sprintf("max_tool_calls: %d", 1+r.IntN(4)))
	}
	if r.IntN(2) == 0 || len(parts) == 1 {
		parts = append(parts, fmt.Sprintf("token_budget: {total: %d}", 100+r.IntN(400)))
	}
	if r.IntN(2) == 0 {
		parts = append(parts, "any: ["+nonEmpty(r, 1)+"]")
	}
	if extra != "" {
		parts = append(parts, extra)
	}
	return "{" + dedupKeys(parts) + "}"
}

// startHeldTree starts a holder and 1 to 4 children under it (held, timed
// or worker runs), maybe with a grandchild, each with random events.
func startHeldTree(r *rand.Rand, stages map[string]*middleware.Stage) []*treeRun {
	mk := func(parent context.Context, stage string) *treeRun {
		ctx, run := stages[stage].Start(parent)
		lr := &treeRun{run: run, ctx: ctx, events: randomEvents(r, 4+r.IntN(14)), stopAt: -1, pause: -1}
		if r.IntN(6) == 0 {
			lr.stopAt = r.IntN(len(lr.events))
		}
		if r.IntN(4) == 0 {
			lr.pause = r.IntN(len(lr.events))
		}
		// Its first line comes before its children's, so that replay knows
		// it as their parent (§8: a parent seen earlier in the log).
		if lr.stopAt == 0 {
			lr.stopAt = 1
		}
		if lr.pause == 0 {
			lr.pause = 1
		}
		_, lr.done = run.Observe(lr.events[0])
		lr.next = 1
		return lr
	}
	root := mk(context.Background(), "holder")
	runs := []*treeRun{root}
	for range 1 + r.IntN(4) {
		ch := mk(root.ctx, pick(r, []string{"held", "held", "timed", "worker"}))
		runs = append(runs, ch)
		if r.IntN(3) == 0 {
			runs = append(runs, mk(ch.ctx, pick(r, []string{"inner", "timed"})))
		}
	}
	return runs
}

// driveHolds feeds the runs' events interleaved at random, in one
// goroutine, as drive does, and at each turn of a held run raises it,
// stops it, waits out its hold timeout, observes its next event (which
// blocks until the hold timeout), or passes to another run.
func driveHolds(r *rand.Rand, runs []*treeRun, hold time.Duration, n *holdCounts) {
	seen := map[*treeRun]time.Time{} // the hold each run was last counted at
	for {
		var open []*treeRun
		for _, lr := range runs {
			if !lr.done {
				open = append(open, lr)
			}
		}
		if len(open) == 0 {
			return
		}
		lr := open[r.IntN(len(open))]
		if c, since, held := lr.run.Held(); held {
			act := r.IntN(6)
			if !seen[lr].Equal(since) {
				// A new hold: the first turn takes each way out in turn
				// (raise, stop, wait, block), so every one is taken.
				seen[lr] = since
				act = []int{0, 2, 3, 5}[n.held%4]
				n.held++
			}
			switch act {
			case 0, 1:
				if lr.run.Raise(raiseFor(r, c)) == nil { // nil unless the hold timed out meanwhile
					n.raised++
				}
				continue
			case 2:
				lr.run.Stop("operator")
				lr.done = true
				n.stopped++
				continue
			case 3:
				time.Sleep(hold + 20*time.Millisecond)
				n.waited++
				continue
			case 4:
				continue // another run's turn; the hold timer runs on
			}
			n.blocked++ // Observe below waits for the hold timeout
		}
		switch {
		case lr.next == lr.stopAt:
			lr.run.Stop("operator")
			lr.done = true
			continue
		case lr.next == lr.pause:
			time.Sleep(60 * time.Millisecond)
			lr.pause = -1
		}
		if lr.ctx.Err() != nil || lr.next >= len(lr.events) {
			lr.done = true
			continue
		}
		if _, stop := lr.run.Observe(lr.events[lr.next]); stop {
			lr.done = true
		}
		lr.next++
	}
}

// raiseFor returns random raise amounts for a run held at c: mostly of
// c's resource (by a little, which may not be enough for the next event,
// or by a lot), sometimes of another one, which releases the run only
// until its next event reaches the limit again.
func raiseFor(r *rand.Rand, c termination.Cause) termination.Limits {
	res := termination.ResourceIterations
	switch c := c.(type) {
	case termination.MaxToolCallsReached:
		res = termination.ResourceToolCalls
	case termination.BudgetExhausted:
		res = c.Resource
	}
	if r.IntN(5) == 0 {
		res = pick(r, []termination.Resource{termination.ResourceIterations, termination.ResourceToolCalls, termination.ResourceTotalTokens, termination.ResourceCost})
	}
	small := r.IntN(2) == 0
	amount := func(little, lot int) int {
		if small {
			return 1 + r.IntN(little)
		}
		return lot + r.IntN(lot)
	}
	var l termination.Limits
	switch res {
	case termination.ResourceIterations:
		l.Iterations, l.Has = amount(2, 5), termination.LimitIterations
	case termination.ResourceToolCalls:
		l.ToolCalls, l.Has = amount(2, 5), termination.LimitToolCalls
	case termination.ResourceTotalTokens:
		l.TotalTokens, l.Has = int64(amount(50, 500)), termination.LimitTotalTokens
	case termination.ResourceInputTokens:
		l.InputTokens, l.Has = int64(amount(50, 500)), termination.LimitInputTokens
	case termination.ResourceOutputTokens:
		l.OutputTokens, l.Has = int64(amount(20, 200)), termination.LimitOutputTokens
	default:
		l.Cost, l.Has = float64(amount(5, 20))/100, termination.LimitCost
	}
	return l
}
