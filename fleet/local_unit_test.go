package fleet_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/internal/account"
	"github.com/agentstop/agentstop/fleet/internal/fleetmetrics"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// testClock is a settable clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func msg(tokens int64) termination.Event {
	return termination.Event{Kind: termination.KindMessage, Usage: termination.Usage{InputTokens: tokens}}
}

func skipReason(res termination.Result) termination.Reason {
	if s, ok := res.Cause.(termination.Skipped); ok {
		return s.Reason
	}
	return ""
}

func TestLocalBudgetWindows(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 11, 23, 10, 0, 30, 0, time.UTC)}
	l := fleet.NewLocal(fleet.WithClock(clock.Now))
	s, err := middleware.New("windows", middleware.WithParticipant(fleet.Membership(l)),
		middleware.WithFleetBudget(termination.FleetBudget{Key: "stage", Window: time.Minute, TotalTokens: 100}))
	if err != nil {
		t.Fatal(err)
	}
	_, a := s.Start(t.Context())
	_, b := s.Start(t.Context())
	a.Observe(msg(60))
	resA := a.Finish(nil)
	b.Observe(msg(40))
	resB := b.Finish(nil)
	if resA.Cause.TagValue() != termination.TagNaturalCompletion || resB.StoppedAt != 1 {
		t.Fatalf("a: %v; b: %v at %d", resA.Cause, resB.Cause, resB.StoppedAt)
	}
	_, c := s.Start(t.Context())
	res := c.Finish(nil)
	if skipReason(res) != termination.SkipFleetBudgetExhausted || !strings.Contains(res.Cause.(termination.Skipped).Detail, "2026-11-23T10:01:00Z") {
		t.Fatalf("run in the exhausted window: %#v", res.Cause)
	}

	clock.Add(30 * time.Second) // 10:01:00, the next window
	_, d := s.Start(t.Context())
	_, e := s.Start(t.Context())
	d.Observe(msg(90))
	bs, _ := l.Budgets(t.Context())
	if len(bs) != 1 || bs[0].Used.Total() != 90 || bs[0].Exhausted != "" || !bs[0].WindowStart.Equal(time.Date(2026, 11, 23, 10, 1, 0, 0, time.UTC)) || bs[0].Runs != 2 {
		t.Fatalf("Budgets() = %+v", bs)
	}
	clock.Add(time.Minute) // e lives on into 10:02
	if _, stop := e.Observe(msg(90)); stop {
		t.Errorf("a live run's spend in a new window stopped it: %v", context.Cause(e.Context()))
	}
	if _, stop := d.Observe(msg(10)); !stop {
		t.Errorf("100 of 100 in the new window did not stop")
	}
	d.Finish(nil)
	e.Finish(nil)
	clock.Add(5 * time.Minute)
	if bs, _ := l.Budgets(t.Context()); len(bs) != 0 {
		t.Errorf("a budget with no runs and a past window is still listed: %+v", bs)
	}
	// Accounts of past windows are swept as runs join, Budgets or not.
	for _, tenant := range []string{"a", "b", "c"} {
		s2, _ := middleware.New("sweep_"+tenant, middleware.WithParticipant(fleet.Membership(l)),
			middleware.WithFleetBudget(termination.FleetBudget{Key: "stage", Window: time.Minute, TotalTokens: 100}))
		_, r := s2.Start(t.Context())
		r.Observe(msg(1))
		r.Finish(nil)
	}
	clock.Add(2 * time.Minute)
	_, r := s.Start(t.Context())
	r.Finish(nil)
	if n := fleet.LocalAccounts(l); n != 1 { // the joining run's own
		t.Errorf("%d accounts after a join, want 1: past windows are kept", n)
	}
}

