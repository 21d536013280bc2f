package langchaingo

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/callbacks"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// Handler is a langchaingo callbacks.Handler that feeds a run. Give it to the
// executor, the agent and the model (see the package example), wrap the
// tools that do not report to it with [Tools], run the executor under the
// context that middleware.Stage.Start returned, and end with
// [Handler.Finish]. It is safe for concurrent use; one Handler serves
// one run.
type Handler struct {
	callbacks.SimpleHandler

	run    *middleware.Run
	source string

	mu       sync.Mutex
	pending  *termination.Event // the last model response, until the agent parses it
	problem  string             // why pending is not an answer (cut off, blocked), if it is not
	lastResp *llms.ContentResponse
	sawLLM   bool   // the model reports its responses
	lastLog  string // log of the last action, to group actions without model callbacks
	tool     string // tool of the last action
	toolID   string // call id of the last action
	turns    int
	reported []error
	// toolErrs are the errors tool results reported: the same error
	// travelling up the chains is not reported again (matched by identity
	// only, so that a short tool error such as "EOF" hides no later,
	// different error whose text contains it).
	toolErrs []error
	wrapped  int          // calls of tools wrapped by Tools running now
	actions  []openAction // actions no wrapped tool has answered yet (Tools), oldest first
}

// openAction is an action a tool wrapped by Tools may answer.
type openAction struct{ tool, input, id string }

// maxOpenActions bounds Handler.actions (a loop whose tools are not
// wrapped answers none of them) and Handler.toolErrs.
const maxOpenActions = 64

var _ callbacks.Handler = (*Handler)(nil)

// Option configures a Handler.
type Option interface{ apply(*Handler) }

type optionFunc func(*Handler)

func (f optionFunc) apply(h *Handler) { f(h) }

// WithSource sets the source of the handler's events, e.g. the agent's
// name. Default: empty.
func WithSource(name string) Option {
	return optionFunc(func(h *Handler) { h.source = name })
}

// NewHandler returns a Handler that feeds run.
func NewHandler(run *middleware.Run, opts ...Option) *Handler {
	h := &Handler{run: run}
	for _, o := range opts {
		if o != nil {
			o.apply(h)
		}
	}
	return h
}

// ErrMaxIterations is how [Handler.Finish] reports agents.ErrNotFinished,
// the executor's own max-iterations stop. The error it finishes the run with
// matches both ErrMaxIterations and agents.ErrNotFinished with errors.Is,
// keeps the executor's message, and holds a termination.MaxIterationsReached
// (errors.As) whose Limit is the number of model turns the executor ran and
// whose Count is one more.
var ErrMaxIterations = errors.New("langchaingo: executor reached its MaxIterations")

type limitError struct {
	err   error
	cause termination.MaxIterationsReached
}

func (e *limitError) Error() string   { return e.err.Error() }
func (e *limitError) Unwrap() []error { return []error{e.err, ErrMaxIterations, e.cause} }

// Finish reports a model response still held, then finishes the run with
// err, the executor's error (nil on success). A Handler of a nil run reports
// nothing and returns the zero Result.
func (h *Handler) Finish(err error) termination.Result {
	h.mu.Lock()
	h.flushLocked()
	turns := h.turns
	h.mu.Unlock()
	if h.run == nil {
		return termination.Result{}
	}
	if errors.Is(err, agents.ErrNotFinished) {
		err = &limitError{err: err, cause: termination.MaxIterationsReached{Limit: turns, Count: turns + 1}}
	}
	return h.run.Finish(err)
}

// HandleLLMGenerateContentStart implements callbacks.Handler.
func (h *Handler) HandleLLMGenerateContentStart(context.Context, []llms.MessageContent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sawLLM = true
	h.flushLocked() // a response the agent never acted on
}

// HandleLLMGenerateContentEnd implements callbacks.Handler: the response is
// held until the agent acts on it or finishes.
func (h *Handler) HandleLLMGenerateContentEnd(_ context.Context, res *llms.ContentResponse) {
	if res == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if res == h.lastResp { // reported twice (model and wrapper): count once
		return
	}
	h.lastResp = res
	h.sawLLM = true
	h.flushLocked()
	text := ""
	if len(res.Choices) > 0 && res.Choices[0] != nil {
		text = res.Choices[0].Content
	}
	h.turns++
	h.pending = &termination.Event{Kind: termination.KindMessage, Source: h.source, Text: text, Usage: Usage(res)}
	h.problem = unfinished(res)
}

// HandleAgentAction implements callbacks.Handler: the response that asked
// for it is a message, the action a tool_call.
func (h *Handler) HandleAgentAction(_ context.Context, action schema.AgentAction) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.pending != nil:
		h.flushLocked()
	case !h.sawLLM && action.Log != h.lastLog:
		h.turns++
		h.observe(termination.Event{Kind: termination.KindMessage, Source: h.source, Text: action.Log})
	}
	h.lastLog = action.Log
	h.tool, h.toolID = action.Tool, action.ToolID
	if len(h.actions) == maxOpenActions {
		h.actions = append(h.actions[:0], h.actions[1:]...)
	}
	h.actions = append(h.actions, openAction{tool: action.Tool, input: action.ToolInput, id: action.ToolID})
	h.observe(termination.Event{Kind: termination.KindToolCall, Source: h.source, Tool: action.Tool, Args: argsJSON(action.ToolInput), CallID: action.ToolID})
}

