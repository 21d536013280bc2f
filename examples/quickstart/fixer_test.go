package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/termination"
)

// replayBehaviour evaluates a behaviour's script (at most limit events) under
// policy as replay does.
func replayBehaviour(t *testing.T, policy string, next func(int) (termination.Event, bool), limit int) termination.Result {
	t.Helper()
	p, err := termination.ParsePolicy([]byte(policy))
	require.NoError(t, err)
	ev := termination.NewEvaluator(p.Condition(), termination.EventClock)
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
