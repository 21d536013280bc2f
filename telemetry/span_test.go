package telemetry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry"
	"github.com/agentstop/agentstop/termination"
)

// causeCase drives a real middleware stage to one cause.
type causeCase struct {
	name      string
	stageOpts []middleware.Option
	drive     func(t *testing.T, st *middleware.Stage) termination.Result

	tag      string // termination_cause on span and metrics
	kind     string // termination.kind ($kind)
	outcome  string
	fields   map[string]attribute.Value // the termination event's cause fields; nil values: present, any value
	warnings []map[string]attribute.Value
	// counts on the span
	iterations, toolCalls int
	in, out               int64
	toolSpans             []string // execute_tool child spans, in end order
	toolErr               bool     // the (only) tool span failed
}

func events(evs ...termination.Event) func(*testing.T, *middleware.Stage) termination.Result {
	return func(_ *testing.T, st *middleware.Stage) termination.Result { return observe(st, evs...) }
}

var anyValue = attribute.Value{} // a field that must be present, with any value

func causeCases() []causeCase {
	dangerous := termination.CauseFunc("dangerous_tool", func(ev termination.Event, _ termination.Totals) termination.Cause {
		if ev.Kind == termination.KindToolCall && ev.Tool == "drop_database" {
			return termination.Custom{Reason: "dangerous_tool", Properties: map[string]any{"tool": ev.Tool}}
		}
		return nil
	})
	return []causeCase{
		{
			name:      "completed/text_mention",
			stageOpts: []middleware.Option{middleware.WithCondition(termination.CompletionSignals{TextMention: "APPROVE"})},
			drive:     events(msg("critic", "looks good", 10, 2), msg("critic", "APPROVE", 20, 3)),
			tag:       "completed", kind: "Completed", outcome: "succeeded",
			fields:     map[string]attribute.Value{"termination.condition": attribute.StringValue("text_mention"), "termination.detail": attribute.StringValue("APPROVE")},
			iterations: 2, in: 30, out: 5,
		},
		{
			name:      "completed/function_call with a tool span",
			stageOpts: []middleware.Option{middleware.WithCondition(termination.CompletionSignals{FunctionCall: []string{"approve"}})},
			drive:     events(call("approve", `{"id":1}`), result("approve", "")),
			tag:       "completed", kind: "Completed", outcome: "succeeded",
			fields:    map[string]attribute.Value{"termination.condition": attribute.StringValue("function_call"), "termination.detail": attribute.StringValue("approve")},
			toolCalls: 1, toolSpans: []string{"execute_tool approve"},
		},
		{
			name:  "natural_completion",
			drive: events(msg("planner", "thinking", 5, 1), termination.Event{Kind: termination.KindFinal, Source: "planner", Text: "done"}),
			tag:   "natural_completion", kind: "NaturalCompletion", outcome: "succeeded",
			fields:     map[string]attribute.Value{},
			iterations: 2, in: 5, out: 1,
		},
		{
			name:      "handoff",
			stageOpts: []middleware.Option{middleware.WithCondition(termination.CompletionSignals{Handoff: []string{"user"}})},
			drive:     events(termination.Event{Kind: termination.KindHandoff, Source: "planner", Target: "user"}),
			tag:       "handoff", kind: "HandoffRequested", outcome: "succeeded",
			fields: map[string]attribute.Value{"termination.target": attribute.StringValue("user"), "termination.source": attribute.StringValue("planner")},
		},
		{
			name:      "max_iterations",
			stageOpts: []middleware.Option{middleware.WithCondition(termination.IterationLimits{Limit: 1})},
			drive:     events(msg("a", "one", 1, 1), msg("a", "two", 1, 1), msg("a", "never seen", 1, 1)),
			tag:       "max_iterations", kind: "MaxIterationsReached", outcome: "failed",
			fields:     map[string]attribute.Value{"termination.limit": attribute.Int64Value(1), "termination.count": attribute.Int64Value(2)},
			iterations: 2, in: 2, out: 2,
		},
		{
			name:      "max_tool_calls with one tool span and one unanswered call",
			stageOpts: []middleware.Option{middleware.WithCondition(termination.ToolCallLimits{Limit: 1})},
			drive:     events(call("search", `{"q":1}`), result("search", "rate limited"), call("search", `{"q":2}`)),
			tag:       "max_tool_calls", kind: "MaxToolCallsReached", outcome: "failed",
			fields:    map[string]attribute.Value{"termination.limit": attribute.Int64Value(1), "termination.count": attribute.Int64Value(2)},
			toolCalls: 2, toolSpans: []string{"execute_tool search"}, toolErr: true,
		},
		{
			name: "budget_pressure after a warning and one grace turn",
			stageOpts: []middleware.Option{middleware.WithCondition(termination.TokenLimits{
				Total: 1000, Pressure: 0.5, Grace: new(1)})},
			drive: events(msg("s", "part 1", 600, 0), msg("s", "wrapping up", 100, 50), msg("s", "never seen", 1, 1)),
			tag:   "budget_pressure", kind: "BudgetPressure", outcome: "succeeded",
			fields: map[string]attribute.Value{"termination.resource": attribute.StringValue("total_tokens"),
				"termination.threshold": attribute.Float64Value(0.5), "termination.used": attribute.Float64Value(750),
				"termination.limit": attribute.Float64Value(1000)},
			warnings: []map[string]attribute.Value{{"resource": attribute.StringValue("total_tokens"),
				"threshold": attribute.Float64Value(0.5), "used": attribute.Float64Value(600), "limit": attribute.Float64Value(1000)}},
			iterations: 2, in: 700, out: 50,
		},
		{
			name:      "budget_exhausted on cost",
			stageOpts: []middleware.Option{middleware.WithCondition(termination.CostLimit{Limit: 0.5})},
			drive: events(termination.Event{Kind: termination.KindMessage, Text: "expensive", Cost: 0.25},
				termination.Event{Kind: termination.KindMessage, Text: "more", Cost: 0.5}),
			tag: "budget_exhausted", kind: "BudgetExhausted", outcome: "failed",
			fields: map[string]attribute.Value{"termination.resource": attribute.StringValue("cost"),
				"termination.used": attribute.Float64Value(0.75), "termination.limit": attribute.Float64Value(0.5)},
			iterations: 2,
		},
		{
			name:      "stall",
			stageOpts: []middleware.Option{middleware.WithCondition(termination.StallLimits{Repeats: 2})},
			drive:     events(call("search", `{"q":"x","n":1}`), call("search", `{"n": 1, "q": "x"}`)),
			tag:       "stall", kind: "StallDetected", outcome: "failed",
			fields:    map[string]attribute.Value{"termination.signal": attribute.StringValue("repeated_tool_call"), "termination.repeats": attribute.Int64Value(2)},
			toolCalls: 2,
		},
		{
			name: "timeout from the timer",
			// Long enough that the event is evaluated before the timer
			// fires on a loaded machine: an event past the deadline is not
			// evaluated (§3).
			stageOpts: []middleware.Option{middleware.WithCondition(termination.TimeLimits{Timeout: 500 * time.Millisecond})},
			drive: func(t *testing.T, st *middleware.Stage) termination.Result {
				_, run := st.Start(context.Background())
				run.Observe(msg("critic", "reviewing", 1, 1))
				waitDone(t, run, 5*time.Second)
				return run.Finish(nil)
			},
			tag: "timeout", kind: "Timeout", outcome: "failed",
			fields:     map[string]attribute.Value{"termination.limit": attribute.StringValue("500ms"), "termination.elapsed": attribute.StringValue("500ms")},
			iterations: 1, in: 1, out: 1,
		},
		{
			name: "cancelled by Stop",
			drive: func(t *testing.T, st *middleware.Stage) termination.Result {
				_, run := st.Start(context.Background())
				run.Observe(msg("executor", "polling", 0, 0))
				run.Stop("operator pressed Stop")
				return run.Finish(nil)
			},
			tag: "cancelled", kind: "Cancelled", outcome: "failed",
			fields:     map[string]attribute.Value{"termination.reason": attribute.StringValue("external"), "termination.detail": attribute.StringValue("operator pressed Stop")},
			iterations: 1,
		},
		{
			name: "cancelled by the caller's context",
			drive: func(t *testing.T, st *middleware.Stage) termination.Result {
				ctx, cancel := context.WithCancelCause(context.Background())
				_, run := st.Start(ctx)
				cancel(errors.New("caller gave up"))
				waitDone(t, run, 5*time.Second)
				return run.Finish(nil)
			},
			tag: "cancelled", kind: "Cancelled", outcome: "failed",
			fields: map[string]attribute.Value{"termination.reason": attribute.StringValue("context"), "termination.detail": attribute.StringValue("caller gave up")},
		},
		{
			name: "failed: stream error",
			drive: func(t *testing.T, st *middleware.Stage) termination.Result {
				_, run := st.Start(context.Background())
				run.Observe(msg("coder", "compiling", 3, 0))
				return run.Finish(errors.New("model provider: 503"))
			},
			tag: "failed", kind: "Failed", outcome: "failed",
			fields:     map[string]attribute.Value{"termination.reason": attribute.StringValue("stream_error"), "termination.error": attribute.StringValue("model provider: 503")},
			iterations: 1, in: 3,
		},
		{
			name:      "failed: error threshold",
			stageOpts: []middleware.Option{middleware.WithCondition(termination.ErrorLimits{Consecutive: 2})},
			drive:     events(call("run_tests", `{}`), result("run_tests", "exit 1"), call("run_tests", `{}`), result("run_tests", "exit 1")),
			tag:       "failed", kind: "Failed", outcome: "failed",
			fields:    map[string]attribute.Value{"termination.reason": attribute.StringValue("error_threshold"), "termination.error": anyValue},
			toolCalls: 2, toolSpans: []string{"execute_tool run_tests", "execute_tool run_tests"}, toolErr: true,
		},
		{
			name: "skipped",
			drive: func(t *testing.T, st *middleware.Stage) termination.Result {
				return st.Skip(context.Background(), "no changes")
			},
			tag: "skipped", kind: "Skipped", outcome: "skipped",
			fields: map[string]attribute.Value{"termination.reason": attribute.StringValue("no changes")},
		},
		{
			name:      "custom, not allow-listed",
			stageOpts: []middleware.Option{middleware.WithCondition(dangerous)},
			drive:     events(call("drop_database", `{"name":"prod"}`)),
			tag:       "custom", kind: "Custom", outcome: "failed",
			fields:    map[string]attribute.Value{"termination.reason": attribute.StringValue("dangerous_tool"), "termination.properties": attribute.StringValue(`{"tool":"drop_database"}`)},
			toolCalls: 1,
		},
		{
			name:      "custom, allow-listed by the stage",
			stageOpts: []middleware.Option{middleware.WithCondition(dangerous), middleware.WithCustomReasons("dangerous_tool")},
			drive:     events(call("drop_database", `{}`)),
			tag:       "dangerous_tool", kind: "Custom", outcome: "failed",
			fields:    map[string]attribute.Value{"termination.reason": attribute.StringValue("dangerous_tool"), "termination.properties": anyValue},
			toolCalls: 1,
		},
		{
			name: "custom, treated as success",
			stageOpts: []middleware.Option{middleware.WithCondition(dangerous), middleware.WithTreatAsSuccess(func(c termination.Cause) bool {
				return c.TagValue() == "custom"
			})},
			drive: events(call("drop_database", `{}`)),
			tag:   "custom", kind: "Custom", outcome: "succeeded",
			fields:    map[string]attribute.Value{"termination.reason": attribute.StringValue("dangerous_tool"), "termination.properties": anyValue},
			toolCalls: 1,
		},
		{
			name:      "all: tag of the last cause",
			stageOpts: []middleware.Option{middleware.WithCondition(termination.AllOf(termination.CompletionSignals{TextMention: "A"}, termination.IterationLimits{Limit: 1}))},
			drive:     events(msg("x", "A", 0, 0), msg("x", "B", 0, 0)),
			tag:       "max_iterations", kind: "All", outcome: "failed",
			fields:     map[string]attribute.Value{"termination.causes": anyValue},
			iterations: 2,
		},
	}
}

