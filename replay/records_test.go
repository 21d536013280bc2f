package replay_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// replayLog replays log as the replay command does, with the policies of
// stages (YAML by stage name) and fallback (nil: none).
func replayLog(t *testing.T, log string, stages map[string]string, fallback *termination.Policy) ([]termination.Result, map[string]int) {
	t.Helper()
	pols := map[string]*termination.Policy{}
	for s, y := range stages {
		p := termination.MustParsePolicy(y)
		pols[s] = &p
	}
	idx := codec.IndexRuns(strings.NewReader(log))
	rp := replay.NewRunner(fallback, replay.WithIndex(&idx), replay.WithPolicies(func(s string) (*termination.Policy, bool) { p, ok := pols[s]; return p, ok }))
	d := codec.NewDecoder(strings.NewReader(log))
	var out []termination.Result
	for {
		e, err := d.NextEntry()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if e.Record != nil {
			out = append(out, rp.Record(e.Record, idx.IsLast(e.Record.Run, d.Line()))...)
		} else {
			out = append(out, rp.Line(&e.Event, idx.IsLast(e.Event.Logged().Run, d.Line()))...)
		}
	}
	return append(out, rp.End()...), rp.LeftOut()
}

func byRun(rs []termination.Result) map[string]termination.Result {
	m := map[string]termination.Result{}
	for _, r := range rs {
		m[r.Run] = r
	}
	return m
}

// The tree: the planner's end record comes after its children's
// lines; live it ended on its tree budget, the analysts Cancelled{parent}.
func TestReplayEndsAtEndRecord(t *testing.T) {
	const tree = "tree: {token_budget: {total: 15000}}"
	log := lines(
		`{"kind":"message","run":"p","stage":"planner","time":"2026-11-28T10:00:00Z","usage":{"input_tokens":100}}`,
		`{"kind":"message","run":"c1","parent":"p","stage":"analyst","time":"2026-11-28T10:00:01Z","usage":{"input_tokens":7000}}`,
		`{"kind":"message","run":"c2","parent":"p","stage":"analyst","time":"2026-11-28T10:00:02Z","usage":{"input_tokens":7000}}`,
		`{"kind":"message","run":"c1","time":"2026-11-28T10:00:03Z","usage":{"input_tokens":1000}}`,
		`{"kind":"end","run":"p","stage":"planner","time":"2026-11-28T10:00:03Z","cause":{"$kind":"BudgetExhausted","resource":"total_tokens","used":15100,"limit":15000,"scope":"tree"},"outcome":"failed","stopped_at":0,"events":1,"policy":"code"}`,
		`{"kind":"end","run":"c1","parent":"p","stage":"analyst","time":"2026-11-28T10:00:03Z","cause":{"$kind":"Cancelled","reason":"parent","detail":"planner ended: budget_exhausted"},"outcome":"failed","stopped_at":0,"events":2,"policy":"code"}`,
		`{"kind":"end","run":"c2","parent":"p","stage":"analyst","time":"2026-11-28T10:00:03Z","cause":{"$kind":"Cancelled","reason":"parent","detail":"planner ended: budget_exhausted"},"outcome":"failed","stopped_at":0,"events":1,"policy":"code"}`,
	)
	t.Run("same policy derives the live end", func(t *testing.T) {
		res, left := replayLog(t, log, map[string]string{"planner": tree, "analyst": "max_iterations: 20"}, nil)
		require.Empty(t, left)
		m := byRun(res)
		require.Equal(t, termination.BudgetExhausted{Resource: "total_tokens", Used: 15100, Limit: 15000, Scope: termination.ScopeTree}, m["p"].Cause)
		require.False(t, m["p"].FromRecord)
		require.Equal(t, "budget_exhausted", m["p"].Live)
		require.Equal(t, "planner", m["p"].Stage)
		require.Equal(t, termination.Cancelled{Reason: termination.CancelParent, Detail: "planner ended: budget_exhausted"}, m["c1"].Cause)
		require.Equal(t, 2, m["c1"].Events)
		require.Equal(t, 1, m["c2"].Events)
		require.Equal(t, "cancelled", m["c2"].Live)
	})
	t.Run("a policy without tree: takes the recorded ends", func(t *testing.T) {
		res, _ := replayLog(t, log, map[string]string{"planner": "max_iterations: 5", "analyst": "max_iterations: 20"}, nil)
		m := byRun(res)
		require.True(t, m["p"].FromRecord)
		require.Equal(t, "budget_exhausted", m["p"].TerminationCause)
		require.Equal(t, 1, m["p"].Events)
		require.Equal(t, 0, m["p"].StoppedAt)
		// The children end with the cascade from their replayed parent.
		require.Equal(t, termination.Cancelled{Reason: termination.CancelParent, Detail: "planner ended: budget_exhausted"}, m["c1"].Cause)
		require.Equal(t, "cancelled", m["c1"].Live)
	})
	t.Run("runs without a policy are left out and still end", func(t *testing.T) {
		res, left := replayLog(t, log, map[string]string{"analyst": "max_iterations: 20"}, nil)
		require.Equal(t, map[string]int{"planner": 1}, left)
		m := byRun(res)
		require.NotContains(t, m, "p")
		require.Equal(t, termination.Cancelled{Reason: termination.CancelParent, Detail: "planner ended: budget_exhausted"}, m["c1"].Cause)
	})
	t.Run("-policy is the policy of stages without a file", func(t *testing.T) {
		fb := termination.MustParsePolicy("max_iterations: 50")
		res, left := replayLog(t, log, map[string]string{"analyst": "max_iterations: 20"}, &fb)
		require.Empty(t, left)
		require.True(t, byRun(res)["p"].FromRecord)
	})
}

