package middleware_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// scriptedFleet is a Fleet whose members the test drives through the hooks
// it captured.
type scriptedFleet struct {
	mu     sync.Mutex
	reject termination.Cause
	joins  []fleet.RunInfo
	budget []*termination.FleetBudget
	hooks  []fleet.Run
	member *scriptedMember
}

type scriptedMember struct {
	mu     sync.Mutex
	spent  termination.Usage
	cost   float64
	prog   termination.Totals
	warnAt int64 // Spend returns a warning once spent tokens reach it
	stopAt int64 // Spend returns a stop once spent tokens reach it
	warned bool
	left   []*termination.Result
}

func (f *scriptedFleet) Participant() middleware.Participant { return fleet.Membership(f) }

func (f *scriptedFleet) Join(_ context.Context, run fleet.RunInfo, b *termination.FleetBudget, h fleet.Run) (fleet.Member, termination.Cause) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.joins = append(f.joins, run)
	f.budget = append(f.budget, b)
	if f.reject != nil {
		return nil, f.reject
	}
	f.hooks = append(f.hooks, h)
	if f.member == nil {
		f.member = &scriptedMember{}
	}
	return f.member, nil
}

func (m *scriptedMember) Spend(u termination.Usage, cost float64) (warning, stop termination.Cause) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spent = m.spent.Add(u)
	m.cost += cost
	if m.warnAt > 0 && !m.warned && m.spent.Total() >= m.warnAt {
		m.warned = true
		warning = termination.BudgetPressure{Resource: termination.ResourceTotalTokens, Threshold: 0.5, Used: float64(m.spent.Total()), Limit: float64(2 * m.warnAt), Scope: termination.ScopeFleet}
	}
	if m.stopAt > 0 && m.spent.Total() >= m.stopAt {
		stop = termination.BudgetExhausted{Resource: termination.ResourceTotalTokens, Used: float64(m.spent.Total()), Limit: float64(m.stopAt), Scope: termination.ScopeFleet}
	}
	return warning, stop
}

func (m *scriptedMember) Progress(p termination.Totals) {
	m.mu.Lock()
	m.prog = p
	m.mu.Unlock()
}

func (m *scriptedMember) Leave(res *termination.Result) {
	m.mu.Lock()
	m.left = append(m.left, res)
	m.mu.Unlock()
}

func TestRunLabelsValidated(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"upper case", map[string]string{"Tenant": "acme"}, `label name "Tenant"`},
		{"dash", map[string]string{"tenant-id": "acme"}, `label name "tenant-id"`},
		{"long value", map[string]string{"tenant": strings.Repeat("x", 257)}, "257 bytes, the limit is 256"},
	} {
		for _, withFleet := range []bool{false, true} {
			opts := []middleware.Option{}
			f := &scriptedFleet{}
			if withFleet {
				opts = append(opts, middleware.WithParticipant(fleet.Membership(f)))
			}
			s, err := middleware.New("labels", opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, run := s.Start(context.Background(), middleware.WithLabels(tc.labels))
			res := run.Finish(nil)
			fl, ok := res.Cause.(termination.Failed)
			if !ok || fl.Reason != termination.FailInvalidInput || !strings.Contains(fl.Err, tc.want) {
				t.Errorf("%s (fleet %v): cause = %#v, want Failed{invalid_input} containing %q", tc.name, withFleet, res.Cause, tc.want)
			}
			if ctx.Err() == nil {
				t.Errorf("%s: context not cancelled", tc.name)
			}
			if len(f.joins) != 0 {
				t.Errorf("%s: a run with bad labels joined the fleet", tc.name)
			}
		}
	}
	s, _ := middleware.New("labels")
	_, run := s.Start(context.Background(), middleware.WithLabels(map[string]string{"tenant": strings.Repeat("x", 256), "tier_2": ""}))
	if res := run.Finish(nil); res.Cause != (termination.NaturalCompletion{}) {
		t.Errorf("valid labels: %v", res.Cause)
	}
}

