// Package telemetry records agentstop stage runs with OpenTelemetry: one
// "invoke_agent {stage}" span per run, "execute_tool {tool}" child spans, and
// the metrics of the contract (agent.stage.terminations, .duration,
// .iterations, .tool_calls, .tokens, .budget.utilization, .budget.pressure,
// .active), all tagged with the run's termination_cause.
//
// # Recording
//
// [NewRecorder] returns a [Recorder], the OpenTelemetry implementation of
// middleware.Recorder:
//
//	rec := telemetry.NewRecorder()                 // global providers
//	stage, _ := middleware.New("planner", middleware.WithPolicy(p), middleware.WithRecorder(rec))
//
// Like otelhttp, it takes providers ([WithTracerProvider],
// [WithMeterProvider]) and defaults to the globals, so it costs nothing until
// an SDK is installed. Instruments are created once per Recorder; creation
// errors go to otel.Handle. Attribute sets are built once per stage and per
// (stage, cause, outcome) and cached, so a run's end builds no attribute
// set; nothing at all is recorded per event unless the run's span is
// sampled (then tool calls become child spans).
//
// # Bounded cardinality
//
// termination_cause only takes the contract's closed set of values, plus
// allow-listed custom reasons: those the stage allow-lists
// (middleware.WithCustomReasons puts them in the Result's tag), up to
// [MaxCustomTags] of them, and those of [WithCustomReasons]. Every other
// value is recorded as "custom".
// Stage names past [WithStageLimit] distinct names (default 200) are
// recorded as "_other". otelsetup.Setup also sets the SDK's per-instrument
// cardinality limit.
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
