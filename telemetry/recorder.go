package telemetry

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// ScopeName is the instrumentation scope of agentstop's spans and metrics.
const ScopeName = "github.com/agentstop/agentstop/telemetry"

// Version is the version of the instrumentation.
func Version() string { return "0.1.0" }

// Attribute keys of the spans and metrics (docs/spec.md §5). The
// gen_ai.* keys follow the GenAI semantic conventions (see the package doc
// for the version followed).
const (
	KeyStage            = attribute.Key("stage")
	KeyTerminationCause = attribute.Key("termination_cause")
	KeyOutcome          = attribute.Key("outcome")
	KeyTokenType        = attribute.Key("token_type")
	KeyResource         = attribute.Key("resource")
	KeySignal           = attribute.Key("signal")
	KeyTerminationKind  = attribute.Key("termination.kind")
	// KeyPolicy is the shadow policy's name on agent.stage.shadow.stops.
	KeyPolicy = attribute.Key("policy")

	KeyGenAIOperationName  = attribute.Key("gen_ai.operation.name")
	KeyGenAIAgentName      = attribute.Key("gen_ai.agent.name")
	KeyGenAIAgentID        = attribute.Key("gen_ai.agent.id")
	KeyGenAIConversationID = attribute.Key("gen_ai.conversation.id")
	KeyGenAIProviderName   = attribute.Key("gen_ai.provider.name")
	KeyGenAIRequestModel   = attribute.Key("gen_ai.request.model")
	KeyGenAIToolName       = attribute.Key("gen_ai.tool.name")
	KeyGenAIToolCallID     = attribute.Key("gen_ai.tool.call.id")
	KeyErrorType           = attribute.Key("error.type")
	KeyRunID               = attribute.Key("agentstop.run.id")
	// KeyParentRunID is the parent's run id on the invoke_agent span of a
	// child run (docs/spec.md §8).
	KeyParentRunID = attribute.Key("agentstop.parent.run.id")
)

// Fixed attribute values the Recorder records in place of unbounded or
// free-text ones.
const (
	// OtherStage is the stage name recorded for stages past the stage limit.
	OtherStage = "_other"
	// OtherValue is recorded for tool names past the tool limit, provider
	// names past MaxProviders, shadow policy names past MaxShadowPolicies
	// and unknown stall signals past the bound.
	OtherValue = "_other"
	// ToolError is the error.type of a failed tool call (never the tool's
	// free-text error).
	ToolError = "tool_error"
	// ResourceTimeout is the resource attribute of agent.tree.limits.reached
	// for a tree timeout (a Timeout with scope tree), beside the budgeted
	// resources of termination.Resource.
	ResourceTimeout = "timeout"
)

// Cardinality bounds of a Recorder: past each, later values are recorded as
// "_other" (termination_cause values as "custom").
const (
	// DefaultStageLimit is the default number of distinct stage names
	// recorded (WithStageLimit).
	DefaultStageLimit = 200
	// DefaultToolLimit is the default number of distinct tool names
	// recorded on gen_ai.execute_tool.duration (WithToolLimit).
	DefaultToolLimit = 200
	// MaxCustomTags bounds the custom termination_cause values a Recorder
	// records from stages' allow-lists (middleware.WithCustomReasons), over
	// all stages; later ones are recorded as "custom".
	MaxCustomTags = 32
	// MaxProviders bounds the distinct gen_ai.provider.name values a
	// Recorder records on metrics; later ones are recorded as "_other".
	MaxProviders = 32
	// MaxShadowPolicies bounds the distinct shadow policy names a Recorder
	// records per stage on agent.stage.shadow.stops; later ones are
	// recorded as "_other" (their span attributes keep their names).
	MaxShadowPolicies = 16
)

// Bucket layouts of the contract (docs/spec.md §5), unexported so that no
// caller can change them: the package doc lists them.
var (
	// durationBuckets: agent.stage.duration and gen_ai.invoke_agent.duration.
	durationBuckets = []float64{0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6}
	// countBuckets: agent.stage.iterations and agent.stage.tool_calls.
	countBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
	// agentCallBuckets: gen_ai.invoke_agent.inference_calls and
	// gen_ai.invoke_agent.tool_calls: 1, 2, 4 … 128.
	agentCallBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128}
	// utilizationBuckets: agent.stage.budget.utilization.
	utilizationBuckets = []float64{0.25, 0.5, 0.75, 0.8, 0.9, 1, 1.25, 1.5, 2}
	// toolDurationBuckets are the GenAI conventions' advice for
	// gen_ai.execute_tool.duration: 0.01 … 81.92 s, doubling.
	toolDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

