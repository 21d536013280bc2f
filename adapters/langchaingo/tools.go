package langchaingo

import (
	"context"
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
// The result carries the tool and call id of the agent's last action
// (as the callbacks' do) when that action names the wrapped tool (case
// aside, as the executor matches them); otherwise the wrapped tool's name
// and no call id.
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
	h.mu.Unlock()
	returned := false
	defer func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.wrapped--
		if returned {
			h.toolResultLocked(t.Name(), out, err)
		}
	}()
	out, err = t.Tool.Call(ctx, input)
	returned = true
	return out, err
}

// toolResultLocked reports the result of a call of the wrapped tool name.
func (h *Handler) toolResultLocked(name, out string, err error) {
	ev := termination.Event{Kind: termination.KindToolResult, Source: h.source, Tool: h.tool, CallID: h.toolID}
	if !strings.EqualFold(h.tool, name) {
		ev.Tool, ev.CallID = name, ""
	}
	if err != nil {
		h.rememberLocked(err)
		ev.Err = toolErrorText(name, err)
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
