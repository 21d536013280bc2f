package cascade

import (
	"testing"

	"github.com/agentstop/agentstop/termination"
)

func TestParentEnded(t *testing.T) {
	for _, c := range []struct {
		stage, tag string
		want       termination.Cancelled
	}{
		{"planner", termination.TagMaxIterations, termination.Cancelled{Reason: termination.CancelParent, Detail: "planner ended: max_iterations"}},
		{"replay", termination.TagNaturalCompletion, termination.Cancelled{Reason: termination.CancelParent, Detail: "replay ended: natural_completion"}},
	} {
		if got := ParentEnded(c.stage, c.tag); got != c.want {
			t.Errorf("ParentEnded(%q, %q) = %#v, want %#v", c.stage, c.tag, got, c.want)
		}
	}
}