// Option configures a Recorder.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	tp         trace.TracerProvider
	mp         metric.MeterProvider
	stageLimit int
	toolLimit  int
}

// WithTracerProvider sets the tracer provider. Default: the global one.
// nil is ignored.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) {
		if tp != nil {
			c.tp = tp
		}
	})
}

// WithMeterProvider sets the meter provider. Default: the global one. nil
// is ignored.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) {
		if mp != nil {
			c.mp = mp
		}
	})
}

// WithStageLimit sets how many distinct stage names are recorded; runs of
// later stages are recorded as "_other". Default DefaultStageLimit; a value
// < 1 is reported to otel.Handle and ignored.
func WithStageLimit(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 {
			otel.Handle(fmt.Errorf("telemetry: WithStageLimit(%d): must be >= 1; keeping %d", n, c.stageLimit))
			return
		}
		c.stageLimit = n
	})
}

// WithToolLimit sets how many distinct tool names gen_ai.execute_tool.duration
// records; later tools are recorded as "_other" (their spans keep their
// names). Default DefaultToolLimit; a value < 1 is reported to otel.Handle
// and ignored.
func WithToolLimit(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 {
			otel.Handle(fmt.Errorf("telemetry: WithToolLimit(%d): must be >= 1; keeping %d", n, c.toolLimit))
			return
		}
		c.toolLimit = n
	})
}

// Recorder records stage runs with OpenTelemetry. It implements
// middleware.Participant and is safe for concurrent use; one Recorder can serve
// every stage of a process.
type Recorder struct {
	tracer trace.Tracer

	terminations   metric.Int64Counter
	duration       metric.Float64Histogram
	iterations     metric.Int64Histogram
	toolCalls      metric.Int64Histogram
	tokens         metric.Int64Counter
	utilization    metric.Float64Histogram
	pressure       metric.Int64Counter
	stalls         metric.Int64Counter
	active         metric.Int64UpDownCounter
	invokeDuration metric.Float64Histogram
	toolDuration   metric.Float64Histogram
	inferenceCalls metric.Int64Histogram
	agentToolCalls metric.Int64Histogram
	treeCancelled  metric.Int64Counter
	treeLimits     metric.Int64Counter
	idleStops      metric.Int64Counter
	shadowStops    metric.Int64Counter // shadow.go
	holds          holds               // agent.stage.held, agent.stage.held.oldest (hold.go)

	stageLimit int
	toolLimit  int

	tagsMu sync.RWMutex
	tags   map[string]bool // termination_cause values recorded as themselves
	custom int             // custom values among tags

	mu        sync.RWMutex
	stages    map[string]*stageAttrs
	tools     map[string]*toolAttrs
	providers map[string]struct{} // provider names recorded as themselves

	// spans holds the span context of every live run whose span is
	// sampled, by run id, for its children's spans (underParent).
	spans sync.Map
}

var _ middleware.Participant = (*Recorder)(nil)

