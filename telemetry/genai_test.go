package telemetry_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry"
	"github.com/agentstop/agentstop/termination"
)

func callID(tool, id string) termination.Event {
	return termination.Event{Kind: termination.KindToolCall, Tool: tool, CallID: id, Args: []byte(`{}`)}
}

func resultID(tool, id, err string) termination.Event {
	return termination.Event{Kind: termination.KindToolResult, Tool: tool, CallID: id, Err: err}
}

func model(kind termination.Kind, m string) termination.Event {
	return termination.Event{Kind: kind, Source: "a", Text: "turn", Model: m}
}

// spansByName splits the ended spans into the run's span and the tool
// spans, in end order.
func spansByName(t *testing.T, h *harness, runName string) (run sdktrace.ReadOnlySpan, tools []sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range h.spans.Ended() {
		if s.Name() == runName {
			require.Nil(t, run, "two %s spans", runName)
			run = s
		} else {
			tools = append(tools, s)
		}
	}
	require.NotNil(t, run, "no %s span", runName)
	return run, tools
}

// TestGenAIAttributes asserts every attribute of spec §5.1 by name and
// value, on spans and metrics, for a run with a provider, agent and
// conversation ids, one model, and tool calls with ids (one failing).
func TestGenAIAttributes(t *testing.T) {
	h := newHarness(t, nil)
	st := h.stage(t, "researcher", middleware.WithProviderName("openai"), middleware.WithCondition(termination.IterationLimits{Limit: 2}))
	_, run := st.Start(context.Background(), middleware.WithAgentID("agent-7"), middleware.WithConversationID("conv-42"))
	for _, ev := range []termination.Event{
		model(termination.KindMessage, "gpt-4o"),
		callID("search", "call_1"),
		resultID("search", "call_1", "HTTP 503: upstream said no"),
		callID("fetch", "call_2"),
		resultID("fetch", "call_2", ""),
		model(termination.KindMessage, "gpt-4o"),
		model(termination.KindMessage, "gpt-4o"),
	} {
		run.Observe(ev)
	}
	res := run.Finish(nil)
	require.Equal(t, "max_iterations", res.Tag())
	h.requireAllEnded(t)

	span, tools := spansByName(t, h, "invoke_agent researcher")
	a := attrMap(span.Attributes())
	for k, v := range map[string]attribute.Value{
		"gen_ai.operation.name":  attribute.StringValue("invoke_agent"),
		"gen_ai.agent.name":      attribute.StringValue("researcher"),
		"gen_ai.provider.name":   attribute.StringValue("openai"),
		"gen_ai.agent.id":        attribute.StringValue("agent-7"),
		"gen_ai.conversation.id": attribute.StringValue("conv-42"),
		"gen_ai.request.model":   attribute.StringValue("gpt-4o"),
		"error.type":             attribute.StringValue("max_iterations"),
		"termination_cause":      attribute.StringValue("max_iterations"),
	} {
		assert.Equal(t, v, a[k], "span attribute %s", k)
	}
	assert.Equal(t, codes.Error, span.Status().Code)

	require.Len(t, tools, 2)
	for i, want := range []struct {
		tool, id string
		failed   bool
	}{{"search", "call_1", true}, {"fetch", "call_2", false}} {
		s := tools[i]
		assert.Equal(t, "execute_tool "+want.tool, s.Name())
		assert.Equal(t, trace.SpanKindInternal, s.SpanKind())
		assert.Equal(t, span.SpanContext().SpanID(), s.Parent().SpanID())
		ta := attrMap(s.Attributes())
		assert.Equal(t, attribute.StringValue("execute_tool"), ta["gen_ai.operation.name"])
		assert.Equal(t, attribute.StringValue(want.tool), ta["gen_ai.tool.name"])
		assert.Equal(t, attribute.StringValue(want.id), ta["gen_ai.tool.call.id"])
		if want.failed {
			assert.Equal(t, codes.Error, s.Status().Code)
			assert.Equal(t, attribute.StringValue("tool_error"), ta["error.type"])
			assert.NotContains(t, s.Status().Description, "503", "never the free-text error")
			for _, kv := range s.Attributes() {
				assert.NotContains(t, kv.Value.Emit(), "503", "never the free-text error (%s)", kv.Key)
			}
		} else {
			assert.Equal(t, codes.Unset, s.Status().Code)
			assert.NotContains(t, ta, "error.type")
		}
	}

	m := h.collect(t)
	opts := []metricdatatest.Option{metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars(), metricdatatest.IgnoreValue()}
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "gen_ai.invoke_agent.duration", Description: "The end-to-end duration of a single agent invocation.", Unit: "s",
		Data: metricdata.Histogram[float64]{
			Temporality: metricdata.CumulativeTemporality,
			DataPoints: []metricdata.HistogramDataPoint[float64]{{Attributes: set(
				attribute.String("gen_ai.operation.name", "invoke_agent"),
				attribute.String("gen_ai.agent.name", "researcher"),
				attribute.String("gen_ai.provider.name", "openai"),
				attribute.String("error.type", "max_iterations"))}},
		},
	}, m["gen_ai.invoke_agent.duration"], opts...)
	for _, dp := range m["gen_ai.invoke_agent.duration"].Data.(metricdata.Histogram[float64]).DataPoints {
		assert.Equal(t, specDurationBuckets, dp.Bounds, "the same buckets as agent.stage.duration")
		assert.Equal(t, uint64(1), dp.Count)
	}
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "gen_ai.execute_tool.duration", Description: "The duration of a single tool execution.", Unit: "s",
		Data: metricdata.Histogram[float64]{
			Temporality: metricdata.CumulativeTemporality,
			DataPoints: []metricdata.HistogramDataPoint[float64]{
				{Attributes: set(attribute.String("gen_ai.tool.name", "search"), attribute.String("error.type", "tool_error"))},
				{Attributes: set(attribute.String("gen_ai.tool.name", "fetch"))},
			},
		},
	}, m["gen_ai.execute_tool.duration"], opts...)
	wantToolBuckets := []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	for _, dp := range m["gen_ai.execute_tool.duration"].Data.(metricdata.Histogram[float64]).DataPoints {
		assert.Equal(t, wantToolBuckets, dp.Bounds)
		assert.Equal(t, uint64(1), dp.Count)
	}
}

