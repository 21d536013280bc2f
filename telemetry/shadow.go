package telemetry

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agentstop/agentstop/termination"
)

// Shadow policies (docs/spec.md §5.2): what a candidate policy would have
// done to a run is recorded once, at the run's end, from Result.Shadow —
// nothing per event.

// ShadowAttributeKeys returns the span attribute keys of a shadow policy
// named name: agentstop.shadow.NAME.termination_cause and
// agentstop.shadow.NAME.stopped_at.
func ShadowAttributeKeys(name string) (cause, stoppedAt attribute.Key) {
	return attribute.Key("agentstop.shadow." + name + ".termination_cause"), attribute.Key("agentstop.shadow." + name + ".stopped_at")
}

// newShadowStops creates agent.stage.shadow.stops.
func newShadowStops(meter metric.Meter) (metric.Int64Counter, error) {
	return meter.Int64Counter("agent.stage.shadow.stops", metric.WithUnit("{run}"),
		metric.WithDescription("Runs a shadow policy would have stopped (it never acts), by the policy and the cause it would have stopped them with."))
}

// shadowAttrs are a stage's shadow attribute sets and span keys, built
// once per (policy, termination_cause) and per policy.
type shadowAttrs struct {
	mu       sync.RWMutex
	policies map[string]*shadowPolicyAttrs // by name as given; at most MaxShadowPolicies recorded as themselves
	counted  int                           // policies recorded as themselves
}

// shadowPolicyAttrs are one shadow policy's.
type shadowPolicyAttrs struct {
	causeKey, stoppedAtKey attribute.Key
	recorded               string // the policy label: the name, or "_other" past the bound
	mu                     sync.RWMutex
	byTag                  map[string][]metric.AddOption // {stage, policy, termination_cause}
}

// policy returns the attributes of the shadow policy named name.
func (a *shadowAttrs) policy(name string) *shadowPolicyAttrs {
	a.mu.RLock()
	p := a.policies[name]
	a.mu.RUnlock()
	if p != nil {
		return p
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if p = a.policies[name]; p != nil {
		return p
	}
	if a.policies == nil {
		a.policies = map[string]*shadowPolicyAttrs{}
	}
	recorded := OtherValue
	if a.counted < MaxShadowPolicies {
		recorded = name
		a.counted++
	}
	p = &shadowPolicyAttrs{recorded: recorded, byTag: map[string][]metric.AddOption{}}
	p.causeKey, p.stoppedAtKey = ShadowAttributeKeys(name)
	if len(a.policies) < 4*MaxShadowPolicies { // past it, built per run: spans keep names, metrics do not grow
		a.policies[name] = p
	}
	return p
}

// stops is the attribute set of agent.stage.shadow.stops for tag.
func (p *shadowPolicyAttrs) stops(stage, tag string) []metric.AddOption {
	return cached(&p.mu, p.byTag, tag, func(tag string) []metric.AddOption {
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
			KeyStage.String(stage), KeyPolicy.String(p.recorded), KeyTerminationCause.String(tag)))}
	})
}

// recordShadow records the run's shadow verdicts: for each policy that
// would have stopped the run, agent.stage.shadow.stops {stage, policy,
// termination_cause} once, and the span attributes
// agentstop.shadow.NAME.termination_cause and .stopped_at.
func (rr *runRecorder) recordShadow(res *termination.Result) {
	for name, v := range res.Shadow {
		if v == nil || v.Cause == nil {
			continue
		}
		p := rr.stage.shadow.policy(name)
		tag := rr.rec.tag(v.Cause, &rr.info)
		rr.rec.shadowStops.Add(rr.ctx, 1, p.stops(rr.stage.name, tag)...)
		if rr.recording {
			rr.span.SetAttributes(p.causeKey.String(tag), p.stoppedAtKey.Int(v.StoppedAt))
		}
	}
}
