package middleware

import (
	"testing"

	"github.com/agentstop/agentstop/termination"
)

// TestLiveRunsClash: a run whose key another live run already holds is
// found by its id, and each run leaves the registry when it ends, whichever
// of the two ends first. (Two live runs with one id cannot happen; it is
// the one way to give two runs one key.)
func TestLiveRunsClash(t *testing.T) {
	for _, firstEnds := range []bool{true, false} {
		stage := &Stage{name: "clash"}
		id := "clash-test-run-id"
		a, b := &Run{stage: stage, id: id}, &Run{stage: stage, id: id}
		registerRun(a)
		registerRun(b)
		if got, _ := lookupRun(id); got != a {
			t.Fatalf("lookup = %p, want the first run %p", got, a)
		}
		if liveRuns.clash[id] != b {
			t.Fatalf("the second run is not kept by its id")
		}
		res := &termination.Result{Cause: termination.NaturalCompletion{}}
		first, second := a, b
		if !firstEnds {
			first, second = b, a
		}
		unregisterRun(first, res)
		if got, _ := lookupRun(id); got != second {
			t.Fatalf("after one ended: lookup = %p, want %p", got, second)
		}
		unregisterRun(second, res)
		if got, detail := lookupRun(id); got != nil || detail == "" {
			t.Fatalf("after both ended: lookup = %p, %q; want none, ended", got, detail)
		}
		if len(liveRuns.clash) != 0 || liveRuns.m[idKey(id)] != nil {
			t.Fatalf("the registry keeps an ended run")
		}
	}
}
