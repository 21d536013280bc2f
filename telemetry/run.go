package telemetry

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// maxPendingTools bounds the tool calls a run keeps waiting for their
// results; past it the oldest is forgotten (a loop that never reports
// results must not grow, or slow down, for its whole life).
const maxPendingTools = 64

// inlinePending is how many open tool calls a run holds without a heap
// allocation.
const inlinePending = 4

// toolCacheSize is how many tools a run finds without the Recorder's lock.
const toolCacheSize = 4

// pendingCall is a tool call waiting for its result.
type pendingCall struct {
	tool   string        // the name as called
	callID string        // "" when the loop gave none
	at     time.Duration // when it was called, on the run's clock (runRecorder.since)
}

// cachedTool is a tool's attributes, kept by a run so that its later calls
// take no lock (Recorder.tool).
type cachedTool struct {
	name  string
	attrs *toolAttrs
	other bool
}

// runRecorder records one run. The middleware calls it under the run's lock.
type runRecorder struct {
	rec   *Recorder
	stage *stageAttrs
	ctx   context.Context
	// toolCtx is the context of gen_ai.execute_tool.duration's records:
	// ctx when the run's span context is sampled, else one without a
	// span, which the SDK's exemplar filter dismisses without a lookup
	// (an unsampled span gives no exemplar either).
	toolCtx   context.Context
	span      trace.Span
	recording bool
	info      middleware.RunInfo
	provider  string // bounded, for metrics

	// model is the one model seen in the run; mixed when several were.
	model string
	mixed bool

	// base is when the run's recording started: tool calls are timed by
	// the monotonic clock from it (half the cost of time.Now), and a
	// sampled call's span starts at base plus its offset, as the SDK ends
	// a span at its start plus the monotonic time since.
	base time.Time

	pending    []pendingCall
	pendingBuf [inlinePending]pendingCall
	tools      [toolCacheSize]cachedTool // the run's latest tools (tool)
	nextTool   int                       // the slot of tools the next new tool takes
	heldAt     time.Time                 // when the run was held at a limit; zero when not held (hold.go)
	scratch    *spanScratch              // for execute_tool spans; nil when the run is not recorded
}

// spanScratch is where a recorded run builds its execute_tool spans'
// start option and attributes: no allocation for them per span.
type spanScratch struct {
	start [1]trace.SpanStartOption
	kv    [4]attribute.KeyValue
}

// since is the time since the run's recording started, by the monotonic
// clock.
func (rr *runRecorder) since() time.Duration { return time.Since(rr.base) }

// tool returns the attributes of a tool from the run's cache, else from the
// Recorder (and caches them).
func (rr *runRecorder) tool(name string) (*toolAttrs, bool) {
	for i := range rr.tools {
		if c := &rr.tools[i]; c.attrs != nil && c.name == name {
			return c.attrs, c.other
		}
	}
	ta, other := rr.rec.tool(name)
	rr.tools[rr.nextTool] = cachedTool{name: name, attrs: ta, other: other}
	rr.nextTool = (rr.nextTool + 1) % toolCacheSize
	return ta, other
}

// Event pairs tool calls with their results, for gen_ai.execute_tool.duration
// (always: no allocation) and, when the run's span is sampled, for
// execute_tool child spans; and notes the run's model.
func (rr *runRecorder) Event(ev *termination.Event) {
	switch ev.Kind {
	case termination.KindToolCall:
		if len(rr.pending) == maxPendingTools {
			copy(rr.pending, rr.pending[1:])
			rr.pending = rr.pending[:len(rr.pending)-1]
		}
		rr.pending = append(rr.pending, pendingCall{tool: ev.Tool, callID: ev.CallID, at: rr.since()})
	case termination.KindToolResult:
		rr.toolResult(ev)
	case termination.KindMessage, termination.KindFinal:
		if ev.Model == "" || rr.mixed {
			return
		}
		if rr.model == "" {
			rr.model = ev.Model
		} else if rr.model != ev.Model {
			rr.mixed = true
		}
	}
}

// match finds the call a result answers: the call with its call_id; else
// (no call_id, or none matches) the oldest open call of that tool that has
// no id. -1 when there is none.
func (rr *runRecorder) match(ev *termination.Event) int {
	if ev.CallID != "" {
		for i := range rr.pending {
			if rr.pending[i].callID == ev.CallID {
				return i
			}
		}
	}
	for i := range rr.pending {
		if p := &rr.pending[i]; p.callID == "" && p.tool == ev.Tool {
			return i
		}
	}
	return -1
}

