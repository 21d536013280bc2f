package telemetry

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/termination"
)

// TestCauseAttributesCoverJSONFields pins the promise of the package doc:
// the agentstop.termination span event carries the cause's fields as
// termination.<field>, every field of the JSON form (§2), with every
// optional field set: a per-tool limit's tool, a fleet budget's scope, a
// tree limit's scope, an idle limit's idle, a cycle's period, a skip's
// detail.
func TestCauseAttributesCoverJSONFields(t *testing.T) {
	for _, c := range []termination.Cause{
		termination.Completed{Condition: "text_mention", Detail: "TERMINATE"},
		termination.NaturalCompletion{},
		termination.HandoffRequested{Target: "user", Source: "planner"},
		termination.MaxIterationsReached{Limit: 3, Count: 4},
		termination.MaxToolCallsReached{Limit: 2, Count: 3, Tool: "search"},
		termination.BudgetPressure{Resource: termination.ResourceTotalTokens, Threshold: 0.8, Used: 80, Limit: 100, Scope: termination.ScopeFleet},
		termination.BudgetExhausted{Resource: termination.ResourceCost, Used: 2.5, Limit: 2, Scope: termination.ScopeFleet},
		termination.StallDetected{Signal: termination.SignalCycle, Repeats: 3, Period: 2},
		termination.Timeout{Limit: time.Minute, Elapsed: 61 * time.Second},
		termination.Timeout{Limit: time.Minute, Elapsed: time.Minute, Scope: termination.ScopeTree},
		termination.Timeout{Limit: time.Minute, Elapsed: time.Minute, Idle: true},
		termination.MaxIterationsReached{Limit: 3, Count: 4, Scope: termination.ScopeTree},
		termination.MaxToolCallsReached{Limit: 2, Count: 3, Scope: termination.ScopeTree},
		termination.Cancelled{Reason: termination.CancelExternal, Detail: "incident 42 (by ops@host)"},
		termination.Failed{Reason: termination.FailInvalidInput, Err: "event 3: kind: missing"},
		termination.Skipped{Reason: termination.SkipBlocked, Detail: "incident 42 (by ops@host)"},
		termination.Custom{Reason: "dangerous_tool", Properties: map[string]any{"tool": "rm"}},
		termination.All{Causes: []termination.Cause{termination.MaxIterationsReached{Limit: 1, Count: 2}}},
	} {
		b, err := codec.MarshalCause(c)
		if err != nil {
			t.Fatal(err)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(b, &fields); err != nil {
			t.Fatal(err)
		}
		var want []string
		for k := range fields {
			if k != "$kind" {
				want = append(want, "termination."+k)
			}
		}
		var got []string
		for _, kv := range causeAttributes(c) {
			got = append(got, string(kv.Key))
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%T: attributes %s, want the JSON form's fields %s", c, strings.Join(got, ", "), strings.Join(want, ", "))
		}
	}
}

// TestCachedAttributeSetsDoNotAllocate: once built, a stage's attribute
// sets are found without allocating (the run's end looks several up), and
// an unknown resource shares the "_other" set rather than growing the
// cache.
func TestCachedAttributeSetsDoNotAllocate(t *testing.T) {
	r := NewRecorder()
	s := r.stage("planner")
	s.cause(termination.TagMaxIterations, termination.OutcomeFailed)
	s.invokeAttrs("openai", termination.TagMaxIterations)
	s.resource(termination.ResourceCost)
	if n := testing.AllocsPerRun(100, func() {
		s.cause(termination.TagMaxIterations, termination.OutcomeFailed)
		s.invokeAttrs("openai", termination.TagMaxIterations)
		s.resource(termination.ResourceCost)
	}); n != 0 {
		t.Errorf("%v allocations per lookup of cached sets, want 0", n)
	}
	if s.cause("a", 1) == s.cause("b", 1) || s.invokeAttrs("", "") == nil {
		t.Error("distinct keys share a set")
	}
	s.resource("nonsense")
	s.resource("more_nonsense")
	if len(s.resources) != 2 {
		t.Errorf("%d resource sets cached, want 2 (cost and _other)", len(s.resources))
	}
}
