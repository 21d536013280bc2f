package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentstop/agentstop/telemetry"
)

// TestQuickstartSpeaksGenAI: the quickstart's traces carry every span
// attribute of spec §5.1 (provider, agent and conversation ids, model, tool
// call ids) and its metrics include the GenAI ones.
func TestQuickstartSpeaksGenAI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet for a few seconds")
	}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	}()
	f, err := newFleet(telemetry.NewRecorder(telemetry.WithTracerProvider(tp), telemetry.WithMeterProvider(mp)), inProcess(t), 8)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	f.run(ctx)
	<-ctx.Done()
	f.wait(5 * time.Second)

	seen := map[string]bool{}
	planners := map[trace.SpanID]string{} // the planner spans' run ids
	for _, s := range spans.Ended() {
		for _, kv := range s.Attributes() {
			seen[string(kv.Key)] = true
			if s.Name() == "invoke_agent planner" && kv.Key == telemetry.KeyRunID {
				planners[s.SpanContext().SpanID()] = kv.Value.AsString()
			}
		}
	}
	for _, k := range []string{"gen_ai.operation.name", "gen_ai.agent.name", "gen_ai.provider.name", "gen_ai.agent.id",
		"gen_ai.conversation.id", "gen_ai.request.model", "gen_ai.tool.name", "gen_ai.tool.call.id", "error.type",
		"agentstop.run.id", "agentstop.parent.run.id"} {
		assert.True(t, seen[k], "no span carries %s", k)
	}
	// Each analyst's span is a child of its planner's, in one trace, and
	// names the planner's run (spec §5.1, §8).
	analysts := 0
	for _, s := range spans.Ended() {
		if s.Name() != "invoke_agent "+delegateStage {
			continue
		}
		analysts++
		parentRun, ok := planners[s.Parent().SpanID()]
		if assert.True(t, ok, "an analyst span whose parent is not a planner span") {
			assert.Equal(t, s.Parent().TraceID(), s.SpanContext().TraceID())
			for _, kv := range s.Attributes() {
				if kv.Key == telemetry.KeyParentRunID {
					assert.Equal(t, parentRun, kv.Value.AsString())
				}
			}
		}
	}
	assert.Positive(t, analysts, "no analyst ran")
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	names := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			names[m.Name] = true
		}
	}
	assert.True(t, names["gen_ai.invoke_agent.duration"])
	assert.True(t, names["gen_ai.execute_tool.duration"])
	assert.True(t, names["gen_ai.invoke_agent.inference_calls"])
	assert.True(t, names["gen_ai.invoke_agent.tool_calls"])
	assert.True(t, names["agent.tree.limits.reached"])
	assert.True(t, names["agent.tree.runs.cancelled"])
}