func TestLocalBlockExpiryClock(t *testing.T) {
	clock := &testClock{now: time.Unix(1_800_000_000, 0)}
	l := fleet.NewLocal(fleet.WithClock(clock.Now))
	s, _ := middleware.New("expiry", middleware.WithParticipant(fleet.Membership(l)))
	b, err := l.Block(t.Context(), fleet.BlockRequest{Selector: fleet.Selector{All: true}, Reason: "freeze", By: "ops", Expire: time.Hour})
	if err != nil || !b.Expires.Equal(clock.now.Add(time.Hour)) {
		t.Fatalf("Block = %+v, %v", b, err)
	}
	_, r := s.Start(t.Context())
	if res := r.Finish(nil); skipReason(res) != termination.SkipBlocked || res.Cause.(termination.Skipped).Detail != "freeze (by ops)" {
		t.Errorf("blocked run: %#v", res.Cause)
	}
	clock.Add(time.Hour - time.Nanosecond)
	if bs, _ := l.Blocks(t.Context()); len(bs) != 1 {
		t.Errorf("block gone before its expiry")
	}
	clock.Add(time.Nanosecond)
	_, r = s.Start(t.Context())
	if res := r.Finish(nil); res.Cause.TagValue() != termination.TagNaturalCompletion {
		t.Errorf("run after the expiry: %v", res.Cause)
	}
	if bs, _ := l.Blocks(t.Context()); len(bs) != 0 {
		t.Errorf("expired block listed: %+v", bs)
	}
	// A block on the same selector replaces the earlier one.
	l.Block(t.Context(), fleet.BlockRequest{Selector: fleet.Selector{Stage: "expiry"}, Reason: "one", By: "a"})
	l.Block(t.Context(), fleet.BlockRequest{Selector: fleet.Selector{Stage: "expiry"}, Reason: "two", By: "b"})
	if bs, _ := l.Blocks(t.Context()); len(bs) != 1 || bs[0].Reason != "two" {
		t.Errorf("Blocks() = %+v, want the second block only", bs)
	}
}

func counterValues(t *testing.T, reader *sdkmetric.ManualReader, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != fleet.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				key := ""
				for _, kv := range dp.Attributes.ToSlice() {
					key += string(kv.Key) + "=" + kv.Value.AsString()
				}
				out[key] += dp.Value
			}
		}
	}
	return out
}

func TestLocalMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	l := fleet.NewLocal(fleet.WithMeterProvider(mp))
	s, _ := middleware.New("metrics", middleware.WithParticipant(fleet.Membership(l)),
		middleware.WithFleetBudget(termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 100, Cost: 10, Pressure: 0.5}))
	var runs []*middleware.Run
	for range 3 {
		_, r := s.Start(t.Context())
		runs = append(runs, r)
	}
	runs[0].Observe(msg(30))
	runs[1].Observe(msg(30)) // pressure: once, though three runs are warned
	runs[2].Observe(msg(50)) // exhausted: once, though three runs stop
	for _, r := range runs {
		if res := r.Finish(nil); res.Cause.TagValue() != termination.TagBudgetExhausted {
			t.Errorf("run ended with %v", res.Cause)
		}
		if res := r.Wait(); len(res.Warnings) != 1 {
			t.Errorf("run warnings %v, want one fleet pressure warning", res.Warnings)
		}
	}
	_, r := s.Start(t.Context()) // rejected: exhausted
	r.Finish(nil)
	other, _ := middleware.New("metrics_other", middleware.WithParticipant(fleet.Membership(l)))
	_, live := other.Start(t.Context())
	_, live2 := other.Start(t.Context())
	rep, _ := l.Stop(t.Context(), fleet.StopRequest{Selector: fleet.Selector{Stage: "metrics_other"}, Reason: "x", By: "y"})
	if rep.Stopped != 2 {
		t.Errorf("stopped %d", rep.Stopped)
	}
	live.Finish(nil)
	live2.Finish(nil)
	l.Block(t.Context(), fleet.BlockRequest{Selector: fleet.Selector{Stage: "metrics_other"}, Reason: "x", By: "y"})
	_, r = other.Start(t.Context())
	r.Finish(nil)

	for name, want := range map[string]map[string]int64{
		"agent.fleet.budget.pressure":  {"resource=total_tokens": 1},
		"agent.fleet.budget.exhausted": {"resource=total_tokens": 1},
		"agent.fleet.runs.stopped":     {"": 2},
		"agent.fleet.runs.rejected":    {"reason=fleet_budget_exhausted": 1, "reason=blocked": 1},
	} {
		got := counterValues(t, reader, name)
		for k, v := range got {
			if v == 0 {
				delete(got, k) // exported at 0 from the start (TestMetricsExportedAtZero)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s = %v, want %v", name, got, want)
			continue
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
	}
}

// TestLocalOvershoot: runs spending concurrently from one shared budget
// stop at its limit, passing it by no more than one event per run (the
// events in flight when the limit is reached).
func TestLocalOvershoot(t *testing.T) {
	const runs, limit, perEvent = 8, 10_000, 7
	l := fleet.NewLocal()
	s, _ := middleware.New("overshoot", middleware.WithParticipant(fleet.Membership(l)),
		middleware.WithFleetBudget(termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: limit}))
	// Every run starts before any spends: a run that started after the
	// budget ran out would be skipped.
	type started struct {
		ctx context.Context
		run *middleware.Run
	}
	var all []started
	for range runs {
		ctx, run := s.Start(context.Background())
		all = append(all, started{ctx, run})
	}
	var wg sync.WaitGroup
	results := make([]termination.Result, runs)
	for i, st := range all {
		wg.Go(func() {
			ch, produced := make(chan int), make(chan struct{})
			defer func() { <-produced }() // the producer has exited
			go func() {
				defer close(produced)
				defer close(ch)
				for i := 0; ; i++ {
					select {
					case ch <- i:
					case <-st.ctx.Done():
						return
					}
				}
			}()
			for range middleware.Forward(st.run, ch, func(int) termination.Event { return msg(perEvent) }) {
			}
			results[i] = st.run.Wait()
		})
	}
	wg.Wait()
	var total int64
	for i, res := range results {
		var x termination.BudgetExhausted
		if !errors.As(res.Cause, &x) || x.Scope != termination.ScopeFleet {
			t.Errorf("run %d: %v", i, res.Cause)
		}
		total += res.Tokens.Total()
	}
	if total < limit || total > limit+runs*perEvent {
		t.Errorf("runs spent %d tokens of %d: overshoot beyond one event per run", total, limit)
	}
}

func TestSelector(t *testing.T) {
	id := runid.New()
	for _, tc := range []struct {
		sel  fleet.Selector
		want string
	}{
		{fleet.Selector{}, "no selector"},
		{fleet.Selector{All: true, Stage: "s"}, "all cannot be combined"},
		{fleet.Selector{RunID: "ABC"}, `run id "ABC" is not 32 lowercase hex digits`},
		{fleet.Selector{Stage: "  "}, "stage name is blank"},
		{fleet.Selector{Stage: "bad name!"}, `stage name "bad name!" has ' ' at byte 3`},
		{fleet.Selector{Stage: "*"}, `stage name "*" starts with '*'`},
		{fleet.Selector{Labels: map[string]string{"Tenant": "x"}}, `label name "Tenant"`},
		{fleet.Selector{Labels: map[string]string{"t": strings.Repeat("v", 300)}}, "300 bytes"},
	} {
		err := tc.sel.Validate()
		if !errors.Is(err, fleet.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.sel, err, tc.want)
		}
	}
	run := fleet.RunInfo{ID: id, Stage: "s", Labels: map[string]string{"tenant": "acme", "tier": "gold"}}
	for _, tc := range []struct {
		sel  fleet.Selector
		want bool
	}{
		{fleet.Selector{}, true},
		{fleet.Selector{All: true}, true},
		{fleet.Selector{RunID: id}, true},
		{fleet.Selector{RunID: runid.New()}, false},
		{fleet.Selector{Stage: "s", Labels: map[string]string{"tenant": "acme"}}, true},
		{fleet.Selector{Stage: "s", Labels: map[string]string{"tenant": "acme", "tier": "free"}}, false},
		{fleet.Selector{Labels: map[string]string{"region": ""}}, false},
		{fleet.Selector{Stage: "t"}, false},
	} {
		if got := tc.sel.Matches(run); got != tc.want {
			t.Errorf("%+v.Matches = %v", tc.sel, got)
		}
	}
	sel := fleet.Selector{Stage: "my stage", Labels: map[string]string{"tier": "gold", "tenant": "acme"}}
	if got := sel.String(); got != `-stage "my stage" -label tenant=acme -label tier=gold` {
		t.Errorf("String() = %s", got)
	}
	if !sel.Equal(fleet.Selector{Stage: "my stage", Labels: map[string]string{"tenant": "acme", "tier": "gold"}}) || sel.Equal(fleet.Selector{Stage: "my stage"}) {
		t.Error("Equal")
	}
}

