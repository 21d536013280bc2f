package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// replayBehaviour evaluates a behaviour's script (at most limit events) under
// policy as replay does.
func replayBehaviour(t *testing.T, policy string, next func(int) (termination.Event, bool), limit int) termination.Result {
	t.Helper()
	p, err := termination.ParsePolicy([]byte(policy))
	require.NoError(t, err)
	ev := termination.NewEvaluator(p.Condition(), time.Time{})
	for i := range limit {
		e, ok := next(i)
		if !ok {
			break
		}
		if _, stop := ev.Observe(e); stop {
			break
		}
	}
	return ev.Result()
}

func fixerBehaviour(t *testing.T, name string) func(int) (termination.Event, bool) {
	for _, s := range stages {
		if s.name != "fixer" {
			continue
		}
		for _, b := range s.behaviours {
			if b.name == name {
				return b.next
			}
		}
	}
	t.Fatalf("no fixer behaviour %q", name)
	return nil
}

// TestFixerShowsSameResult: the fixer's edit-and-test runs are never
// stopped by its same_result stall (the test output changes), while the
// runs that re-run one failing command stop as repeated_result; without
// same_result the edit-and-test runs would stop too.
func TestFixerShowsSameResult(t *testing.T) {
	edit := fixerBehaviour(t, "edits and re-tests")
	res := replayBehaviour(t, fixerPolicy, edit, 1000)
	assert.Equal(t, termination.NaturalCompletion{}, res.Cause, "edit and re-test is progress")
	assert.Greater(t, res.ToolCalls, 6, "the test command ran several times")

	rerun := fixerBehaviour(t, "re-runs the same failing command")
	res = replayBehaviour(t, fixerPolicy, rerun, 1000)
	assert.Equal(t, termination.StallDetected{Signal: termination.SignalRepeatedResult, Repeats: 3}, res.Cause)
	assert.Equal(t, []int{3, 6, 9}, res.Evidence, "the three identical results")

	res = replayBehaviour(t, "stall: {repeats: 3, window: 8}\n", edit, 1000)
	assert.Equal(t, termination.StallDetected{Signal: termination.SignalRepeatedToolCall, Repeats: 3}, res.Cause,
		"without same_result the re-run test command is a stall")
}

// TestFixerShowsAnyArgsAndIgnoreTools: the search retried with
// ever-different patterns that finds nothing stops on its 3rd empty
// result with any_args (the CI polls between the searches left alone by
// ignore_tools); the run that waits on CI, polling its status, ends by
// itself. Without any_args the searches are progress; without ignore_tools
// the CI polls are the stall.
func TestFixerShowsAnyArgsAndIgnoreTools(t *testing.T) {
	search := fixerBehaviour(t, "searches with ever-different patterns")
	res := replayBehaviour(t, fixerPolicy, search, 1000)
	assert.Equal(t, termination.StallDetected{Signal: termination.SignalRepeatedResult, Repeats: 3}, res.Cause)
	assert.Equal(t, []int{5, 10, 15}, res.Evidence, "the three empty searches, not the CI polls")

	withoutAnyArgs := "stall: {repeats: 3, window: 8, same_result: true, ignore_tools: [ci_status]}\n"
	res = replayBehaviour(t, withoutAnyArgs, search, 60)
	assert.Equal(t, termination.NaturalCompletion{}, res.Cause, "without any_args a new pattern is progress")

	withoutIgnore := "stall: {repeats: 3, window: 8, same_result: true, any_args: true}\n"
	res = replayBehaviour(t, withoutIgnore, search, 1000)
	assert.Equal(t, []int{3, 8, 13}, res.Evidence, "without ignore_tools the CI polls are the stall")

	wait := fixerBehaviour(t, "waits on CI")
	res = replayBehaviour(t, fixerPolicy, wait, 1000)
	assert.Equal(t, termination.NaturalCompletion{}, res.Cause, "polling CI is left alone")
	assert.Equal(t, 12, res.Events)
	res = replayBehaviour(t, withoutIgnore, wait, 1000)
	assert.Equal(t, termination.StallDetected{Signal: termination.SignalRepeatedResult, Repeats: 3}, res.Cause,
		"without ignore_tools polling is a stall")
}

// TestFixerHangsUntilIdle: the run that hangs on a tool is stopped by the
// fixer's idle limit, live, after its last event.
func TestFixerHangsUntilIdle(t *testing.T) {
	p := termination.MustParsePolicy(fixerPolicy)
	st, err := middleware.New("fixer", middleware.WithPolicy(p))
	require.NoError(t, err)
	var hang behaviour
	for _, b := range stageNamed("fixer").behaviours {
		if b.hang {
			hang = b
		}
	}
	require.NotNil(t, hang.next)
	ctx, run := st.Start(context.Background())
	start := time.Now()
	for ev, err := range middleware.ForwardSeq(run, sequence(ctx, hang, func() time.Duration { return 0 }, nil), identity) {
		require.NoError(t, err)
		_ = ev
	}
	res := run.Wait()
	assert.Equal(t, termination.Timeout{Limit: time.Second, Elapsed: time.Second, Idle: true}, res.Cause)
	assert.Equal(t, 2, res.StoppedAt, "after the tool call, its last event")
	assert.GreaterOrEqual(t, time.Since(start), time.Second)
}
