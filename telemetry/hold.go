package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Holds (§3 hold, §5): agent.stage.held {stage} counts the runs held at a
// limit, waiting to be raised; agent.stage.held.oldest {stage} (s) is the
// longest current wait, for an alert on a run nobody raises. Both are
// built once, with the Recorder.

// holds are the Recorder's held runs, by stage, with when each was held.
type holds struct {
	counter metric.Int64UpDownCounter
	oldest  metric.Float64ObservableGauge

	mu    sync.Mutex
	since map[*stageAttrs]map[*runRecorder]time.Time // a stage stays once it has held a run: its gauge shows 0, not "No data"
}

var _ middleware.HoldRecorder = (*runRecorder)(nil)

// initHolds creates the hold instruments; errors go to handle.
func (r *Recorder) initHolds(meter metric.Meter, handle func(error)) {
	h := &r.holds
	h.since = map[*stageAttrs]map[*runRecorder]time.Time{}
	var err error
	h.counter, err = meter.Int64UpDownCounter("agent.stage.held", metric.WithUnit("{run}"),
		metric.WithDescription("Stage runs held at a limit (hold:), waiting to be raised, stopped or timed out."))
	handle(err)
	h.oldest, err = meter.Float64ObservableGauge("agent.stage.held.oldest", metric.WithUnit("s"),
		metric.WithDescription("How long the stage's longest-held run has waited at its limit; 0 when none is held."))
	handle(err)
	if err == nil {
		_, err = meter.RegisterCallback(h.observe, h.oldest)
		handle(err)
	}
}

// observe reports each stage's longest current wait.
func (h *holds) observe(_ context.Context, o metric.Observer) error {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for s, runs := range h.since {
		var longest time.Duration
		for _, t := range runs {
			longest = max(longest, now.Sub(t))
		}
		o.ObserveFloat64(h.oldest, longest.Seconds(), s.stage)
	}
	return nil
}

// Held implements middleware.HoldRecorder: the run waits at c's limit.
func (rr *runRecorder) Held(c termination.Cause) {
	if !rr.heldAt.IsZero() {
		return
	}
	rr.heldAt = time.Now()
	h := &rr.rec.holds
	h.counter.Add(rr.ctx, 1, rr.stage.stage)
	h.mu.Lock()
	runs := h.since[rr.stage]
	if runs == nil {
		runs = map[*runRecorder]time.Time{}
		h.since[rr.stage] = runs
	}
	runs[rr] = rr.heldAt
	h.mu.Unlock()
}

// Released implements middleware.HoldRecorder: the run goes on or ends.
func (rr *runRecorder) Released() {
	if rr.heldAt.IsZero() {
		return
	}
	rr.heldAt = time.Time{}
	h := &rr.rec.holds
	h.counter.Add(rr.ctx, -1, rr.stage.stage)
	h.mu.Lock()
	delete(h.since[rr.stage], rr)
	h.mu.Unlock()
}

// Raised implements middleware.HoldRecorder: a span event
// agentstop.raise with the amounts (the §2 resource names).
func (rr *runRecorder) Raised(l termination.Limits) {
	if rr.recording {
		rr.span.AddEvent("agentstop.raise", trace.WithAttributes(attribute.String("limits", l.String())))
	}
}

// heldEvent records a warning that is a limit the run is held at: a span
// event agentstop.held with the limit's termination_cause (and scope).
func (rr *runRecorder) heldEvent(c termination.Cause) {
	if !rr.recording {
		return
	}
	attrs := []attribute.KeyValue{KeyTerminationCause.String(termination.Tag(c, nil))}
	if s := causeScope(c); s != "" {
		attrs = append(attrs, attribute.String("scope", s))
	}
	rr.span.AddEvent("agentstop.held", trace.WithAttributes(attrs...))
}

func causeScope(c termination.Cause) string {
	switch c := c.(type) {
	case termination.MaxIterationsReached:
		return c.Scope
	case termination.MaxToolCallsReached:
		return c.Scope
	case termination.BudgetExhausted:
		return c.Scope
	}
	return ""
}