func TestRunIDWithAndWithoutFleet(t *testing.T) {
	s, _ := middleware.New("noid")
	_, run := s.Start(context.Background())
	_, other := s.Start(context.Background())
	if !runid.Valid(run.ID()) || !runid.Valid(other.ID()) || run.ID() == other.ID() {
		t.Errorf("runs without a fleet have ids %q, %q", run.ID(), other.ID())
	}
	if res := run.Finish(nil); res.Run != run.ID() {
		t.Errorf("Result.Run = %q, want %q", res.Run, run.ID())
	}
	other.Finish(nil)

	f := &scriptedFleet{}
	s, _ = middleware.New("ids", middleware.WithParticipant(fleet.Membership(f)))
	_, a := s.Start(context.Background(), middleware.WithLabels(map[string]string{"tenant": "acme"}))
	_, b := s.Start(context.Background())
	a.Finish(nil)
	b.Finish(nil)
	if !runid.Valid(a.ID()) || !runid.Valid(b.ID()) || a.ID() == b.ID() {
		t.Errorf("ids %q, %q", a.ID(), b.ID())
	}
	if len(f.joins) != 2 || f.joins[0].ID != a.ID() || f.joins[0].Stage != "ids" || f.joins[0].Labels["tenant"] != "acme" || f.joins[0].Started.IsZero() {
		t.Errorf("joins = %+v", f.joins)
	}
	if len(f.member.left) != 2 || f.member.left[0] == nil {
		t.Errorf("Leave called %d times", len(f.member.left))
	}
}

func TestFleetRejectsAtStart(t *testing.T) {
	f := &scriptedFleet{reject: termination.Skipped{Reason: termination.SkipBlocked, Detail: "incident (by ops)"}}
	s, _ := middleware.New("rejected", middleware.WithParticipant(fleet.Membership(f)))
	ctx, run := s.Start(context.Background())
	if ctx.Err() == nil {
		t.Fatal("a rejected run's context is live")
	}
	out := middleware.Forward(run, produce(ctx, itemsOf([]termination.Event{{Kind: termination.KindMessage}})), decodeItem)
	for range out {
	}
	res := run.Wait()
	if res.Cause != f.reject || res.Outcome != termination.OutcomeSkipped || res.Events != 0 {
		t.Errorf("result = %+v", res)
	}
	if f.member != nil {
		t.Error("a rejected run got a member")
	}
}

func TestFleetRunStopAndWarn(t *testing.T) {
	f := &scriptedFleet{}
	rec := &fakeRecorder{} // recorder_test.go
	var hooked []termination.Cause
	s, _ := middleware.New("hooks", middleware.WithParticipant(fleet.Membership(f)), middleware.WithParticipant(rec),
		middleware.WithOnWarning(func(_ context.Context, _ *middleware.Run, c termination.Cause) { hooked = append(hooked, c) }))
	ctx, run := s.Start(context.Background())
	h := f.hooks[0]
	w := termination.BudgetPressure{Resource: termination.ResourceCost, Threshold: 0.8, Used: 8, Limit: 10, Scope: termination.ScopeFleet}
	h.Warn(w)
	if len(hooked) != 0 {
		t.Error("the warning hook ran on the fleet's goroutine")
	}
	run.Observe(termination.Event{Kind: termination.KindMessage})
	if len(hooked) != 1 || hooked[0] != w || len(rec.only(t).warnings) != 1 {
		t.Fatalf("after the next event: hook %v, recorder %v", hooked, rec.only(t).warnings)
	}
	cause := fleet.StopRequest{Reason: "runaway", By: "ops@host"}.Cause()
	if !h.StopWith(cause) {
		t.Error("Stop on a live run reported false")
	}
	if h.StopWith(cause) {
		t.Error("a second Stop reported true")
	}
	var c termination.Cancelled
	if !errors.As(context.Cause(ctx), &c) || c.Detail != "runaway (by ops@host)" || c.Reason != termination.CancelExternal {
		t.Errorf("cause = %v", context.Cause(ctx))
	}
	res := run.Finish(nil)
	if len(res.Warnings) != 1 || res.Cause != cause {
		t.Errorf("result: cause %v, warnings %v", res.Cause, res.Warnings)
	}
	h.Warn(w) // after the end: nothing
	if fr := rec.only(t); len(fr.warnings) != 1 || len(fr.misuse) > 0 {
		t.Errorf("recorder: warnings %v, misuse %v", fr.warnings, fr.misuse)
	}
}

