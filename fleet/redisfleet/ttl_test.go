package redisfleet

import (
	"context"
	"testing"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// checkTTLs fails t for every key under f's prefix, on every node, that
// has no TTL but for the four indexes (sorted sets whose members carry
// their expiries) and want (keys that may live for ever: a block without
// expiry).
func checkTTLs(t *testing.T, r deployment, f *Fleet, want ...string) {
	t.Helper()
	raw := rawClient(t, r)
	keys, err := keysMatching(t.Context(), raw, f.cfg.prefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	forever := map[string]bool{f.k.runs(): true, f.k.stops(): true, f.k.blocks(): true, f.k.budgets(): true}
	for _, k := range want {
		forever[k] = true
	}
	for _, k := range keys {
		ttl, err := raw.PTTL(t.Context(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl < 0 && !forever[k] {
			t.Errorf("key %s has no TTL", k)
		}
	}
}

// TestEveryValueHasATTL: registry entries, stops, their confirmations,
// blocks with an expiry and budget windows are all written with their TTL,
// on one server and on a cluster.
func TestEveryValueHasATTL(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		f := newTestFleet(t, r)
		budget := termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 1_000_000}
		s, err := middleware.New("ttl", middleware.WithParticipant(fleet.Membership(f)), middleware.WithFleetBudget(budget))
		if err != nil {
			t.Fatal(err)
		}
		_, run := s.Start(t.Context())
		defer run.Finish(nil)
		run.Observe(termination.Event{Kind: termination.KindMessage, Text: "x", Usage: termination.Usage{InputTokens: 10}})
		if err := f.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Block(t.Context(), fleet.BlockRequest{Selector: fleet.Selector{Stage: "other"}, Reason: "x", Expire: time.Hour}); err != nil {
			t.Fatal(err)
		}
		forever, err := f.Block(t.Context(), fleet.BlockRequest{Selector: fleet.Selector{Stage: "another"}, Reason: "x"})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := f.Stop(t.Context(), fleet.StopRequest{Selector: fleet.Selector{RunID: run.ID()}, Reason: "x"})
		if err != nil || rep.Stopped != 1 {
			t.Fatalf("Stop = %+v, %v", rep, err)
		}
		checkTTLs(t, r, f, f.k.block(blockID(forever.Selector)))
	})
}

// TestLateSettleLeavesNoCounterWithoutTTL: usage spent in a window that
// ended (past its key's grace) while the server was away is dropped when
// the process reconnects, not written into a recreated window key that
// would then never expire.
func TestLateSettleLeavesNoCounterWithoutTTL(t *testing.T) {
	srv := redistest.Start(t)
	f := newTestFleet(t, srv, WithLease(300*time.Millisecond), WithSyncInterval(50*time.Millisecond), WithTimeout(300*time.Millisecond))
	budget := termination.FleetBudget{Key: "stage", Window: time.Second, TotalTokens: 1_000_000}
	s, err := middleware.New("late", middleware.WithParticipant(fleet.Membership(f)), middleware.WithFleetBudget(budget))
	if err != nil {
		t.Fatal(err)
	}
	_, run := s.Start(t.Context())
	defer run.Finish(nil)
	event := termination.Event{Kind: termination.KindMessage, Text: "x", Usage: termination.Usage{InputTokens: 10}}
	run.Observe(event)
	if err := f.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	run.Observe(event) // unsettled, in a window that ends while the server is away
	// The window (1 s) and its key's grace (two leases) pass.
	time.Sleep(time.Second + 2*300*time.Millisecond + 300*time.Millisecond)
	srv.Restart()
	eventually(t, 5*time.Second, "the process reconnects and settles", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		return f.Flush(ctx) == nil && f.up.Load()
	})
	_ = f.Flush(t.Context())
	checkTTLs(t, srv, f)
}
