package redisfleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// urlDeployment is a deployment given by its URL (a server reached as
// another ACL user).
type urlDeployment string

func (u urlDeployment) URL() string { return string(u) }

// heldRun starts a run of f held at its tool-call limit of 1 (hold
// timeout 20s), after two tool calls.
func heldRun(t *testing.T, f *Fleet) *middleware.Run {
	t.Helper()
	policy := termination.MustParsePolicy("max_tool_calls: 1\nhold: {timeout: 20s}")
	s, err := middleware.New("raise", middleware.WithPolicy(policy), middleware.WithParticipant(fleet.Membership(f)))
	if err != nil {
		t.Fatal(err)
	}
	_, run := s.Start(t.Context())
	t.Cleanup(func() { run.Finish(nil) })
	for range 2 {
		run.Observe(termination.Event{Kind: termination.KindToolCall, Tool: "search"})
	}
	if _, _, h := run.Held(); !h {
		t.Fatal("the run is not held after two tool calls with max_tool_calls: 1")
	}
	return run
}

// appFleet starts a server and a fleet on it that connects as its own ACL
// user "app" (so that disconnect can cut it off), with a lease of 20s: its
// runs stay listed while the process is away.
func appFleet(t *testing.T) (*redistest.Server, *Fleet) {
	t.Helper()
	srv := redistest.Start(t)
	if r, err := srv.Do(strings.Fields("ACL SETUSER app on >app-pw ~* &* +@all")...); err != nil || r != "+OK" {
		t.Fatalf("ACL SETUSER app: %q, %v", r, err)
	}
	app := urlDeployment(strings.Replace(srv.URL(), "redis://", "redis://app:app-pw@", 1))
	return srv, newTestFleet(t, app, WithLease(20*time.Second))
}

// disconnect cuts f's process off the server: its ACL user off, its
// connections killed (no subscription, no commands), until reconnect.
func disconnect(t *testing.T, srv *redistest.Server, f *Fleet) {
	t.Helper()
	for _, cmd := range [][]string{strings.Fields("ACL SETUSER app off"), strings.Fields("CLIENT KILL USER app")} {
		if _, err := srv.Do(cmd...); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	eventually(t, 5*time.Second, "the process sees the server unreachable", func() bool { return !f.up.Load() })
}

// reconnect lets the process disconnect cut off in again.
func reconnect(t *testing.T, srv *redistest.Server) {
	t.Helper()
	if r, err := srv.Do("ACL", "SETUSER", "app", "on"); err != nil || r != "+OK" {
		t.Fatalf("ACL SETUSER app on: %q, %v", r, err)
	}
}

// raisedOnce checks that run, held at a tool-call limit of 1 after two
// calls and raised by 5, has a limit of 6, not 11: calls 3 to 6 go on,
// the 7th holds it again.
func raisedOnce(t *testing.T, run *middleware.Run) {
	t.Helper()
	call := termination.Event{Kind: termination.KindToolCall, Tool: "search"}
	for i := 3; i <= 6; i++ {
		if c, stop := run.Observe(call); stop {
			t.Fatalf("call %d stopped the run: %v", i, c)
		}
		if _, _, h := run.Held(); h {
			t.Fatalf("held at call %d: the raise was not applied, want a limit of 6", i)
		}
	}
	run.Observe(call)
	if _, _, h := run.Held(); !h {
		t.Error("not held at call 7: the raise was applied more than once, want a limit of 6")
	}
}

// raiseAcks returns the stored raise's id, its record and its
// confirmations.
func raiseAcks(t *testing.T, raw redis.UniversalClient, f *Fleet) (id, rec string, acks []string) {
	t.Helper()
	ctx := context.Background()
	ids, err := raw.ZRange(ctx, f.k.raises(), 0, -1).Result()
	if err != nil || len(ids) != 1 {
		t.Fatalf("stored raises = %q, %v; want one", ids, err)
	}
	rec, err = raw.Get(ctx, f.k.raise(ids[0])).Result()
	if err != nil {
		t.Fatalf("the raise's record: %v", err)
	}
	acks, err = raw.LRange(ctx, f.k.raiseAck(ids[0]), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ids[0], rec, acks
}

// reread makes f re-read the stored control state at its next round, as
// after a reconnect, and waits for that round.
func reread(t *testing.T, f *Fleet) {
	t.Helper()
	f.mu.Lock()
	f.resync = true
	f.mu.Unlock()
	f.poke()
	for range 2 {
		if err := f.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRaiseMissedWhileDisconnected: a raise published while the holding
// process is disconnected (its ACL user off, its connections killed: no
// subscription, no commands) is applied when it reconnects, from the
// stored record; the operator's Raise, still waiting, reports it raised.
// A late copy of the message and further re-reads do not apply it again:
// the run's limit is raised by the amount once.
func TestRaiseMissedWhileDisconnected(t *testing.T) {
	srv, f := appFleet(t)
	ctl := newTestControl(t, srv, f.cfg.prefix)
	raw := rawClient(t, srv)
	run := heldRun(t, f)
	eventually(t, 5*time.Second, "the run is listed as held", func() bool {
		rs, err := ctl.Runs(t.Context(), fleet.Selector{RunID: run.ID()})
		return err == nil && len(rs) == 1 && rs[0].Held != nil
	})

	disconnect(t, srv, f)
	type result struct {
		rep fleet.RaiseReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := ctl.Raise(context.Background(), fleet.RaiseRequest{RunID: run.ID(), By: "ops@test", Wait: 15 * time.Second,
			Limits: termination.Limits{ToolCalls: 5, Has: termination.LimitToolCalls}})
		done <- result{rep, err}
	}()
	eventually(t, 5*time.Second, "the raise is stored", func() bool {
		n, err := raw.ZCard(context.Background(), f.k.raises()).Result()
		return err == nil && n == 1
	})
	time.Sleep(1500 * time.Millisecond) // re-reads fail while the process is away
	if _, _, h := run.Held(); !h {
		t.Fatal("the run was raised while its process was disconnected")
	}
	reconnect(t, srv)
	var res result
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Raise did not return")
	}
	if res.err != nil || res.rep.Outcome != fleet.RaiseRaised {
		t.Fatalf("Raise = %+v, %v; want raised after the process reconnected", res.rep, res.err)
	}
	if _, _, h := run.Held(); h {
		t.Fatal("the run is still held")
	}

	raisedOnce(t, run) // and held again at its raised limit

	// The message arrives late, and the stored raise is read again: neither
	// raises the run (held again) a second time nor confirms it again.
	_, rec, _ := raiseAcks(t, raw, f)
	f.handle(t.Context(), rec)
	reread(t, f)
	if _, _, h := run.Held(); !h {
		t.Error("the late message or the re-read raised the run a second time")
	}
	if _, _, acks := raiseAcks(t, raw, f); len(acks) != 1 || acks[0] != "r "+run.ID() {
		t.Errorf("confirmations = %q, want one %q", acks, "r "+run.ID())
	}
}

// TestRaiseReReadAppliesOnce: a raise applied from its message is not
// applied again — to the run, held again at its raised limit — by the
// re-reads of the stored raises that follow, for as
// long as the record lasts (longer than the process's lease, so that
// remembering the raise for a lease only would not do); on a server and on
// a cluster.
func TestRaiseReReadAppliesOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		f := newTestFleet(t, r) // a 2s lease
		ctl := newTestControl(t, r, f.cfg.prefix)
		raw := rawClient(t, r)
		run := heldRun(t, f)
		eventually(t, 5*time.Second, "the run is listed as held", func() bool {
			rs, err := ctl.Runs(t.Context(), fleet.Selector{RunID: run.ID()})
			return err == nil && len(rs) == 1 && rs[0].Held != nil
		})
		rep, err := ctl.Raise(t.Context(), fleet.RaiseRequest{RunID: run.ID(), By: "ops@test", Wait: 10 * time.Second,
			Limits: termination.Limits{ToolCalls: 5, Has: termination.LimitToolCalls}})
		if err != nil || rep.Outcome != fleet.RaiseRaised {
			t.Fatalf("Raise = %+v, %v", rep, err)
		}
		raisedOnce(t, run)                              // and held again at its raised limit
		time.Sleep(f.cfg.lease + 1500*time.Millisecond) // periodic re-reads, past the process's lease
		reread(t, f)                                    // and one as after a reconnect
		if _, _, h := run.Held(); !h {
			t.Error("a re-read raised the run a second time")
		}
		id, _, acks := raiseAcks(t, raw, f) // the record is still there
		if len(acks) != 1 || acks[0] != "r "+run.ID() {
			t.Errorf("confirmations of raise %s = %q, want one %q", id, acks, "r "+run.ID())
		}
	})
}