func TestFleetWarningWithoutLaterEvent(t *testing.T) {
	f := &scriptedFleet{}
	rec := &fakeRecorder{}
	s, _ := middleware.New("late_warning", middleware.WithParticipant(fleet.Membership(f)), middleware.WithParticipant(rec))
	_, run := s.Start(context.Background())
	w := termination.BudgetPressure{Resource: termination.ResourceCost, Threshold: 0.8, Used: 8, Limit: 10, Scope: termination.ScopeFleet}
	f.hooks[0].Warn(w)
	res := run.Finish(nil)
	if len(res.Warnings) != 1 {
		t.Errorf("result warnings = %v", res.Warnings)
	}
	if fr := rec.only(t); strings.Join(fr.calls, ",") != "warning,end" || len(fr.misuse) > 0 {
		t.Errorf("recorder calls = %v (misuse %v), want the warning before the end", fr.calls, fr.misuse)
	}
}

func TestFleetSpendStopsOnEvent(t *testing.T) {
	f := &scriptedFleet{member: &scriptedMember{warnAt: 50, stopAt: 100}}
	var hooked []termination.Cause
	s, _ := middleware.New("spend", middleware.WithParticipant(fleet.Membership(f)),
		middleware.WithOnWarning(func(_ context.Context, _ *middleware.Run, c termination.Cause) { hooked = append(hooked, c) }))
	ctx, run := s.Start(context.Background())
	evs := []termination.Event{
		{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 30}},
		{Kind: termination.KindToolCall, Tool: "search"},
		{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 30}, Cost: 0.5},
		{Kind: termination.KindMessage, Usage: termination.Usage{OutputTokens: 40}},
		{Kind: termination.KindMessage, Usage: termination.Usage{OutputTokens: 40}},
	}
	var got []int
	out := middleware.Forward(run, produce(ctx, itemsOf(evs)), decodeItem)
	for it := range out {
		got = append(got, it.i)
	}
	res := run.Wait()
	x, ok := res.Cause.(termination.BudgetExhausted)
	if !ok || x.Scope != termination.ScopeFleet || res.StoppedAt != 4 || len(res.Fired) != 1 {
		t.Fatalf("result: cause %#v, stopped at %d, fired %v", res.Cause, res.StoppedAt, res.Fired)
	}
	if len(got) != 4 || got[3] != 3 {
		t.Errorf("forwarded %v, want items 0-3 (the firing one included)", got)
	}
	if len(hooked) != 1 || len(res.Warnings) != 1 {
		t.Errorf("warnings: hook %v, result %v", hooked, res.Warnings)
	}
	m := f.member
	// The fleet reads the run's figures through the Progress hook (no
	// event hands them over: Member.Progress is not called).
	prog := f.hooks[0].Progress()
	if m.spent.Total() != 100 || m.cost != 0.5 || prog.Iterations != 3 || prog.ToolCalls != 1 || prog.Events != 4 || m.prog != (termination.Totals{}) {
		t.Errorf("member saw spent %v, cost %g, progress %+v (hook) %+v (Progress)", m.spent, m.cost, prog, m.prog)
	}
}

func TestFleetBudgetOptions(t *testing.T) {
	p := termination.MustParsePolicy("max_iterations: 5\nfleet_budget: {key: stage, window: 1h, total_tokens: 10}")
	// Without a fleet the budget is validated, kept, and ignored.
	s, err := middleware.New("nofleet", middleware.WithPolicy(p))
	if err != nil {
		t.Fatal(err)
	}
	if b := s.FleetBudget(); b == nil || b.TotalTokens != 10 {
		t.Errorf("FleetBudget() = %v", b)
	}
	_, run := s.Start(context.Background())
	run.Observe(termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 100}})
	if res := run.Finish(nil); res.Cause != (termination.NaturalCompletion{}) {
		t.Errorf("a stage without a fleet enforced fleet_budget: %v", res.Cause)
	}

	f := &scriptedFleet{}
	s, _ = middleware.New("withfleet", middleware.WithPolicy(p), middleware.WithParticipant(fleet.Membership(f)))
	_, run = s.Start(context.Background())
	run.Finish(nil)
	if len(f.budget) != 1 || f.budget[0] == nil || *f.budget[0] != *p.FleetBudget() {
		t.Errorf("Join got budget %v", f.budget)
	}

	if _, err := middleware.New("two", middleware.WithPolicy(p), middleware.WithFleetBudget(*p.FleetBudget())); err == nil || !strings.Contains(err.Error(), "already has a fleet_budget") {
		t.Errorf("two fleet budgets: %v", err)
	}
	if _, err := middleware.New("bad", middleware.WithFleetBudget(termination.FleetBudget{Key: "stage", Window: time.Hour})); err == nil || !strings.Contains(err.Error(), "needs at least one") {
		t.Errorf("invalid fleet budget: %v", err)
	}
}

