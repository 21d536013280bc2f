package eino

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Handler is an eino callbacks.Handler that feeds a run from component
// callbacks, for loops that are not adk agents (a compose graph, a
// hand-written loop over a ChatModel and tools) or when the agent event
// iterator is not at hand:
//
//   - a ChatModel's end is a message event (a final event when the response
//     requests no tool and the agent is final, see [WithFinalAgents]) with
//     the response's usage: ResponseMeta.Usage, else the callback's
//     TokenUsage, never both; its model is the callback's Config.Model; a
//     response cut off or blocked is a message followed by an error event,
//     as [Decode] maps it;
//   - a Tool's start is a tool_call event (the tool's name and JSON
//     arguments), its end a tool_result event, its error a failed
//     tool_result, each with the tool call's id (compose.GetToolCallID);
//   - the end of adk's transfer_to_agent tool is followed by a handoff event
//     (to the agent named in its arguments), the end of adk's exit tool by a
//     stop event, as Forward reports their actions;
//   - any other component's error is an error event, once per error as it
//     travels up the graph.
//
// Streamed outputs are read from the handler's own copy (eino hands each
// handler one), on a goroutine that ends with the stream; events keep their
// order. Attach the handler with [Handler.Context] (per run) or
// callbacks.AppendGlobalHandlers (every run), run the loop under the
// context that middleware.Stage.Start returned, and end with
// [Handler.Finish]. eino's callbacks do not name the agent: a Handler's
// events have the source [WithSource] gives (empty by default), and
// [WithFinalAgents] checks that one name, so it cannot tell agents apart
// here: given names that do not include it, it makes every answer a
// message event (none is final). Their model is the one the chat model's
// callback names in its Config, else the one [WithModel] gives.
//
// Do not use a Handler and [Forward] on the same run: both would report the
// same model responses.
type Handler struct {
	run *middleware.Run
	cfg *config

	mu       sync.Mutex
	pending  sync.WaitGroup // streamed outputs not yet observed
	order    chan struct{}  // closed when the previous streamed output was observed
	reported []error
	turns    int64
	lastErr  error
}

var _ callbacks.Handler = (*Handler)(nil)

// NewHandler returns a Handler that feeds run.
func NewHandler(run *middleware.Run, opts ...Option) *Handler {
	done := make(chan struct{})
	close(done)
	return &Handler{run: run, cfg: newConfig(opts), order: done}
}

// Context returns ctx with h attached, so that every eino component run
// under it (an adk Runner, a compiled graph) reports to h, together with the
// global handlers (eino's callbacks.InitCallbacks: handlers attached to ctx
// before are replaced).
func (h *Handler) Context(ctx context.Context) context.Context {
	return callbacks.InitCallbacks(ctx, &callbacks.RunInfo{}, h)
}

// Finish waits for streamed outputs still being read, then finishes the run
// with err, the loop's error (nil when it returned normally). An
// adk.ErrExceedMaxIterations is reported as [ErrMaxIterations], whether it
// is err or reached the handler's callbacks (an adk agent reports it as an
// event, so a loop that reads the events without collecting their errors
// may pass nil). A Handler of a nil run reports nothing and returns the
// zero Result.
func (h *Handler) Finish(err error) termination.Result {
	h.pending.Wait()
	h.mu.Lock()
	turns := h.turns
	if err == nil && errors.Is(h.lastErr, adk.ErrExceedMaxIterations) {
		err = h.lastErr
	}
	h.mu.Unlock()
	if h.run == nil {
		return termination.Result{}
	}
	return h.run.Finish(frameworkLimit(err, turns))
}

// OnStart implements callbacks.Handler: a tool's start is a tool_call.
func (h *Handler) OnStart(ctx context.Context, info *callbacks.RunInfo, input callbacks.CallbackInput) context.Context {
	if info == nil || info.Component != components.ComponentOfTool {
		return ctx
	}
	in := tool.ConvCallbackInput(input)
	var args string
	if in != nil {
		args = in.ArgumentsInJSON
	}
	h.emit(termination.Event{Kind: termination.KindToolCall, Tool: info.Name, Args: argsJSON(args), CallID: compose.GetToolCallID(ctx)})
	if info.Name == adk.TransferToAgentToolName {
		return context.WithValue(ctx, transferKey{}, args)
	}
	return ctx
}