// TestRaiseReReadSkipsLaterHold: a raise its process missed while the run
// was not held does not release a hold that began after the raise was
// issued: had the message arrived, it would have found the run not held.
// The re-read answers it as the message would have ("n").
func TestRaiseReReadSkipsLaterHold(t *testing.T) {
	srv, f := appFleet(t)
	ctl := newTestControl(t, srv, f.cfg.prefix)
	raw := rawClient(t, srv)
	policy := termination.MustParsePolicy("max_tool_calls: 1\nhold: {timeout: 20s}")
	s, err := middleware.New("raise_later", middleware.WithPolicy(policy), middleware.WithParticipant(fleet.Membership(f)))
	if err != nil {
		t.Fatal(err)
	}
	_, run := s.Start(t.Context())
	t.Cleanup(func() { run.Finish(nil) })
	call := termination.Event{Kind: termination.KindToolCall, Tool: "search"}
	run.Observe(call) // 1 of 1: not held
	eventually(t, 5*time.Second, "the run is listed", func() bool {
		rs, err := ctl.Runs(t.Context(), fleet.Selector{RunID: run.ID()})
		return err == nil && len(rs) == 1
	})

	disconnect(t, srv, f)
	rep, err := ctl.Raise(t.Context(), fleet.RaiseRequest{RunID: run.ID(), By: "ops@test", Wait: 300 * time.Millisecond,
		Limits: termination.Limits{ToolCalls: 5, Has: termination.LimitToolCalls}})
	if err != nil || rep.Outcome != fleet.RaiseUnconfirmed {
		t.Fatalf("Raise = %+v, %v; want unconfirmed while the process is away", rep, err)
	}
	time.Sleep(20 * time.Millisecond)
	run.Observe(call) // 2 of 1: held, after the raise was issued
	if _, _, h := run.Held(); !h {
		t.Fatal("the run is not held at its second call")
	}
	reconnect(t, srv)
	eventually(t, 10*time.Second, "the process is back", func() bool { return f.up.Load() })
	reread(t, f)
	reread(t, f)
	if _, _, h := run.Held(); !h {
		t.Fatal("the re-read of a raise issued before the hold released the run")
	}
	if _, _, acks := raiseAcks(t, raw, f); len(acks) != 1 || acks[0] != "n "+run.ID() {
		t.Errorf("confirmations = %q, want one %q", acks, "n "+run.ID())
	}
}
