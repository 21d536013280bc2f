package anthropicstop

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentstop/agentstop/middleware"
)

// The SDK's tool runner calls a tool with the input of a tool_use block but
// not its id. The ids come from the message the runner answers: [All] and
// [AllStreaming] hand every message they report to the openCalls of the
// run, which [Tools] created, and a tool's result takes the id of the first
// unanswered tool_use block of that message with the tool's name and input.

// runCalls holds the openCalls of the runs that [Tools] wraps tools for,
// until the run's context ends (when the run stops or finishes).
var runCalls sync.Map // *middleware.Run -> *openCalls

// openCalls is the client tool calls of the last message of a tool runner
// that no tool result has answered yet.
type openCalls struct {
	mu    sync.Mutex
	calls []openCall
}

type openCall struct {
	id, name string
	input    []byte // as the runner hands it to the tool; nil if it cannot
}

// callsFor returns the openCalls of run, creating them when create is set.
func callsFor(run *middleware.Run, create bool) *openCalls {
	if run == nil {
		return nil
	}
	if c, ok := runCalls.Load(run); ok {
		return c.(*openCalls)
	}
	if !create {
		return nil
	}
	c, loaded := runCalls.LoadOrStore(run, &openCalls{})
	if !loaded {
		// The run's context is cancelled when it stops or finishes: no tool
		// result of it is evaluated after that.
		context.AfterFunc(run.Context(), func() { runCalls.CompareAndDelete(run, c) })
	}
	return c.(*openCalls)
}

// record makes m's client tool calls the open ones, as the runner picks
// them (its clientToolCalls): none unless the turn stopped for tool_use,
// and only the tool_use blocks after the last fallback block. The input is
// marshalled as the runner marshals it for the tool.
func (o *openCalls) record(m *anthropic.BetaMessage) {
	if o == nil || m == nil {
		return
	}
	var calls []openCall
	if m.StopReason == anthropic.BetaStopReasonToolUse {
		seam := -1
		for i := range m.Content {
			if m.Content[i].Type == "fallback" {
				seam = i
			}
		}
		for i := seam + 1; i < len(m.Content); i++ {
			if m.Content[i].Type != "tool_use" {
				continue
			}
			use := m.Content[i].AsToolUse()
			input, err := json.Marshal(use.Input)
			if err != nil {
				input = nil // the runner does not run this call
			}
			calls = append(calls, openCall{id: use.ID, name: use.Name, input: input})
		}
	}
	o.mu.Lock()
	o.calls = calls
	o.mu.Unlock()
}

// take returns the id of the first open call of the tool name with this
// input and closes it; "" when there is none.
func (o *openCalls) take(name string, input []byte) string {
	if o == nil {
		return ""
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, c := range o.calls {
		if c.name == name && c.input != nil && bytes.Equal(c.input, input) {
			o.calls = append(o.calls[:i], o.calls[i+1:]...)
			return c.id
		}
	}
	return ""
}