// A run that ended live on a timer replays with its recorded cause and
// the time to its end record; a stricter policy derives its own end.
func TestReplayTimerAndStricterPolicy(t *testing.T) {
	log := lines(
		`{"kind":"message","run":"r","stage":"critic","time":"2026-11-28T10:00:00Z","text":"Reviewing..."}`,
		`{"kind":"end","run":"r","stage":"critic","time":"2026-11-28T10:00:02Z","cause":{"$kind":"Timeout","limit":"2s","elapsed":"2s"},"outcome":"failed","stopped_at":0,"events":1,"policy":"code"}`,
	)
	res, _ := replayLog(t, log, map[string]string{"critic": "timeout: 2s"}, nil)
	require.Len(t, res, 1)
	require.Equal(t, "timeout", res[0].TerminationCause)
	require.True(t, res[0].FromRecord)
	require.Equal(t, "2s", res[0].Duration.String())
	require.Equal(t, "timeout", res[0].Live)

	res, _ = replayLog(t, log, map[string]string{"critic": "text_mention: {text: Reviewing}"}, nil)
	require.Equal(t, "completed", res[0].TerminationCause)
	require.False(t, res[0].FromRecord)
	require.Equal(t, 1, res[0].StoppedAt)
	require.Equal(t, "timeout", res[0].Live)
}

// A blocked run has only its end record; a dropped line makes a run
// incomplete; logs without end records have no live.
func TestReplayRecordOnlyAndDropped(t *testing.T) {
	log := lines(
		`{"kind":"end","run":"b","stage":"planner","time":"2026-11-28T10:00:00Z","cause":{"$kind":"Skipped","reason":"blocked","detail":"drill"},"outcome":"skipped","stopped_at":0,"events":0,"policy":"code"}`,
		`{"kind":"message","run":"d","stage":"coder","time":"2026-11-28T10:00:00Z"}`,
		`{"kind":"message","run":"d","time":"2026-11-28T10:00:01Z","dropped":3}`,
		`{"kind":"message","run":"n","stage":"coder","time":"2026-11-28T10:00:01Z"}`,
	)
	res, _ := replayLog(t, log, map[string]string{"planner": "max_iterations: 3", "coder": "max_iterations: 30"}, nil)
	m := byRun(res)
	require.Equal(t, termination.Skipped{Reason: "blocked", Detail: "drill"}, m["b"].Cause)
	require.True(t, m["b"].FromRecord)
	require.True(t, m["d"].Incomplete)
	require.False(t, m["n"].Incomplete)
	require.Empty(t, m["n"].Live)
	require.False(t, m["n"].FromRecord)
}

// A raise record changes nothing under a policy without hold.
func TestReplayIgnoresRaiseWithoutHold(t *testing.T) {
	log := lines(first, raiseA, `{"kind":"message","run":"a","time":"2026-11-28T10:00:03Z"}`)
	res, _ := replayLog(t, log, map[string]string{"planner": "max_iterations: 1"}, nil)
	require.Len(t, res, 1)
	require.Equal(t, "max_iterations", res[0].TerminationCause)
	require.Equal(t, 2, res[0].StoppedAt)
}

