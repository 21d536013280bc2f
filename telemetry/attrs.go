package telemetry

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentstop/agentstop/internal/label"
	"github.com/agentstop/agentstop/termination"
)

// stageAttrs are the attribute sets of one stage, built once.
type stageAttrs struct {
	name     string
	spanName string
	stage    metric.MeasurementOption // {stage}
	input    metric.MeasurementOption // {stage, token_type=input}
	output   metric.MeasurementOption // {stage, token_type=output}
	agent    metric.MeasurementOption // {gen_ai.agent.name}

	// The options of the tree counters, as slices built once: passing one
	// option as a variadic argument would allocate per call.
	treeCancel []metric.AddOption            // {stage}
	treeLimits map[string][]metric.AddOption // by resource: {stage, resource}
	idleStops  []metric.AddOption            // {stage}

	// hasChildren is set at the stage's first run with a parent.
	hasChildren atomic.Bool
	// started is set at the stage's first run.
	started atomic.Bool

	shadow shadowAttrs // shadow.go

	mu        sync.RWMutex
	starts    map[string][]trace.SpanStartOption // by provider name ("" for none)
	byCause   map[causeKey]*causeAttrs
	resources map[termination.Resource]metric.MeasurementOption
	signals   map[termination.StallSignal]metric.MeasurementOption
	invoke    map[invokeKey]metric.MeasurementOption
}

type causeKey struct {
	tag     string
	outcome termination.Outcome
}

type causeAttrs struct {
	withOutcome metric.MeasurementOption // {stage, termination_cause, outcome}
	tagOnly     metric.MeasurementOption // {stage, termination_cause}
}

// invokeKey keys the attribute sets of gen_ai.invoke_agent.duration.
type invokeKey struct {
	provider  string // recorded provider ("" when not given)
	errorType string // "" unless the run failed
}

// maxStartOptions bounds the per-stage cache of span start options (one
// per provider name); past it, they are built per run.
const maxStartOptions = 8

// maxSignals bounds the stall signals recorded per stage; others are
// recorded as "_other".
const maxSignals = 16

func (r *Recorder) stage(name string) *stageAttrs {
	r.mu.RLock()
	s := r.stages[name]
	if s == nil && len(r.stages) >= r.stageLimit {
		s = r.stages[OtherStage] // past the limit: no write lock per run
	}
	r.mu.RUnlock()
	if s != nil {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s = r.stages[name]; s != nil {
		return s
	}
	recorded := name
	if len(r.stages) >= r.stageLimit {
		if s = r.stages[OtherStage]; s != nil {
			return s
		}
		recorded = OtherStage
	}
	s = &stageAttrs{
		name:       recorded,
		spanName:   "invoke_agent " + recorded,
		stage:      metric.WithAttributeSet(attribute.NewSet(KeyStage.String(recorded))),
		input:      metric.WithAttributeSet(attribute.NewSet(KeyStage.String(recorded), KeyTokenType.String("input"))),
		output:     metric.WithAttributeSet(attribute.NewSet(KeyStage.String(recorded), KeyTokenType.String("output"))),
		agent:      metric.WithAttributeSet(attribute.NewSet(KeyGenAIAgentName.String(recorded))),
		treeCancel: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(KeyStage.String(recorded)))},
		treeLimits: map[string][]metric.AddOption{},
		idleStops:  []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(KeyStage.String(recorded)))},
		starts:     map[string][]trace.SpanStartOption{},
		byCause:    map[causeKey]*causeAttrs{},
		resources:  map[termination.Resource]metric.MeasurementOption{},
		signals:    map[termination.StallSignal]metric.MeasurementOption{},
		invoke:     map[invokeKey]metric.MeasurementOption{},
	}
	r.stages[recorded] = s
	return s
}

// startOptions are the options of the stage's invoke_agent span for a
// provider: kind INTERNAL, gen_ai.operation.name, gen_ai.agent.name, stage
// and gen_ai.provider.name when given. The span carries the provider as
// given (spans are not metrics: no bound).
func (s *stageAttrs) startOptions(provider string) []trace.SpanStartOption {
	s.mu.RLock()
	o, ok := s.starts[provider]
	s.mu.RUnlock()
	if ok {
		return o
	}
	attrs := []attribute.KeyValue{KeyGenAIOperationName.String("invoke_agent"), KeyGenAIAgentName.String(s.name), KeyStage.String(s.name)}
	if provider != "" {
		attrs = append(attrs, KeyGenAIProviderName.String(provider))
	}
	o = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.starts) < maxStartOptions {
		s.starts[provider] = o
	}
	return o
}

func (s *stageAttrs) cause(tag string, outcome termination.Outcome) *causeAttrs {
	return cached(&s.mu, s.byCause, causeKey{tag, outcome}, func(k causeKey) *causeAttrs {
		return &causeAttrs{
			withOutcome: metric.WithAttributeSet(attribute.NewSet(KeyStage.String(s.name), KeyTerminationCause.String(k.tag), KeyOutcome.String(k.outcome.String()))),
			tagOnly:     metric.WithAttributeSet(attribute.NewSet(KeyStage.String(s.name), KeyTerminationCause.String(k.tag))),
		}
	})
}