// TestSpanAndMetricsForEachCause drives a real stage to every cause of the
// contract and pins the run's span (name, kind, status, attributes, events,
// tool child spans) and its termination series.
func TestSpanAndMetricsForEachCause(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range causeCases() {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			st := h.stage(t, "planner", tc.stageOpts...)
			res := tc.drive(t, st)
			require.Equal(t, tc.outcome, res.Outcome.String(), "outcome of %v", res.Cause)
			seen[tc.tag] = true
			h.requireAllEnded(t)

			spans := h.spans.Ended()
			var run sdktrace.ReadOnlySpan
			var tools []sdktrace.ReadOnlySpan
			for _, s := range spans {
				if s.Name() == "invoke_agent planner" {
					require.Nil(t, run, "two invoke_agent spans")
					run = s
				} else {
					tools = append(tools, s)
				}
			}
			require.NotNil(t, run, "no invoke_agent span among %d", len(spans))
			assert.Equal(t, trace.SpanKindInternal, run.SpanKind())
			assert.Equal(t, telemetry.ScopeName, run.InstrumentationScope().Name)
			assert.Equal(t, telemetry.Version(), run.InstrumentationScope().Version)

			want := map[string]attribute.Value{
				"gen_ai.operation.name":      attribute.StringValue("invoke_agent"),
				"gen_ai.agent.name":          attribute.StringValue("planner"),
				"stage":                      attribute.StringValue("planner"),
				"termination_cause":          attribute.StringValue(tc.tag),
				"termination.kind":           attribute.StringValue(tc.kind),
				"outcome":                    attribute.StringValue(tc.outcome),
				"agent.iterations":           attribute.Int64Value(int64(tc.iterations)),
				"agent.tool_calls":           attribute.Int64Value(int64(tc.toolCalls)),
				"gen_ai.usage.input_tokens":  attribute.Int64Value(tc.in),
				"gen_ai.usage.output_tokens": attribute.Int64Value(tc.out),
				// Every run has an id (§8), with or without a fleet.
				"agentstop.run.id": attribute.StringValue(runID(t, res)),
			}
			if tc.outcome == "failed" {
				want["error.type"] = attribute.StringValue(tc.tag)
				assert.Equal(t, codes.Error, run.Status().Code)
				assert.Equal(t, res.Cause.Error(), run.Status().Description)
			} else {
				assert.Equal(t, codes.Unset, run.Status().Code, "status of a %s run", tc.outcome)
			}
			assert.Equal(t, want, attrMap(run.Attributes()), "span attributes")

			// Events: one per warning, then the termination.
			evs := run.Events()
			require.Len(t, evs, len(tc.warnings)+1, "span events")
			for i, w := range tc.warnings {
				assert.Equal(t, "agentstop.budget_pressure", evs[i].Name)
				assert.Equal(t, w, attrMap(evs[i].Attributes), "warning %d", i)
			}
			term := evs[len(evs)-1]
			assert.Equal(t, "agentstop.termination", term.Name)
			got := attrMap(term.Attributes)
			wantEv := map[string]attribute.Value{"termination_cause": attribute.StringValue(tc.tag), "termination.kind": attribute.StringValue(tc.kind)}
			for k, v := range tc.fields {
				if v == anyValue {
					require.Contains(t, got, k)
					v = got[k]
				}
				wantEv[k] = v
			}
			assert.Equal(t, wantEv, got, "termination event")

			// Tool spans: children of the run, one per call/result pair.
			var names []string
			for _, s := range tools {
				names = append(names, s.Name())
				assert.Equal(t, run.SpanContext().SpanID(), s.Parent().SpanID(), "parent of %s", s.Name())
				assert.Equal(t, run.SpanContext().TraceID(), s.SpanContext().TraceID())
				assert.Equal(t, trace.SpanKindInternal, s.SpanKind())
				a := attrMap(s.Attributes())
				assert.Equal(t, "execute_tool", a["gen_ai.operation.name"].AsString())
				assert.Equal(t, s.Name(), "execute_tool "+a["gen_ai.tool.name"].AsString())
				if tc.toolErr {
					assert.Equal(t, codes.Error, s.Status().Code)
					assert.Equal(t, "tool_error", a["error.type"].AsString())
				} else {
					assert.Equal(t, codes.Unset, s.Status().Code)
				}
			}
			assert.Equal(t, tc.toolSpans, names, "execute_tool spans")

			// Metrics: the run's one termination series.
			m := h.collect(t)
			sum := m["agent.stage.terminations"].Data.(metricdata.Sum[int64])
			require.Len(t, sum.DataPoints, 1)
			dp := sum.DataPoints[0]
			assert.Equal(t, int64(1), dp.Value)
			assert.Equal(t, attribute.NewSet(attribute.String("stage", "planner"),
				attribute.String("termination_cause", tc.tag), attribute.String("outcome", tc.outcome)), dp.Attributes)
			require.Len(t, dp.Exemplars, 1, "a sampled run's exemplar")
			assert.Equal(t, run.SpanContext().TraceID(), trace.TraceID(dp.Exemplars[0].TraceID))
			active := m["agent.stage.active"].Data.(metricdata.Sum[int64])
			require.Len(t, active.DataPoints, 1)
			assert.Zero(t, active.DataPoints[0].Value, "runs still active")
		})
	}
	for _, tag := range termination.TagValues() {
		assert.True(t, seen[tag], "no case produces termination_cause=%s", tag)
	}
}

