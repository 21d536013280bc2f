package redisfleet

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testPrefix(t *testing.T) string {
	return "p" + itoa(prefixes.Add(1)) + "x" + itoa(time.Now().UnixNano()%1e6) + ":"
}

func newTestControl(t *testing.T, srv deployment, prefix string) *Control {
	t.Helper()
	c, err := NewControl(srv.URL(), WithPrefix(prefix), withKeyGuard(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func cancelled(t *testing.T, c termination.Cause, detail string) {
	t.Helper()
	x, ok := c.(termination.Cancelled)
	if !ok || x.Reason != termination.CancelExternal || x.Detail != detail {
		t.Errorf("cause = %#v, want Cancelled{external, %q}", c, detail)
	}
}

// TestProcesses: three OS processes share one Redis: the registry shows
// every run with its process, stops by run, label and stage end exactly
// the matching runs in whichever process owns them, and a block skips new
// runs in every process until unblocked.
func TestProcesses(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Redis) {
		prefix := testPrefix(t)
		ctl := newTestControl(t, srv, prefix)
		cs := startChildren(t, srv, prefix, 3)
		a := cs[0].start("a", "research", "tenant=acme", "-")
		cs[1].start("b", "research", "tenant=globex", "-")
		cs[2].start("c", "writer", "tenant=acme,tier=gold", "-")
		cs[0].spend("a", 100, 10)

		// Registry: within 1 s of the start, with each run's process.
		begin := time.Now()
		eventually(t, 5*time.Second, "three runs in three processes are listed", func() bool {
			rs, err := ctl.Runs(t.Context(), fleet.Selector{})
			if err != nil || len(rs) != 3 {
				return false
			}
			pids := map[int]bool{}
			for _, r := range rs {
				pids[r.PID] = true
				if r.ID == a && r.InputTokens != 100 {
					return false
				}
			}
			return len(pids) == 3 && pids[cs[0].pid] && pids[cs[1].pid] && pids[cs[2].pid]
		})
		if d := time.Since(begin); d > time.Second {
			t.Errorf("runs listed %s after they started, want <= 1s", d)
		}
		if rs, _ := ctl.Runs(t.Context(), fleet.Selector{Labels: map[string]string{"tenant": "acme"}}); len(rs) != 2 {
			t.Errorf("Runs(tenant=acme) = %d runs, want 2", len(rs))
		}

		// Stop by run id: only a.
		rep, err := ctl.Stop(t.Context(), fleet.StopRequest{Selector: fleet.Selector{RunID: a}, Reason: "loop", By: "ops@test"})
		if err != nil || rep != (fleet.StopReport{Matched: 1, Stopped: 1}) {
			t.Errorf("Stop(run a) = %+v, %v", rep, err)
		}
		cancelled(t, cs[0].ended("a", 2*time.Second), "loop (by ops@test)")

		// Stop by label: c (a has ended).
		rep, err = ctl.Stop(t.Context(), fleet.StopRequest{Selector: fleet.Selector{Labels: map[string]string{"tenant": "acme"}}, Reason: "acme", By: "ops@test"})
		if err != nil || rep.Stopped != 1 || rep.Unconfirmed != 0 {
			t.Errorf("Stop(tenant=acme) = %+v, %v", rep, err)
		}
		cancelled(t, cs[2].ended("c", 2*time.Second), "acme (by ops@test)")
		cs[1].notEnded("b")

		// Block the stage: new runs in every process are skipped; b goes on.
		if _, err := ctl.Block(t.Context(), fleet.BlockRequest{Selector: fleet.Selector{Stage: "research"}, Reason: "incident", By: "ops@test"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the contract: from 1 s after block returns
		for i, ch := range cs {
			name := "blocked" + itoa(int64(i))
			ch.start(name, "research", "-", "-")
			sk, ok := ch.ended(name, 2*time.Second).(termination.Skipped)
			if !ok || sk.Reason != termination.SkipBlocked || sk.Detail != "incident (by ops@test)" {
				t.Errorf("child %d: new run's cause = %#v, want Skipped{blocked, incident (by ops@test)}", i, sk)
			}
		}
		cs[1].notEnded("b")
		if n, err := ctl.Unblock(t.Context(), fleet.Selector{Stage: "research"}); n != 1 || err != nil {
			t.Fatalf("Unblock = %d, %v", n, err)
		}
		time.Sleep(time.Second)
		cs[2].start("d", "research", "-", "-")

		// Stop by stage: b and d, in two processes.
		rep, err = ctl.Stop(t.Context(), fleet.StopRequest{Selector: fleet.Selector{Stage: "research"}, Reason: "stage", By: "ops@test"})
		if err != nil || rep.Stopped != 2 {
			t.Errorf("Stop(stage research) = %+v, %v", rep, err)
		}
		cancelled(t, cs[1].ended("b", 2*time.Second), "stage (by ops@test)")
		cancelled(t, cs[2].ended("d", 2*time.Second), "stage (by ops@test)")
		eventually(t, 2*time.Second, "stopped runs leave the registry", func() bool {
			rs, err := ctl.Runs(t.Context(), fleet.Selector{})
			return err == nil && len(rs) == 0
		})
	})
}

// TestSharedBudgetAcrossProcesses: runs in two processes share one budget;
// reaching it stops both, and a third process skips new runs.
func TestSharedBudgetAcrossProcesses(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Redis) {
		prefix := testPrefix(t)
		ctl := newTestControl(t, srv, prefix)
		cs := startChildren(t, srv, prefix, 3)
		cs[0].start("a", "research", "tenant=acme", "1000")
		cs[1].start("b", "research", "tenant=acme", "1000")
		cs[2].start("g", "research", "tenant=globex", "1000")
		cs[0].spend("a", 300, 100)
		cs[1].spend("b", 300, 100)
		time.Sleep(300 * time.Millisecond) // settled in the background
		cs[0].spend("a", 200, 50)          // 1050 of 1000
		for i, name := range []string{"a", "b"} {
			x, ok := cs[i].ended(name, 3*time.Second).(termination.BudgetExhausted)
			if !ok || x.Scope != termination.ScopeFleet || x.Resource != termination.ResourceTotalTokens || x.Limit != 1000 || x.Used < 1000 {
				t.Errorf("run %s: cause = %#v, want BudgetExhausted{total_tokens, 1000, fleet}", name, x)
			}
		}
		cs[2].notEnded("g")
		eventually(t, 3*time.Second, "a new acme run in a third process is skipped", func() bool {
			name := "n" + itoa(time.Now().UnixNano())
			cs[2].start(name, "research", "tenant=acme", "1000")
			l := cs[2].expect("ended "+name+" ", 2*time.Second)
			return strings.Contains(l, string(termination.SkipFleetBudgetExhausted))
		})
		bs, err := ctl.Budgets(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, b := range bs {
			if b.Value == "acme" {
				found = true
				if b.Exhausted != termination.ResourceTotalTokens || b.Used.Total() < 1000 || b.Used.Total() > 1050+30 {
					t.Errorf("acme budget = %+v", b)
				}
			}
		}
		if !found {
			t.Errorf("Budgets() = %+v, no acme", bs)
		}
	})
}

// TestKilledProcessLeavesRegistry: a process killed with SIGKILL cannot
// deregister its runs; they leave when their lease lapses.
func TestKilledProcessLeavesRegistry(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Redis) {
		prefix := testPrefix(t)
		ctl := newTestControl(t, srv, prefix)
		ch := startChild(t, srv.URL(), prefix, time.Second)
		id := ch.start("a", "research", "-", "-")
		eventually(t, 2*time.Second, "the run is listed", func() bool {
			rs, err := ctl.Runs(t.Context(), fleet.Selector{RunID: id})
			return err == nil && len(rs) == 1
		})
		if err := ch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-ch.done
		killed := time.Now()
		eventually(t, 3*time.Second, "the killed process's run leaves the registry", func() bool {
			rs, err := ctl.Runs(t.Context(), fleet.Selector{RunID: id})
			return err == nil && len(rs) == 0
		})
		if d := time.Since(killed); d > 2*time.Second {
			t.Errorf("left %s after the kill, want within the 1s lease (+1s)", d)
		}
	})
}

