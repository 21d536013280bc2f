package middleware_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// typedNilFleet is a Fleet whose answers carry typed-nil causes (a nil
// *termination.Custom in a Cause): no cause at all, as everywhere else a
// user-supplied Cause enters a run.
type typedNilFleet struct {
	scriptedFleet
	nilJoin bool // Join returns a member and a typed-nil cause
}

type typedNilMember struct{ *scriptedMember }

var nilCustom *termination.Custom

func (m typedNilMember) Spend(u termination.Usage, cost float64) (warning, stop termination.Cause) {
	m.scriptedMember.Spend(u, cost)
	return nilCustom, nilCustom
}

func (f *typedNilFleet) Participant() middleware.Participant { return fleet.Membership(f) }

func (f *typedNilFleet) Join(ctx context.Context, run fleet.RunInfo, b *termination.FleetBudget, h fleet.Run) (fleet.Member, termination.Cause) {
	m, _ := f.scriptedFleet.Join(ctx, run, b, h)
	if f.nilJoin {
		return typedNilMember{m.(*scriptedMember)}, nilCustom
	}
	return typedNilMember{m.(*scriptedMember)}, nil
}

func TestFleetTypedNilCauses(t *testing.T) {
	for _, nilJoin := range []bool{false, true} {
		f := &typedNilFleet{nilJoin: nilJoin}
		rec := &fakeRecorder{}
		var hooked []termination.Cause
		s, err := middleware.New("typed_nil", middleware.WithParticipant(fleet.Membership(f)), middleware.WithParticipant(rec),
			middleware.WithOnWarning(func(_ context.Context, _ *middleware.Run, c termination.Cause) { hooked = append(hooked, c) }))
		if err != nil {
			t.Fatal(err)
		}
		ctx, run := s.Start(context.Background())
		if ctx.Err() != nil {
			t.Fatalf("nilJoin %v: a typed-nil cause from Join ended the run: %v", nilJoin, context.Cause(ctx))
		}
		f.hooks[0].Warn(nilCustom)
		c, stop := run.Observe(termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 5}})
		if stop || c != nil {
			t.Fatalf("nilJoin %v: Observe = %v, %v; a typed-nil stop from Spend is no stop", nilJoin, c, stop)
		}
		if ctx.Err() != nil {
			t.Fatalf("nilJoin %v: run stopped: %v", nilJoin, context.Cause(ctx))
		}
		res := run.Finish(nil)
		if res.Cause != (termination.NaturalCompletion{}) {
			t.Errorf("nilJoin %v: cause %v, want NaturalCompletion", nilJoin, res.Cause)
		}
		if len(res.Warnings) != 0 || len(hooked) != 0 {
			t.Errorf("nilJoin %v: typed-nil warnings recorded: result %v, hook %v", nilJoin, res.Warnings, hooked)
		}
		if _, err := json.Marshal(res); err != nil {
			t.Errorf("nilJoin %v: result does not marshal: %v", nilJoin, err)
		}
		m := f.member
		m.mu.Lock()
		left := len(m.left)
		m.mu.Unlock()
		if left != 1 {
			t.Errorf("nilJoin %v: member left %d times, want 1 (a joined run must leave)", nilJoin, left)
		}
	}
}
