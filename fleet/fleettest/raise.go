package fleettest

import (
	"errors"
	"testing"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// testRaise: a run held at its limit (hold:) is listed with what it waits
// on, a raise through the Control releases it with its limit raised and is
// confirmed; a raise for a run that is not held, unknown, or malformed
// changes nothing and says so.
func testRaise(t *testing.T, f fleet.Fleet, c fleet.Control) {
	r := c
	s := newStage(t, f, "fleettest_raise", middleware.WithPolicy(termination.MustParsePolicy("max_iterations: 1\nhold: {timeout: 1m}")))
	_, a := start(t, s, nil)
	_, b := start(t, s, nil)
	waitListed(t, c, a, b)
	a.Observe(message(1, 1))
	a.Observe(message(1, 1)) // 2 of 1: held
	var held fleet.RunInfo
	eventually(t, "the held run is listed with its limit", func() bool {
		var ok bool
		held, ok = hasRun(runs(t, c, fleet.Selector{RunID: a.ID()}), a.ID())
		return ok && held.Held != nil
	})
	if held.Held.Limit != termination.TagMaxIterations || time.Since(held.Held.Since) > time.Minute {
		t.Errorf("listed hold = %+v, want max_iterations since just now", held.Held)
	}
	if rb, _ := hasRun(runs(t, c, fleet.Selector{RunID: b.ID()}), b.ID()); rb.Held != nil {
		t.Errorf("run b listed as held: %+v", rb.Held)
	}
	raise := fleet.RaiseRequest{RunID: a.ID(), Limits: termination.Limits{Iterations: 3, Has: termination.LimitIterations}, By: By, Wait: 5 * time.Second}
	rep, err := r.Raise(t.Context(), raise)
	if err != nil || rep.Outcome != fleet.RaiseRaised || rep.Held == nil {
		t.Fatalf("Raise(held run) = %+v, %v; want raised, with what it was held at", rep, err)
	}
	if _, _, h := a.Held(); h {
		t.Fatal("the raised run is still held")
	}
	if _, stop := a.Observe(message(1, 1)); stop {
		t.Error("the raised run stopped at 3 of 4")
	}
	if rem := a.Remaining(); rem.Iterations != 1 {
		t.Errorf("remaining after the raise: %d iterations, want 1", rem.Iterations)
	}
	eventually(t, "the raised run is listed as not held", func() bool {
		ra, ok := hasRun(runs(t, c, fleet.Selector{RunID: a.ID()}), a.ID())
		return ok && ra.Held == nil
	})
	for _, tc := range []struct {
		name string
		req  fleet.RaiseRequest
		want fleet.RaiseOutcome
	}{
		{"not held", fleet.RaiseRequest{RunID: b.ID(), Limits: raise.Limits, By: By, Wait: 5 * time.Second}, fleet.RaiseNotHeld},
		{"raised already", raise, fleet.RaiseNotHeld},
		{"unknown", fleet.RaiseRequest{RunID: runid.New(), Limits: raise.Limits, By: By}, fleet.RaiseUnknown},
	} {
		if rep, err := r.Raise(t.Context(), tc.req); err != nil || rep.Outcome != tc.want {
			t.Errorf("Raise(%s) = %+v, %v; want %s", tc.name, rep, err, tc.want)
		}
	}
	for _, bad := range []fleet.RaiseRequest{
		{RunID: "nope", Limits: raise.Limits},
		{RunID: a.ID()},
		{RunID: a.ID(), Limits: termination.Limits{Cost: -1, Has: termination.LimitCost}},
	} {
		if _, err := r.Raise(t.Context(), bad); !errors.Is(err, fleet.ErrInvalid) {
			t.Errorf("Raise(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}
