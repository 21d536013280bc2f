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

// The roles of an idleScript's runs: a run held at its own limit, and a
// planner held at its tree: limit with its kid.
const (
	roleOwn = iota
	rolePlanner
	roleKid
	roles
)

var roleStages = [roles]string{"own", "planner", "kid"}

// idleScript is what the driver of TestRecordedIdleHoldsReplayAsLive does:
// each step pauses, whatever the state of the runs, then raises its run if
// it is held and observes a message. A hold lasts until its run's next
// step.
type idleScript struct {
	idle  time.Duration
	steps []idleStep
}

type idleStep struct {
	role  int
	pause time.Duration // before the step
}

// newIdleScript draws a script: idle D in [40ms, 60ms), pauses of none,
// D/10 or 3D (an idle stop for a run that is not held; for a held one, a
// hold past its idle limit, which only the pause keeps going). After a step that reaches a limit of
// idlePolicies (the own run's third message, then every second one; the
// tree's fourth, then every second one), the pause is 3D one time in two.
func newIdleScript(r *rand.Rand) idleScript {
	d := time.Duration(40+r.IntN(20)) * time.Millisecond
	sc := idleScript{idle: d}
	own, tree := 0, 0
	crossed := false
	for range 10 + r.IntN(8) {
		st := idleStep{role: pick(r, []int{roleOwn, roleOwn, rolePlanner, roleKid, roleKid})}
		switch n := r.IntN(8); {
		case n == 0 || crossed && n < 4:
			st.pause = 3 * d
		case n < 3:
			st.pause = d / 10
		}
		if st.role == roleOwn {
			own++
			crossed = own >= 3 && own%2 == 1
		} else {
			tree++
			crossed = tree >= 4 && tree%2 == 0
		}
		sc.steps = append(sc.steps, st)
	}
	return sc
}

// idlePolicies are the policies of the three roles with idle D and a hold
// timeout of hold.
func idlePolicies(d, hold time.Duration) [roles]termination.Policy {
	src := [roles]string{
		fmt.Sprintf("{max_iterations: 2, idle: %s, hold: {timeout: %s}}", d, hold),
		fmt.Sprintf("{idle: %s, tree: {max_iterations: 3}, hold: {timeout: %s}}", 4*d, hold),
		fmt.Sprintf("{idle: %s}", d),
	}
	var out [roles]termination.Policy
	for i, s := range src {
		out[i] = termination.MustParsePolicy(s)
	}
	return out
}

// liveIdleHolds runs sc live under pols (recorded by the extra options):
// at each step it pauses, raises its run by 2 iterations when it is held
// and observes a message. It returns each role's result and run id.
func liveIdleHolds(t *testing.T, sc idleScript, pols [roles]termination.Policy, opts ...middleware.Option) (res [roles]termination.Result, ids [roles]string) {
	var runs [roles]*middleware.Run
	stage := func(role int) *middleware.Stage {
		return mustStage(t, roleStages[role], append([]middleware.Option{middleware.WithPolicy(pols[role])}, opts...)...)
	}
	_, runs[roleOwn] = stage(roleOwn).Start(context.Background())
	pctx, planner := stage(rolePlanner).Start(context.Background())
	runs[rolePlanner] = planner
	planner.Observe(termination.Event{Kind: termination.KindInput, Text: "task"}) // its first line before its kid's
	_, runs[roleKid] = stage(roleKid).Start(pctx)
	msg := termination.Event{Kind: termination.KindMessage, Text: "turn"}
	for _, st := range sc.steps {
		time.Sleep(st.pause)
		run := runs[st.role]
		if isDone(run) {
			continue
		}
		if _, _, held := run.Held(); held {
			_ = run.Raise(termination.Limits{Iterations: 2, Has: termination.LimitIterations})
		}
		run.Observe(msg)
	}
	for _, run := range runs {
		if _, _, held := run.Held(); held {
			// Stop, not Finish: a holder whose tree is held at the end of
			// its stream ends as natural_completion live (left to the
			// lead), while Stop ends it with the limit's cause.
			run.Stop("done")
		}
	}
	for _, role := range []int{roleKid, rolePlanner, roleOwn} {
		res[role] = runs[role].Finish(nil)
		ids[role] = runs[role].ID()
	}
	return res, ids
}

