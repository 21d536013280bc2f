package redisfleet

import (
	"testing"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/termination"
)

// parentCancelled checks a Cancelled{reason: parent, detail} cause.
func parentCancelled(t *testing.T, what string, c termination.Cause, detail string) {
	t.Helper()
	x, ok := c.(termination.Cancelled)
	if !ok || x.Reason != termination.CancelParent || x.Detail != detail {
		t.Errorf("%s: cause = %#v, want Cancelled{parent, %q}", what, c, detail)
	}
}

// parentEnded checks a Skipped{reason: parent_ended, detail} cause.
func parentEnded(t *testing.T, what string, c termination.Cause, detail string) {
	t.Helper()
	x, ok := c.(termination.Skipped)
	if !ok || x.Reason != termination.SkipParentEnded || x.Detail != detail {
		t.Errorf("%s: cause = %#v, want Skipped{parent_ended, %q}", what, c, detail)
	}
}

// TestTreeAcrossProcesses (§8 across processes): a planner in one process,
// a researcher under it in a second (started from a request whose headers
// the Propagator read), with a fetcher under the researcher
// in the same process and a reader under it in a third. The registry shows
// every parent; a fleet stop of the planner ends every descendant in every
// process with Cancelled{parent, "planner ended: cancelled"} and reports
// them (the researcher's remote child ends although the researcher's loop
// has not finished it yet); children that start afterwards are refused
// with Skipped{parent_ended} naming their own parent; a run's ordinary
// end ends its remote children too.
func TestTreeAcrossProcesses(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Redis) {
		prefix := testPrefix(t)
		ctl := newTestControl(t, srv, prefix)
		cs := startChildren(t, srv, prefix, 3)
		plan := cs[0].start("plan", "planner", "-", "-")
		res := cs[1].child("res", "researcher", plan, "keep", "prop") // from a request's headers; stopped, not finished
		fetch := cs[1].sub("fetch", "fetcher", "res")
		read := cs[2].child("read", "reader", res)
		other := cs[2].start("other", "planner", "-", "-")

		want := map[string]string{plan: "", res: plan, fetch: res, read: res, other: ""}
		eventually(t, 5*time.Second, "the registry shows every run with its parent", func() bool {
			rs, err := ctl.Runs(t.Context(), fleet.Selector{})
			if err != nil || len(rs) != len(want) {
				return false
			}
			for _, r := range rs {
				if p, ok := want[r.ID]; !ok || r.Parent != p {
					return false
				}
			}
			return true
		})

		rep, err := ctl.Stop(t.Context(), fleet.StopRequest{Selector: fleet.Selector{RunID: plan}, Reason: "runaway", By: "ops@test"})
		if err != nil || rep != (fleet.StopReport{Matched: 1, Stopped: 1, Descendants: 3}) {
			t.Errorf("Stop(-run planner) = %+v, %v; want 1 matched, 1 stopped, 3 descendants", rep, err)
		}
		cancelled(t, cs[0].ended("plan", 2*time.Second), "runaway (by ops@test)")
		parentCancelled(t, "researcher", cs[1].ended("res", 2*time.Second), "planner ended: cancelled")
		parentCancelled(t, "fetcher", cs[1].ended("fetch", 2*time.Second), "planner ended: cancelled")
		parentCancelled(t, "reader", cs[2].ended("read", 2*time.Second), "planner ended: cancelled")
		cs[2].notEnded("other")

		// Late children, in processes other than their parents'.
		cs[2].child("late", "researcher", plan)
		parentEnded(t, "a late child of the planner", cs[2].ended("late", 2*time.Second), "planner ended: cancelled")
		cs[0].child("late2", "reader", res)
		parentEnded(t, "a late child of the researcher", cs[0].ended("late2", 2*time.Second), "researcher ended: cancelled")
		cs[1].send("finish res")
		cs[1].expect("finished res cancelled", 2*time.Second)

		// An ordinary end (not a stop) ends the remote children too; the
		// stop of a run without descendants reports none.
		cs[0].child("sub", "researcher", other)
		eventually(t, 5*time.Second, "the child of other is registered", func() bool {
			rs, err := ctl.Runs(t.Context(), fleet.Selector{Stage: "researcher"})
			return err == nil && len(rs) == 1 && rs[0].Parent == other
		})
		cs[2].send("finish other")
		tag := cs[2].expect("finished other ", 2*time.Second)[len("finished other "):]
		parentCancelled(t, "the child of a run that finished", cs[0].ended("sub", 2*time.Second), "planner ended: "+tag)
		eventually(t, 5*time.Second, "every run leaves the registry", func() bool {
			rs, err := ctl.Runs(t.Context(), fleet.Selector{})
			return err == nil && len(rs) == 0
		})
	})
}

