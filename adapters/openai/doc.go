// Package openaistop reports the turns of a hand-written OpenAI Chat
// Completions tool loop (github.com/openai/openai-go/v3) to an agentstop
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
//		return run.Finish(err)
//	}
//	if _, stop := openaistop.Observe(run, &completion); stop {
//		break
//	}
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
package openaistop
