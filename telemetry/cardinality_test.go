package telemetry_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry"
	"github.com/agentstop/agentstop/termination"
)

// points returns the attribute sets of every data point of m.
func points(t *testing.T, m metricdata.Metrics) []attribute.Set {
	t.Helper()
	var out []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Histogram[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	default:
		t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
	}
	return out
}

// TestCardinalityIsBounded runs 10,000 runs with random stage names and
// random custom reasons, some allow-listed by the stage, most not, and checks that every instrument stays
// within the bound: the first stageLimit stage names plus "_other", the
// closed set of causes plus the allow-listed reasons.
func TestCardinalityIsBounded(t *testing.T) {
	const (
		runs       = 10000
		stageLimit = 20
		names      = 500
	)
	h := newHarness(t, sdktrace.NeverSample(), telemetry.WithStageLimit(stageLimit))
	rng := rand.New(rand.NewPCG(1, 2))
	reasons := func() string {
		switch rng.IntN(4) {
		case 0:
			return "approved_reason" // allow-listed by the stage: kept
		case 1:
			return "stage_only_reason" // allow-listed by the stage: kept
		case 2:
			return fmt.Sprintf("free text reason #%d!", rng.IntN(1e6)) // never a label
		}
		return fmt.Sprintf("reason_%d", rng.IntN(1e6))
	}
	stages := map[string]*middleware.Stage{}
	var order []string
	resources := []string{"total", "input", "output"}
	for range runs {
		name := fmt.Sprintf("stage-%d", rng.IntN(names))
		st := stages[name]
		if st == nil {
			policy := termination.MustParsePolicy(fmt.Sprintf("token_budget: {%s: 1000, pressure: 0.5}\n", resources[rng.IntN(3)]))
			var err error
			st, err = middleware.New(name, middleware.WithParticipant(h.rec), middleware.WithPolicy(policy),
				middleware.WithCustomReasons("approved_reason", "stage_only_reason"),
				middleware.WithCondition(termination.CauseFunc("random", func(ev termination.Event, _ termination.Totals) termination.Cause {
					if ev.Kind == termination.KindStop {
						return termination.Custom{Reason: ev.Text}
					}
					return nil
				})))
			require.NoError(t, err)
			stages[name] = st
			order = append(order, name)
		}
		reason := reasons()
		// Usage stays under every budget: the Func decides every run.
		observe(st, msg("a", "x", int64(rng.IntN(500)), int64(rng.IntN(500))),
			termination.Event{Kind: termination.KindStop, Text: reason})
	}
	require.Greater(t, len(order), stageLimit*10, "the test must use many more stages than the limit")

	m := h.collect(t)
	require.Len(t, m, 12, "the agent.stage.* instruments and gen_ai.invoke_agent.*")
	kept := map[string]bool{telemetry.OtherStage: true}
	// The first stageLimit stages to start a run keep their names.
	for _, n := range order[:stageLimit] {
		kept[n] = true
	}
	// Causes: the Func fires Custom on every run, whose tag is either the
	// allow-listed reason or "custom"; no run ends otherwise.
	causes := map[string]bool{"approved_reason": true, "stage_only_reason": true, "custom": true}
	bounds := map[string]int{
		"agent.stage.terminations":       (stageLimit + 1) * len(causes), // one outcome: failed
		"agent.stage.duration":           (stageLimit + 1) * len(causes),
		"agent.stage.iterations":         (stageLimit + 1) * len(causes),
		"agent.stage.tool_calls":         (stageLimit + 1) * len(causes),
		"agent.stage.tokens":             (stageLimit + 1) * 2,
		"agent.stage.budget.utilization": (stageLimit + 1) * 3,
		"agent.stage.budget.pressure":    (stageLimit + 1) * 3,
		"agent.stage.active":             stageLimit + 1,
		"agent.stage.idle.stops":         stageLimit + 1,
		// {gen_ai.operation.name, gen_ai.agent.name, error.type}: every run failed.
		"gen_ai.invoke_agent.duration": (stageLimit + 1) * len(causes),
		// {gen_ai.agent.name}: one series per stage.
		"gen_ai.invoke_agent.inference_calls": stageLimit + 1,
		"gen_ai.invoke_agent.tool_calls":      stageLimit + 1,
	}
	for name, bound := range bounds {
		pts := points(t, m[name])
		assert.LessOrEqual(t, len(pts), bound, "%s series", name)
		assert.NotEmpty(t, pts, name)
		seenStages := map[string]bool{}
		for _, set := range pts {
			st, ok := set.Value("stage")
			if !ok {
				st, ok = set.Value("gen_ai.agent.name")
			}
			require.True(t, ok, "%s without stage", name)
			assert.True(t, kept[st.AsString()], "%s: stage %q past the limit", name, st.AsString())
			seenStages[st.AsString()] = true
			if c, ok := set.Value("termination_cause"); ok {
				assert.True(t, causes[c.AsString()], "%s: termination_cause %q", name, c.AsString())
			}
			if c, ok := set.Value("error.type"); ok {
				assert.True(t, causes[c.AsString()], "%s: error.type %q", name, c.AsString())
			}
		}
		if name != "agent.stage.budget.pressure" { // not every stage crosses its threshold
			assert.Len(t, seenStages, stageLimit+1, "%s: stages", name)
		}
	}
	var total int64
	for _, dp := range m["agent.stage.terminations"].Data.(metricdata.Sum[int64]).DataPoints {
		total += dp.Value
		c, _ := dp.Attributes.Value("termination_cause")
		o, _ := dp.Attributes.Value("outcome")
		assert.Equal(t, "failed", o.AsString(), "outcome of %s", c.AsString())
	}
	assert.Equal(t, int64(runs), total, "every run is counted, under its own or the _other stage")
}

