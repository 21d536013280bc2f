package middleware_test

import (
	"context"
	"math"
	"testing"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// An invalid event ends the run with Failed{invalid_input} and adds nothing
// to the run's budgets; it must not be charged to the shared budget either:
// negative usage would give a fleet budget back, a NaN cost would poison it.
func TestFleetInvalidEventNotSpent(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   termination.Event
	}{
		{"negative input tokens", termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: -1000}}},
		{"negative output tokens", termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{OutputTokens: -1000}}},
		{"negative cost", termination.Event{Kind: termination.KindMessage, Cost: -5}},
		{"NaN cost", termination.Event{Kind: termination.KindMessage, Cost: math.NaN()}},
		{"unknown kind", termination.Event{Kind: 99, Usage: termination.Usage{InputTokens: 7}, Cost: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &scriptedFleet{}
			s, err := middleware.New("invalid", middleware.WithParticipant(fleet.Membership(f)))
			if err != nil {
				t.Fatal(err)
			}
			_, run := s.Start(context.Background())
			run.Observe(termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 10}, Cost: 1})
			c, stop := run.Observe(tc.ev)
			if fl, ok := c.(termination.Failed); !stop || !ok || fl.Reason != termination.FailInvalidInput {
				t.Fatalf("Observe = %v, %v; want Failed{invalid_input}", c, stop)
			}
			run.Finish(nil)
			m := f.member
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.spent != (termination.Usage{InputTokens: 10}) || m.cost != 1 {
				t.Errorf("charged to the fleet: %+v, cost %v; want only the valid event's {10 0}, cost 1", m.spent, m.cost)
			}
		})
	}
}
