package replay_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/eventlog"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// TestRecordedGoStageReplaysAsLive: a planner stage in Go holds tree limits
// and a hold (middleware.WithTreeLimits, WithHold); its coder child, a
// stage in Go with its own condition only, crosses the tree's token
// budget, the tree is held, and an operator raises it. Replayed with the
// same stages in Go (WithStages), every run gets its live cause,
// stopped_at, events and tree totals. Without the planner's hold, the
// tree stops where it was held live; without its tree limits, it has no
// tree totals; and WithCondition, one condition for every stage, gives
// the coder no tree.
func TestRecordedGoStageReplaysAsLive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	log, err := eventlog.New(path)
	require.NoError(t, err)
	own := termination.IterationLimits{Limit: 50}
	tree := termination.TokenLimits{Total: 1000}
	planner, err := middleware.New("planner", middleware.WithCondition(own), middleware.WithTreeLimits(tree),
		middleware.WithHold(time.Minute), middleware.WithParticipant(log))
	require.NoError(t, err)
	coder, err := middleware.New("coder", middleware.WithCondition(own), middleware.WithParticipant(log))
	require.NoError(t, err)

	turn := termination.Event{Kind: termination.KindMessage, Text: "next step", Usage: termination.Usage{InputTokens: 250, OutputTokens: 50}}
	ctx, p := planner.Start(context.Background())
	p.Observe(turn)
	_, c := coder.Start(ctx)
	held := 0
	for range 6 {
		c.Observe(turn)
		if _, _, ok := c.Held(); ok {
			held++
			require.NoError(t, c.Raise(termination.Limits{TotalTokens: 2000, Has: termination.LimitTotalTokens}))
		}
	}
	require.Equal(t, 1, held, "the coder's turns cross the tree's budget once")
	live := map[string]termination.Result{}
	for _, r := range []*middleware.Run{c, p} {
		res := r.Finish(nil)
		live[res.Run] = res
	}
	require.NoError(t, log.Close())

	replayed := func(opts ...replay.Option) map[string]termination.Result {
		t.Helper()
		f, err := os.Open(path)
		require.NoError(t, err)
		defer f.Close()
		res, _, err := replay.NewRunner(nil, opts...).Log(f)
		require.NoError(t, err)
		out := map[string]termination.Result{}
		for _, r := range res {
			out[r.Run] = r
		}
		return out
	}
	stages := func(plannerStage replay.Stage) replay.Option {
		return replay.WithStages(func(name string) (replay.Stage, bool) {
			switch name {
			case "planner":
				return plannerStage, true
			case "coder":
				return replay.Stage{Condition: own}, true
			}
			return replay.Stage{}, false
		})
	}
	got := replayed(stages(replay.Stage{Condition: own, TreeLimits: tree, Hold: time.Minute}))
	require.Len(t, got, 2)
	for id, w := range live {
		g := got[id]
		assert.Equal(t, termination.Tag(w.Cause, nil), termination.Tag(g.Cause, nil), "run %s (%s): cause", id, w.Stage)
		assert.Equal(t, w.StoppedAt, g.StoppedAt, "run %s: stopped_at", id)
		assert.Equal(t, w.Events, g.Events, "run %s: events", id)
		assert.Equal(t, w.Tree, g.Tree, "run %s: tree totals", id)
	}
	require.NotNil(t, live[p.ID()].Tree, "the planner holds tree limits")
	assert.Equal(t, int64(1750), live[p.ID()].Tree.Tokens.InputTokens, "the tree went on past its budget once raised")

	noHold := replayed(stages(replay.Stage{Condition: own, TreeLimits: tree}))
	stop, ok := noHold[p.ID()].Cause.(termination.BudgetExhausted)
	require.True(t, ok, "without the hold, the tree stops where it was held live: %v", noHold[p.ID()].Cause)
	assert.Equal(t, termination.ScopeTree, stop.Scope)
	assert.IsType(t, termination.Cancelled{}, noHold[c.ID()].Cause, "and its coder with it")

	noTree := replayed(stages(replay.Stage{Condition: own, Hold: time.Minute}))
	assert.Nil(t, noTree[p.ID()].Tree, "without tree limits, no tree totals")

	// WithCondition gives every stage one condition, and no tree limits.
	one := replayed(replay.WithCondition(own))
	assert.Nil(t, one[p.ID()].Tree)
	assert.Equal(t, termination.TagNaturalCompletion, termination.Tag(one[c.ID()].Cause, nil))
}

