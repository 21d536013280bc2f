// Package genkitstop puts genkit's own tool loop (github.com/firebase/genkit/go)
// under an agentstop [middleware.Run].
//
// genkit.Generate and genkit.GenerateStream run the tool loop themselves:
// call the model, run the tools it requests, call it again, up to
// ai.WithMaxTurns turns. [Middleware] is a genkit model middleware that sees
// every one of those model calls, so it reports each model response and the
// tool results sent back to the model, and stops the loop by refusing the
// next step once the run has stopped. [Generate] and [GenerateStream] wrap
// genkit's functions with it:
//
//	ctx, run := stage.Start(ctx)
//	for v, err := range genkitstop.GenerateStream(ctx, g, run,
//		ai.WithPrompt("..."), ai.WithTools(search), ai.WithMaxTurns(100)) {
//		...
//	}
//	res := run.Wait()
//
// # Events
//
// Every model response becomes, in order: one message or final event with
// its usage (exactly once, counted as the OpenTelemetry GenAI conventions
// count it: input is the response's GenerationUsage.InputTokens, which
// the googlegenai and compat_oai plugins report with the cached tokens
// included; output is OutputTokens plus ThoughtsTokens when the plugin
// reports the thoughts apart — Gemini's, whose TotalTokens includes them —
// and OutputTokens alone when they are already part of it, as with
// OpenAI-compatible models. Genkit v1.4.0's anthropic plugin reports
// Anthropic's input_tokens and output_tokens only: its prompt-cache tokens
// are lost before the middleware sees the response and are not counted); one
// tool_call event per tool request, with its input (the text of the
// message or final event is its text and data parts, never the model's
// reasoning parts);
// and an error event when the turn is not an answer.
//
//	response                          events
//	with tool requests                message, tool_call...
//	finish reason stop, other, ...    final
//	finish reason length              message, error "finish_reason length: ..."
//	finish reason blocked             message, error "finish_reason blocked: ...: <finish message>"
//
// The tool results genkit sends back with the next model call are reported
// as tool_result events (their output, as JSON, in Text) just before that
// call. A generation that a tool interrupted (ai.ToolContext.Interrupt:
// the loop hands over to a human) is reported as a stop event by Generate
// and GenerateStream.
//
// # Model and source
//
// genkit does not hand a model middleware the model's name: ai.ModelRequest
// and ai.ModelResponse have no field for it, and the middleware runs
// outside the model's action. [WithModel] names it (give the name you give
// ai.WithModelName); a response that names the model that served it (the
// compat_oai plugin's Custom "model") keeps that name. [WithSource] names
// the agent. Both go to [Middleware], or among genkit's options in a call
// of [Generate] or [GenerateStream]:
//
//	genkitstop.Generate(ctx, g, run, ai.WithModelName("googleai/gemini-2.5-flash"),
//		genkitstop.WithModel("googleai/gemini-2.5-flash"), ai.WithPrompt("..."))
//
// # Stopping
//
// The run's context, which the generation must run under, is cancelled
// with the typed cause when the run stops. The middleware also checks the
// run before every model call and after every response: once the run has
// stopped it returns the cause as the model's error, so genkit makes no
// further model call and runs none of the tools of the response that
// stopped it. Generate returns that cause as its error (errors.As finds
// it); GenerateStream ends its iteration without yielding it.
//
// # Tool failures
//
// genkit v1.4.0 has no tool middleware, and tools are looked up by name in
// the registry, so a per-run wrapper around a tool cannot be installed. A
// failing tool aborts genkit's generation with the tool's error; Generate
// and GenerateStream finish the run with it: Failed{reason: stream_error},
// the error text naming the tool. Successful tool results are reported by
// the middleware as described above.
package genkitstop