func (rr *runRecorder) toolResult(ev *termination.Event) {
	i := rr.match(ev)
	if i < 0 {
		return // a result without a call we saw: no duration to record
	}
	p := rr.pending[i]
	copy(rr.pending[i:], rr.pending[i+1:])
	rr.pending[len(rr.pending)-1] = pendingCall{}
	rr.pending = rr.pending[:len(rr.pending)-1]

	d := rr.since() - p.at
	r := rr.rec
	ta, other := rr.tool(p.tool)
	failed := ev.Err != ""
	m := ta.ok
	if failed {
		m = ta.failed
	}
	r.toolDuration.Record(rr.toolCtx, d.Seconds(), m...)
	if !rr.recording {
		return
	}
	name := ta.spanName
	if other { // past the tool limit: the span keeps the tool's own name
		name = "execute_tool " + p.tool
	}
	// The span starts at the call and ends now (End without a timestamp:
	// the SDK's end is the start plus the monotonic time since, the clock
	// of d). Its one start option is the timestamp: no span kind (an
	// unspecified kind is INTERNAL, and each option is a pass over the
	// SDK's span config), and its attributes come in one SetAttributes,
	// from the run's scratch: as a start option they would cost the SDK a
	// copy of them per span (the conventions mark none of them
	// sampling-relevant, and a sampler still sees the span's name, which
	// names the tool).
	sc := rr.scratch
	sc.start[0] = trace.WithTimestamp(rr.base.Add(p.at))
	_, span := r.tracer.Start(rr.ctx, name, sc.start[:]...)
	kv := append(sc.kv[:0], KeyGenAIOperationName.String("execute_tool"), KeyGenAIToolName.String(p.tool))
	if id := ev.CallID; id != "" || p.callID != "" {
		if id == "" {
			id = p.callID
		}
		kv = append(kv, KeyGenAIToolCallID.String(id))
	}
	if failed {
		kv = append(kv, KeyErrorType.String(ToolError))
		span.SetStatus(codes.Error, "tool call failed")
	}
	span.SetAttributes(kv...)
	span.End()
}

// Warning counts a warning and adds a span event: budget-pressure warnings
// (tokens, cost, iterations, tool calls) on agent.stage.budget.pressure,
// stall warnings on agent.stage.stall.warnings. A fleet budget's pressure
// (scope fleet) reaches every run that shares it: it is on the span, but
// counted once per crossing per process by the fleet's own
// agent.fleet.budget.pressure, not once per run here. A tree limit's
// pressure (scope tree) reaches the holder and every live descendant: it is
// on their spans only.
func (rr *runRecorder) Warning(c termination.Cause) {
	switch w := c.(type) {
	case termination.BudgetPressure:
		if w.Scope == "" {
			rr.rec.pressure.Add(rr.ctx, 1, rr.stage.resource(w.Resource))
		}
		if rr.recording {
			attrs := []attribute.KeyValue{
				KeyResource.String(string(w.Resource)),
				attribute.Float64("threshold", w.Threshold),
				attribute.Float64("used", w.Used),
				attribute.Float64("limit", w.Limit),
			}
			if w.Scope != "" {
				attrs = append(attrs, attribute.String("scope", w.Scope))
			}
			rr.span.AddEvent("agentstop.budget_pressure", trace.WithAttributes(attrs...))
		}
	case termination.StallDetected:
		rr.rec.stalls.Add(rr.ctx, 1, rr.stage.signal(w.Signal))
		if rr.recording {
			rr.span.AddEvent("agentstop.stall_warning", trace.WithAttributes(
				KeySignal.String(string(w.Signal)),
				attribute.Int("repeats", w.Repeats)))
		}
	default:
		if (termination.Hold{}).Holds(c) {
			rr.heldEvent(c) // a limit the run is held at (hold.go)
		}
	}
}

// Error reports a failure on the span and to otel.Handle.
func (rr *runRecorder) Error(err error) {
	if err == nil {
		return
	}
	otel.Handle(err)
	if rr.recording {
		rr.span.AddEvent("agentstop.error", trace.WithAttributes(attribute.String("error.message", err.Error())))
	}
}