// NewRecorder returns a Recorder. Instrument creation errors are sent to
// otel.Handle; the Recorder then records with the instruments it has.
func NewRecorder(opts ...Option) *Recorder {
	cfg := config{stageLimit: DefaultStageLimit, toolLimit: DefaultToolLimit}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	r := &Recorder{
		tracer:     cfg.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(Version())),
		stageLimit: cfg.stageLimit,
		toolLimit:  cfg.toolLimit,
		tags:       map[string]bool{},
		stages:     map[string]*stageAttrs{},
		tools:      map[string]*toolAttrs{},
		providers:  map[string]struct{}{},
	}
	for _, t := range termination.TagValues() {
		r.tags[t] = true
	}
	meter := cfg.mp.Meter(ScopeName, metric.WithInstrumentationVersion(Version()))
	var err error
	handle := func(e error) {
		if e != nil {
			otel.Handle(e)
		}
	}
	r.terminations, err = meter.Int64Counter("agent.stage.terminations",
		metric.WithDescription("Stage runs that ended, by why they ended."))
	handle(err)
	r.duration, err = meter.Float64Histogram("agent.stage.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of stage runs."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	handle(err)
	r.iterations, err = meter.Int64Histogram("agent.stage.iterations", metric.WithUnit("{iteration}"),
		metric.WithDescription("Model turns per stage run."), metric.WithExplicitBucketBoundaries(countBuckets...))
	handle(err)
	r.toolCalls, err = meter.Int64Histogram("agent.stage.tool_calls", metric.WithUnit("{tool_call}"),
		metric.WithDescription("Tool calls per stage run."), metric.WithExplicitBucketBoundaries(countBuckets...))
	handle(err)
	r.tokens, err = meter.Int64Counter("agent.stage.tokens", metric.WithUnit("{token}"),
		metric.WithDescription("Tokens spent by stage runs."))
	handle(err)
	r.utilization, err = meter.Float64Histogram("agent.stage.budget.utilization", metric.WithUnit("1"),
		metric.WithDescription("Share of each budget used by a stage run."), metric.WithExplicitBucketBoundaries(utilizationBuckets...))
	handle(err)
	r.pressure, err = meter.Int64Counter("agent.stage.budget.pressure",
		metric.WithDescription("Budget-pressure warnings."))
	handle(err)
	r.stalls, err = meter.Int64Counter("agent.stage.stall.warnings",
		metric.WithDescription("Stall warnings: the loop started repeating itself, before any stop."))
	handle(err)
	r.active, err = meter.Int64UpDownCounter("agent.stage.active",
		metric.WithDescription("Stage runs in progress."))
	handle(err)
	r.invokeDuration, err = meter.Float64Histogram("gen_ai.invoke_agent.duration", metric.WithUnit("s"),
		metric.WithDescription("The end-to-end duration of a single agent invocation."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	handle(err)
	r.toolDuration, err = meter.Float64Histogram("gen_ai.execute_tool.duration", metric.WithUnit("s"),
		metric.WithDescription("The duration of a single tool execution."),
		metric.WithExplicitBucketBoundaries(toolDurationBuckets...))
	handle(err)
	r.inferenceCalls, err = meter.Int64Histogram("gen_ai.invoke_agent.inference_calls", metric.WithUnit("{inference_call}"),
		metric.WithDescription("The number of inference calls made during a single agent invocation."),
		metric.WithExplicitBucketBoundaries(agentCallBuckets...))
	handle(err)
	r.agentToolCalls, err = meter.Int64Histogram("gen_ai.invoke_agent.tool_calls", metric.WithUnit("{tool_call}"),
		metric.WithDescription("The number of tool calls made during a single agent invocation."),
		metric.WithExplicitBucketBoundaries(agentCallBuckets...))
	handle(err)
	r.treeCancelled, err = meter.Int64Counter("agent.tree.runs.cancelled", metric.WithUnit("{run}"),
		metric.WithDescription("Runs ended because an ancestor run ended (Cancelled with reason parent)."))
	handle(err)
	r.treeLimits, err = meter.Int64Counter("agent.tree.limits.reached",
		metric.WithDescription("Tree limits reached: runs ended by a limit over themselves and their descendants (scope tree)."))
	handle(err)
	r.idleStops, err = meter.Int64Counter("agent.stage.idle.stops", metric.WithUnit("{run}"),
		metric.WithDescription("Runs stopped because no event arrived for their idle limit (Timeout with idle; termination_cause timeout)."))
	handle(err)
	r.shadowStops, err = newShadowStops(meter)
	handle(err)
	r.initHolds(meter, handle)
	return r
}

// tag is the result's termination_cause: taken from the typed cause with
// the stage's allow-list (never from a string written into the Result),
// and bounded to the closed set plus MaxCustomTags allow-listed values.
func (r *Recorder) tag(c termination.Cause, info *middleware.RunInfo) string {
	var allowed func(string) bool
	if len(info.CustomReasons) > 0 {
		allowed = info.Allowed
	}
	t := termination.Tag(c, allowed)
	if t == "" {
		return termination.TagCustom // no cause at all: a Result the middleware never builds
	}
	r.tagsMu.RLock()
	ok := r.tags[t]
	r.tagsMu.RUnlock()
	if ok {
		return t
	}
	r.tagsMu.Lock()
	defer r.tagsMu.Unlock()
	if r.tags[t] {
		return t
	}
	if r.custom >= MaxCustomTags {
		return termination.TagCustom
	}
	r.custom++
	r.tags[t] = true
	return t
}

// provider bounds a provider name for metrics: the first MaxProviders
// names are recorded as themselves, later ones as "_other".
func (r *Recorder) provider(name string) string {
	if name == "" {
		return ""
	}
	r.mu.RLock()
	_, ok := r.providers[name]
	n := len(r.providers)
	r.mu.RUnlock()
	switch {
	case ok:
		return name
	case n >= MaxProviders:
		return OtherValue
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.providers[name]; !ok {
		if len(r.providers) >= MaxProviders {
			return OtherValue
		}
		r.providers[name] = struct{}{}
	}
	return name
}

// underParent places a child run's span under its parent's when the
// parent is a live, sampled run of this Recorder that the context does not
// already carry (a child started with middleware.WithParent rather than
// under its parent's context): a context without a span gets the parent's
// span as the new span's parent; a context with a span of another trace
// keeps it (the caller's trace wins), and the span links to the parent's.
// A child started under its parent's context already has the parent's
// span, or one below it, as its parent.
func (r *Recorder) underParent(ctx context.Context, parent string, opts []trace.SpanStartOption) (context.Context, []trace.SpanStartOption) {
	v, ok := r.spans.Load(parent)
	if !ok {
		return ctx, opts // not a run of this Recorder, or not sampled
	}
	psc := v.(trace.SpanContext)
	cur := trace.SpanContextFromContext(ctx)
	switch {
	case !cur.IsValid():
		return trace.ContextWithSpanContext(ctx, psc), opts
	case cur.TraceID() != psc.TraceID():
		return ctx, append(opts[:len(opts):len(opts)], trace.WithLinks(trace.Link{SpanContext: psc}))
	}
	return ctx, opts
}

// Join implements middleware.Participant: it starts the run's span and
// counts the run as active.
func (r *Recorder) Join(ctx context.Context, run *middleware.Run) (context.Context, middleware.Part) {
	return r.startRun(ctx, run.Info())
}

// startRun starts the span of the run info describes.
func (r *Recorder) startRun(ctx context.Context, info middleware.RunInfo) (context.Context, middleware.Part) {
	s := r.stage(info.Stage)
	provider := r.provider(info.Provider)
	opts := s.startOptions(info.Provider)
	if info.ParentRunID != "" {
		ctx, opts = r.underParent(ctx, info.ParentRunID, opts)
	}
	ctx, span := r.tracer.Start(ctx, s.spanName, opts...)
	r.active.Add(ctx, 1, s.stage)
	rr := &runRecorder{rec: r, stage: s, ctx: ctx, span: span, recording: span.IsRecording(),
		info: info, provider: provider, base: time.Now(), toolCtx: context.Background()}
	if span.SpanContext().IsSampled() {
		rr.toolCtx = ctx
	}
	rr.pending = rr.pendingBuf[:0]
	if rr.recording {
		rr.scratch = new(spanScratch)
	}
	if rr.recording && info.RunID != "" {
		// A child started with middleware.WithParent from a context
		// without a span finds this run's span here (underParent).
		r.spans.Store(info.RunID, span.SpanContext())
	}
	if rr.recording {
		if info.AgentID != "" {
			span.SetAttributes(KeyGenAIAgentID.String(info.AgentID))
		}
		if info.ConversationID != "" {
			span.SetAttributes(KeyGenAIConversationID.String(info.ConversationID))
		}
		if info.RunID != "" {
			span.SetAttributes(KeyRunID.String(info.RunID))
		}
		if info.ParentRunID != "" {
			span.SetAttributes(KeyParentRunID.String(info.ParentRunID))
		}
	}
	if !s.started.Load() && s.started.CompareAndSwap(false, true) {
		// The stage's first run: export agent.stage.idle.stops at 0, so
		// that a dashboard's increase() counts the first idle stop too.
		r.idleStops.Add(ctx, 0, s.idleStops...)
	}
	if info.ParentRunID != "" && !s.hasChildren.Load() && s.hasChildren.CompareAndSwap(false, true) {
		// The stage's first child run: export agent.tree.runs.cancelled at
		// 0, so that a dashboard's increase() counts the first cascade too.
		r.treeCancelled.Add(ctx, 0, s.treeCancel...)
	}
	return ctx, rr
}
