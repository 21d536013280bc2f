package middleware_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestTreeInLocalFleet: the fleet's registry shows each run's parent, and
// a fleet stop of a planner ends its descendants and reports them.
func TestTreeInLocalFleet(t *testing.T) {
	l := fleet.NewLocal()
	planner := mustStage(t, "planner", middleware.WithParticipant(fleet.Membership(l)))
	worker := mustStage(t, "worker", middleware.WithParticipant(fleet.Membership(l)))
	pctx, p := planner.Start(context.Background())
	cctx, c := worker.Start(pctx)
	_, g := worker.Start(cctx)
	_, other := worker.Start(context.Background())

	runs, err := l.Runs(context.Background(), fleet.Selector{})
	require.NoError(t, err)
	parents := map[string]string{}
	for _, r := range runs {
		parents[r.ID] = r.Parent
	}
	assert.Equal(t, map[string]string{p.ID(): "", c.ID(): p.ID(), g.ID(): c.ID(), other.ID(): ""}, parents)

	rep, err := l.Stop(context.Background(), fleet.StopRequest{Selector: fleet.Selector{RunID: p.ID()}, Reason: "runaway", By: "ops"})
	require.NoError(t, err)
	assert.Equal(t, fleet.StopReport{Matched: 1, Stopped: 1, Descendants: 2}, rep)
	want := parentCancel("planner", "cancelled")
	assert.Equal(t, termination.Cancelled{Reason: termination.CancelExternal, Detail: "runaway (by ops)"}, p.Finish(nil).Cause)
	assert.Equal(t, want, c.Finish(nil).Cause)
	assert.Equal(t, want, g.Finish(nil).Cause)
	assert.Equal(t, termination.NaturalCompletion{}, other.Finish(nil).Cause, "not a descendant")
}