// TestGenAIOmitted: without a provider, ids or models, the span carries no
// gen_ai.provider.name, ids or gen_ai.request.model; with two models, no
// gen_ai.request.model; a succeeded run's metric has no error.type.
func TestGenAIOmitted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []termination.Event
	}{
		{"no model", []termination.Event{msg("a", "x", 0, 0)}},
		{"two models", []termination.Event{model(termination.KindMessage, "gpt-4o"), model(termination.KindFinal, "gpt-4o-mini")}},
		{"a model, then another", []termination.Event{model(termination.KindMessage, "m1"), model(termination.KindMessage, "m2"), model(termination.KindMessage, "m1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			res := observe(h.stage(t, "plain"), tc.events...)
			require.Equal(t, "natural_completion", res.Tag())
			span, _ := spansByName(t, h, "invoke_agent plain")
			a := attrMap(span.Attributes())
			for _, k := range []string{"gen_ai.provider.name", "gen_ai.agent.id", "gen_ai.conversation.id", "gen_ai.request.model", "error.type"} {
				assert.NotContains(t, a, k)
			}
			dps := h.collect(t)["gen_ai.invoke_agent.duration"].Data.(metricdata.Histogram[float64]).DataPoints
			require.Len(t, dps, 1)
			assert.Equal(t, set(attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", "plain")), dps[0].Attributes)
		})
	}
}

// TestParallelCallsOfOneTool: two parallel calls to one tool give two
// spans, each from its own call to its own result, paired by call_id even
// when the results come back in the other order; without ids, results pair
// first in, first out.
func TestParallelCallsOfOneTool(t *testing.T) {
	type step struct {
		ev    termination.Event
		sleep time.Duration
	}
	for _, tc := range []struct {
		name  string
		steps []step
		ids   []string        // gen_ai.tool.call.id of the spans, in end order
		min   []time.Duration // minimum duration of the spans, in end order
		max   []time.Duration
	}{
		{
			name: "by call id, answered in reverse",
			// a starts, b starts 30ms later, b ends 10ms later, a ends 30ms after that.
			steps: []step{{callID("search", "a"), 30 * time.Millisecond}, {callID("search", "b"), 10 * time.Millisecond},
				{resultID("search", "b", ""), 30 * time.Millisecond}, {resultID("search", "a", ""), 0}},
			ids: []string{"b", "a"},
			min: []time.Duration{10 * time.Millisecond, 70 * time.Millisecond},
			max: []time.Duration{40 * time.Millisecond, time.Hour},
		},
		{
			name: "no ids: first in, first out",
			steps: []step{{call("search", `{}`), 30 * time.Millisecond}, {call("search", `{}`), 10 * time.Millisecond},
				{result("search", ""), 30 * time.Millisecond}, {result("search", ""), 0}},
			// the first result answers the first call (0→40ms), the second the second (30→70ms)
			ids: []string{"", ""},
			min: []time.Duration{40 * time.Millisecond, 40 * time.Millisecond},
			max: []time.Duration{time.Hour, time.Hour},
		},
		{
			name: "a result without id takes the oldest call without id",
			steps: []step{{callID("search", "x"), 0}, {call("search", `{}`), 20 * time.Millisecond},
				{result("search", ""), 0}, {resultID("search", "x", ""), 0}},
			ids: []string{"", "x"},
			min: []time.Duration{20 * time.Millisecond, 20 * time.Millisecond},
			max: []time.Duration{time.Hour, time.Hour},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			_, run := h.stage(t, "p").Start(context.Background())
			for _, s := range tc.steps {
				run.Observe(s.ev)
				time.Sleep(s.sleep)
			}
			run.Finish(nil)
			h.requireAllEnded(t)
			_, tools := spansByName(t, h, "invoke_agent p")
			require.Len(t, tools, 2, "one span per call")
			for i, s := range tools {
				assert.Equal(t, "execute_tool search", s.Name())
				id := attrMap(s.Attributes())["gen_ai.tool.call.id"]
				assert.Equal(t, tc.ids[i], id.AsString(), "call id of span %d", i)
				d := s.EndTime().Sub(s.StartTime())
				assert.GreaterOrEqual(t, d, tc.min[i], "duration of span %d", i)
				assert.Less(t, d, tc.max[i], "duration of span %d", i)
			}
			dps := h.collect(t)["gen_ai.execute_tool.duration"].Data.(metricdata.Histogram[float64]).DataPoints
			require.Len(t, dps, 1)
			assert.Equal(t, uint64(2), dps[0].Count)
		})
	}
}

// TestToolDurationWhenNotSampled: the tool histogram pairs calls with
// results whether or not the run's span is sampled.
func TestToolDurationWhenNotSampled(t *testing.T) {
	h := newHarness(t, sdktrace.NeverSample())
	observe(h.stage(t, "p"), callID("a", "1"), callID("a", "2"), resultID("a", "2", "boom"), resultID("a", "1", ""), call("b", `{}`))
	assert.Empty(t, h.spans.Started())
	dps := h.collect(t)["gen_ai.execute_tool.duration"].Data.(metricdata.Histogram[float64]).DataPoints
	got := map[string]uint64{}
	for _, dp := range dps {
		got[dp.Attributes.Encoded(attribute.DefaultEncoder())] = dp.Count
	}
	enc := func(kv ...attribute.KeyValue) string { s := set(kv...); return s.Encoded(attribute.DefaultEncoder()) }
	assert.Equal(t, map[string]uint64{
		enc(attribute.String("gen_ai.tool.name", "a")):                                               1,
		enc(attribute.String("gen_ai.tool.name", "a"), attribute.String("error.type", "tool_error")): 1,
	}, got, "b's call has no result: no duration")
}

// TestToolNamesAreBounded: past the tool limit, gen_ai.execute_tool.duration
// records "_other"; the spans keep the tools' names.
func TestToolNamesAreBounded(t *testing.T) {
	h := newHarness(t, nil, telemetry.WithToolLimit(3))
	var evs []termination.Event
	for i := range 10 {
		tool := fmt.Sprintf("tool_%d", i)
		evs = append(evs, call(tool, `{}`), result(tool, ""))
	}
	observe(h.stage(t, "p"), evs...)
	names := map[string]uint64{}
	for _, dp := range h.collect(t)["gen_ai.execute_tool.duration"].Data.(metricdata.Histogram[float64]).DataPoints {
		v, _ := dp.Attributes.Value("gen_ai.tool.name")
		names[v.AsString()] = dp.Count
	}
	assert.Equal(t, map[string]uint64{"tool_0": 1, "tool_1": 1, "tool_2": 1, "_other": 7}, names)
	_, tools := spansByName(t, h, "invoke_agent p")
	require.Len(t, tools, 10)
	assert.Equal(t, "execute_tool tool_9", tools[9].Name())
	assert.Equal(t, "tool_9", attrMap(tools[9].Attributes())["gen_ai.tool.name"].AsString())
}

// TestWarningsOnMetrics: count-pressure warnings add to
// agent.stage.budget.pressure with resource iterations / tool_calls; stall
// warnings to agent.stage.stall.warnings{stage, signal}; each is also a
// span event.
func TestWarningsOnMetrics(t *testing.T) {
	h := newHarness(t, nil)
	_, rr := h.rec.StartRun(context.Background(), middleware.RunInfo{Stage: "looper"})
	rr.Warning(termination.BudgetPressure{Resource: termination.ResourceIterations, Threshold: 0.8, Used: 8, Limit: 10})
	rr.Warning(termination.BudgetPressure{Resource: termination.ResourceToolCalls, Threshold: 0.8, Used: 4, Limit: 5})
	// A fleet budget's pressure is counted by the fleet, once per crossing
	// per process: on the span, not on agent.stage.budget.pressure.
	rr.Warning(termination.BudgetPressure{Resource: termination.ResourceTotalTokens, Threshold: 0.8, Used: 80, Limit: 100, Scope: termination.ScopeFleet})
	rr.Warning(termination.StallDetected{Signal: termination.SignalRepeatedToolCall, Repeats: 2})
	rr.Warning(termination.StallDetected{Signal: termination.SignalRepeatedToolCall, Repeats: 3})
	rr.Warning(termination.StallDetected{Signal: termination.SignalCycle, Repeats: 2, Period: 2})
	rr.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded})

	m := h.collect(t)
	opts := []metricdatatest.Option{metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()}
	stage := attribute.String("stage", "looper")
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "agent.stage.budget.pressure", Description: "Budget-pressure warnings.",
		Data: metricdata.Sum[int64]{
			Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{
				{Attributes: set(stage, attribute.String("resource", "iterations")), Value: 1},
				{Attributes: set(stage, attribute.String("resource", "tool_calls")), Value: 1},
			},
		},
	}, m["agent.stage.budget.pressure"], opts...)
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "agent.stage.stall.warnings", Description: "Stall warnings: the loop started repeating itself, before any stop.",
		Data: metricdata.Sum[int64]{
			Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{
				{Attributes: set(stage, attribute.String("signal", "repeated_tool_call")), Value: 2},
				{Attributes: set(stage, attribute.String("signal", "cycle")), Value: 1},
			},
		},
	}, m["agent.stage.stall.warnings"], opts...)

	span, _ := spansByName(t, h, "invoke_agent looper")
	var names []string
	for _, e := range span.Events() {
		names = append(names, e.Name)
	}
	assert.Equal(t, []string{"agentstop.budget_pressure", "agentstop.budget_pressure", "agentstop.budget_pressure",
		"agentstop.stall_warning", "agentstop.stall_warning", "agentstop.stall_warning", "agentstop.termination"}, names)
}

