package anthropicstop_test

import (
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	anthropicstop "github.com/agentstop/agentstop/adapters/anthropic"
)

// TestNilRun: every Observe function reports nothing to a nil run and says
// go on, as Observe does, instead of panicking in the middle of a loop.
func TestNilRun(t *testing.T) {
	call := anthropic.ToolUseBlock{ID: "t1", Name: "search"}
	m := &anthropic.Message{Model: "claude", StopReason: anthropic.StopReasonEndTurn}
	for name, observe := range map[string]func() bool{
		"Observe":           func() bool { _, stop := anthropicstop.Observe(nil, m); return stop },
		"ObserveBeta":       func() bool { _, stop := anthropicstop.ObserveBeta(nil, &anthropic.BetaMessage{}); return stop },
		"ObserveToolResult": func() bool { _, stop := anthropicstop.ObserveToolResult(nil, call, "3 hits", nil); return stop },
		"ObserveError":      func() bool { _, stop := anthropicstop.ObserveError(nil, errors.New("boom")); return stop },
	} {
		if observe() {
			t.Errorf("%s with a nil run says stop", name)
		}
	}
}