// TestStageLimitDefault: the 201st stage name is recorded as _other.
func TestStageLimitDefault(t *testing.T) {
	h := newHarness(t, nil)
	for i := range telemetry.DefaultStageLimit + 5 {
		_, rr := h.rec.StartRun(context.Background(), middleware.RunInfo{Stage: fmt.Sprintf("s%03d", i)})
		rr.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded})
	}
	pts := points(t, h.collect(t)["agent.stage.terminations"])
	assert.Len(t, pts, telemetry.DefaultStageLimit+1)
	var other int
	for _, s := range h.spans.Ended() {
		if s.Name() == "invoke_agent _other" {
			other++
			assert.Equal(t, "_other", attrMap(s.Attributes())["gen_ai.agent.name"].AsString())
		}
	}
	assert.Equal(t, 5, other, "spans of stages past the limit")
}

// TestRecorderTakesTagFromTypedCause: the recorder takes termination_cause
// from the typed cause and the stage's allow-list it is given with the run
// (RunInfo.CustomReasons), never from a string written into the Result:
// a caller that writes TerminationCause cannot add a series. Allow-listed
// values are kept up to MaxCustomTags over all stages.
func TestRecorderTakesTagFromTypedCause(t *testing.T) {
	h := newHarness(t, nil)
	end := func(reason, written string, allow ...string) {
		_, rr := h.rec.StartRun(context.Background(), middleware.RunInfo{Stage: "s", CustomReasons: allow})
		rr.End(&termination.Result{Cause: termination.Custom{Reason: reason}, TerminationCause: written, Outcome: termination.OutcomeFailed})
	}
	end("quota", "quota", "quota")                 // allow-listed by the stage: kept
	end("user_id_12345", "user_id_12345")          // a caller-written tag: not trusted
	end("user_id_67890", "user_id_67890", "quota") // not in the stage's list
	end("quota", "max_iterations")                 // a forged built-in tag: the cause decides
	end("Not A Label", "", "Not A Label")          // never a label
	// A built-in cause is its own tag whatever was written.
	_, rr := h.rec.StartRun(context.Background(), middleware.RunInfo{Stage: "s"})
	rr.End(&termination.Result{Cause: termination.MaxIterationsReached{Limit: 1, Count: 2}, TerminationCause: "free_text", Outcome: termination.OutcomeFailed})
	for i := range telemetry.MaxCustomTags + 10 {
		r := fmt.Sprintf("reason_%d", i)
		end(r, r, r) // each stage allow-lists its own: bounded over all of them
	}
	got := map[string]int64{}
	for _, dp := range h.collect(t)["agent.stage.terminations"].Data.(metricdata.Sum[int64]).DataPoints {
		c, _ := dp.Attributes.Value("termination_cause")
		got[c.AsString()] = dp.Value
	}
	assert.Equal(t, int64(1), got["quota"])
	assert.Equal(t, int64(1), got["max_iterations"])
	assert.NotContains(t, got, "user_id_12345")
	assert.NotContains(t, got, "user_id_67890")
	assert.NotContains(t, got, "free_text")
	assert.Equal(t, int64(4+11), got["custom"], "untrusted tags, the bad label, and the reasons past the cap")
	assert.Len(t, got, 3+telemetry.MaxCustomTags-1, "quota, max_iterations, custom and the other allow-listed reasons")
}
