// Package langchaingo connects agentstop to LangChainGo
// (github.com/tmc/langchaingo): a [Handler], a langchaingo callbacks.Handler,
// feeds a middleware.Run from an agents.Executor's callbacks, and the run's
// stop reaches the executor through its context.
//
//	ctx, run := stage.Start(ctx)
//	h := langchaingo.NewHandler(run)
//	llm, _ := openai.New(openai.WithCallback(h))        // usage comes from the model's callbacks
//	agent := agents.NewOpenAIFunctionsAgent(llm, tools, agents.WithCallbacksHandler(h))
//	executor := agents.NewExecutor(agent, agents.WithCallbacksHandler(h))
//	_, err := chains.Run(ctx, executor, "task")
//	res := h.Finish(err)                                // why it stopped
//
// # Mapping
//
// One model response is one message event with the response's token usage,
// followed by a tool_call event per agent action (its ToolID as call id,
// which the tool's tool_result carries too); the response the agent
// turns into its answer is a final event instead, unless it was cut off
// at the token limit or blocked (its first choice's StopReason: length,
// max_tokens, content_filter, refusal, Google AI's FinishReasonMaxTokens
// and FinishReasonSafety): then it is a message followed by an error event
// that says why, as the openai and anthropic adapters report such a turn.
// A tool's end is a
// tool_result, its error a failed tool_result, a chain's or model's error an
// error event (each error once, as it travels up the chains). The executor's
// own limit, agents.ErrNotFinished, finishes the run with an error that
// matches [ErrMaxIterations] and holds a termination.MaxIterationsReached.
//
// # Choices
//
//   - A model response is held until the agent has parsed it: the agent's
//     action makes it a message, its finish a final. The executor reports
//     its max-iterations stop as an AgentFinish whose output is
//     ErrNotFinished's text; that is not a final answer.
//   - Usage is read from the first choice of a response that carries it
//     (providers repeat the response's usage in every choice), under the
//     provider's keys: PromptTokens/CompletionTokens (OpenAI, Ollama, Google
//     AI's standardized keys), InputTokens/OutputTokens (Anthropic),
//     input_tokens/output_tokens (Google AI, Bedrock), or a "usage" struct
//     with PromptTokens/CompletionTokens fields (Mistral). Tokens are
//     counted as the OpenTelemetry GenAI conventions count them: input
//     includes cached input tokens (Anthropic's CacheCreationInputTokens
//     and CacheReadInputTokens are added; OpenAI's and Google AI's prompt
//     counts include them already), output includes reasoning tokens
//     (OpenAI's completion count includes them; Google AI reports Gemini's
//     thoughts only in its total, so a total above input + output adds the
//     rest to output).
//   - The executor does not check its context between iterations: the stop
//     reaches it when the next model or tool call fails with the cancelled
//     context, which every network client does.
//   - A model that does not call HandleLLMGenerateContentEnd (in v0.1.14,
//     llms/anthropic) gives no usage; each new agent action log then starts
//     a message.
//   - Tool results come from tools that call the handler (langchaingo's
//     built-in tools do, given the handler); the tool is the last action's.
//     Your own tools report through [Tools], which wraps them: each call's
//     output or error becomes a tool_result, once, even for a tool that also
//     calls the handler (while a wrapped tool runs, the handler ignores
//     HandleToolEnd and HandleToolError; the wrapper reports what Call
//     returned). The executor ends at a tool's error; an agent that should
//     see the error and try again needs a tool that returns it as its
//     output, wrapped around the one Tools returned, so that the failure
//     still counts for errors.consecutive (see the Tools example).
//   - A tool_call's args are the input the executor hands the tool, without
//     the trailing "\nObservation:" it cuts off. A langchaingo tool takes a
//     string: a JSON object or array is reported as it is; any other input
//     (a MRKL agent's "Action Input: 42", the value the OpenAI functions
//     agent unwraps from {"__arg1": ...}) as a JSON string, so "42" stays
//     the text the tool got, not a number.
package langchaingo