// transferKey carries a transfer_to_agent call's arguments from its start to
// its end.
type transferKey struct{}

// OnEnd implements callbacks.Handler: a model's end is a message or final,
// a tool's end a tool_result.
func (h *Handler) OnEnd(ctx context.Context, info *callbacks.RunInfo, output callbacks.CallbackOutput) context.Context {
	if info == nil {
		return ctx
	}
	switch info.Component {
	case components.ComponentOfChatModel:
		out := model.ConvCallbackOutput(output)
		if out == nil || out.Message == nil {
			return ctx
		}
		h.modelEnd(out.Message, out.TokenUsage, modelName(out.Config))
	case components.ComponentOfTool:
		out := tool.ConvCallbackOutput(output)
		var text string
		if out != nil {
			text = out.Response
		}
		h.emit(termination.Event{Kind: termination.KindToolResult, Tool: info.Name, Text: text, CallID: compose.GetToolCallID(ctx)})
		switch info.Name {
		case adk.TransferToAgentToolName:
			var p struct {
				AgentName string `json:"agent_name"`
			}
			args, _ := ctx.Value(transferKey{}).(string)
			if json.Unmarshal([]byte(args), &p) == nil && p.AgentName != "" {
				h.emit(termination.Event{Kind: termination.KindHandoff, Target: p.AgentName})
			}
		case adk.ToolInfoExit.Name:
			h.emit(termination.Event{Kind: termination.KindStop, Text: text})
		}
	}
	return ctx
}

// OnError implements callbacks.Handler: a tool's error is a failed
// tool_result; any other error is an error event, reported once.
func (h *Handler) OnError(ctx context.Context, info *callbacks.RunInfo, err error) context.Context {
	if err == nil {
		return ctx
	}
	if info != nil && info.Component == components.ComponentOfTool {
		h.remember(err)
		h.emit(termination.Event{Kind: termination.KindToolResult, Tool: info.Name, Err: err.Error(), CallID: compose.GetToolCallID(ctx)})
		return ctx
	}
	if h.remember(err) {
		h.emit(errorEvent("", err))
	}
	return ctx
}

// remember records err and reports whether it is new: the same error
// reaches OnError once per enclosing node and graph, wrapped or not.
func (h *Handler) remember(err error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	msg := err.Error()
	for _, e := range h.reported {
		// An empty text is contained in every text: match it only by identity.
		if errors.Is(err, e) || (e.Error() != "" && strings.Contains(msg, e.Error())) {
			return false
		}
	}
	h.reported = append(h.reported, err)
	h.lastErr = err
	return true
}

// OnStartWithStreamInput implements callbacks.Handler. Inputs carry no
// event; the handler's copy is closed at once.
func (h *Handler) OnStartWithStreamInput(ctx context.Context, info *callbacks.RunInfo, input *schema.StreamReader[callbacks.CallbackInput]) context.Context {
	if input != nil {
		input.Close()
	}
	return ctx
}

