package langchaingo

import (
	"context"
	"slices"
	"strings"

	"github.com/tmc/langchaingo/tools"

	"github.com/agentstop/agentstop/termination"
)

// Tools wraps tools so that every call of one reports its result to h, as
// the tool callbacks of langchaingo's built-in tools do: a tool_result
// event with the output Call returned, or a failed tool_result with its
// error (which then counts as reported: the same error travelling up the
// chains is not reported again as an error event). Give the wrapped tools
// to the agent in place of yours, for tools that do not call h
// themselves.
//
// The result carries the tool and call id of the action the call answers:
// the oldest action not answered yet that names the wrapped tool (case
// aside, as the executor matches them) with the input Call was given, else
// the oldest that names the tool, so that parallel calls of one tool each
// get their own id; with no such action, the wrapped tool's name and no
// call id.
//
// A tool is reported once. While a wrapped tool's Call runs, h ignores
// HandleToolEnd and HandleToolError, so a tool that also reports to h
// through its CallbacksHandler (a built-in tool given h) is reported by
// the wrapper alone, with what Call returned. The executor runs one tool
// at a time; in a loop of your own that runs tools in parallel, wrap all
// the tools that report to h or none. A tool already wrapped for h is
// not wrapped again. A tool that panics is not reported.
//
// A nil tool stays nil; with a nil h the tools are returned as they are.
func Tools(h *Handler, ts ...tools.Tool) []tools.Tool {
	out := make([]tools.Tool, len(ts))
	for i, t := range ts {
		if w, ok := t.(reportedTool); h == nil || t == nil || (ok && w.h == h) {
			out[i] = t
			continue
		}
		out[i] = reportedTool{Tool: t, h: h}
	}
	return out
}

// reportedTool is a tool wrapped by Tools.
type reportedTool struct {
	tools.Tool
	h *Handler
}

// Call runs the tool and reports its result.
func (t reportedTool) Call(ctx context.Context, input string) (out string, err error) {
	h := t.h
	h.mu.Lock()
	h.wrapped++
	answers := h.takeActionLocked(t.Name(), input)
	h.mu.Unlock()
	returned := false
	defer func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.wrapped--
		if returned {
			h.toolResultLocked(answers, out, err)
		}
	}()
	out, err = t.Tool.Call(ctx, input)
	returned = true
	return out, err
}

// takeActionLocked takes the action a call of the wrapped tool name with
// input answers (see Tools); with none, an action of the tool's name and
// no call id.
func (h *Handler) takeActionLocked(name, input string) openAction {
	i := slices.IndexFunc(h.actions, func(a openAction) bool { return strings.EqualFold(a.tool, name) && a.input == input })
	if i < 0 {
		i = slices.IndexFunc(h.actions, func(a openAction) bool { return strings.EqualFold(a.tool, name) })
	}
	if i < 0 {
		return openAction{tool: name}
	}
	a := h.actions[i]
	h.actions = slices.Delete(h.actions, i, i+1)
	return a
}

// toolResultLocked reports the result of a call of a wrapped tool that
// answers the action a.
func (h *Handler) toolResultLocked(a openAction, out string, err error) {
	ev := termination.Event{Kind: termination.KindToolResult, Source: h.source, Tool: a.tool, CallID: a.id}
	if err != nil {
		h.toolErrLocked(err)
		ev.Err = toolErrorText(a.tool, err)
	} else {
		ev.Text = out
	}
	h.observe(ev)
}

// toolErrorText is the Err of a failed tool_result: the error's text, or,
// for an error without text, a text that says so (an empty Err would make
// the result a success).
func toolErrorText(tool string, err error) string {
	if msg := err.Error(); msg != "" {
		return msg
	}
	if tool == "" {
		tool = "tool"
	}
	return tool + " failed with an error that has no text"
}
