package genkitstop

import (
	"context"
	"encoding/json"
	"iter"
	"strings"
	"sync"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// The error texts of turns that are not answers (see the package doc).
const (
	errLength  = "finish_reason length: the response was cut off at the token limit"
	errBlocked = "finish_reason blocked: the response was blocked"
)

// Events turns one model response into events and passes them to emit, in
// order: a message or final event with the response's usage (and its
// model when the response names it: the compat_oai plugin's Custom
// "model"; genkit's types have no model field), a tool_call
// event per tool request (its Ref as call id; the tool_result that
// Middleware reports carries the response's Ref), and an error event when the turn is not an answer
// (finish reason length or blocked). The package doc has the full mapping.
// A nil response emits nothing.
func Events(resp *ai.ModelResponse, emit func(termination.Event)) {
	if resp == nil {
		return
	}
	ev := termination.Event{Kind: termination.KindFinal, Model: responseModel(resp)}
	if resp.Usage != nil {
		ev.Usage = usage(resp.Usage)
	}
	var problem string
	switch resp.FinishReason {
	case ai.FinishReasonLength:
		problem = errLength
	case ai.FinishReasonBlocked:
		problem = errBlocked
		if resp.FinishMessage != "" {
			problem += ": " + resp.FinishMessage
		}
	}
	var calls []*ai.ToolRequest
	if resp.Message != nil {
		ev.Text = text(resp.Message)
		calls = resp.ToolRequests()
	}
	if len(calls) > 0 || problem != "" {
		ev.Kind = termination.KindMessage
	}
	emit(ev)
	for _, c := range calls {
		emit(termination.Event{Kind: termination.KindToolCall, Tool: c.Name, Args: marshal(c.Input), CallID: c.Ref})
	}
	if problem != "" {
		emit(termination.Event{Kind: termination.KindError, Err: problem})
	}
}

// text is the text of a model message: its text and data parts, as
// Message.Text joins them, but never a reasoning part (Message.Text returns
// the only part of a message whatever its kind, so a response cut off while
// the model thought would have its thoughts as its text).
func text(m *ai.Message) string {
	var b strings.Builder
	for _, p := range m.Content {
		if p.IsText() || p.IsData() {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// marshal returns v as JSON, or nothing when v is nil or cannot be
// marshalled (a tool input or output always can: it went over the wire).
func marshal(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// Middleware returns a genkit model middleware that reports every model call
// of a generation to run, so genkit's own tool loop is observed and stopped:
//
//   - before a model call, the results of the tools that the previous
//     response requested (genkit sends them in the request) are reported as
//     tool_result events;
//   - after it, the response is reported (see [Events]).
//
// Once run has stopped, the middleware makes no model call and returns the
// run's typed cause as the error; a response whose tool requests made the
// run stop is replaced by that error too, so genkit runs none of its tools.
// A response that is the final answer is returned even when its event
// stopped the run (a completion condition): the loop is over anyway.
//
// Run the generation under the context that stage.Start returned, add the
// middleware with ai.WithMiddleware, and call run.Finish with the
// generation's error; [Generate] and [GenerateStream] do all three. With
// a nil run the middleware observes nothing and calls the model as is.
// opts name the model and the source of the events ([WithModel],
// [WithSource]).
func Middleware(run *middleware.Run, opts ...Option) ai.ModelMiddleware {
	return newMiddleware(run, newConfig(opts))
}

func newMiddleware(run *middleware.Run, cfg config) ai.ModelMiddleware {
	if run == nil {
		return func(next ai.ModelFunc) ai.ModelFunc { return next }
	}
	var (
		mu      sync.Mutex
		pending int // tool calls reported whose results were not
	)
	return func(next ai.ModelFunc) ai.ModelFunc {
		return func(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			mu.Lock()
			cause, stop := toolResults(run, &cfg, req, &pending)
			mu.Unlock()
			if stop {
				return nil, cause
			}
			resp, err := next(ctx, req, cb)
			if err != nil {
				if cause, stopped := run.Cause(); stopped {
					return nil, cause
				}
				return resp, err
			}
			n := 0
			cause, stop = middleware.ObserveEach(run, resp, func(resp *ai.ModelResponse, emit func(termination.Event)) {
				Events(resp, func(ev termination.Event) {
					if ev.Kind == termination.KindToolCall {
						n++
					}
					emit(cfg.name(ev))
				})
			})
			mu.Lock()
			pending += n
			mu.Unlock()
			if stop && n > 0 {
				return nil, cause
			}
			return resp, nil
		}
	}
}

// toolResults reports the tool responses of the last message of req, up to
// the number of tool calls still pending (earlier history is not this
// run's), and says whether the run has stopped.
func toolResults(run *middleware.Run, cfg *config, req *ai.ModelRequest, pending *int) (termination.Cause, bool) {
	if cause, stopped := run.Cause(); stopped {
		return cause, true
	}
	if *pending == 0 || req == nil || len(req.Messages) == 0 {
		return nil, false
	}
	last := req.Messages[len(req.Messages)-1]
	if last == nil || last.Role != ai.RoleTool {
		return nil, false
	}
	for _, p := range last.Content {
		if *pending == 0 || p == nil || !p.IsToolResponse() || p.ToolResponse == nil {
			continue
		}
		*pending--
		ev := termination.Event{Kind: termination.KindToolResult, Tool: p.ToolResponse.Name, CallID: p.ToolResponse.Ref}
		if out := marshal(p.ToolResponse.Output); out != nil {
			if s, ok := p.ToolResponse.Output.(string); ok {
				ev.Text = s
			} else {
				ev.Text = string(out)
			}
		}
		if cause, stop := run.Observe(cfg.name(ev)); stop {
			return cause, true
		}
	}
	return nil, false
}

// Generate is genkit.Generate observed by run: it adds [Middleware] to
// opts (with the [Option] values among opts, which it takes out of what
// genkit gets, as it does nil options), runs the generation under ctx
// (the context stage.Start returned),
// reports an interrupted generation (a tool asked for a human) as a stop
// event, and finishes run with the generation's error. When run stops the
// generation, the error is the run's typed cause (errors.As finds it);
// run.Wait returns the result. With a nil run it is genkit.Generate.
func Generate(ctx context.Context, g *genkit.Genkit, run *middleware.Run, opts ...ai.GenerateOption) (*ai.ModelResponse, error) {
	cfg, opts := splitOptions(opts)
	if run == nil {
		return genkit.Generate(ctx, g, opts...)
	}
	resp, err := genkit.Generate(ctx, g, append(opts, ai.WithMiddleware(newMiddleware(run, cfg)))...)
	if err != nil {
		if cause, stopped := run.Cause(); stopped {
			err = cause
		}
		run.Finish(err)
		return resp, err
	}
	interrupted(run, &cfg, resp)
	run.Finish(nil)
	return resp, nil
}

// GenerateStream is genkit.GenerateStream observed by run, like
// [Generate] (opts may hold [Option] values too): it yields the same
// stream values, and ends the iteration
// when run stops (after the chunk or the tool round in flight; genkit makes
// no further model call). Once the run has stopped, genkit's error for the
// generation it abandoned is not yielded: run.Wait (or context.Cause of
// ctx) says why the loop ended. A consumer that leaves the iteration early
// stops the run with Cancelled{reason: external}, unless it leaves on an
// error or after the final (Done) value: then the run ends as the stream
// would. The run is finished when the iteration ends. With a nil run it
// yields genkit.GenerateStream's values and observes nothing.
func GenerateStream(ctx context.Context, g *genkit.Genkit, run *middleware.Run, opts ...ai.GenerateOption) iter.Seq2[*ai.ModelStreamValue, error] {
	cfg, opts := splitOptions(opts)
	opts = append(opts, ai.WithMiddleware(newMiddleware(run, cfg)))
	return func(yield func(*ai.ModelStreamValue, error) bool) {
		var (
			left, gaveUp bool
			lastErr      error
		)
		// genkit calls its yield function once more, with an error, after
		// the consumer has left (the range-over-func runtime check would
		// panic), so the stream is read with a plain function.
		genkit.GenerateStream(ctx, g, opts...)(func(v *ai.ModelStreamValue, err error) bool {
			if left {
				return false
			}
			if err != nil {
				if _, stopped := causeOf(run); stopped {
					return false
				}
				lastErr = err
			} else if v != nil && v.Done {
				interrupted(run, &cfg, v.Response)
			}
			if !yield(v, err) {
				// Leaving on an error or after the final response is how
				// loops end; leaving before is the consumer giving up.
				left, gaveUp = true, err == nil && (v == nil || !v.Done)
				return false
			}
			return true
		})
		if run == nil {
			return
		}
		if gaveUp {
			run.Leave("consumer stopped iterating")
		}
		run.Finish(lastErr)
	}
}

// causeOf is run.Cause; a nil run never stops.
func causeOf(run *middleware.Run) (termination.Cause, bool) {
	if run == nil {
		return nil, false
	}
	return run.Cause()
}

// interrupted reports a generation that a tool interrupted as a stop event.
func interrupted(run *middleware.Run, cfg *config, resp *ai.ModelResponse) {
	if run != nil && resp != nil && resp.FinishReason == ai.FinishReasonInterrupted {
		run.Observe(cfg.name(termination.Event{Kind: termination.KindStop, Text: resp.FinishMessage}))
	}
}

// usage counts a response's tokens as the OpenTelemetry GenAI conventions
// do: input includes cached input tokens, output includes reasoning
// tokens. Genkit's googlegenai and compat_oai plugins put cached tokens
// inside InputTokens (CachedContentTokens is a part of it; the anthropic
// plugin drops Anthropic's cache tokens), but disagree on thoughts:
// googlegenai's OutputTokens are Gemini's candidates only, with the
// thoughts apart (and in TotalTokens), while compat_oai's OutputTokens
// already include the reasoning that its ThoughtsTokens repeats. The
// thoughts are added when the total shows they are not in OutputTokens.
func usage(u *ai.GenerationUsage) termination.Usage {
	in, out := int64(u.InputTokens), int64(u.OutputTokens)
	if th := int64(u.ThoughtsTokens); th > 0 && int64(u.TotalTokens) >= in+out+th {
		out += th
	}
	return termination.Usage{InputTokens: in, OutputTokens: out}
}