// cached returns m[k], building it with build the first time (under mu's
// write lock, so once per key); m is guarded by mu. A hit takes the read
// lock only and allocates nothing.
func cached[K comparable, V any](mu *sync.RWMutex, m map[K]V, k K, build func(K) V) V {
	mu.RLock()
	v, ok := m[k]
	mu.RUnlock()
	if ok {
		return v
	}
	mu.Lock()
	defer mu.Unlock()
	if v, ok = m[k]; !ok {
		v = build(k)
		m[k] = v
	}
	return v
}

// invokeAttrs is the attribute set of gen_ai.invoke_agent.duration:
// gen_ai.operation.name, gen_ai.agent.name, gen_ai.provider.name when
// given, error.type when the run failed. Both values are bounded (the
// provider by MaxProviders, the error type is a termination_cause).
func (s *stageAttrs) invokeAttrs(provider, errorType string) metric.MeasurementOption {
	return cached(&s.mu, s.invoke, invokeKey{provider, errorType}, func(k invokeKey) metric.MeasurementOption {
		kv := []attribute.KeyValue{KeyGenAIOperationName.String("invoke_agent"), KeyGenAIAgentName.String(s.name)}
		if k.provider != "" {
			kv = append(kv, KeyGenAIProviderName.String(k.provider))
		}
		if k.errorType != "" {
			kv = append(kv, KeyErrorType.String(k.errorType))
		}
		return metric.WithAttributeSet(attribute.NewSet(kv...))
	})
}

// resource is the attribute set {stage, resource}; a resource outside the
// contract's set is recorded as "_other".
func (s *stageAttrs) resource(res termination.Resource) metric.MeasurementOption {
	if !knownResource(res) {
		res = OtherValue
	}
	return cached(&s.mu, s.resources, res, func(res termination.Resource) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(KeyStage.String(s.name), KeyResource.String(string(res))))
	})
}

// treeLimit is the attribute set of agent.tree.limits.reached: {stage,
// resource}, resource a budgeted resource or "timeout"; anything else is
// recorded as "_other".
func (s *stageAttrs) treeLimit(res string) []metric.AddOption {
	if res != ResourceTimeout && !knownResource(termination.Resource(res)) {
		res = OtherValue
	}
	return cached(&s.mu, s.treeLimits, res, func(res string) []metric.AddOption {
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(KeyStage.String(s.name), KeyResource.String(res)))}
	})
}

func knownResource(res termination.Resource) bool {
	switch res {
	case termination.ResourceTotalTokens, termination.ResourceInputTokens, termination.ResourceOutputTokens,
		termination.ResourceCost, termination.ResourceIterations, termination.ResourceToolCalls:
		return true
	}
	return false
}

// signal is the attribute set of agent.stage.stall.warnings for a stall
// signal: {stage, signal}; bounded by maxSignals per stage.
func (s *stageAttrs) signal(sig termination.StallSignal) metric.MeasurementOption {
	s.mu.RLock()
	o, ok := s.signals[sig]
	s.mu.RUnlock()
	if ok {
		return o
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok = s.signals[sig]; ok {
		return o
	}
	recorded := string(sig)
	if len(s.signals) >= maxSignals || !label.ValidValue(recorded) {
		recorded = OtherValue
		if o, ok = s.signals[OtherValue]; ok {
			return o
		}
		sig = OtherValue
	}
	o = metric.WithAttributeSet(attribute.NewSet(KeyStage.String(s.name), KeySignal.String(recorded)))
	s.signals[sig] = o
	return o
}

// toolAttrs is what every call of one tool shares: its span name and the
// attribute sets of gen_ai.execute_tool.duration.
type toolAttrs struct {
	spanName string
	// The options of gen_ai.execute_tool.duration, as slices built once:
	// passing one option as a variadic argument would allocate per call.
	ok     []metric.RecordOption // {gen_ai.tool.name}
	failed []metric.RecordOption // {gen_ai.tool.name, error.type=tool_error}
}

func newToolAttrs(name, recorded string) *toolAttrs {
	return &toolAttrs{
		spanName: "execute_tool " + name,
		ok:       []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(KeyGenAIToolName.String(recorded)))},
		failed:   []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(KeyGenAIToolName.String(recorded), KeyErrorType.String(ToolError)))},
	}
}

// tool returns the attributes of a tool, and whether they are the "_other"
// ones (past the tool limit: the span name must then be built for the
// call). No allocation once the tool is known.
func (r *Recorder) tool(name string) (*toolAttrs, bool) {
	r.mu.RLock()
	t, other := r.tools[name], false
	if t == nil && len(r.tools) >= r.toolLimit {
		t, other = r.tools[OtherValue], true
	}
	r.mu.RUnlock()
	if t != nil {
		return t, other
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t = r.tools[name]; t != nil {
		return t, false
	}
	if len(r.tools) >= r.toolLimit {
		if t = r.tools[OtherValue]; t == nil {
			t = newToolAttrs(OtherValue, OtherValue)
			r.tools[OtherValue] = t
		}
		return t, true
	}
	t = newToolAttrs(name, name)
	r.tools[name] = t
	return t, false
}
