package replay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/internal/cascade"
	"github.com/agentstop/agentstop/termination"
)

// at is a line of run at second sec of 10:00: a message, or a raise of
// its iterations by 10 when kind is "raise".
func at(kind, run, parent, stage string, sec int) string {
	ts := fmt.Sprintf("2026-11-28T10:00:%02dZ", sec)
	if kind == "raise" {
		return fmt.Sprintf(`{"kind":"raise","run":%q,"time":%q,"limits":{"iterations":10}}`, run, ts)
	}
	return fmt.Sprintf(`{"kind":%q,"run":%q,"parent":%q,"stage":%q,"time":%q}`, kind, run, parent, stage, ts)
}

// TestReplayHoldOnTheEventsClock: replay keeps the hold's time on the
// events' clock as live keeps it on the wall clock (§3 hold, §4): idle
// pauses from the held event's time to the raise record's (a run's own
// hold, and a tree's for every run of the tree), and a hold whose timeout
// passed before a raise record has ended there with the limit's cause —
// the raise finds no held run, as live.
func TestReplayHoldOnTheEventsClock(t *testing.T) {
	const (
		idleHold  = "max_iterations: 1\nidle: 5s\nhold: {timeout: 1m}"
		shortHold = "max_iterations: 1\nhold: {timeout: 10s}"
		treeIdle  = "idle: 5s\ntree: {max_iterations: 1}\nhold: {timeout: 1m}"
		treeHold  = "tree: {max_iterations: 1}\nhold: {timeout: 10s}"
	)
	msg := func(run string, sec int) string {
		if run == "b" {
			return at("message", "b", "a", "analyst", sec)
		}
		return at("message", "a", "", "planner", sec)
	}
	raise := func(sec int) string { return at("raise", "a", "", "", sec) }
	idle := termination.Timeout{Limit: 5 * time.Second, Elapsed: 5 * time.Second, Idle: true}
	own := termination.MaxIterationsReached{Limit: 1, Count: 2}
	tree := termination.MaxIterationsReached{Limit: 1, Count: 2, Scope: termination.ScopeTree}
	type want struct {
		cause             termination.Cause
		stoppedAt, events int
	}
	tests := []struct {
		name         string
		planner, kid string
		log          []string
		a, b         want
		aDuration    time.Duration
	}{
		{"idle pauses while held: the raise at 20s resumes it", idleHold, "",
			[]string{msg("a", 0), msg("a", 1), raise(20), msg("a", 21)},
			want{termination.NaturalCompletion{}, 0, 3}, want{}, 21 * time.Second},
		{"idle resumes at the raise, where it was", idleHold, "",
			[]string{msg("a", 0), msg("a", 1), raise(20), msg("a", 26)},
			want{idle, 2, 2}, want{}, 25 * time.Second},
		{"a raise as the last line: duration to the last event", idleHold, "",
			[]string{msg("a", 0), msg("a", 1), raise(20)},
			want{termination.NaturalCompletion{}, 0, 2}, want{}, time.Second},
		{"the hold timeout passed before the raise: the limit", shortHold, "",
			[]string{msg("a", 0), msg("a", 1), raise(30), msg("a", 31)},
			want{own, 2, 2}, want{}, time.Second},
		{"a raise before the hold timeout: the run goes on", shortHold, "",
			[]string{msg("a", 0), msg("a", 1), raise(10), msg("a", 31)},
			want{termination.NaturalCompletion{}, 0, 3}, want{}, 31 * time.Second},
		{"a timeout due while held, before the raise", shortHold + "\ntimeout: 5s", "",
			[]string{msg("a", 0), msg("a", 1), raise(8), msg("a", 9)},
			want{termination.Timeout{Limit: 5 * time.Second, Elapsed: 5 * time.Second}, 2, 2}, want{}, 5 * time.Second},
		{"a held tree's idle limits pause until its raise", treeIdle, "idle: 5s",
			[]string{msg("a", 0), msg("b", 1), raise(20), msg("b", 21), msg("a", 22)},
			want{termination.NaturalCompletion{}, 0, 2}, want{termination.NaturalCompletion{}, 0, 2}, 22 * time.Second},
		{"a held tree's hold timeout passed before the raise", treeHold, "",
			[]string{msg("a", 0), msg("b", 1), raise(30), msg("b", 31)},
			want{tree, 0, 1}, want{cascade.ParentEnded("planner", termination.TagMaxIterations), 0, 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := replayLog(t, lines(tt.log...), map[string]string{"planner": tt.planner, "analyst": tt.kid}, nil)
			got := byRun(res)
			check := func(run string, w want) {
				r, ok := got[run]
				require.True(t, ok, "no result for run %s", run)
				require.Equal(t, w.cause, r.Cause, "run %s: cause", run)
				require.Equal(t, w.stoppedAt, r.StoppedAt, "run %s: stopped_at", run)
				require.Equal(t, w.events, r.Events, "run %s: events", run)
			}
			check("a", tt.a)
			if tt.b.cause != nil {
				check("b", tt.b)
			}
			require.Equal(t, tt.aDuration, got["a"].Duration, "run a: duration")
		})
	}
}

// TestReplayTreeTimeoutDuration: a holder ended by its tree timeout lasted
// until the timeout (§4 duration), as one ended by its own timeout.
func TestReplayTreeTimeoutDuration(t *testing.T) {
	log := lines(at("message", "a", "", "planner", 0), at("message", "b", "a", "analyst", 1), at("message", "b", "a", "analyst", 15), at("message", "a", "", "planner", 16))
	for _, policy := range []string{"tree: {timeout: 10s}", "timeout: 10s"} {
		res, _ := replayLog(t, log, map[string]string{"planner": policy, "analyst": "{}"}, nil)
		a := byRun(res)["a"]
		require.Equal(t, termination.TagTimeout, a.TerminationCause, policy)
		require.Equal(t, 10*time.Second, a.Duration, policy)
	}
}