// OnEndWithStreamOutput implements callbacks.Handler: a streamed model
// response or tool result is read from the handler's copy on a goroutine
// and observed when it ends, before any later callback's event.
func (h *Handler) OnEndWithStreamOutput(ctx context.Context, info *callbacks.RunInfo, output *schema.StreamReader[callbacks.CallbackOutput]) context.Context {
	if output == nil {
		return ctx
	}
	if info == nil || (info.Component != components.ComponentOfChatModel && info.Component != components.ComponentOfTool) {
		output.Close()
		return ctx
	}
	h.mu.Lock()
	prev := h.order
	done := make(chan struct{})
	h.order = done
	h.pending.Add(1)
	h.mu.Unlock()
	comp, name, callID := info.Component, info.Name, compose.GetToolCallID(ctx)
	go func() {
		defer h.pending.Done()
		defer close(done)
		defer output.Close()
		var msgs []*schema.Message
		var usage *model.TokenUsage
		var modelID string
		var text strings.Builder
		for {
			chunk, err := output.Recv()
			if err != nil { // io.EOF, or a failure the framework reports itself
				break
			}
			switch comp {
			case components.ComponentOfChatModel:
				if out := model.ConvCallbackOutput(chunk); out != nil {
					if out.Message != nil {
						msgs = append(msgs, out.Message)
					}
					if out.TokenUsage != nil {
						usage = maxUsage(usage, out.TokenUsage)
					}
					if m := modelName(out.Config); m != "" {
						modelID = m
					}
				}
			case components.ComponentOfTool:
				if out := tool.ConvCallbackOutput(chunk); out != nil {
					text.WriteString(out.Response)
				}
			}
		}
		<-prev
		switch comp {
		case components.ComponentOfChatModel:
			if msg := concatChunks(msgs); msg != nil {
				h.observeModel(msg, usage, modelID)
			}
		case components.ComponentOfTool:
			h.observe(termination.Event{Kind: termination.KindToolResult, Tool: name, Text: text.String(), CallID: callID})
		}
	}()
	return ctx
}

// maxUsage folds the TokenUsage of one more chunk into a: each count is
// the largest the chunks reported (a chunk's counts are the response's so
// far, never a delta).
func maxUsage(a, b *model.TokenUsage) *model.TokenUsage {
	if a == nil {
		c := *b
		return &c
	}
	a.PromptTokens = max(a.PromptTokens, b.PromptTokens)
	a.PromptTokenDetails.CachedTokens = max(a.PromptTokenDetails.CachedTokens, b.PromptTokenDetails.CachedTokens)
	a.CompletionTokens = max(a.CompletionTokens, b.CompletionTokens)
	a.TotalTokens = max(a.TotalTokens, b.TotalTokens)
	a.CompletionTokensDetails.ReasoningTokens = max(a.CompletionTokensDetails.ReasoningTokens, b.CompletionTokensDetails.ReasoningTokens)
	return a
}

// modelEnd observes a model response delivered whole.
func (h *Handler) modelEnd(msg *schema.Message, usage *model.TokenUsage, modelID string) {
	h.waitOrder()
	h.observeModel(msg, usage, modelID)
}

// modelName is the model a callback's configuration names, if any.
func modelName(c *model.Config) string {
	if c == nil {
		return ""
	}
	return c.Model
}

// observeModel maps a model response without its tool calls: with a
// Handler the calls are reported by the tools' own starts.
func (h *Handler) observeModel(msg *schema.Message, usage *model.TokenUsage, modelID string) {
	h.mu.Lock()
	h.turns++
	h.mu.Unlock()
	kind := termination.KindFinal
	problem := unfinished(msg)
	if len(msg.ToolCalls) > 0 || !h.cfg.isFinalAgent(h.cfg.source) || problem != "" {
		kind = termination.KindMessage
	}
	if modelID == "" {
		modelID = h.cfg.model
	}
	h.observe(termination.Event{Kind: kind, Text: msg.Content, Usage: usageOf(msg, usage), Model: modelID})
	if problem != "" {
		h.observe(termination.Event{Kind: termination.KindError, Err: problem})
	}
}

// emit observes ev after any streamed output that came before it.
func (h *Handler) emit(ev termination.Event) {
	h.waitOrder()
	h.observe(ev)
}

func (h *Handler) waitOrder() {
	h.mu.Lock()
	prev := h.order
	h.mu.Unlock()
	<-prev
}

func (h *Handler) observe(ev termination.Event) {
	if h.run != nil {
		if ev.Source == "" {
			ev.Source = h.cfg.source
		}
		h.run.Observe(ev)
	}
}
