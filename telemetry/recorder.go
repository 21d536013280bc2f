package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// ScopeName is the instrumentation scope of agentstop's spans and metrics.
const ScopeName = "github.com/agentstop/agentstop/telemetry"

// Version is the version of the instrumentation.
func Version() string { return "0.1.0" }

// Attribute keys shared by spans and metrics.
const (
	KeyStage            = attribute.Key("stage")
	KeyTerminationCause = attribute.Key("termination_cause")
	KeyOutcome          = attribute.Key("outcome")
	KeyTokenType        = attribute.Key("token_type")
	KeyResource         = attribute.Key("resource")
	KeyTerminationKind  = attribute.Key("termination.kind")
)

// OtherStage is the stage name recorded for stages past the stage limit.
const OtherStage = "_other"

// DefaultStageLimit is the default number of distinct stage names recorded.
const DefaultStageLimit = 200

// Bucket layouts of the contract.
var (
	DurationBuckets    = []float64{0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6}
	CountBuckets       = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
	UtilizationBuckets = []float64{0.25, 0.5, 0.75, 0.8, 0.9, 1, 1.25, 1.5, 2}
)

// Option configures a Recorder.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	tp            trace.TracerProvider
	mp            metric.MeterProvider
	stageLimit    int
	customReasons []string
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

// WithCustomReasons allow-lists custom termination_cause values (Custom
// reasons, tags of registered cause types) ahead of the stages' own
// allow-lists (see Recorder). A value that is not a snake_case label of at
// most 64 characters is reported to otel.Handle and ignored.
func WithCustomReasons(reasons ...string) Option {
	return optionFunc(func(c *config) {
		for _, r := range reasons {
			if !termination.ValidTagValue(r) {
				otel.Handle(fmt.Errorf("telemetry: WithCustomReasons: %q is not a snake_case label of at most 64 characters; ignored", r))
				continue
			}
			c.customReasons = append(c.customReasons, r)
		}
	})
}

// MaxCustomTags bounds the custom termination_cause values a Recorder
// accepts from stages' allow-lists (beyond those of WithCustomReasons);
// later ones are recorded as "custom".
const MaxCustomTags = 32

// Recorder records stage runs with OpenTelemetry. It implements
// middleware.Recorder and is safe for concurrent use; one Recorder can serve
// every stage of a process.
type Recorder struct {
	tracer trace.Tracer

	terminations metric.Int64Counter
	duration     metric.Float64Histogram
	iterations   metric.Int64Histogram
	toolCalls    metric.Int64Histogram
	tokens       metric.Int64Counter
	utilization  metric.Float64Histogram
	pressure     metric.Int64Counter
	active       metric.Int64UpDownCounter

	stageLimit int
	tagsMu     sync.RWMutex
	tags       map[string]bool // allowed termination_cause values
	accepted   int             // custom values accepted from stages' allow-lists

	mu     sync.RWMutex
	stages map[string]*stageAttrs
}

var _ middleware.Recorder = (*Recorder)(nil)

// NewRecorder returns a Recorder. Instrument creation errors are sent to
// otel.Handle; the Recorder then records with the instruments it has.
func NewRecorder(opts ...Option) *Recorder {
	cfg := config{stageLimit: DefaultStageLimit}
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
		tags:       map[string]bool{},
		stages:     map[string]*stageAttrs{},
	}
	for _, t := range termination.TagValues() {
		r.tags[t] = true
	}
	for _, t := range cfg.customReasons {
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
		metric.WithDescription("Duration of stage runs."), metric.WithExplicitBucketBoundaries(DurationBuckets...))
	handle(err)
	r.iterations, err = meter.Int64Histogram("agent.stage.iterations", metric.WithUnit("{iteration}"),
		metric.WithDescription("Model turns per stage run."), metric.WithExplicitBucketBoundaries(CountBuckets...))
	handle(err)
	r.toolCalls, err = meter.Int64Histogram("agent.stage.tool_calls", metric.WithUnit("{tool_call}"),
		metric.WithDescription("Tool calls per stage run."), metric.WithExplicitBucketBoundaries(CountBuckets...))
	handle(err)
	r.tokens, err = meter.Int64Counter("agent.stage.tokens", metric.WithUnit("{token}"),
		metric.WithDescription("Tokens spent by stage runs."))
	handle(err)
	r.utilization, err = meter.Float64Histogram("agent.stage.budget.utilization", metric.WithUnit("1"),
		metric.WithDescription("Share of each budget used by a stage run."), metric.WithExplicitBucketBoundaries(UtilizationBuckets...))
	handle(err)
	r.pressure, err = meter.Int64Counter("agent.stage.budget.pressure",
		metric.WithDescription("Budget-pressure warnings."))
	handle(err)
	r.active, err = meter.Int64UpDownCounter("agent.stage.active",
		metric.WithDescription("Stage runs in progress."))
	handle(err)
	return r
}