// stopRecorder is a fleet.Run that records the cause it is stopped with;
// it is never held and has no figures.
type stopRecorder struct{ ch chan termination.Cause }

func newStopRecorder() *stopRecorder { return &stopRecorder{ch: make(chan termination.Cause, 1)} }

func (s *stopRecorder) StopWith(c termination.Cause) bool {
	select {
	case s.ch <- c:
		return true
	default:
		return false // stopped already
	}
}
func (s *stopRecorder) Warn(termination.Cause)                     {}
func (s *stopRecorder) Progress() termination.Totals               { return termination.Totals{} }
func (s *stopRecorder) Raise(termination.Limits) error             { return termination.ErrNotHeld }
func (s *stopRecorder) Held() (termination.Cause, time.Time, bool) { return nil, time.Time{}, false }

func (s *stopRecorder) wait(t *testing.T, what string, d time.Duration) termination.Cause {
	t.Helper()
	select {
	case c := <-s.ch:
		return c
	case <-time.After(d):
		t.Fatalf("%s: not stopped within %s", what, d)
		return nil
	}
}

// TestEndedRecords: the fleet's record of ended runs, through the Fleet
// API of two Fleets (two processes to Redis): a run's end stops its
// children in the other Fleet and refuses later ones for WithEndedTTL and
// no longer; a record whose message was lost still ends a child at the
// next re-read (within about a second).
func TestEndedRecords(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Redis) {
		prefix := testPrefix(t)
		a := newTestFleet(t, srv, WithPrefix(prefix), WithEndedTTL(time.Second))
		b := newTestFleet(t, srv, WithPrefix(prefix), WithEndedTTL(time.Second))
		ctx := t.Context()

		parent := runid.New()
		pm, c := a.Join(ctx, fleet.RunInfo{ID: parent, Stage: "planner"}, nil, nil)
		if c != nil {
			t.Fatal(c)
		}
		kid := newStopRecorder()
		km, c := b.Join(ctx, fleet.RunInfo{ID: runid.New(), Stage: "researcher", Parent: parent}, nil, kid)
		if c != nil {
			t.Fatalf("a child of a live remote parent: %v", c)
		}
		defer km.Leave(nil)
		pm.Leave(&termination.Result{Cause: termination.Completed{}})
		ended := time.Now()
		parentCancelled(t, "the child of a run that completed", kid.wait(t, "the child", 2*time.Second), "planner ended: completed")

		m, c := b.Join(ctx, fleet.RunInfo{ID: runid.New(), Stage: "researcher", Parent: parent}, nil, nil)
		parentEnded(t, "a late child", c, "planner ended: completed")
		if m != nil {
			t.Error("a refused child got a membership")
		}
		if rs, _ := b.Runs(ctx, fleet.Selector{Stage: "researcher"}); len(rs) > 1 {
			t.Errorf("the refused child is in the registry: %+v", rs)
		}

		// A record without its message (as if the message were lost).
		lost := runid.New()
		orphan := newStopRecorder()
		om, c := b.Join(ctx, fleet.RunInfo{ID: runid.New(), Stage: "reader", Parent: lost}, nil, orphan)
		if c != nil {
			t.Fatalf("a child of an unknown parent: %v", c)
		}
		defer om.Leave(nil)
		raw := rawClient(t, srv)
		if err := raw.Set(ctx, b.k.ended(lost), `{"cascade":"remote ended: failed","skip":"remote ended: failed"}`, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		parentCancelled(t, "a child whose parent's end was not announced", orphan.wait(t, "the orphan", 3*time.Second), "remote ended: failed")

		// After the TTL the end is forgotten: a child is taken for the
		// child of an unknown run.
		time.Sleep(time.Until(ended.Add(1100 * time.Millisecond)))
		eventually(t, 2*time.Second, "a child is admitted once the record's TTL is over", func() bool {
			m, c := b.Join(ctx, fleet.RunInfo{ID: runid.New(), Stage: "researcher", Parent: parent}, nil, nil)
			if m != nil {
				m.Leave(nil)
			}
			return c == nil
		})
	})
}