func TestWindowStart(t *testing.T) {
	for _, tc := range []struct {
		t    time.Time
		w    time.Duration
		want time.Time
	}{
		{time.Unix(3725, 5), time.Hour, time.Unix(3600, 0)},
		{time.Unix(3600, 0), time.Hour, time.Unix(3600, 0)},
		{time.Unix(-1, 0), time.Hour, time.Unix(-3600, 0)},
		{time.Unix(10, 0), 3 * time.Second, time.Unix(9, 0)},
	} {
		if got := account.WindowStart(tc.t, tc.w); !got.Equal(tc.want) {
			t.Errorf("WindowStart(%v, %s) = %v, want %v", tc.t.Unix(), tc.w, got.Unix(), tc.want.Unix())
		}
	}
}

func TestLocalJoinErrors(t *testing.T) {
	l := fleet.NewLocal()
	id := runid.New()
	m, c := l.Join(t.Context(), fleet.RunInfo{ID: id, Stage: "s"}, nil, nil)
	if c != nil {
		t.Fatal(c)
	}
	defer m.Leave(nil)
	for name, tc := range map[string]struct {
		run    fleet.RunInfo
		budget *termination.FleetBudget
		want   string
	}{
		"no id":          {fleet.RunInfo{Stage: "s"}, nil, "no id"},
		"duplicate id":   {fleet.RunInfo{ID: id, Stage: "s"}, nil, "already joined"},
		"bad label":      {fleet.RunInfo{ID: runid.New(), Labels: map[string]string{"A": "b"}}, nil, "snake_case"},
		"invalid budget": {fleet.RunInfo{ID: runid.New()}, &termination.FleetBudget{Key: "stage"}, "fleet_budget.window"},
	} {
		_, c := l.Join(t.Context(), tc.run, tc.budget, nil)
		f, ok := c.(termination.Failed)
		if !ok || f.Reason != termination.FailInvalidInput || !strings.Contains(f.Err, tc.want) {
			t.Errorf("%s: %#v", name, c)
		}
	}
	rs, _ := l.Runs(t.Context(), fleet.Selector{})
	if len(rs) != 1 || rs[0].PID == 0 || rs[0].Host == "" {
		t.Errorf("Runs() = %+v", rs)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.Runs(ctx, fleet.Selector{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Runs on a cancelled context: %v", err)
	}
}

// TestLocalWindowEndsOnRealClock: without WithClock, each spend is charged
// to the window its own reading of the real clock falls in: the next
// window starts afresh for a run that spans it, however loaded the machine
// (no timer has to notice the end first), and a Progress hook gives the
// figures Runs lists.
func TestLocalWindowEndsOnRealClock(t *testing.T) {
	l := fleet.NewLocal()
	b := termination.FleetBudget{Key: "stage", Window: time.Second, TotalTokens: 100}
	// Start just after a window starts, so that the spends below fall in it.
	time.Sleep(time.Until(account.WindowStart(time.Now(), time.Second).Add(time.Second + 10*time.Millisecond)))
	prog := termination.Totals{Iterations: 3, ToolCalls: 2}
	m, c := l.Join(t.Context(), fleet.RunInfo{ID: runid.New(), Stage: "s"}, &b,
		figuresRun{prog})
	if c != nil {
		t.Fatal(c)
	}
	defer m.Leave(nil)
	if _, stop := m.Spend(termination.Usage{InputTokens: 100}, 0); stop == nil {
		t.Fatal("spending the whole budget did not exhaust it")
	}
	if _, stop := m.Spend(termination.Usage{InputTokens: 1}, 0); stop == nil {
		t.Fatal("an exhausted budget took more")
	}
	rs, err := l.Runs(t.Context(), fleet.Selector{})
	if err != nil || len(rs) != 1 || rs[0].Iterations != 3 || rs[0].ToolCalls != 2 {
		t.Fatalf("Runs = %+v, %v; want the hook's figures", rs, err)
	}
	time.Sleep(time.Until(account.WindowStart(time.Now(), time.Second).Add(time.Second + 50*time.Millisecond)))
	if _, stop := m.Spend(termination.Usage{InputTokens: 10}, 0); stop != nil {
		t.Fatalf("the next window: %v", stop)
	}
}

// TestMetricsExportedAtZero: from the moment a fleet starts, before
// anything happens, every fleet counter is exported at 0 for each of its
// known attribute values (§5.1), so a dashboard shows 0 and not "No data".
func TestMetricsExportedAtZero(t *testing.T) {
	if fleet.ScopeName != fleetmetrics.ScopeName {
		t.Errorf("fleet.ScopeName %q, but the instruments are built on scope %q", fleet.ScopeName, fleetmetrics.ScopeName)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	fleet.NewLocal(fleet.WithMeterProvider(mp))
	resources := map[string]int64{"resource=total_tokens": 0, "resource=input_tokens": 0, "resource=output_tokens": 0, "resource=cost": 0}
	want := map[string]map[string]int64{
		"agent.fleet.errors":           {},
		"agent.fleet.runs.rejected":    {},
		"agent.fleet.budget.pressure":  resources,
		"agent.fleet.budget.exhausted": resources,
		"agent.fleet.runs.stopped":     {"": 0},
	}
	// The operations the package doc lists, as users see them.
	for _, op := range []string{"join", "leave", "renew", "reserve", "settle", "stop", "block", "list", "connect", "internal"} {
		want["agent.fleet.errors"]["operation="+op] = 0
	}
	for _, r := range []string{"blocked", "fleet_budget_exhausted", "fleet_unavailable", "invalid_input"} {
		want["agent.fleet.runs.rejected"]["reason="+r] = 0
	}
	if n := len(want["agent.fleet.errors"]); n != 10 {
		t.Errorf("%d operations, want the 10 Op constants", n)
	}
	if n := len(want["agent.fleet.runs.rejected"]); n != 4 {
		t.Errorf("%d reject reasons, want blocked, fleet_budget_exhausted, fleet_unavailable, invalid_input", n)
	}
	for name, w := range want {
		got := counterValues(t, reader, name)
		if len(got) != len(w) {
			t.Errorf("%s = %v, want %v", name, got, w)
			continue
		}
		for k := range w {
			if v, ok := got[k]; !ok || v != 0 {
				t.Errorf("%s{%s} = %d (exported: %v), want 0", name, k, v, ok)
			}
		}
	}
}

// figuresRun is a fleet.Run with fixed figures that stops at once and is
// never held.
type figuresRun struct{ prog termination.Totals }

func (figuresRun) StopWith(termination.Cause) bool            { return true }
func (figuresRun) Warn(termination.Cause)                     {}
func (r figuresRun) Progress() termination.Totals             { return r.prog }
func (figuresRun) Raise(termination.Limits) error             { return termination.ErrNotHeld }
func (figuresRun) Held() (termination.Cause, time.Time, bool) { return nil, time.Time{}, false }
