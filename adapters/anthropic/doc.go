// Package anthropicstop reports the turns of an Anthropic Messages tool loop
// (github.com/anthropics/anthropic-sdk-go) to an agentstop
// [middleware.Run], so a policy can stop the loop: a hand-written loop, or
// the SDK's own beta tool runner.
//
// A hand-written loop calls [Observe] after each model call (a streamed
// message is first read with [Accumulate], which accumulates it with the
// SDK's Message.Accumulate) and [ObserveToolResult] after each tool; every
// Observe function returns (cause, stop), stop meaning the loop must end:
//
//	ctx, run := stage.Start(ctx)
//	for {
//		msg, err := client.Messages.New(ctx, params)
//		if err != nil {
//			return run.Finish(err)
//		}
//		if _, stop := anthropicstop.Observe(run, msg); stop {
//			break // the run's ctx is cancelled with the typed cause
//		}
//		if msg.StopReason != anthropic.StopReasonToolUse {
//			break // final answer
//		}
//		... run each tool_use block; if _, stop := anthropicstop.ObserveToolResult(run, call, out, err); stop { return run.Finish(nil) } ...
//	}
//	return run.Finish(nil)
//
// The SDK's beta tool runner runs the loop itself. [All] and [AllStreaming]
// wrap its iterators and [Tools] wraps its tools:
//
//	ctx, run := stage.Start(ctx)
//	runner := client.Beta.Messages.NewToolRunner(anthropicstop.Tools(run, tools...), params)
//	for msg, err := range anthropicstop.All(run, runner.All(ctx)) {
//		if err != nil {
//			return run.Finish(err)
//		}
//		...
//	}
//	res := run.Wait()
//
// When the run stops, the iteration ends after the message that stopped it:
// the runner makes no further request and runs none of that message's
// tools. A consumer that breaks out of the iteration early stops the run as
// Cancelled{reason: external}, unless it breaks on a pair with an error or
// right after the final answer: then the run ends as the stream would have
// (Failed{reason: stream_error}, NaturalCompletion), as with
// middleware.ForwardSeq. Calling run.Finish(err) first, as above, does the
// same for the error.
//
// # Events
//
// One message becomes, in order: one message or final event with its usage
// (exactly once, counted as the OpenTelemetry GenAI conventions count it:
// input is input_tokens plus the prompt-cache tokens
// cache_creation_input_tokens and cache_read_input_tokens, which Anthropic
// reports apart although the model processed them; output is
// output_tokens, which includes extended thinking; a beta message adds the
// tokens of its server-side compactions, which the API reports only in
// usage.iterations) and the text of its text blocks,
// the model's name as source and model; one tool_call event per tool call,
// with the tool_use block's id as call id (ToolResultEvent carries it too,
// and so do the results [Tools] reports when the runner is wrapped by [All]
// or [AllStreaming]: see Tools); and an error event when the turn is not an
// answer. stop_reason decides the kind:
//
//	stop_reason                        events
//	tool_use                           message, tool_call per tool_use block
//	pause_turn, compaction             message (the server resumes the turn)
//	end_turn, stop_sequence, unknown   final
//	max_tokens                         message, error "stop_reason max_tokens: ..."
//	model_context_window_exceeded      message, error "stop_reason model_context_window_exceeded: ..."
//	refusal                            message, error "stop_reason refusal: the model refused: <explanation>"
//
// As in the SDK's tool runner, tool_use blocks are tool calls only when the
// turn stopped for tool_use: a turn cut off by max_tokens or refused has
// calls that are never run. Server and MCP tool calls (server_tool_use,
// mcp_tool_use), which Anthropic runs whatever the stop reason, are always
// tool_call events; their results are not reported.
//
// A turn cut off or refused is a model turn (an iteration, with its tokens)
// but not an answer: the error event says why, so a loop that ends there
// ends as Failed{reason: stream_error} with that text, and the errors
// condition counts it.
//
// A streamed turn that fails midway is a model turn too: message_start
// already reported its input tokens (the whole prompt). After an
// [Accumulate] error, [ObserveStreamError] reports the partial message as a
// message event with those tokens (without its cut-off tool calls), then
// the error; run.Finish(err) alone would not count them:
//
//	m, err := anthropicstop.Accumulate(client.Messages.NewStreaming(ctx, params), nil)
//	if err != nil {
//		anthropicstop.ObserveStreamError(run, &m, err)
//		return run.Finish(err)
//	}
//
// [AllStreaming] reports a turn of the runner that fails midway the same
// way.
package anthropicstop