// TestRecordedIdleHoldsReplayAsLive: idle limits pause while a run is held
// — at its own limit, or its tree's (the holder and its descendants) — and
// resume where they were after a raise, live on the wall clock and in
// replay on the events' clock, from the held event's time to the raise
// record's (§3 hold, §4): replaying the recording with the policies it ran
// under gives every run its live cause, stopped_at and events.
func TestRecordedIdleHoldsReplayAsLive(t *testing.T) {
	r := rand.New(rand.NewPCG(seed(t), 41))
	for c := range 8 {
		sc := newIdleScript(r)
		path := filepath.Join(t.TempDir(), "events.jsonl")
		log, err := eventlog.New(path)
		require.NoError(t, err)
		pols := idlePolicies(sc.idle, time.Second)
		live, ids := liveIdleHolds(t, sc, pols, middleware.WithParticipant(log))
		require.NoError(t, log.Close())
		role := map[string]int{}
		for i, id := range ids {
			role[id] = i
		}
		byStage := map[string]*termination.Policy{}
		for i := range pols {
			byStage[roleStages[i]] = &pols[i]
		}
		got := replayRecorded(t, path, byStage)
		require.Len(t, got, roles, "case %d: one result per run", c)
		for _, res := range got {
			requireSameEnd(t, live[role[res.Run]], res, fmt.Sprintf("case %d: %s; script %+v", c, res.Stage, sc))
		}
	}
}

// requireSameEnd requires got to have want's cause, stopped_at and events.
func requireSameEnd(t *testing.T, want, got termination.Result, what string) {
	t.Helper()
	wc, _ := codec.MarshalCause(want.Cause)
	gc, _ := codec.MarshalCause(got.Cause)
	require.JSONEq(t, string(wc), string(gc), "%s: cause", what)
	require.Equal(t, want.StoppedAt, got.StoppedAt, "%s: stopped_at", what)
	require.Equal(t, want.Events, got.Events, "%s: events", what)
}

// TestRecordedHoldTimeoutUnderCandidate: a run held at its own limit, and
// a tree held at its holder's tree: limit, raised 300ms after the hold,
// recorded under a hold timeout of 1m, replay under a candidate whose
// hold timeout (50ms) passed before the raise record as a live run under
// the candidate ends: the hold timeout ended it with the limit's cause
// (the holder's, its kid Cancelled{parent}), and the raise found no held
// run.
func TestRecordedHoldTimeoutUnderCandidate(t *testing.T) {
	policies := func(hold string) map[string]*termination.Policy {
		out := map[string]*termination.Policy{}
		for stage, src := range map[string]string{
			"own":     "{max_iterations: 1, hold: {timeout: " + hold + "}}",
			"planner": "{tree: {max_iterations: 1}, hold: {timeout: " + hold + "}}",
			"kid":     "{}",
		} {
			p := termination.MustParsePolicy(src)
			out[stage] = &p
		}
		return out
	}
	msg := termination.Event{Kind: termination.KindMessage, Text: "turn"}
	live := func(pols map[string]*termination.Policy, opts ...middleware.Option) map[string]termination.Result {
		stage := func(name string) *middleware.Stage {
			return mustStage(t, name, append([]middleware.Option{middleware.WithPolicy(*pols[name])}, opts...)...)
		}
		_, own := stage("own").Start(context.Background())
		pctx, planner := stage("planner").Start(context.Background())
		planner.Observe(msg)
		_, kid := stage("kid").Start(pctx)
		own.Observe(msg)
		own.Observe(msg) // held
		kid.Observe(msg) // the tree's second iteration: held
		time.Sleep(300 * time.Millisecond)
		raise := termination.Limits{Iterations: 5, Has: termination.LimitIterations}
		_ = own.Raise(raise) // an error when the hold timed out
		_ = kid.Raise(raise)
		own.Observe(msg)
		kid.Observe(msg)
		return map[string]termination.Result{"own": own.Finish(nil), "kid": kid.Finish(nil), "planner": planner.Finish(nil)}
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	log, err := eventlog.New(path)
	require.NoError(t, err)
	recorded := live(policies("1m"), middleware.WithParticipant(log))
	require.NoError(t, log.Close())
	require.Equal(t, termination.NaturalCompletion{}, recorded["own"].Cause, "raised in time under the recorded policy")

	candidate := policies("50ms")
	want := live(candidate)
	require.Equal(t, termination.MaxIterationsReached{Limit: 1, Count: 2}, want["own"].Cause, "the candidate's hold timed out before the raise")
	got := replayRecorded(t, path, candidate)
	require.Len(t, got, 3)
	for _, res := range got {
		requireSameEnd(t, want[res.Stage], res, res.Stage)
	}
}

// isDone reports whether run has ended.
func isDone(run *middleware.Run) bool {
	select {
	case <-run.Done():
		return true
	default:
		return false
	}
}