// TestToolPairingDoesNotAllocate pins the per-event cost of the tool
// histogram: pairing calls with results (by id and first in, first out)
// allocates nothing, sampled span or not being irrelevant to the metric.
func TestToolPairingDoesNotAllocate(t *testing.T) {
	h := newHarness(t, sdktrace.NeverSample())
	_, rr := h.rec.StartRun(context.Background(), middleware.RunInfo{Stage: "p", Provider: "openai"})
	defer rr.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded})
	var ev termination.Event
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range pairingEvents {
			ev = pairingEvents[i]
			rr.Event(&ev)
		}
	})
	assert.Zero(t, allocs)
}

// pairingEvents are parallel calls of one tool with ids answered out of
// order, then calls without ids, and a model turn.
var pairingEvents = []termination.Event{
	model(termination.KindMessage, "gpt-4o"),
	callID("search", "call_1"), callID("search", "call_2"), callID("fetch", "call_3"),
	resultID("search", "call_2", ""), resultID("fetch", "call_3", "failed"), resultID("search", "call_1", ""),
	call("lint", `{}`), call("lint", `{}`), result("lint", ""), result("lint", ""),
}

// BenchmarkToolPairing is the Recorder's per-event cost of the tool
// histogram on an unsampled run (the pairing happens whether or not spans
// are sampled) and on a sampled one (execute_tool spans too).
func BenchmarkToolPairing(b *testing.B) {
	for _, bc := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"unsampled", sdktrace.NeverSample()}, {"sampled", sdktrace.AlwaysSample()}} {
		b.Run(bc.name, func(b *testing.B) {
			h := newHarness(b, bc.sampler)
			_, rr := h.rec.StartRun(context.Background(), middleware.RunInfo{Stage: "p", Provider: "openai"})
			defer rr.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded})
			var ev termination.Event
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ev = pairingEvents[i%len(pairingEvents)]
				rr.Event(&ev)
				i++
			}
		})
	}
}

