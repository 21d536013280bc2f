package middleware_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/eventlog"
	"github.com/agentstop/agentstop/internal/testutil"
	"github.com/agentstop/agentstop/middleware"
	replaylog "github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// treeRun is one run of TestRecordedTreesReplayAsLive as the loop drives
// it.
type treeRun struct {
	run    *middleware.Run
	ctx    context.Context
	events []termination.Event
	next   int
	done   bool
	stopAt int // external stop before this event (-1: none)
	pause  int // a pause before this event, to let timers fire (-1: none)
}

// TestRecordedTreesReplayAsLive: random trees of runs (a holder of random
// tree: limits, children and grandchildren with random policies and
// timeouts), interleaved, with pauses that let timers fire and external
// stops, recorded through eventlog: replaying the log with each stage's
// policy gives every run exactly its live cause, stopped_at and events.
func TestRecordedTreesReplayAsLive(t *testing.T) {
	r := rand.New(rand.NewPCG(seed(t), 31))
	for c := range 10 {
		dir := t.TempDir()
		log, err := eventlog.New(filepath.Join(dir, "events.jsonl"))
		require.NoError(t, err)
		srcs := map[string]string{
			"holder": fmt.Sprintf("{tree: {token_budget: {total: %d}, max_iterations: %d}, max_iterations: %d}", 200+r.IntN(800), 4+r.IntN(12), 3+r.IntN(10)),
			"worker": nonEmpty(r, 1),
			"timed":  fmt.Sprintf("{timeout: 40ms, max_tool_calls: %d}", 2+r.IntN(6)),
		}
		stages := map[string]*middleware.Stage{}
		pols := map[string]*termination.Policy{}
		for name, src := range srcs {
			p := termination.MustParsePolicy(src)
			pols[name] = &p
			stages[name] = mustStage(t, name, middleware.WithPolicy(p), middleware.WithParticipant(log))
		}
		live := startTree(r, stages)
		drive(r, live)
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
}

// startTree starts a holder, 1 to 3 children under it (workers or timed
// runs) and maybe a grandchild, each with random events.
func startTree(r *rand.Rand, stages map[string]*middleware.Stage) []*treeRun {
	mk := func(parent context.Context, stage string) *treeRun {
		ctx, run := stages[stage].Start(parent)
		evs := randomEvents(r, 3+r.IntN(12))
		for i := range evs {
			evs[i].Usage = termination.Usage{InputTokens: int64(r.IntN(60))}
		}
		lr := &treeRun{run: run, ctx: ctx, events: evs, stopAt: -1, pause: -1}
		if r.IntN(5) == 0 {
			lr.stopAt = r.IntN(len(evs))
		}
		if r.IntN(3) == 0 {
			lr.pause = r.IntN(len(evs))
		}
		return lr
	}
	root := mk(context.Background(), "holder")
	runs := []*treeRun{root}
	for range 1 + r.IntN(3) {
		kind := "worker"
		if r.IntN(2) == 0 {
			kind = "timed"
		}
		ch := mk(root.ctx, kind)
		runs = append(runs, ch)
		if r.IntN(3) == 0 {
			runs = append(runs, mk(ch.ctx, "worker"))
		}
	}
	return runs
}

// drive feeds the runs' events interleaved at random, in one goroutine,
// until every run has ended or run out of events.
func drive(r *rand.Rand, runs []*treeRun) {
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

// replayRecorded replays the log with each stage's policy, as agentstop
// replay -policies does.
func replayRecorded(t *testing.T, path string, pols map[string]*termination.Policy) []termination.Result {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	out, _ := testutil.ReplayLog(t, f, nil, replaylog.WithPolicies(func(s string) (*termination.Policy, bool) {
		p, ok := pols[s]
		return p, ok
	}))
	return out
}

// TestNoEventAfterTreeLimit: an event of a sibling that arrives after
// another run's event crossed the holder's tree limit, but before the
// cascade reached the sibling, is not evaluated: the tree ended at the
// crossing event, as replay ends it. (B's warning hook delivers A's event
// at that moment.)
func TestNoEventAfterTreeLimit(t *testing.T) {
	holder := mustStage(t, "holder", middleware.WithPolicy(termination.MustParsePolicy("tree: {token_budget: {total: 500}}")))
	var a *middleware.Run
	var late termination.Cause
	var lateStop bool
	worker := mustStage(t, "worker", middleware.WithPolicy(termination.MustParsePolicy("token_budget: {total: 10000, pressure: 0.05}")),
		middleware.WithOnWarning(func(_ context.Context, r *middleware.Run, _ termination.Cause) {
			if r != a && a != nil && late == nil {
				late, lateStop = a.Observe(termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 1}})
			}
		}))
	ctx, h := holder.Start(context.Background())
	_, a = worker.Start(ctx)
	_, b := worker.Start(ctx)
	_, stop := b.Observe(termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 600}})
	require.True(t, stop)
	require.True(t, lateStop, "A's event after the crossing stops A")
	want := termination.Cancelled{Reason: termination.CancelParent, Detail: "holder ended: budget_exhausted"}
	require.Equal(t, want, late)
	ra := a.Finish(nil)
	require.Equal(t, want, ra.Cause)
	require.Zero(t, ra.Events, "A's late event was not evaluated")
	require.Equal(t, termination.BudgetExhausted{Resource: "total_tokens", Used: 600, Limit: 500, Scope: termination.ScopeTree}, h.Finish(nil).Cause)
	b.Finish(nil)
}
