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

// TestRaiseAcrossProcesses: a run held in one process is raised by a
// Control of its own (the CLI's), with a second process on the same fleet
// that holds another held run: only the named run is raised, by its own
// process, which confirms it; the other stays held until its hold timeout
// ends it with the limit's cause.
func TestRaiseAcrossProcesses(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		fa := newTestFleet(t, r)
		fb := newTestFleet(t, r, WithPrefix(fa.cfg.prefix))
		ctl := newTestControl(t, r, fa.cfg.prefix)
		policy := termination.MustParsePolicy("max_tool_calls: 1\nhold: {timeout: 3s}")
		held := func(f *Fleet) *middleware.Run {
			s, err := middleware.New("raise", middleware.WithPolicy(policy), middleware.WithParticipant(fleet.Membership(f)))
			if err != nil {
				t.Fatal(err)
			}
			_, run := s.Start(t.Context())
			t.Cleanup(func() { run.Finish(nil) })
			call := termination.Event{Kind: termination.KindToolCall, Tool: "search"}
			run.Observe(call)
			run.Observe(call)
			return run
		}
		a, b := held(fa), held(fb)
		eventually(t, 5*time.Second, "both held runs are listed as held", func() bool {
			rs, err := ctl.Runs(t.Context(), fleet.Selector{})
			n := 0
			for _, r := range rs {
				if r.Held != nil && r.Held.Limit == termination.TagMaxToolCalls {
					n++
				}
			}
			return err == nil && n == 2
		})
		rep, err := ctl.Raise(t.Context(), fleet.RaiseRequest{RunID: a.ID(), By: "ops@test",
			Limits: termination.Limits{ToolCalls: 5, Has: termination.LimitToolCalls}})
		if err != nil || rep.Outcome != fleet.RaiseRaised {
			t.Fatalf("Raise(a) = %+v, %v", rep, err)
		}
		if _, _, h := a.Held(); h {
			t.Error("run a is still held")
		}
		if _, _, h := b.Held(); !h {
			t.Error("run b, in the other process, was released too")
		}
		select {
		case <-b.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("run b's hold timeout did not end it")
		}
		if c, _ := b.Cause(); termination.Tag(c, nil) != termination.TagMaxToolCalls {
			t.Errorf("run b ended with %v, want its limit's cause", c)
		}
		if c, stopped := a.Cause(); stopped {
			t.Errorf("run a ended with %v", c)
		}
	})
}

// TestRaiseAcrossOSProcesses: a run held in another OS process (a child
// process of this test, its own fleet and connections) is listed as held
// and released by a raise from this process, which the child confirms; on
// a server and on a cluster.
func TestRaiseAcrossOSProcesses(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		prefix := "raiseproc:"
		c := startChild(t, r.URL(), prefix, 3*time.Second)
		c.send("held w")
		id := strings.Fields(c.expect("started w ", 5*time.Second))[2]
		c.expect("heldat w", 5*time.Second)
		ctl := newTestControl(t, r, prefix)
		eventually(t, 5*time.Second, "the child's run is listed as held", func() bool {
			rs, err := ctl.Runs(t.Context(), fleet.Selector{RunID: id})
			return err == nil && len(rs) == 1 && rs[0].Held != nil && rs[0].Held.Limit == termination.TagMaxToolCalls
		})
		rep, err := ctl.Raise(t.Context(), fleet.RaiseRequest{RunID: id, By: "ops@test",
			Limits: termination.Limits{ToolCalls: 5, Has: termination.LimitToolCalls}})
		if err != nil || rep.Outcome != fleet.RaiseRaised {
			t.Fatalf("Raise = %+v, %v", rep, err)
		}
		// Raised by 5: the third call is within the raised limit (6).
		if l := c.expect("released w", 5*time.Second); l != "released w going" {
			t.Errorf("child: %q, want the run to go on after the raise", l)
		}
	})
}