// stageAttrs are the attribute sets of one stage, built once.
type stageAttrs struct {
	name     string
	spanName string
	stage    metric.MeasurementOption // {stage}
	input    metric.MeasurementOption // {stage, token_type=input}
	output   metric.MeasurementOption // {stage, token_type=output}
	startAt  []attribute.KeyValue     // span attributes at start

	mu        sync.RWMutex
	byCause   map[causeKey]*causeAttrs
	resources map[termination.Resource]metric.MeasurementOption
	tools     map[string]*toolSpan
}

type causeKey struct {
	tag     string
	outcome termination.Outcome
}

type causeAttrs struct {
	withOutcome metric.MeasurementOption // {stage, termination_cause, outcome}
	tagOnly     metric.MeasurementOption // {stage, termination_cause}
}

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
		name:      recorded,
		spanName:  "invoke_agent " + recorded,
		stage:     metric.WithAttributeSet(attribute.NewSet(KeyStage.String(recorded))),
		input:     metric.WithAttributeSet(attribute.NewSet(KeyStage.String(recorded), KeyTokenType.String("input"))),
		output:    metric.WithAttributeSet(attribute.NewSet(KeyStage.String(recorded), KeyTokenType.String("output"))),
		startAt:   []attribute.KeyValue{attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", recorded), KeyStage.String(recorded)},
		byCause:   map[causeKey]*causeAttrs{},
		resources: map[termination.Resource]metric.MeasurementOption{},
		tools:     map[string]*toolSpan{},
	}
	r.stages[recorded] = s
	return s
}

func (s *stageAttrs) cause(tag string, outcome termination.Outcome) *causeAttrs {
	k := causeKey{tag, outcome}
	s.mu.RLock()
	c := s.byCause[k]
	s.mu.RUnlock()
	if c != nil {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c = s.byCause[k]; c == nil {
		c = &causeAttrs{
			withOutcome: metric.WithAttributeSet(attribute.NewSet(KeyStage.String(s.name), KeyTerminationCause.String(tag), KeyOutcome.String(outcome.String()))),
			tagOnly:     metric.WithAttributeSet(attribute.NewSet(KeyStage.String(s.name), KeyTerminationCause.String(tag))),
		}
		s.byCause[k] = c
	}
	return c
}

// maxPendingTools bounds the tool calls a sampled run keeps waiting for
// their results.
const maxPendingTools = 256

// maxCachedTools bounds the per-stage cache of tool span names and options;
// tools past it build theirs per span.
const maxCachedTools = 64

// toolSpan is what every execute_tool span of one tool shares.
type toolSpan struct {
	name string
	opts []trace.SpanStartOption
}

func newToolSpan(tool string) *toolSpan {
	return &toolSpan{name: "execute_tool " + tool, opts: []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", tool)),
	}}
}