// TestToolSpanNeedsResult: a tool call without its result gives no span,
// and one whose result comes back gives a span from the call to the result.
func TestToolSpanNeedsResult(t *testing.T) {
	h := newHarness(t, nil)
	st := h.stage(t, "coder")
	_, run := st.Start(context.Background())
	run.Observe(call("compile", `{}`))
	run.Observe(call("lint", `{}`))
	time.Sleep(5 * time.Millisecond)
	run.Observe(result("lint", ""))
	run.Observe(call("compile", `{}`)) // a second, unanswered compile
	run.Finish(nil)
	h.requireAllEnded(t)

	var tools []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() != "invoke_agent coder" {
			tools = append(tools, s)
		}
	}
	require.Len(t, tools, 1)
	assert.Equal(t, "execute_tool lint", tools[0].Name())
	assert.GreaterOrEqual(t, tools[0].EndTime().Sub(tools[0].StartTime()), 5*time.Millisecond, "span from call to result")
}

// TestNothingPerEventWhenNotSampled: an unsampled run has no tool spans and
// no span data, but its metrics are complete.
func TestNothingPerEventWhenNotSampled(t *testing.T) {
	h := newHarness(t, sdktrace.NeverSample())
	st := h.stage(t, "coder", middleware.WithCondition(termination.ToolCallLimits{Limit: 1}))
	res := observe(st, call("a", `{}`), result("a", ""), call("a", `{}`))
	require.Equal(t, "max_tool_calls", res.Tag())
	assert.Empty(t, h.spans.Started())
	m := h.collect(t)
	sum := m["agent.stage.terminations"].Data.(metricdata.Sum[int64])
	require.Len(t, sum.DataPoints, 1)
	assert.Empty(t, sum.DataPoints[0].Exemplars, "exemplar without a sampled span")
}