func TestFleetStopsForward(t *testing.T) {
	l := fleet.NewLocal()
	s, _ := middleware.New("forward_stop", middleware.WithParticipant(fleet.Membership(l)))
	ctx, run := s.Start(context.Background(), middleware.WithLabels(map[string]string{"tenant": "acme"}))
	in := endless(ctx, termination.Event{Kind: termination.KindMessage})
	out := middleware.Forward(run, in, decodeItem)
	for range 3 {
		<-out
	}
	rep, err := l.Stop(context.Background(), fleet.StopRequest{Selector: fleet.Selector{Labels: map[string]string{"tenant": "acme"}}, Reason: "incident", By: "ops"})
	if err != nil || rep != (fleet.StopReport{Matched: 1, Stopped: 1}) {
		t.Fatalf("Stop = %+v, %v", rep, err)
	}
	for range out {
	}
	res := waitResult(t, run, 5*time.Second)
	if res.Cause != (fleet.StopRequest{Reason: "incident", By: "ops"}).Cause() || res.Events < 3 {
		t.Errorf("result: %v after %d events", res.Cause, res.Events)
	}
	if rs, _ := l.Runs(context.Background(), fleet.Selector{}); len(rs) != 0 {
		t.Errorf("registry after the end: %+v", rs)
	}
}

// TestFleetEventAllocs: the per-event path with a fleet and a shared budget
// allocates nothing.
func TestFleetEventAllocs(t *testing.T) {
	l := fleet.NewLocal()
	s, _ := middleware.New("allocs", middleware.WithParticipant(fleet.Membership(l)),
		middleware.WithFleetBudget(termination.FleetBudget{Key: "label:tenant", Window: time.Hour, TotalTokens: 1 << 60, Cost: 1e12, Pressure: 0.9}))
	_, run := s.Start(context.Background(), middleware.WithLabels(map[string]string{"tenant": "acme"}))
	defer run.Finish(nil)
	ev := termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: 10, OutputTokens: 3}, Cost: 0.01}
	if n := testing.AllocsPerRun(1000, func() { run.Observe(ev) }); n != 0 {
		t.Errorf("Observe with a fleet budget: %v allocs per event, want 0", n)
	}
}

// TestWithFleet: WithFleet(f) makes the stage's runs members of f, as the
// participant f gives (§7: "A stage uses a fleet with middleware.WithFleet");
// a nil fleet, typed or not, is an error naming the option.
func TestWithFleet(t *testing.T) {
	f := &scriptedFleet{reject: termination.Skipped{Reason: termination.SkipBlocked, Detail: "incident (by ops)"}}
	s, err := middleware.New("with_fleet", middleware.WithFleet(f))
	if err != nil {
		t.Fatal(err)
	}
	_, run := s.Start(context.Background())
	if res := run.Finish(nil); res.Cause != f.reject {
		t.Errorf("cause = %v, want the fleet's refusal %v", res.Cause, f.reject)
	}
	var typed *scriptedFleet
	for _, nilFleet := range []middleware.Fleet{nil, typed} {
		if _, err := middleware.New("nil_fleet", middleware.WithFleet(nilFleet)); err == nil || !strings.Contains(err.Error(), "WithFleet: nil fleet") {
			t.Errorf("WithFleet(%#v): err = %v, want one naming WithFleet", nilFleet, err)
		}
	}
}
