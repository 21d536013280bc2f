package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/redisfleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runRaiseCLI(env map[string]string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = runRaise(args, stdio{out: &out, err: &errb, getenv: func(k string) string { return env[k] }})
	return code, out.String(), errb.String()
}

// TestRaiseCommand: runs -held lists a held run with its limit; a raise
// that does not name the limit's resource changes nothing (exit 1, saying
// so); raise releases it (exit 0) and says so; a raise for a run that is
// not held, or unknown, changes nothing and exits 1, saying which. On a
// server and on a cluster.
func TestRaiseCommand(t *testing.T) {
	noLeaks(t)
	redistest.Each(t, func(t *testing.T, srv redistest.Redis) {
		env := map[string]string{"AGENTSTOP_REDIS_URL": srv.URL()}
		f, err := redisfleet.New(context.Background(), srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close(context.Background())
		s, err := middleware.New("writer", middleware.WithParticipant(fleet.Membership(f)),
			middleware.WithPolicy(termination.MustParsePolicy("max_iterations: 1\nhold: {timeout: 1m}")))
		if err != nil {
			t.Fatal(err)
		}
		_, run := s.Start(context.Background())
		defer run.Finish(nil)
		_, other := s.Start(context.Background())
		defer other.Finish(nil)
		msg := termination.Event{Kind: termination.KindMessage}
		run.Observe(msg)
		run.Observe(msg) // held
		if err := f.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The registry shows a held run within 1 s of its hold (§7: a run's
		// figures within 1 s), on a cluster as on one server.
		var (
			code        int
			out, errOut string
			rs          []fleet.RunInfo
		)
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			code, out, errOut = runFleetCLI(t, env, "runs", "-held", "-json")
			rs = nil
			if code == 0 && json.Unmarshal([]byte(out), &rs) == nil && len(rs) == 1 || time.Now().After(deadline) {
				break
			}
		}
		if code != 0 || len(rs) != 1 || rs[0].ID != run.ID() || rs[0].Held == nil || rs[0].Held.Limit != "max_iterations" {
			t.Fatalf("runs -held -json: exit %d, %s %s", code, out, errOut)
		}
		code, out, _ = runFleetCLI(t, env, "runs", "-held")
		if code != 0 || !strings.Contains(out, run.ID()) || !strings.Contains(out, "max_iterations") || strings.Contains(out, other.ID()) || !strings.Contains(out, "1 held run") {
			t.Errorf("runs -held: exit %d\n%s", code, out)
		}

		// A raise that does not name the limit's resource changes nothing.
		code, out, errOut = runRaiseCLI(env, "-run", run.ID(), "-cost", "+0.5")
		if code != exitFail || errOut != "" || !strings.Contains(out, "is not held at a limit this raise names: nothing raised (the fleet showed it held at max_iterations") {
			t.Errorf("raise -cost of a run held at max_iterations: exit %d, %q, %q", code, out, errOut)
		}
		if _, _, held := run.Held(); !held {
			t.Fatal("a raise that misses the limit released the run")
		}
		code, out, errOut = runRaiseCLI(env, "-run", run.ID(), "-iterations", "+2", "-by", "ops@test")
		if code != exitOK || errOut != "" || !strings.HasPrefix(out, "raised run "+run.ID()+" by iterations=2 (held at max_iterations") {
			t.Fatalf("raise: exit %d, %q, %q", code, out, errOut)
		}
		if _, _, held := run.Held(); held {
			t.Error("the run is still held")
		}
		// Raised again at once, naming the same limit: while the registry
		// still shows it held, it says the run is no longer held; after,
		// that it is not held.
		code, out, errOut = runRaiseCLI(env, "-run", run.ID(), "-iterations", "+2")
		if code != exitFail || errOut != "" || !strings.Contains(out, "is no longer held: nothing raised") && !strings.Contains(out, "is not held at a limit: nothing raised") {
			t.Errorf("raise again: exit %d, %q, %q", code, out, errOut)
		}
		for _, tc := range []struct{ id, want string }{
			{run.ID(), "is not held at a limit"}, // this raise names, when the fleet still shows the raised run held
			{other.ID(), "is not held at a limit: nothing raised"},
			{runid.New(), "(unknown, or it has ended): nothing raised"},
		} {
			code, out, errOut = runRaiseCLI(env, "-run", tc.id, "-cost", "+0.5")
			if code != exitFail || errOut != "" || !strings.Contains(out, tc.want) {
				t.Errorf("raise %s: exit %d, %q, %q; want exit 1 saying %q", tc.id, code, out, errOut, tc.want)
			}
		}
	})
}

// TestRaiseCommandErrors: usage errors are one line on stderr, exit 2.
func TestRaiseCommandErrors(t *testing.T) {
	env := map[string]string{"AGENTSTOP_REDIS_URL": "redis://127.0.0.1:1"}
	id := runid.New()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-run", id}, "give at least one amount"},
		{[]string{"-run", id, "-iterations", "0"}, `-iterations: want a positive amount such as +10, got "0"`},
		{[]string{"-run", id, "-cost", "-1"}, `-cost: want a positive amount`},
		{[]string{"-run", id, "-tokens", "many"}, `-tokens: want a positive amount`},
		{[]string{"-iterations", "+1"}, "-run ID is required"},
		{[]string{"-run", "nope", "-iterations", "+1"}, "run id"},
		{[]string{"-run", id, "-iterations", "+1", "extra"}, `unexpected argument "extra"`},
	} {
		code, out, errOut := runRaiseCLI(env, tc.args...)
		if code != exitBad || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("raise %v: exit %d, %q, %q; want exit 2 with %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if code, _, _ := runRaiseCLI(nil, "-run", id, "-iterations", "+1"); code != exitBad {
		t.Errorf("raise without a server: exit %d, want 2", code)
	}
}

// TestRaiseLineReleasedMeanwhile: a raise that names the limit the
// registry showed, answered "not held", says the run is no longer held
// (released in the moment before); one that names another resource says
// that a raise must name the held limit's.
func TestRaiseLineReleasedMeanwhile(t *testing.T) {
	held := &fleet.Held{Limit: termination.TagMaxIterations, Cause: "max iterations reached (3 > limit 2)", Since: time.Now()}
	rep := fleet.RaiseReport{Outcome: fleet.RaiseNotHeld, Held: held}
	var iters, cost termination.Limits
	require.NoError(t, iters.Set("iterations=2"))
	require.NoError(t, cost.Set("cost=0.5"))
	assert.Contains(t, raiseLine("r1", iters, rep, time.Second), "run r1 is no longer held: nothing raised (the fleet showed it held at max_iterations a moment ago")
	assert.Contains(t, raiseLine("r1", cost, rep, time.Second), "run r1 is not held at a limit this raise names")
	budget := fleet.RaiseReport{Outcome: fleet.RaiseNotHeld, Held: &fleet.Held{Limit: termination.TagBudgetExhausted}}
	assert.Contains(t, raiseLine("r1", cost, budget, time.Second), "is no longer held")
	assert.Contains(t, raiseLine("r1", iters, budget, time.Second), "this raise names")
}