// End records the run's metrics and ends its span.
func (rr *runRecorder) End(res *termination.Result) {
	r, s, ctx := rr.rec, rr.stage, rr.ctx
	tag := r.tag(res.Cause, &rr.info)
	ca := s.cause(tag, res.Outcome)
	r.terminations.Add(ctx, 1, ca.withOutcome)
	r.duration.Record(ctx, res.Duration.Seconds(), ca.withOutcome)
	errorType := ""
	if res.Outcome == termination.OutcomeFailed {
		errorType = tag
	}
	r.invokeDuration.Record(ctx, res.Duration.Seconds(), s.invokeAttrs(rr.provider, errorType))
	r.iterations.Record(ctx, int64(res.Iterations), ca.tagOnly)
	r.toolCalls.Record(ctx, int64(res.ToolCalls), ca.tagOnly)
	// Iterations are the inference calls (docs/spec.md §5.1).
	r.inferenceCalls.Record(ctx, int64(res.Iterations), s.agent)
	r.agentToolCalls.Record(ctx, int64(res.ToolCalls), s.agent)
	rr.recordTree(res.Cause)
	rr.recordShadow(res) // shadow.go
	if n := res.Tokens.InputTokens; n > 0 {
		r.tokens.Add(ctx, n, s.input)
	}
	if n := res.Tokens.OutputTokens; n > 0 {
		r.tokens.Add(ctx, n, s.output)
	}
	for _, b := range res.Budgets {
		r.utilization.Record(ctx, b.Utilization(), s.resource(b.Resource))
	}
	r.active.Add(ctx, -1, s.stage)
	clear(rr.pending) // calls without results: no span, no duration
	rr.pending = rr.pending[:0]
	if rr.recording {
		rr.endSpan(res, tag)
		if id := rr.info.RunID; id != "" {
			r.spans.Delete(id)
		}
	}
	rr.span.End()
}

// recordTree counts what a run's end says about its tree (docs/spec.md
// §8), and an idle stop on agent.stage.idle.stops {stage} (its tag is
// timeout, so only this counter tells it apart), from the typed cause (for All, the last cause to fire, the one its
// tag names): a run cancelled because an ancestor ended on
// agent.tree.runs.cancelled {stage}; a tree limit reached by the run that
// holds it on agent.tree.limits.reached {stage, resource}, where resource is
// the budget's resource, iterations, tool_calls, or timeout. No new
// termination_cause value: both are cancelled / the limit's own tag on
// agent.stage.terminations.
func (rr *runRecorder) recordTree(c termination.Cause) {
	if all, ok := c.(termination.All); ok && len(all.Causes) > 0 {
		c = all.Causes[len(all.Causes)-1]
	}
	r, s, ctx := rr.rec, rr.stage, rr.ctx
	res := ""
	switch c := c.(type) {
	case termination.Cancelled:
		if c.Reason == termination.CancelParent {
			r.treeCancelled.Add(ctx, 1, s.treeCancel...)
		}
		return
	case termination.BudgetExhausted:
		if c.Scope == termination.ScopeTree {
			res = string(c.Resource)
		}
	case termination.BudgetPressure: // a grace stop of a tree budget
		if c.Scope == termination.ScopeTree {
			res = string(c.Resource)
		}
	case termination.MaxIterationsReached:
		if c.Scope == termination.ScopeTree {
			res = string(termination.ResourceIterations)
		}
	case termination.MaxToolCallsReached:
		if c.Scope == termination.ScopeTree {
			res = string(termination.ResourceToolCalls)
		}
	case termination.Timeout:
		if c.Idle {
			r.idleStops.Add(ctx, 1, s.idleStops...)
		}
		if c.Scope == termination.ScopeTree {
			res = ResourceTimeout
		}
	}
	if res != "" {
		r.treeLimits.Add(ctx, 1, s.treeLimit(res)...)
	}
}

func (rr *runRecorder) endSpan(res *termination.Result, tag string) {
	kind, err := codec.CauseType(res.Cause)
	if err != nil {
		kind = fmt.Sprintf("%T", res.Cause) // an unregistered user type still gets a name
	}
	span := rr.span
	span.SetAttributes(
		KeyTerminationCause.String(tag),
		KeyTerminationKind.String(kind),
		KeyOutcome.String(res.Outcome.String()),
		attribute.Int("agent.iterations", res.Iterations),
		attribute.Int("agent.tool_calls", res.ToolCalls),
		attribute.Int64("gen_ai.usage.input_tokens", res.Tokens.InputTokens),
		attribute.Int64("gen_ai.usage.output_tokens", res.Tokens.OutputTokens),
	)
	if rr.model != "" && !rr.mixed {
		span.SetAttributes(KeyGenAIRequestModel.String(rr.model))
	}
	attrs := []attribute.KeyValue{KeyTerminationCause.String(tag), KeyTerminationKind.String(kind)}
	attrs = append(attrs, causeAttributes(res.Cause)...)
	span.AddEvent("agentstop.termination", trace.WithAttributes(attrs...))
	if res.Outcome == termination.OutcomeFailed {
		span.SetAttributes(KeyErrorType.String(tag))
		msg := ""
		if res.Cause != nil {
			msg = res.Cause.Error()
		}
		span.SetStatus(codes.Error, msg)
	}
}