// TestHookPanicIsReported: a panicking OnWarning hook is reported on the
// span and to otel.Handle, and the run goes on.
func TestHookPanicIsReported(t *testing.T) {
	errs := captureErrors(t)
	h := newHarness(t, nil)
	st := h.stage(t, "summarizer",
		middleware.WithCondition(termination.TokenLimits{Total: 100, Pressure: 0.5}),
		middleware.WithOnWarning(func(context.Context, *middleware.Run, termination.Cause) { panic("hook bug") }))
	res := observe(st, msg("s", "a", 60, 0), termination.Event{Kind: termination.KindFinal, Text: "done"})
	require.Equal(t, "natural_completion", res.Tag())
	h.requireAllEnded(t)
	require.ErrorContains(t, errs.All(), "hook bug")
	span := h.spans.Ended()[0]
	names := []string{}
	for _, e := range span.Events() {
		names = append(names, e.Name)
	}
	assert.Equal(t, []string{"agentstop.budget_pressure", "agentstop.error", "agentstop.termination"}, names)
	assert.Equal(t, codes.Unset, span.Status().Code)
	m := h.collect(t)
	p := m["agent.stage.budget.pressure"].Data.(metricdata.Sum[int64])
	require.Len(t, p.DataPoints, 1)
	assert.Equal(t, int64(1), p.DataPoints[0].Value)
}

