// Package eino connects agentstop to CloudWeGo Eino
// (github.com/cloudwego/eino): a running adk agent, or any eino component
// graph, feeds a middleware.Run, and the run's stop reaches the agent
// through its context.
//
// # Two ways in
//
//   - [Forward] wraps the event iterator of an adk agent or Runner
//     (*adk.AsyncIterator[*adk.AgentEvent]). The caller reads the same
//     events from the returned iterator; streamed messages are teed, never
//     drained. Run the agent under [Context], and every model and tool call
//     waits until Forward has evaluated the steps before it, so a stop is
//     exact; without it the stop is best-effort.
//   - [Handler] is a callbacks.Handler for loops that are not adk agents: it
//     maps chat model and tool callbacks to events.
//
// Typical use with an adk Runner:
//
//	ctx, run := stage.Start(ctx)
//	events := eino.Forward(run, runner.Query(ctx, "task"))
//	for {
//		ev, ok := events.Next()
//		if !ok {
//			break
//		}
//		// ... use ev as before ...
//	}
//	res := run.Wait() // why it stopped: a typed termination.Cause
//
// # Mapping
//
// One model response is one message event — a final event when it requests
// no tool — carrying the response's token usage (ResponseMeta.Usage), followed
// by one tool_call event per requested call; a response cut off at the
// token limit or blocked (ResponseMeta.FinishReason length, max_tokens,
// content_filter, safety, refusal, in any case) is a message event
// followed by an error event that says why, not a final answer. A tool
// message is a
// tool_result. An AgentAction's TransferToAgent is a handoff, Exit and
// BreakLoop are a stop. An event's Err is an error event; when the agent
// ends with adk.ErrExceedMaxIterations the run is finished with
// [ErrMaxIterations]. See [Decode] and [Handler] for the details.
//
// # Choices
//
//   - Whether an answer is final depends on the workflow: by default every
//     answer is final; [WithFinalAgents] names the agents whose answers end
//     the loop, so that agents answering round after round in a loop
//     workflow count as iterations and can be caught stalling.
//   - Usage is taken from the message's ResponseMeta.Usage and, only when
//     it has none, from the callback's TokenUsage, so a response is counted
//     once. Tokens are counted as the OpenTelemetry GenAI conventions count
//     them: input is PromptTokens (cached tokens included, as eino reports
//     them); output is CompletionTokens, plus ReasoningTokens when the model
//     reports them apart (Gemini: TotalTokens covers them) rather than
//     inside CompletionTokens (OpenAI, ARK, Qwen).
//   - Tool arguments that are not valid JSON are reported as a JSON string.
//   - Model and source: agent events name their agent (AgentName, the
//     source of Forward's and Decode's events) but not their model (neither
//     schema.Message nor its ResponseMeta has one), so [WithModel] names it;
//     a [Handler] takes the model from its chat model callbacks'
//     Config.Model, and [WithModel] only where that is empty, and its
//     source from [WithSource] (callbacks do not name the agent).
package eino