func (s *stageAttrs) tool(name string) *toolSpan {
	s.mu.RLock()
	ts := s.tools[name]
	s.mu.RUnlock()
	if ts != nil {
		return ts
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ts = s.tools[name]; ts == nil {
		ts = newToolSpan(name)
		if len(s.tools) < maxCachedTools {
			s.tools[name] = ts
		}
	}
	return ts
}

func (s *stageAttrs) resource(res termination.Resource) metric.MeasurementOption {
	s.mu.RLock()
	o, ok := s.resources[res]
	s.mu.RUnlock()
	if ok {
		return o
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok = s.resources[res]; !ok {
		o = metric.WithAttributeSet(attribute.NewSet(KeyStage.String(s.name), KeyResource.String(string(res))))
		s.resources[res] = o
	}
	return o
}

// tag bounds a result's termination_cause to the allowed set.
func (r *Recorder) tag(res *termination.Result) string {
	t := res.Tag()
	r.tagsMu.RLock()
	ok := r.tags[t]
	r.tagsMu.RUnlock()
	if ok {
		return t
	}
	// A value the stage allow-listed (middleware.WithCustomReasons put it
	// in the Result) is trusted up to MaxCustomTags distinct values, so that
	// the allow-list is configured once, on the stage.
	if res.TerminationCause != t || !termination.ValidTagValue(t) {
		return termination.TagCustom
	}
	r.tagsMu.Lock()
	defer r.tagsMu.Unlock()
	if r.tags[t] {
		return t
	}
	if r.accepted >= MaxCustomTags {
		return termination.TagCustom
	}
	r.accepted++
	r.tags[t] = true
	return t
}

// StartRun implements middleware.Recorder: it starts the run's span and
// counts the run as active.
func (r *Recorder) StartRun(ctx context.Context, stage string) (context.Context, middleware.RunRecorder) {
	s := r.stage(stage)
	ctx, span := r.tracer.Start(ctx, s.spanName, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(s.startAt...))
	r.active.Add(ctx, 1, s.stage)
	return ctx, &runRecorder{rec: r, stage: s, ctx: ctx, span: span, recording: span.IsRecording()}
}

type pendingTool struct {
	tool  string
	start time.Time
}

// runRecorder records one run. The middleware calls it under the run's lock.
type runRecorder struct {
	rec       *Recorder
	stage     *stageAttrs
	ctx       context.Context
	span      trace.Span
	recording bool
	pending   []pendingTool
	opts      []trace.SpanStartOption // scratch for execute_tool spans
}

// Event turns tool_call/tool_result pairs into execute_tool child spans when
// the run's span is sampled; otherwise it does nothing.
func (rr *runRecorder) Event(ev *termination.Event) {
	if !rr.recording {
		return
	}
	switch ev.Kind {
	case termination.KindToolCall:
		if len(rr.pending) == maxPendingTools {
			// A loop that never reports results: forget the oldest call
			// rather than grow for the run's whole life.
			rr.pending = slices.Delete(rr.pending, 0, 1)
		}
		rr.pending = append(rr.pending, pendingTool{tool: ev.Tool, start: time.Now()})
	case termination.KindToolResult:
		for i, p := range rr.pending {
			if p.tool != ev.Tool {
				continue
			}
			rr.pending = slices.Delete(rr.pending, i, i+1)
			ts := rr.stage.tool(ev.Tool)
			// The options are the tool's, built once, plus the call's start.
			rr.opts = append(append(rr.opts[:0], ts.opts...), trace.WithTimestamp(p.start))
			_, span := rr.rec.tracer.Start(rr.ctx, ts.name, rr.opts...)
			if ev.Err != "" {
				span.SetStatus(codes.Error, ev.Err)
				span.SetAttributes(attribute.String("error.type", "tool_error"))
			}
			span.End()
			return
		}
	}
}

// Warning counts a budget-pressure warning and adds a span event.
func (rr *runRecorder) Warning(c termination.Cause) {
	bp, ok := c.(termination.BudgetPressure)
	if !ok {
		return
	}
	rr.rec.pressure.Add(rr.ctx, 1, rr.stage.resource(bp.Resource))
	if rr.recording {
		rr.span.AddEvent("agentstop.budget_pressure", trace.WithAttributes(
			KeyResource.String(string(bp.Resource)),
			attribute.Float64("threshold", bp.Threshold),
			attribute.Float64("used", bp.Used),
			attribute.Float64("limit", bp.Limit)))
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
	tag := r.tag(res)
	ca := s.cause(tag, res.Outcome)
	r.terminations.Add(ctx, 1, ca.withOutcome)
	r.duration.Record(ctx, res.Duration.Seconds(), ca.withOutcome)
	r.iterations.Record(ctx, int64(res.Iterations), ca.tagOnly)
	r.toolCalls.Record(ctx, int64(res.ToolCalls), ca.tagOnly)
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
	if rr.recording {
		rr.endSpan(res, tag)
	}
	rr.span.End()
}

func (rr *runRecorder) endSpan(res *termination.Result, tag string) {
	kind, err := termination.KindOf(res.Cause)
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
	attrs := []attribute.KeyValue{KeyTerminationCause.String(tag), KeyTerminationKind.String(kind)}
	attrs = append(attrs, causeAttributes(res.Cause)...)
	span.AddEvent("agentstop.termination", trace.WithAttributes(attrs...))
	if res.Outcome == termination.OutcomeFailed {
		span.SetAttributes(attribute.String("error.type", tag))
		msg := ""
		if res.Cause != nil {
			msg = res.Cause.Error()
		}
		span.SetStatus(codes.Error, msg)
	}
}

// Attribute keys of the termination event's cause fields.
const (
	keyCondition = attribute.Key("termination.condition")
	keyDetail    = attribute.Key("termination.detail")
	keyTarget    = attribute.Key("termination.target")
	keySource    = attribute.Key("termination.source")
	keyLimit     = attribute.Key("termination.limit")
	keyCount     = attribute.Key("termination.count")
	keyResource  = attribute.Key("termination.resource")
	keyThreshold = attribute.Key("termination.threshold")
	keyUsed      = attribute.Key("termination.used")
	keySignal    = attribute.Key("termination.signal")
	keyRepeats   = attribute.Key("termination.repeats")
	keyElapsed   = attribute.Key("termination.elapsed")
	keyReason    = attribute.Key("termination.reason")
	keyError     = attribute.Key("termination.error")
	keyProps     = attribute.Key("termination.properties")
	keyCauses    = attribute.Key("termination.causes")
)

// causeAttributes turns a cause's JSON fields into "termination.<field>"
// attributes. Built-in causes keep their Go types, so a field always has the
// same attribute type (budget amounts are always doubles, even when whole);
// Timeout's durations are Go duration strings as in the JSON form; nested
// values (Custom properties, All's causes) are JSON text.
func causeAttributes(c termination.Cause) []attribute.KeyValue {
	switch c := c.(type) {
	case nil:
		return nil
	case termination.Completed:
		return []attribute.KeyValue{keyCondition.String(c.Condition), keyDetail.String(c.Detail)}
	case termination.NaturalCompletion:
		return nil
	case termination.HandoffRequested:
		return []attribute.KeyValue{keySource.String(c.Source), keyTarget.String(c.Target)}
	case termination.MaxIterationsReached:
		return []attribute.KeyValue{keyCount.Int(c.Count), keyLimit.Int(c.Limit)}
	case termination.MaxToolCallsReached:
		return []attribute.KeyValue{keyCount.Int(c.Count), keyLimit.Int(c.Limit)}
	case termination.BudgetPressure:
		return []attribute.KeyValue{keyLimit.Float64(c.Limit), keyResource.String(string(c.Resource)),
			keyThreshold.Float64(c.Threshold), keyUsed.Float64(c.Used)}
	case termination.BudgetExhausted:
		return []attribute.KeyValue{keyLimit.Float64(c.Limit), keyResource.String(string(c.Resource)), keyUsed.Float64(c.Used)}
	case termination.StallDetected:
		return []attribute.KeyValue{keyRepeats.Int(c.Repeats), keySignal.String(string(c.Signal))}
	case termination.Timeout:
		return []attribute.KeyValue{keyElapsed.String(c.Elapsed.String()), keyLimit.String(c.Limit.String())}
	case termination.Cancelled:
		return []attribute.KeyValue{keyDetail.String(c.Detail), keyReason.String(string(c.Reason))}
	case termination.Failed:
		return []attribute.KeyValue{keyError.String(c.Err), keyReason.String(string(c.Reason))}
	case termination.Skipped:
		return []attribute.KeyValue{keyReason.String(c.Reason)}
	case termination.Custom:
		props := "null"
		if b, err := json.Marshal(c.Properties); err == nil {
			props = string(b)
		}
		return []attribute.KeyValue{keyProps.String(props), keyReason.String(c.Reason)}
	case termination.All:
		b, err := termination.MarshalCause(c)
		if err != nil {
			return nil
		}
		var fields struct {
			Causes json.RawMessage `json:"causes"`
		}
		if json.Unmarshal(b, &fields) != nil {
			return nil
		}
		return []attribute.KeyValue{keyCauses.String(string(fields.Causes))}
	}
	return jsonCauseAttributes(c)
}

// jsonCauseAttributes flattens a user-defined cause's JSON fields into
// "termination.<field>" attributes; nested values are kept as JSON text.
func jsonCauseAttributes(c termination.Cause) []attribute.KeyValue {
	b, err := termination.MarshalCause(c)
	if err != nil {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return nil
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if k != termination.KindKey {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]attribute.KeyValue, 0, len(keys))
	for _, k := range keys {
		key := attribute.Key("termination." + k)
		raw := fields[k]
		var v any
		if json.Unmarshal(raw, &v) != nil {
			continue
		}
		switch v := v.(type) {
		case string:
			out = append(out, key.String(v))
		case float64:
			if v == float64(int64(v)) {
				out = append(out, key.Int64(int64(v)))
			} else {
				out = append(out, key.Float64(v))
			}
		case bool:
			out = append(out, key.Bool(v))
		case nil:
		default:
			out = append(out, key.String(string(raw)))
		}
	}
	return out
}
