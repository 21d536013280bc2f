// Package telemetry records agentstop stage runs with OpenTelemetry: one
// "invoke_agent {stage}" span per run, "execute_tool {tool}" child spans, and
// the metrics of the contract (docs/spec.md §5 and §5.1), all tagged with the
// run's termination_cause.
//
// # Recording
//
// [NewRecorder] returns a [Recorder], the OpenTelemetry implementation of
// middleware.Participant:
//
//	rec := telemetry.NewRecorder()                 // global providers
//	stage, _ := middleware.New("planner", middleware.WithPolicy(p), middleware.WithParticipant(rec),
//		middleware.WithProviderName("openai"))
//
// Like otelhttp, it takes providers ([WithTracerProvider],
// [WithMeterProvider]) and defaults to the globals, so it costs nothing until
// an SDK is installed. Instruments are created once per Recorder; creation
// errors go to otel.Handle. Attribute sets are built once per stage and per
// (stage, cause, outcome), per tool and per provider, and cached, so a run's
// end builds no attribute set. Per event, only tool calls and results do
// anything: they are paired for gen_ai.execute_tool.duration whether or not
// the run's span is sampled, without allocating; when it is sampled, each
// pair also becomes a child span.
//
// # Spans
//
// "invoke_agent {stage}" (kind INTERNAL): gen_ai.operation.name=invoke_agent,
// gen_ai.agent.name and stage (the stage name), gen_ai.provider.name
// (middleware.WithProviderName; left out when not given), gen_ai.agent.id
// and gen_ai.conversation.id (middleware.WithAgentID, WithConversationID),
// agentstop.run.id (the run's id, [middleware.Run.ID]: every run has one;
// find the span of a run that `agentstop runs` lists),
// agentstop.parent.run.id (a child run's parent's id, docs/spec.md §8),
// gen_ai.request.model only when every model seen in the run is the same
// one; at the end termination_cause, termination.kind, outcome,
// agent.iterations, agent.tool_calls, gen_ai.usage.input_tokens and
// gen_ai.usage.output_tokens; status Error with error.type set to the
// termination_cause when the outcome is failed. Span events:
// agentstop.budget_pressure and agentstop.stall_warning for warnings,
// agentstop.error for reported failures, agentstop.termination with the
// cause's fields as termination.<field>. For each shadow policy
// (middleware.WithShadowPolicy, docs/spec.md §5.2) that would have stopped
// the run: agentstop.shadow.NAME.termination_cause and
// agentstop.shadow.NAME.stopped_at ([ShadowAttributeKeys]).
//
// Trees of runs: a child run's span is a child of its parent's span when
// the parent runs in this process, so a delegation is one trace. A child
// started under its parent's context gets it from the context, which
// carries the parent's span; a child started with middleware.WithParent
// from a context without a span gets it from the Recorder, which keeps the
// span context of each live sampled run (and forgets it when the run
// ends); from a context with a span of another trace, the caller's trace
// wins and the child's span links to the parent's. A parent in another
// process is named by agentstop.parent.run.id, and the two spans are one
// trace when the request's context carried the caller's trace (otelhttp,
// otelgrpc) beside the run link (middleware.Propagator).
//
// "execute_tool {tool}" (kind INTERNAL, child of the run's span, from the
// call to its result): gen_ai.operation.name=execute_tool,
// gen_ai.tool.name, gen_ai.tool.call.id when the loop gave one; a failed
// result sets status Error and error.type=tool_error, never the tool's
// free-text error. A result is paired with the call of the same call_id;
// a result without one (or with an id no open call has) with the oldest
// open call of its tool that has no id. Parallel calls to one tool each get
// their own span. Calls still open when the run ends get no span. The span
// is started when the result comes, with the call's time as its start, and
// ended at once; its attributes are set right after the start (the
// conventions mark none of them sampling-relevant: a sampler sees the
// span's name, which names the tool). Calls are timed by the monotonic
// clock from the run's start, as the SDK times a span's end from its
// start: the span's start is the run's start plus that offset, and a step
// of the wall clock during a run does not bend its tool spans.
//
// # Metrics
//
//	agent.stage.terminations        counter              stage, termination_cause, outcome
//	agent.stage.duration            histogram, s         stage, termination_cause, outcome
//	agent.stage.iterations          histogram            stage, termination_cause
//	agent.stage.tool_calls          histogram            stage, termination_cause
//	agent.stage.tokens              counter              stage, token_type
//	agent.stage.budget.utilization  histogram            stage, resource
//	agent.stage.budget.pressure     counter              stage, resource (tokens, cost, iterations, tool_calls)
//	agent.stage.stall.warnings      counter              stage, signal
//	agent.stage.active              up-down counter      stage
//	gen_ai.invoke_agent.duration    histogram, s         gen_ai.operation.name, gen_ai.agent.name,
//	                                                     gen_ai.provider.name (when given), error.type (when failed)
//	gen_ai.execute_tool.duration    histogram, s         gen_ai.tool.name, error.type=tool_error (when failed)
//	gen_ai.invoke_agent.inference_calls  histogram       gen_ai.agent.name
//	gen_ai.invoke_agent.tool_calls       histogram       gen_ai.agent.name
//	agent.tree.runs.cancelled       counter              stage
//	agent.tree.limits.reached       counter              stage, resource (tokens, cost, iterations, tool_calls, timeout)
//	agent.stage.idle.stops          counter, {run}       stage
//	agent.stage.shadow.stops        counter, {run}       stage, policy, termination_cause
//
// The histograms' buckets (docs/spec.md §5), passed to the SDK as advice:
//
//	agent.stage.duration, gen_ai.invoke_agent.duration   0.1, 0.2, 0.4 … 409.6 s (doubling)
//	agent.stage.iterations, agent.stage.tool_calls       1, 2, 4 … 1024
//	agent.stage.budget.utilization                       0.25, 0.5, 0.75, 0.8, 0.9, 1, 1.25, 1.5, 2
//	gen_ai.execute_tool.duration                         0.01, 0.02 … 81.92 s (doubling; the conventions' advice)
//	gen_ai.invoke_agent.inference_calls, .tool_calls     1, 2, 4 … 128
//
// gen_ai.invoke_agent.inference_calls ({inference_call}: the run's
// iterations, its model turns) and gen_ai.invoke_agent.tool_calls
// ({tool_call}) are recorded once per run.
//
// Measurements are recorded with the run's context, so that the SDK's
// default, trace-based exemplar filter links a sampled run's measurements
// to its trace; gen_ai.execute_tool.duration of a run that is not sampled
// is recorded without it (it would give no exemplar, and the filter then
// needs no lookup per tool call).
//
// agent.stage.idle.stops counts the runs an idle limit stopped (policy
// key idle:, a Timeout with idle set; for All, the last cause to fire):
// they are termination_cause="timeout" on agent.stage.terminations, like
// a run that reached its total timeout, and a hang is a different problem
// from a slow run. It is exported at 0 for a stage from its first run, so
// that Prometheus' increase() counts the first idle stop too.
//
// # Shadow policies
//
// A shadow policy is evaluated beside the enforced one and never acts
// (middleware.WithShadowPolicy). The Recorder does nothing for it per
// event: at the run's end, for each policy whose verdict in Result.Shadow
// says it would have stopped the run, agent.stage.shadow.stops {stage,
// policy (the shadow policy's name), termination_cause (the tag of the
// cause it would have stopped the run with, bounded like the run's own)}
// counts the run once, and the span gets the two attributes above. A
// policy that would not have stopped the run leaves no trace. Its
// would-stop rate is this counter over agent.stage.terminations of the
// stage (the dashboard's Shadow policies row). Policy names are bounded per
// stage on the metric ([MaxShadowPolicies], then "_other"); attribute sets
// are built once per (stage, policy, termination_cause).
//
// # Trees on metrics
//
// The termination_cause set is closed (docs/spec.md §2), so trees add no
// value to it: a run that an ancestor's end cancelled is "cancelled", a
// run that reached a tree limit has that limit's tag. Two counters, taken
// from the typed cause at the run's end, tell them apart for a dashboard:
// agent.tree.runs.cancelled {stage} counts the runs that ended with
// Cancelled{reason: parent} (an ancestor ended, or its tree limit was
// reached), under the cancelled run's stage; agent.tree.limits.reached
// {stage, resource} counts the runs that held a tree limit and reached it
// (a cause with scope "tree": BudgetExhausted and a BudgetPressure grace
// stop by their resource, MaxIterationsReached as iterations,
// MaxToolCallsReached as tool_calls, Timeout as [ResourceTimeout]), under
// the holder's stage: once per tree that hit its limit, not once per run
// the cascade ended. For All, the last cause to fire decides, as for its
// tag. agent.tree.runs.cancelled is exported at 0 for a stage from its
// first run that has a parent, so that Prometheus' increase() counts the
// first cascade too. A tree's pressure warning reaches the holder and
// every live descendant: it is on their spans (agentstop.budget_pressure
// with scope tree), not on agent.stage.budget.pressure, which counts a
// run's own budgets.
//
// # Semantic conventions followed
//
// The GenAI names follow open-telemetry/semantic-conventions-genai, main
// branch as of November 2026 (no release yet; status Development; commit
// 004902b of docs/gen-ai/gen-ai-metrics.md, building on semantic-conventions
// v1.42.0): agent spans (invoke_agent, execute_tool), gen_ai.* attributes,
// and the gen_ai.invoke_agent.duration and gen_ai.execute_tool.duration
// metrics. Where agentstop differs, on purpose: gen_ai.execute_tool.duration
// leaves out gen_ai.agent.name (conditionally required "when applicable"),
// so that its series stay bounded by tools, not tools × stages;
// gen_ai.invoke_agent.duration leaves out gen_ai.request.model (a run's
// model may change), and carries gen_ai.operation.name and
// gen_ai.provider.name as the contract asks (docs/spec.md §5.1). The conventions have no
// attribute for why an agent stopped yet (gen_ai.agent.finish_reason is
// under discussion): termination_cause stays the key until one is
// published.
//
// # Bounded cardinality
//
// termination_cause only takes the contract's closed set of values
// (docs/spec.md §2 and §5), plus
// the custom reasons the stage allow-lists (middleware.WithCustomReasons,
// the one allow-list), up to [MaxCustomTags] over all stages. The recorder
// takes the tag from the typed cause and the allow-list it is given with
// each run (middleware.RunInfo), never from a string written into the
// Result; every other value is recorded as "custom". Stage names past
// [WithStageLimit] distinct names (default 200) are recorded as "_other",
// tool names past [WithToolLimit] (default 200) too, provider names past
// [MaxProviders]; error.type is a termination_cause or tool_error.
// otelsetup.Setup also sets the SDK's per-instrument cardinality limit.
//
// # Dependencies
//
// Package telemetry depends on the OpenTelemetry API only (like otelhttp):
// importing it pulls in no SDK, exporter, gRPC or Prometheus client (a test
// checks `go list -deps`). The SDK and exporter setup an application
// usually wants lives in package [github.com/agentstop/agentstop/telemetry/otelsetup]:
//
//	tel, _ := otelsetup.Setup(ctx)   // SDK, Prometheus /metrics, OTLP from OTEL_* variables
//	rec := tel.Recorder()            // a Recorder on those providers
package telemetry
