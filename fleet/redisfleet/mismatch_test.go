package redisfleet

import (
	"strings"
	"testing"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestBudgetMismatchAcrossProcesses: a fleet whose policy disagrees with
// the budget another process stored ends its runs with Failed{invalid_input}
// naming the field, as soon as it hears back from the server, and rejects
// later runs at once.
func TestBudgetMismatchAcrossProcesses(t *testing.T) {
	a, b := twoProcesses(t)
	budget := termination.FleetBudget{Key: "label:tenant", Window: time.Hour, TotalTokens: 1000}
	other := budget
	other.TotalTokens = 2000
	acme := middleware.WithLabels(map[string]string{"tenant": "acme"})

	sa := budgetStage(t, "mismatch", a, budget)
	_, ra := sa.Start(t.Context(), acme)
	defer ra.Finish(nil)
	if err := a.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	sb := budgetStage(t, "mismatch", b, other)
	_, rb := sb.Start(t.Context(), acme)
	eventually(t, 3*time.Second, "the disagreeing run stops", func() bool {
		_, done := rb.Cause()
		return done
	})
	check := func(res termination.Result) {
		t.Helper()
		f, ok := res.Cause.(termination.Failed)
		if !ok || f.Reason != termination.FailInvalidInput || !strings.Contains(f.Err, "total_tokens") || !strings.Contains(f.Err, "acme") {
			t.Errorf("cause = %#v, want Failed{invalid_input} naming total_tokens and the budget", res.Cause)
		}
	}
	check(rb.Finish(nil))
	_, again := sb.Start(t.Context(), acme)
	check(again.Finish(nil))
	if c, done := ra.Cause(); done {
		t.Errorf("the first process's run stopped: %v", c)
	}
}

// twoProcesses returns two fleets on one new Redis server under one key
// prefix: two processes of the same deployment.
func twoProcesses(t testing.TB) (a, b *Fleet) {
	t.Helper()
	srv := redistest.Start(t)
	a = newTestFleet(t, srv)
	return a, newTestFleet(t, srv, WithPrefix(a.cfg.prefix))
}

// budgetStage returns a stage named name on fleet f that shares budget,
// with opts; an error fails t.
func budgetStage(t testing.TB, name string, f *Fleet, budget termination.FleetBudget, opts ...middleware.Option) *middleware.Stage {
	t.Helper()
	s, err := middleware.New(name, append([]middleware.Option{middleware.WithParticipant(fleet.Membership(f)), middleware.WithFleetBudget(budget)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