// TestReplayAppliesRaises: under a policy with hold, a run held at a limit
// goes on after a raise record by its amounts, and ends with the limit's
// cause when nothing raises it before its next line, its end record or
// the end of the log (§3 hold, §1 raise records).
func TestReplayAppliesRaises(t *testing.T) {
	const policy = "max_iterations: 1\nhold: {timeout: 1m}"
	msg := func(sec int) string {
		return fmt.Sprintf(`{"kind":"message","run":"a","time":"2026-11-28T10:00:%02dZ"}`, sec)
	}
	raise := func(n int) string {
		return fmt.Sprintf(`{"kind":"raise","run":"a","time":"2026-11-28T10:00:05Z","limits":{"iterations":%d}}`, n)
	}
	end := `{"kind":"end","run":"a","stage":"planner","time":"2026-11-28T10:00:09Z","cause":{"$kind":"MaxIterationsReached","limit":3,"count":4},"outcome":"failed","stopped_at":5,"events":5,"policy":"code"}`
	tests := []struct {
		name      string
		log       string
		limit     int
		count     int
		stoppedAt int
		events    int
		fromRec   bool
	}{
		{"held, never raised: the limit at the end of the log", lines(first, msg(1), msg(2)), 1, 2, 2, 2, false},
		{"held, then a line that is no raise: the limit", lines(first, msg(1), msg(2), msg(3)), 1, 2, 2, 2, false},
		{"raised once, held again", lines(first, msg(1), raise(1), msg(3), msg(4)), 2, 3, 3, 3, false},
		{"raised twice, held at the end record", lines(first, msg(1), raise(1), msg(3), raise(1), msg(4), end), 3, 4, 4, 4, false},
		{"a raise of a run that is not held changes nothing", lines(first, raise(5), msg(1), msg(2)), 1, 2, 2, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := replayLog(t, tt.log, map[string]string{"planner": policy}, nil)
			require.Len(t, res, 1)
			require.Equal(t, termination.MaxIterationsReached{Limit: tt.limit, Count: tt.count}, res[0].Cause)
			require.Equal(t, tt.stoppedAt, res[0].StoppedAt)
			require.Equal(t, tt.events, res[0].Events)
			require.Equal(t, tt.fromRec, res[0].FromRecord)
		})
	}
}

// TestReplayHeldEndRecord: a run held at a limit whose end record comes
// next ends with the recorded end when it was held there live — the end
// record names the policy it replays under and counts the events replay
// evaluated: a timeout (which keeps counting while held) or an ancestor's
// end may have ended the hold — and with the limit's cause otherwise (a
// candidate policy that holds where the live one did not).
func TestReplayHeldEndRecord(t *testing.T) {
	const policy = "max_iterations: 1\nhold: {timeout: 1m}\ntimeout: 30s"
	hash := termination.MustParsePolicy(policy).Hash()
	msg := `{"kind":"message","run":"a","time":"2026-11-28T10:00:01Z"}`
	end := func(cause, policy string, events int) string {
		return fmt.Sprintf(`{"kind":"end","run":"a","stage":"planner","time":"2026-11-28T10:00:31Z","cause":%s,"outcome":"failed","stopped_at":0,"events":%d,"policy":%q}`, cause, events, policy)
	}
	const timeout = `{"$kind":"Timeout","limit":"30s","elapsed":"30.001s"}`
	const parent = `{"$kind":"Cancelled","reason":"parent","detail":"planner ended: max_iterations"}`
	const limitJSON = `{"$kind":"MaxIterationsReached","limit":1,"count":2}`
	limit := termination.MaxIterationsReached{Limit: 1, Count: 2}
	tests := []struct {
		name    string
		log     string
		want    termination.Cause
		fromRec bool
	}{
		{"held live, a timeout ended it", lines(first, msg, end(timeout, hash, 2)), termination.Timeout{Limit: 30 * time.Second, Elapsed: 30*time.Second + time.Millisecond}, true},
		{"held live, its parent's end ended it", lines(first, msg, end(parent, hash, 2)), termination.Cancelled{Reason: termination.CancelParent, Detail: "planner ended: max_iterations"}, true},
		{"another policy live: the limit", lines(first, msg, end(timeout, "sha256:00", 2)), limit, false},
		{"a policy given as code live: the limit", lines(first, msg, end(timeout, "code", 2)), limit, false},
		{"live went on past the hold: the limit", lines(first, msg, end(timeout, hash, 3)), limit, false},
		// Its hold timed out live: the limit, with its evidence, as under
		// any other policy that holds there (the user trial's p1).
		{"held live, its hold timed out: the limit", lines(first, msg, end(limitJSON, hash, 2)), limit, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := replayLog(t, tt.log, map[string]string{"planner": policy}, nil)
			require.Len(t, res, 1)
			require.Equal(t, tt.want, res[0].Cause)
			require.Equal(t, tt.fromRec, res[0].FromRecord)
			if !tt.fromRec {
				require.Equal(t, 2, res[0].StoppedAt)
				require.Equal(t, []int{2}, res[0].Evidence, "the event that crossed the limit")
			}
			if tt.want == limit && tt.log == lines(first, msg, end(limitJSON, hash, 2)) {
				require.Equal(t, 31*time.Second, res[0].Duration, "held until the recorded end")
			}
			require.Equal(t, 2, res[0].Events)
		})
	}
}