// TestRunSpanIsChildOfCallerSpan: the run's span nests under the caller's
// span, and the loop's context carries the run's span.
func TestRunSpanIsChildOfCallerSpan(t *testing.T) {
	h := newHarness(t, nil)
	st := h.stage(t, "planner")
	parentCtx, parent := h.tp.Tracer("test").Start(context.Background(), "workflow")
	ctx, run := st.Start(parentCtx)
	loopSpan := trace.SpanFromContext(ctx)
	run.Finish(nil)
	parent.End()
	h.requireAllEnded(t)
	var got sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == "invoke_agent planner" {
			got = s
		}
	}
	require.NotNil(t, got)
	assert.Equal(t, parent.SpanContext().SpanID(), got.Parent().SpanID())
	assert.Equal(t, got.SpanContext().SpanID(), loopSpan.SpanContext().SpanID(), "the loop's context carries the run's span")
}

// TestConcurrentRunsEndEverySpan runs many stages concurrently through
// every way in and checks that every span is ended and the active gauge is
// back to zero.
func TestConcurrentRunsEndEverySpan(t *testing.T) {
	h := newHarness(t, nil)
	st := h.stage(t, "worker", middleware.WithCondition(termination.ToolCallLimits{Limit: 3}), middleware.WithDrainTimeout(time.Second))
	done := make(chan struct{})
	const n = 40
	for i := range n {
		go func() {
			defer func() { done <- struct{}{} }()
			ctx, run := st.Start(context.Background())
			in := make(chan termination.Event)
			go func() {
				defer close(in)
				for j := range 10 {
					ev := call("t", `{}`)
					if j%2 == 1 {
						ev = result("t", "")
					}
					select {
					case in <- ev:
					case <-ctx.Done():
						return
					}
				}
			}()
			for range middleware.Forward(run, in, func(ev termination.Event) termination.Event { return ev }) {
				if i%7 == 0 {
					run.Stop("test")
				}
			}
			run.Wait()
		}()
	}
	for range n {
		<-done
	}
	h.requireAllEnded(t)
	m := h.collect(t)
	active := m["agent.stage.active"].Data.(metricdata.Sum[int64])
	require.Len(t, active.DataPoints, 1)
	assert.Zero(t, active.DataPoints[0].Value)
	var total int64
	for _, dp := range m["agent.stage.terminations"].Data.(metricdata.Sum[int64]).DataPoints {
		total += dp.Value
	}
	assert.Equal(t, int64(n), total)
	runs := 0
	for _, s := range h.spans.Ended() {
		if s.Name() == "invoke_agent worker" {
			runs++
		}
	}
	assert.Equal(t, n, runs)
}