// TestProvidersAreBounded: past MaxProviders distinct provider names,
// gen_ai.invoke_agent.duration records "_other"; spans keep the name.
func TestProvidersAreBounded(t *testing.T) {
	h := newHarness(t, nil)
	for i := range telemetry.MaxProviders + 3 {
		_, rr := h.rec.StartRun(context.Background(), middleware.RunInfo{Stage: "s", Provider: fmt.Sprintf("p%d", i)})
		rr.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded})
	}
	got := map[string]uint64{}
	for _, dp := range h.collect(t)["gen_ai.invoke_agent.duration"].Data.(metricdata.Histogram[float64]).DataPoints {
		v, _ := dp.Attributes.Value("gen_ai.provider.name")
		got[v.AsString()] = dp.Count
	}
	assert.Len(t, got, telemetry.MaxProviders+1)
	assert.Equal(t, uint64(3), got["_other"])
	last := h.spans.Ended()[len(h.spans.Ended())-1]
	assert.Equal(t, fmt.Sprintf("p%d", telemetry.MaxProviders+2), attrMap(last.Attributes())["gen_ai.provider.name"].AsString())
}

// TestUnansweredCallsAreBounded: a loop that never reports results keeps
// at most a bounded number of open calls; the newest still pair.
func TestUnansweredCallsAreBounded(t *testing.T) {
	h := newHarness(t, sdktrace.NeverSample())
	_, rr := h.rec.StartRun(context.Background(), middleware.RunInfo{Stage: "s"})
	for i := range 1000 {
		ev := callID("t", fmt.Sprint(i))
		rr.Event(&ev)
	}
	ev := resultID("t", "999", "")
	rr.Event(&ev)
	ev = resultID("t", "0", "") // forgotten long ago
	rr.Event(&ev)
	rr.End(&termination.Result{Cause: termination.NaturalCompletion{}, Outcome: termination.OutcomeSucceeded})
	dps := h.collect(t)["gen_ai.execute_tool.duration"].Data.(metricdata.Histogram[float64]).DataPoints
	require.Len(t, dps, 1)
	assert.Equal(t, uint64(1), dps[0].Count)
}
