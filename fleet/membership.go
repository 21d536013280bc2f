package fleet

import (
	"context"
	"time"

	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Membership returns the participant that makes every run of a stage a
// member of f (middleware.WithParticipant(fleet.Membership(f))): the run
// is visible in f's registry with its labels (middleware.WithLabels) and
// figures, can be stopped by an operator (Cancelled{reason: external,
// detail: "REASON (by WHO)"}) and raised when held, is skipped when a
// block matches it (Skipped{reason: blocked}), and shares the stage's
// fleet_budget (middleware.WithPolicy, middleware.WithFleetBudget) with
// the other runs of the same key. Per event the run charges its usage to
// the shared budget in-process, without allocating and without waiting on
// the network. A fleet warning that this run's own event raised reaches
// the stage's warning hook at once; one that another run raised is in the
// run's result at once and reaches the hook and the participants with
// this run's next event (at the run's end if none comes). When f shares
// tree limits (Local and redisfleet do; see "Trees" above), the
// participant does too, and the stage's tree limits are shared through it
// (§8).
// Membership(nil) returns nil (an error from middleware.New).
func Membership(f Fleet) middleware.Participant {
	if f == nil {
		return nil
	}
	if t, ok := f.(tree.Sharer); ok {
		return treeMembership{membership{f}, t}
	}
	return membership{f}
}

// A run of the middleware is how a fleet reaches it.
var _ Run = (*middleware.Run)(nil)

// membership is Membership's participant. It is comparable, so that two
// stages' memberships of one fleet are equal (middleware tells a parent
// on the same fleet by it).
type membership struct{ f Fleet }

// treeMembership is a membership of a fleet that shares trees.
type treeMembership struct {
	membership
	tree.Sharer
}

// Join gives the run its membership part; the run joins f when it starts
// (Start).
func (m membership) Join(ctx context.Context, run *middleware.Run) (context.Context, middleware.Part) {
	return ctx, &memberPart{f: m.f, ctx: ctx, run: run}
}

// memberPart is a run's membership of a fleet: a middleware.Part that is
// a Starter (it joins the fleet), a Spender (the shared budget) and an
// Ender (it leaves).
type memberPart struct {
	f      Fleet
	ctx    context.Context
	run    *middleware.Run
	member Member // set by Start, before the run's first event
}

// Start joins the fleet. A cause the fleet answers with ends the run at
// once (a block, an exhausted budget, an unreachable fail-closed fleet).
func (p *memberPart) Start() error {
	r := p.run
	info := RunInfo{ID: r.ID(), Stage: r.Stage().Name(), Labels: r.Labels(), Started: time.Now(),
		Parent: r.Parent(), Trees: r.SharedTrees()}
	m, cause := p.f.Join(p.ctx, info, r.Stage().FleetBudget(), r)
	// A member that came with a cause (Join should return none) still
	// leaves when the run ends; a typed-nil cause is no cause (the run
	// refuses to stop with it).
	p.member = m
	if cause != nil {
		return cause
	}
	return nil
}

// Spend charges an event's usage to the run's shared budget.
func (p *memberPart) Spend(u termination.Usage, cost float64) (warning, stop termination.Cause) {
	if p.member == nil {
		return nil, nil
	}
	return p.member.Spend(u, cost)
}

// Ended leaves the fleet with the run's final result.
func (p *memberPart) Ended(res *termination.Result) {
	if p.member != nil {
		p.member.Leave(res)
	}
}

// Event, Warning, Error and End: the fleet reads the run's figures when it
// needs them (Run.Progress), and learns of its end from Ended.
func (p *memberPart) Event(*termination.Event)  {}
func (p *memberPart) Warning(termination.Cause) {}
func (p *memberPart) Error(error)               {}
func (p *memberPart) End(*termination.Result)   {}
