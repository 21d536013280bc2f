package redisfleet

import (
	"errors"
	"testing"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestHostileNamesAreLiteral: a stage selector "*" and label values with
// "*", ":", braces (a hash tag), spaces and newlines are stored, listed,
// stopped and blocked as themselves, never as patterns or slots: a
// selector on them touches no other run, on one server or a cluster. (A
// stage cannot be named "*": stage names are file names,
// label.ValidateStage; a selector that says "*" is refused as invalid,
// fleettest's InvalidRequests.)
func TestHostileNamesAreLiteral(t *testing.T) {
	redistest.Each(t, testHostileNames)
}

func testHostileNames(t *testing.T, r redistest.Redis) {
	f := newTestFleet(t, r)
	star, _ := middleware.New("star", middleware.WithParticipant(fleet.Membership(f)))
	plain, _ := middleware.New("plain", middleware.WithParticipant(fleet.Membership(f)))
	hostile := "a*:b {c}\nd?[x]"
	_, hr := star.Start(t.Context(), middleware.WithLabels(map[string]string{"tenant": hostile}))
	defer hr.Finish(nil)
	_, pr := plain.Start(t.Context(), middleware.WithLabels(map[string]string{"tenant": "a"}))
	defer pr.Finish(nil)
	_, pr2 := plain.Start(t.Context(), middleware.WithLabels(map[string]string{"tenant": "a*:b c"}))
	defer pr2.Finish(nil)
	if err := f.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	count := func(sel fleet.Selector) int {
		rs, err := f.Runs(t.Context(), sel)
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}
	for _, tc := range []struct {
		sel  fleet.Selector
		want int
	}{
		{fleet.Selector{}, 3},
		{fleet.Selector{Stage: "star"}, 1},
		{fleet.Selector{Labels: map[string]string{"tenant": "a*"}}, 0},
		{fleet.Selector{Labels: map[string]string{"tenant": "*"}}, 0},
		{fleet.Selector{Labels: map[string]string{"tenant": hostile}}, 1},
		{fleet.Selector{Labels: map[string]string{"tenant": "a*:b c"}}, 1},
	} {
		if got := count(tc.sel); got != tc.want {
			t.Errorf("Runs(%s) = %d runs, want %d", tc.sel, got, tc.want)
		}
	}
	rs, _ := f.Runs(t.Context(), fleet.Selector{Stage: "star"})
	if len(rs) == 1 && (rs[0].Labels["tenant"] != hostile || rs[0].ID != hr.ID()) {
		t.Errorf("listed %+v, want run %s with tenant %q", rs[0], hr.ID(), hostile)
	}

	// A block on stage "*" is refused (no stage has that name); one on
	// "star" blocks that stage only.
	if _, err := f.Block(t.Context(), fleet.BlockRequest{Selector: fleet.Selector{Stage: "*"}, Reason: "star", By: "ops"}); !errors.Is(err, fleet.ErrInvalid) {
		t.Fatalf("a block on stage *: %v, want fleet.ErrInvalid", err)
	}
	if _, err := f.Block(t.Context(), fleet.BlockRequest{Selector: fleet.Selector{Stage: "star"}, Reason: "star", By: "ops"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	_, blocked := star.Start(t.Context())
	defer blocked.Finish(nil)
	_, free := plain.Start(t.Context())
	defer free.Finish(nil)
	if c, _ := blocked.Cause(); func() bool { _, ok := c.(termination.Skipped); return !ok }() {
		t.Errorf("run of stage star after the block: cause %v, want skipped", c)
	}
	if c, done := free.Cause(); done {
		t.Errorf("a block on stage * or star ended a run of stage plain: %v", c)
	}

	// A stop on the hostile label value stops that run only.
	rep, err := f.Stop(t.Context(), fleet.StopRequest{Selector: fleet.Selector{Labels: map[string]string{"tenant": hostile}}, Reason: "r", By: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stopped != 1 || rep.Matched != 1 {
		t.Errorf("stop report %+v, want 1 matched and stopped", rep)
	}
	if c, _ := hr.Cause(); c == nil {
		t.Error("the hostile-labelled run was not stopped")
	} else if x, ok := c.(termination.Cancelled); !ok || x.Detail != "r (by ops)" {
		t.Errorf("cause = %v", c)
	}
	for _, r := range []*middleware.Run{pr, pr2, free} {
		if c, done := r.Cause(); done {
			t.Errorf("run %s ended by a stop on another label value: %v", r.ID(), c)
		}
	}
}
