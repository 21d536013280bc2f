// Package openaistop reports the turns of a hand-written OpenAI tool loop
// (github.com/openai/openai-go/v3), over Chat Completions or the Responses
// API (see the section The Responses API below), to an agentstop
// [middleware.Run], so a policy can stop the loop.
//
// The SDK has no tool loop of its own for Chat Completions: users write one
// (call the model, run the requested tools, append the results, repeat).
// This package gives that loop three calls:
//
//	ctx, run := stage.Start(ctx)
//	for {
//		completion, err := client.Chat.Completions.New(ctx, params)
//		if err != nil {
//			return run.Finish(err)
//		}
//		if _, stop := openaistop.Observe(run, completion); stop {
//			break // the run's ctx is cancelled with the typed cause
//		}
//		if len(completion.Choices) == 0 {
//			break // reported as an error event: the run ends with stream_error
//		}
//		msg := completion.Choices[0].Message
//		if len(msg.ToolCalls) == 0 {
//			break // final answer
//		}
//		params.Messages = append(params.Messages, msg.ToParam())
//		for _, call := range msg.ToolCalls {
//			out, err := runTool(ctx, call)
//			if _, stop := openaistop.ObserveToolResult(run, call, out, err); stop {
//				return run.Finish(nil) // e.g. the errors condition fired on a failed tool
//			}
//			params.Messages = append(params.Messages, openai.ToolMessage(out, call.ID))
//		}
//	}
//	return run.Finish(nil)
//
// Every Observe function returns (cause, stop): stop is true when the loop
// must end (the run's context is already cancelled, so the next request
// would only fail with "context canceled").
//
// Streamed responses are read with [Accumulate], which accumulates the
// chunks with the SDK's ChatCompletionAccumulator, then reported with
// [Observe] like any completion:
//
//	completion, err := openaistop.Accumulate(client.Chat.Completions.NewStreaming(ctx, params), onChunk)
//	if err != nil {
//		openaistop.ObserveStreamError(run, &completion, err) // the partial turn, with its tokens
//		return run.Finish(err)
//	}
//	if _, stop := openaistop.Observe(run, &completion); stop {
//		break
//	}
//
// A stream that fails midway leaves a partial turn: [ObserveStreamError]
// reports it (a message with the tokens streamed before the failure, then
// an error event), which run.Finish(err) alone would not count. OpenAI
// streams the usage on the last chunk only, so a stream cut short there
// has no tokens to count; servers that stream running totals do.
//
// Ask for usage with StreamOptions.IncludeUsage, or the streamed turns carry
// no tokens. The usage is the last one a chunk reported, so a server that
// repeats its running totals on every chunk is counted once; a chunk that
// the SDK's accumulator rejects (an id other than the completion's) is an
// error, not a silently shorter answer.
//
// # Events
//
// One completion becomes, in order:
//
//   - one message or final event carrying the completion's usage (exactly
//     once: prompt_tokens as input, completion_tokens as output — counted
//     as the OpenTelemetry GenAI conventions count them, since OpenAI's
//     prompt_tokens include the cached tokens and its completion_tokens the
//     reasoning tokens, which the usage details only break down), with the
//     text of Choices[0] and the completion's model as source and model;
//   - one tool_call event per tool call of Choices[0] (function calls with
//     their arguments; custom tool calls with their input as a JSON string;
//     the deprecated function_call too, which has no id), with the call's
//     id as call_id (tool results carry it too, pairing a result with its
//     call when one tool runs in parallel);
//   - an error event when the model did not deliver a usable answer.
//
// finish_reason decides the kind:
//
//	finish_reason                      events
//	tool_calls, function_call          message, tool_call...
//	stop (or none, or unknown)         final; message, tool_call... if it has tool calls
//	length                             message, [tool_call...], error "finish_reason length: ..."
//	content_filter                     message, [tool_call...], error "finish_reason content_filter: ..."
//	any, with message.refusal set      message, error "refusal: <the refusal>"
//
// A response cut off at the token limit, blocked by the content filter or
// refused is a model turn (an iteration, with its tokens) but not an answer:
// the error event says why, so a loop that ends there ends as
// Failed{reason: stream_error} with that text, and the errors condition
// counts it. Its tool calls, if any, are still reported: they were requested,
// and a loop that runs them must count them.
//
// Tool results are reported by [ObserveToolResult] (a tool_result event, with
// Err set when the tool failed). A retried API error can be reported with
// [ObserveError] so that the errors condition sees it.
//
// # The Responses API
//
// A loop over client.Responses.New has the same three calls, named for the
// Responses API: [ObserveResponse] after each response, and
// [ObserveResponseToolResult] after each function call it runs (with the
// output item, whose call_id the result carries, as the
// function_call_output item that answers it does):
//
//	for {
//		resp, err := client.Responses.New(ctx, params)
//		if err != nil {
//			return run.Finish(err)
//		}
//		if _, stop := openaistop.ObserveResponse(run, resp); stop {
//			break
//		}
//		calls := 0
//		for _, item := range resp.Output {
//			if item.Type != "function_call" {
//				continue
//			}
//			calls++
//			out, err := runTool(ctx, item.Name, item.Arguments.OfString)
//			if _, stop := openaistop.ObserveResponseToolResult(run, item, out, err); stop {
//				return run.Finish(nil)
//			}
//			... append a function_call_output item for item.CallID to the next request's input ...
//		}
//		if calls == 0 {
//			break // final answer
//		}
//	}
//	return run.Finish(nil)
//
// A streamed response (client.Responses.NewStreaming) is read with
// [AccumulateResponse], which returns the response its terminal event
// (response.completed, response.incomplete, response.failed) carries; a
// stream that ends without one, or sends an error event, is an error; hand
// it to run.Finish (the API reports usage only in the terminal response, so
// a stream cut short has no tokens to count).
//
// One response becomes, in order ([ResponseEvents]):
//
//   - one message or final event carrying the response's usage (exactly
//     once: input_tokens as input, output_tokens as output; OpenAI's
//     input_tokens already include input_tokens_details.cached_tokens and
//     its output_tokens the reasoning tokens, so the details are not added
//     again), with the text of its message items (their output_text parts;
//     a newline between two items) and the response's model as source and
//     model. Reasoning items are never text: a summary that says the stop
//     word does not fire text_mention;
//   - one tool_call event per output item that calls a tool, in output
//     order: function_call (the function's name, its arguments as sent,
//     call_id as call id) and custom_tool_call (its input as a JSON
//     string); and the built-in tools' calls too, since each is a tool call
//     the model made and paid for (max_tool_calls counts them, stall sees a
//     repeated search): web_search_call (tool web_search, args its action),
//     file_search_call (file_search, its queries), code_interpreter_call
//     (code_interpreter, its code), image_generation_call, computer_call
//     (computer, its action), local_shell_call, shell_call, apply_patch_call,
//     tool_search_call, and mcp_call (the MCP tool's name, its arguments).
//     Calls the server ran carry their item id as call id (they have no
//     call_id); their results, inside the response, are not reported. An
//     MCP approval request is not a call yet (its mcp_call follows);
//   - an error event when the response is not an answer.
//
// status and the output decide the kind:
//
//	response                                           events
//	completed, with a call the loop must answer        message, tool_call...
//	completed (or no status), nothing to answer        final, [tool_call... of server-run tools]
//	incomplete, max_output_tokens                      message, [tool_call...], error "status incomplete (max_output_tokens): ..."
//	incomplete, content_filter                         message, [tool_call...], error "status incomplete (content_filter): ..."
//	failed (or an error object)                        message, error "status failed: <code>: <message>"
//	cancelled; queued, in_progress                     message, error "status cancelled: ..."; "status in_progress: ..."
//	a refusal part in a message                        message (text = the refusal), error "refusal: <the refusal>"
//
// The calls the loop must answer are function_call, custom_tool_call,
// computer_call, local_shell_call, shell_call, apply_patch_call and
// mcp_approval_request items (unless the same response carries their
// output, as for a shell run in a hosted container), and a tool_search_call
// executed by the client. A response with both a status problem and a
// refusal gets one error event, naming the status problem. As with Chat
// Completions, a response cut off,
// filtered, failed or refused is an iteration with its tokens but not an
// answer, and the calls it requested are still reported.
package openaistop