// HandleToolEnd implements callbacks.Handler. While a tool wrapped by
// [Tools] for h runs, it is ignored: the wrapper reports the result.
func (h *Handler) HandleToolEnd(_ context.Context, output string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.wrapped > 0 {
		return
	}
	h.observe(termination.Event{Kind: termination.KindToolResult, Source: h.source, Tool: h.tool, Text: output, CallID: h.toolID})
}

// HandleToolError implements callbacks.Handler. While a tool wrapped by
// [Tools] for h runs, it is ignored: the wrapper reports the error.
func (h *Handler) HandleToolError(_ context.Context, err error) {
	if err == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.wrapped > 0 {
		return
	}
	h.toolErrLocked(err)
	h.observe(termination.Event{Kind: termination.KindToolResult, Source: h.source, Tool: h.tool, Err: toolErrorText(h.tool, err), CallID: h.toolID})
}

// HandleAgentFinish implements callbacks.Handler: the answer is final,
// except the executor's max-iterations report.
func (h *Handler) HandleAgentFinish(_ context.Context, finish schema.AgentFinish) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out, _ := finish.ReturnValues["output"].(string)
	if out == agents.ErrNotFinished.Error() {
		h.flushLocked()
		return
	}
	ev := termination.Event{Kind: termination.KindFinal, Source: h.source, Text: out}
	problem := ""
	if p := h.pending; p != nil {
		ev.Usage = p.Usage
		if ev.Text == "" {
			ev.Text = p.Text
		}
		h.pending, problem = nil, h.problem
	} else if !h.sawLLM {
		h.turns++
	}
	if problem != "" {
		// Cut off or blocked: a model turn, not the answer.
		ev.Kind = termination.KindMessage
	}
	h.observe(ev)
	if problem != "" {
		h.observe(termination.Event{Kind: termination.KindError, Source: h.source, Err: problem})
	}
}

// HandleLLMError implements callbacks.Handler.
func (h *Handler) HandleLLMError(_ context.Context, err error) { h.loopError(err) }

// HandleChainError implements callbacks.Handler.
func (h *Handler) HandleChainError(_ context.Context, err error) { h.loopError(err) }

// loopError reports an error event, once per error: the same error reaches
// the model's, the inner chain's and the executor's handlers.
func (h *Handler) loopError(err error) {
	if err == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flushLocked()
	if h.rememberLocked(err) {
		h.observe(termination.Event{Kind: termination.KindError, Source: h.source, Err: err.Error()})
	}
}

// toolErrLocked remembers a tool's error, reported as its failed result
// (the latest maxOpenActions: the one the executor passes on is the last).
func (h *Handler) toolErrLocked(err error) {
	if len(h.toolErrs) == maxOpenActions {
		h.toolErrs = append(h.toolErrs[:0], h.toolErrs[1:]...)
	}
	h.toolErrs = append(h.toolErrs, err)
}

func (h *Handler) rememberLocked(err error) bool {
	for _, e := range h.toolErrs {
		if errors.Is(err, e) {
			return false // a tool's error, reported as its failed result
		}
	}
	msg := err.Error()
	for _, e := range h.reported {
		// An empty text is contained in every text: match it only by identity.
		if errors.Is(err, e) || (e.Error() != "" && strings.Contains(msg, e.Error())) {
			return false
		}
	}
	h.reported = append(h.reported, err)
	return true
}

// flushLocked reports a held model response as a message, followed by an
// error event when it was cut off or blocked.
func (h *Handler) flushLocked() {
	if p := h.pending; p != nil {
		h.pending = nil
		h.observe(*p)
		if h.problem != "" {
			h.observe(termination.Event{Kind: termination.KindError, Source: h.source, Err: h.problem})
		}
	}
}

// unfinished says why a model response is not an answer, from the stop
// reason of its first choice ("" when it is one): cut off at the token
// limit (OpenAI's and Mistral's "length", Anthropic's "max_tokens", Google
// AI's FinishReasonMaxTokens) or blocked (OpenAI's "content_filter",
// Google AI's FinishReasonSafety, Anthropic's "refusal"). Case, underscores
// and a "FinishReason" prefix do not matter.
func unfinished(res *llms.ContentResponse) string {
	if len(res.Choices) == 0 || res.Choices[0] == nil {
		return ""
	}
	r := res.Choices[0].StopReason
	norm := strings.TrimPrefix(strings.ReplaceAll(strings.ToLower(r), "_", ""), "finishreason")
	switch norm {
	case "length", "maxtokens":
		return "stop_reason " + r + ": the response was cut off at the token limit"
	case "contentfilter", "safety", "refusal":
		return "stop_reason " + r + ": the response was blocked"
	}
	return ""
}

func (h *Handler) observe(ev termination.Event) {
	if h.run != nil {
		h.run.Observe(ev)
	}
}

// argsJSON returns a tool input as the args of its tool_call: the input the
// executor hands the tool (it cuts a trailing "\nObservation:" off first).
// A langchaingo tool takes a string, so JSON arguments (an object or an
// array) are reported as they are, and any other input as a JSON string
// holding it: "42" is the text the tool gets, not the number it spells.
func argsJSON(in string) json.RawMessage {
	in = strings.TrimSuffix(in, "\nObservation:")
	if in == "" {
		return nil
	}
	if t := strings.TrimLeft(in, " \t\r\n"); (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Valid([]byte(in)) {
		return json.RawMessage(in)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil
	}
	return b
}
