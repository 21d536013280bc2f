// Package session is a stand-in for google.golang.org/adk/session's Event,
// with the same names and shapes.
package session

import (
	"time"

	"github.com/agentstop/agentstop/adapters/adk/internal/model"
)

// Event is one thing that happened in an ADK invocation.
type Event struct {
	model.LLMResponse

	ID                 string
	Timestamp          time.Time
	InvocationID       string
	Branch             string
	Author             string
	Actions            EventActions
	LongRunningToolIDs []string
}

// EventActions are an event's side effects and control signals.
type EventActions struct {
	StateDelta        map[string]any
	SkipSummarization bool
	TransferToAgent   string
	Escalate          bool
}

// IsFinalResponse reports whether the event is an agent's final response,
// as ADK defines it.
func (e *Event) IsFinalResponse() bool {
	if e.Actions.SkipSummarization || len(e.LongRunningToolIDs) > 0 {
		return true
	}
	if e.Partial || e.Content == nil {
		return e.Content == nil && !e.Partial
	}
	for _, p := range e.Content.Parts {
		if p.FunctionCall != nil || p.FunctionResponse != nil {
			return false
		}
	}
	return true
}
