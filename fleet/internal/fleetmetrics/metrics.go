// Package fleetmetrics holds the fleet's own instruments, which package
// fleet's Local and package redisfleet record on: their names, attributes
// and closed attribute values are documented in package fleet ("Telemetry").
package fleetmetrics

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/agentstop/agentstop/termination"
)

// ScopeName is the instrumentation scope of the fleet's metrics (package
// fleet's ScopeName).
const ScopeName = "github.com/agentstop/agentstop/fleet"

// Operations counted by agent.fleet.errors (the operation attribute).
// A fleet may add its own snake_case operations.
const (
	OpJoin     = "join"     // registering a run, checking blocks and budgets
	OpLeave    = "leave"    // deregistering a run, returning a lease
	OpRenew    = "renew"    // renewing run leases, publishing figures
	OpReserve  = "reserve"  // reserving a budget lease
	OpSettle   = "settle"   // settling spent usage
	OpStop     = "stop"     // issuing or delivering a stop
	OpBlock    = "block"    // issuing, removing or reading blocks
	OpList     = "list"     // runs, blocks, budgets listings
	OpConnect  = "connect"  // (re)connecting, subscribing
	OpInternal = "internal" // anything else
)

// operations are the operations agent.fleet.errors counts, each exported
// at 0 from the moment a fleet starts.
var operations = []string{OpJoin, OpLeave, OpRenew, OpReserve, OpSettle, OpStop, OpBlock, OpList, OpConnect, OpInternal}

// rejectReasons are the reasons agent.fleet.runs.rejected (the reason
// attribute) counts, each exported at 0 from the moment a fleet starts:
// the Skipped reasons a fleet answers Join with, and "invalid_input".
var rejectReasons = []termination.Reason{termination.SkipBlocked, termination.SkipFleetBudgetExhausted,
	termination.SkipFleetUnavailable, termination.FailInvalidInput}

// budgetResources are the resources of a fleet budget (the resource
// attribute of agent.fleet.budget.pressure and .exhausted).
var budgetResources = []termination.Resource{
	termination.ResourceTotalTokens, termination.ResourceInputTokens,
	termination.ResourceOutputTokens, termination.ResourceCost,
}

// Metrics are a fleet's own instruments, built once per fleet from a
// MeterProvider (OTel API only):
//
//   - agent.fleet.errors (counter, operation): failures of the fleet's
//     store or its background work;
//   - agent.fleet.budget.pressure (counter, resource): a shared budget
//     crossed its pressure threshold, once per crossing per process;
//   - agent.fleet.budget.exhausted (counter, resource): a shared budget
//     reached a limit, once per crossing per process;
//   - agent.fleet.runs.stopped (counter): runs this process stopped on an
//     operator's stop;
//   - agent.fleet.runs.rejected (counter, reason): runs this process ended
//     at Join (blocked, fleet_budget_exhausted, fleet_unavailable,
//     invalid_input).
//
// Attribute values come from closed sets, so cardinality is bounded; labels
// and stage names are never attributes. Every counter is exported at 0 for
// each of its known attribute values (the Op constants, the four reasons
// above, the four budget resources) as soon as New builds it, that is from the
// moment a fleet starts: a dashboard shows 0, not "No data", in quiet
// times, and a rate over the first failure has a point to start from. A
// nil *Metrics records nothing.
// Methods are safe for concurrent use and do not allocate once an
// attribute value has been seen.
type Metrics struct {
	errors, pressure, exhausted, stopped, rejected metric.Int64Counter

	mu   sync.Mutex
	sets map[attrKey][]metric.AddOption // cached attribute set, as the variadic argument (a fresh one would allocate)
}

type attrKey struct{ key, value string }

// New builds the instruments from mp; nil means the global
// MeterProvider. Instrument creation errors go to otel.Handle and leave a
// no-op instrument.
func New(mp metric.MeterProvider) *Metrics {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err != nil {
			otel.Handle(err)
		}
		if c == nil {
			c = noop.Int64Counter{}
		}
		return c
	}
	ms := &Metrics{
		errors:    counter("agent.fleet.errors", "{error}", "Failures of the fleet's store or background work, by operation."),
		pressure:  counter("agent.fleet.budget.pressure", "{crossing}", "Shared budgets that crossed their pressure threshold, once per crossing per process."),
		exhausted: counter("agent.fleet.budget.exhausted", "{crossing}", "Shared budgets that reached a limit, once per crossing per process."),
		stopped:   counter("agent.fleet.runs.stopped", "{run}", "Runs stopped by an operator's fleet stop."),
		rejected:  counter("agent.fleet.runs.rejected", "{run}", "Runs ended when they joined the fleet, by reason."),
		sets:      map[attrKey][]metric.AddOption{},
	}
	ms.zero()
	return ms
}

// zero adds 0 to every counter for each of its known attribute values, so
// that each is exported from the start.
func (m *Metrics) zero() {
	ctx := context.Background()
	for _, op := range operations {
		m.errors.Add(ctx, 0, m.attrs("operation", op)...)
	}
	for _, r := range rejectReasons {
		m.rejected.Add(ctx, 0, m.attrs("reason", string(r))...)
	}
	for _, r := range budgetResources {
		m.pressure.Add(ctx, 0, m.attrs("resource", string(r))...)
		m.exhausted.Add(ctx, 0, m.attrs("resource", string(r))...)
	}
	m.stopped.Add(ctx, 0)
}

func (m *Metrics) attrs(key, value string) []metric.AddOption {
	k := attrKey{key, value}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.sets[k]
	if !ok {
		o = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String(key, value)))}
		m.sets[k] = o
	}
	return o
}

// Error counts a failure of operation (one of the Op constants).
func (m *Metrics) Error(operation string) {
	if m == nil {
		return
	}
	m.errors.Add(context.Background(), 1, m.attrs("operation", operation)...)
}

// Pressure counts one crossing of a shared budget's pressure threshold on
// resource.
func (m *Metrics) Pressure(resource termination.Resource) {
	if m == nil {
		return
	}
	m.pressure.Add(context.Background(), 1, m.attrs("resource", string(resource))...)
}

// Exhausted counts one shared budget reaching its limit on resource.
func (m *Metrics) Exhausted(resource termination.Resource) {
	if m == nil {
		return
	}
	m.exhausted.Add(context.Background(), 1, m.attrs("resource", string(resource))...)
}

// Stopped counts n runs stopped by an operator's stop.
func (m *Metrics) Stopped(n int) {
	if m == nil || n <= 0 {
		return
	}
	m.stopped.Add(context.Background(), int64(n))
}

// Rejected counts a run ended at Join with cause c (its Skipped reason, or
// invalid_input for a Failed).
func (m *Metrics) Rejected(c termination.Cause) {
	if m == nil {
		return
	}
	reason := termination.FailInvalidInput
	switch c := c.(type) {
	case termination.Skipped:
		reason = c.Reason
	case termination.Failed:
		reason = c.Reason
	}
	m.rejected.Add(context.Background(), 1, m.attrs("reason", string(reason))...)
}