// recordThreeTurns records one run of a stage "coder" in Go with own (and
// hold when > 0) that takes three turns, then, when waitTimeout, waits for
// the run's timeout while it is held; it returns the log's path and the
// run's live result.
func recordThreeTurns(t *testing.T, own termination.Condition, hold time.Duration, waitTimeout bool) (string, termination.Result) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	log, err := eventlog.New(path)
	require.NoError(t, err)
	opts := []middleware.Option{middleware.WithCondition(own), middleware.WithParticipant(log)}
	if hold > 0 {
		opts = append(opts, middleware.WithHold(hold))
	}
	stage, err := middleware.New("coder", opts...)
	require.NoError(t, err)
	ctx, run := stage.Start(context.Background())
	turn := termination.Event{Kind: termination.KindMessage, Text: "edit", Usage: termination.Usage{InputTokens: 10}}
	for range 3 {
		run.Observe(turn)
	}
	if waitTimeout {
		_, _, held := run.Held()
		require.True(t, held, "held at its third turn")
		<-ctx.Done() // the timeout, while held
	}
	live := run.Finish(nil)
	require.NoError(t, log.Close())
	return path, live
}

// replayOne replays the one run of the log at path with p and opts.
func replayOne(t *testing.T, path string, p *termination.Policy, opts ...replay.Option) termination.Result {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	res, _, err := replay.NewRunner(p, opts...).Log(f)
	require.NoError(t, err)
	require.Len(t, res, 1)
	return res[0]
}

// goStage gives every stage s.
func goStage(s replay.Stage) replay.Option {
	return replay.WithStages(func(string) (replay.Stage, bool) { return s, true })
}

// TestRecordedGoStageHeldThenTimedOut: a run of a stage in Go, held at its
// own limit live, ends by its timeout, which keeps counting while it is
// held (§3 hold). Replayed with WithStages, the recorded end stands (the
// end record names policy "code", as replay's stage in Go does, and
// counts the events replay evaluated), as it does for a policy's run; it
// does not end with the limit it was held at.
func TestRecordedGoStageHeldThenTimedOut(t *testing.T) {
	own := termination.AnyOf(termination.IterationLimits{Limit: 2}, termination.TimeLimits{Timeout: 150 * time.Millisecond})
	path, live := recordThreeTurns(t, own, time.Minute, true)
	require.IsType(t, termination.Timeout{}, live.Cause)
	res := replayOne(t, path, nil, goStage(replay.Stage{Condition: own, Hold: time.Minute}))
	assert.Equal(t, live.Cause, res.Cause)
	assert.Equal(t, live.Events, res.Events)
	assert.True(t, res.FromRecord, "the recorded end stands")
}

// TestGoStageHeldWhereLiveWasNot (found by a review): a run recorded by a
// stage in Go without hold, that completed at its 3rd event, replayed with
// a stricter Stage that holds it at that event: nobody raises it, so it
// ends with the limit's cause, as without hold and as the equivalent
// policy, not with the recorded natural completion (a held run takes no
// next event: it cannot complete). Its end record names "code" like every
// stage in Go's, so the record alone cannot say the run was held live.
func TestGoStageHeldWhereLiveWasNot(t *testing.T) {
	path, live := recordThreeTurns(t, termination.IterationLimits{Limit: 50}, 0, false)
	require.Equal(t, termination.TagNaturalCompletion, live.Tag())
	stricter := termination.IterationLimits{Limit: 2}
	noHold := replayOne(t, path, nil, goStage(replay.Stage{Condition: stricter}))
	require.IsType(t, termination.MaxIterationsReached{}, noHold.Cause)
	pol := termination.MustParsePolicy("max_iterations: 2\nhold: {timeout: 1m}\n")
	require.IsType(t, termination.MaxIterationsReached{}, replayOne(t, path, &pol).Cause)

	held := replayOne(t, path, nil, goStage(replay.Stage{Condition: stricter, Hold: time.Minute}))
	assert.IsType(t, termination.MaxIterationsReached{}, held.Cause, "the Go stage's own hold, never raised, ends with its limit, as the policy's does")
	assert.False(t, held.FromRecord)
}

// TestGoStageShorterHold (found by a review): held live at its 3rd turn
// under a 1h hold and ended by its 150ms timeout while held; replayed with
// a Stage whose hold is 50ms, nobody raised the run, so its hold ends it
// with the limit's cause before the timeout: the recorded Timeout does not
// stand.
func TestGoStageShorterHold(t *testing.T) {
	own := termination.AnyOf(termination.IterationLimits{Limit: 2}, termination.TimeLimits{Timeout: 150 * time.Millisecond})
	path, live := recordThreeTurns(t, own, time.Hour, true)
	require.IsType(t, termination.Timeout{}, live.Cause)
	res := replayOne(t, path, nil, goStage(replay.Stage{Condition: own, Hold: 50 * time.Millisecond}))
	assert.IsType(t, termination.MaxIterationsReached{}, res.Cause, "a 50ms hold ends before the 150ms timeout")
}