// TestServerRestart: the server dies mid-run and comes back empty.
// Fail-open runs go on (and new ones start); on reconnect the process
// registers its live runs again and sees blocks issued meanwhile.
// Fail-closed skips new runs while the server is away.
func TestServerRestart(t *testing.T) {
	srv := redistest.Start(t)
	reader := sdkmetric.NewManualReader()
	open := newTestFleet(t, srv, WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	closed := newTestFleet(t, srv, WithFailClosed(), WithPrefix(open.cfg.prefix))
	ctl := newTestControl(t, srv, open.cfg.prefix)
	so, err := middleware.New("restart", middleware.WithParticipant(fleet.Membership(open)))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := middleware.New("restart", middleware.WithParticipant(fleet.Membership(closed)))
	if err != nil {
		t.Fatal(err)
	}
	_, live := so.Start(t.Context())
	defer live.Finish(nil)
	_, liveClosed := sc.Start(t.Context())
	defer liveClosed.Finish(nil)
	eventually(t, 2*time.Second, "the run is listed", func() bool {
		rs, err := ctl.Runs(t.Context(), fleet.Selector{RunID: live.ID()})
		return err == nil && len(rs) == 1
	})

	srv.Kill()
	eventually(t, 3*time.Second, "fail-closed skips new runs", func() bool {
		_, r := sc.Start(t.Context())
		res := r.Finish(nil)
		sk, ok := res.Cause.(termination.Skipped)
		return ok && sk.Reason == termination.SkipFleetUnavailable
	})
	for range 5 {
		if _, stop := live.Observe(termination.Event{Kind: termination.KindMessage, Text: "on"}); stop {
			t.Fatalf("fail-open run stopped: %v", context.Cause(live.Context()))
		}
	}
	if _, stop := liveClosed.Observe(termination.Event{Kind: termination.KindMessage, Text: "on"}); stop {
		t.Fatalf("fail-closed live run stopped: %v", context.Cause(liveClosed.Context()))
	}
	eventually(t, 3*time.Second, "agent.fleet.errors counts the failures by operation", func() bool {
		return fleetErrors(t, reader) > 0
	})
	_, fresh := so.Start(t.Context())
	if c, ok := fresh.Cause(); ok {
		t.Fatalf("fail-open new run ended at once: %v", c)
	}
	defer fresh.Finish(nil)

	srv.Restart()
	if _, err := ctl.Block(t.Context(), fleet.BlockRequest{Selector: fleet.Selector{Stage: "restart"}, Reason: "after restart", By: "ops"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 8*time.Second, "live runs are registered again", func() bool {
		rs, err := ctl.Runs(t.Context(), fleet.Selector{})
		got := map[string]bool{}
		for _, r := range rs {
			got[r.ID] = true
		}
		return err == nil && got[live.ID()] && got[fresh.ID()] && got[liveClosed.ID()]
	})
	eventually(t, 8*time.Second, "the block issued after the restart applies", func() bool {
		_, r := so.Start(t.Context())
		res := r.Finish(nil)
		sk, ok := res.Cause.(termination.Skipped)
		return ok && sk.Reason == termination.SkipBlocked
	})
	if c, ok := live.Cause(); ok {
		t.Errorf("the live run ended: %v", c)
	}
	// A stop after the restart reaches the re-registered run.
	rep, err := ctl.Stop(t.Context(), fleet.StopRequest{Selector: fleet.Selector{RunID: live.ID()}, Reason: "bye", By: "ops"})
	if err != nil || rep.Stopped != 1 {
		t.Errorf("Stop after restart = %+v, %v", rep, err)
	}
	var x termination.Cancelled
	if !errors.As(context.Cause(live.Context()), &x) || x.Detail != "bye (by ops)" {
		t.Errorf("cause = %v", context.Cause(live.Context()))
	}
}

// TestDeadProcessLeaseReturns: the budget lease of a process killed with
// SIGKILL goes back to the budget one lease period later.
func TestDeadProcessLeaseReturns(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Redis) {
		prefix := testPrefix(t)
		ch := startChild(t, srv.URL(), prefix, time.Second)
		ch.start("a", "research", "tenant=acme", "100000") // lease: 1% = 1000
		ch.spend("a", 10, 0)
		raw := rawClient(t, srv)
		// window reads the budget's window: committed (c1), settled (s1)
		// and the leases held (their count and total).
		window := func() (c1, s1, held float64, leases int) {
			keys, err := keysMatching(context.Background(), raw, prefix+"{budget:*")
			if err != nil || len(keys) != 1 {
				return -1, -1, -1, -1
			}
			h, _ := raw.HGetAll(context.Background(), keys[0]).Result()
			for f, v := range h {
				if strings.HasPrefix(f, "L:") {
					leases++
					a, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
					held += a
				}
			}
			c1, _ = strconv.ParseFloat(h["c1"], 64)
			s1, _ = strconv.ParseFloat(h["s1"], 64)
			return c1, s1, held, leases
		}
		// The child settles its 10 and holds the rest of a lease: committed =
		// settled + held. (Whether the 10 came before its first lease, c1 =
		// 1010 and it holds 1000, or after, c1 = 1000 and it holds 990,
		// depends on the scheduler; both are right.)
		eventually(t, 5*time.Second, "the child holds a lease and has settled its usage", func() bool {
			c1, s1, held, n := window()
			return n == 1 && s1 == 10 && c1-held == 10
		})
		if err := ch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-ch.done
		time.Sleep(1100 * time.Millisecond)

		f := newTestFleet(t, srv, WithPrefix(prefix), WithLease(time.Second))
		s, err := middleware.New("research", middleware.WithParticipant(fleet.Membership(f)),
			middleware.WithFleetBudget(termination.FleetBudget{Key: "label:tenant", Window: time.Hour, TotalTokens: 100000}))
		if err != nil {
			t.Fatal(err)
		}
		_, run := s.Start(t.Context(), middleware.WithLabels(map[string]string{"tenant": "acme"}))
		defer run.Finish(nil)
		eventually(t, 3*time.Second, "the dead child's lease is returned (10 spent + 1000 leased to this process)", func() bool {
			_ = f.Flush(t.Context())
			c1, _, _, n := window()
			return c1 == 1010 && n == 1
		})
	})
}

// fleetErrors sums agent.fleet.errors over its operation attribute values,
// failing the test if a point lacks the attribute.
func fleetErrors(t *testing.T, r *sdkmetric.ManualReader) int64 {
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "agent.fleet.errors" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if op, ok := p.Attributes.Value("operation"); !ok || op.AsString() == "" {
					t.Errorf("agent.fleet.errors point without operation: %v", p.Attributes)
				}
				n += p.Value
			}
		}
	}
	return n
}
