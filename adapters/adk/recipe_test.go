package adk_test

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentstop/agentstop/termination"

	"github.com/agentstop/agentstop/adapters/adk/internal/genai"
	"github.com/agentstop/agentstop/adapters/adk/internal/session"
)

// BEGIN RECIPE

// decodeADK turns one ADK session event into agentstop events.
func decodeADK(ev *session.Event, emit func(termination.Event)) {
	if ev == nil || ev.Partial {
		return // streamed chunks; the non-partial event carries the response and its usage
	}
	var text string
	var calls, results int
	for _, p := range parts(ev) {
		switch {
		case p.FunctionCall != nil:
			calls++
		case p.FunctionResponse != nil:
			results++
		case !p.Thought:
			text += p.Text
		}
	}
	var usage termination.Usage
	if u := ev.UsageMetadata; u != nil {
		// As the GenAI conventions count tokens: the prompt count includes
		// the cached content (not added again), thoughts are apart from
		// the candidates (added).
		usage.InputTokens = int64(u.PromptTokenCount) + int64(u.ToolUsePromptTokenCount)
		usage.OutputTokens = int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount)
	}
	if ev.ErrorCode != "" || ev.ErrorMessage != "" {
		// A model turn that failed (blocked, cut off): an iteration with the
		// tokens it spent, then the error.
		emit(termination.Event{Kind: termination.KindMessage, Source: ev.Author, Text: text, Usage: usage})
		emit(termination.Event{Kind: termination.KindError, Source: ev.Author, Err: ev.ErrorCode + ": " + ev.ErrorMessage})
		return
	}
	switch {
	case ev.Author == "user":
		emit(termination.Event{Kind: termination.KindInput, Source: ev.Author, Text: text})
		return
	case calls > 0 || (results == 0 && (text != "" || !usage.IsZero())):
		kind := termination.KindMessage
		if calls == 0 && ev.IsFinalResponse() {
			kind = termination.KindFinal
		}
		emit(termination.Event{Kind: kind, Source: ev.Author, Text: text, Usage: usage})
	}
	for _, p := range parts(ev) {
		if c := p.FunctionCall; c != nil {
			args, _ := json.Marshal(c.Args)
			emit(termination.Event{Kind: termination.KindToolCall, Source: ev.Author, Tool: c.Name, Args: args, CallID: c.ID})
		}
		if r := p.FunctionResponse; r != nil {
			res := termination.Event{Kind: termination.KindToolResult, Source: ev.Author, Tool: r.Name, CallID: r.ID}
			if e, ok := r.Response["error"]; ok && e != nil {
				res.Err = fmt.Sprint(e)
			} else {
				res.Text = resultText(r.Response)
			}
			emit(res)
		}
	}
	if ev.Actions.TransferToAgent != "" {
		emit(termination.Event{Kind: termination.KindHandoff, Source: ev.Author, Target: ev.Actions.TransferToAgent})
	}
	if ev.Actions.Escalate {
		emit(termination.Event{Kind: termination.KindStop, Source: ev.Author, Text: "escalate"})
	}
}

func parts(ev *session.Event) []*genai.Part {
	if ev.Content == nil {
		return nil
	}
	return ev.Content.Parts
}

// resultText is a function response as the model gets it back: the text of
// a {"result": "..."} response (ADK wraps a tool's non-map result so), else
// the response as JSON, so that results that differ are told apart.
func resultText(r map[string]any) string {
	if s, ok := r["result"].(string); ok && len(r) == 1 {
		return s
	}
	if r == nil {
		return ""
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(r) != nil {
		return ""
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// END RECIPE
