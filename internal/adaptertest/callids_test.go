package adaptertest_test

import (
	"strings"
	"testing"

	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/termination"
)

func TestCheckCallIDs(t *testing.T) {
	call := func(tool, id string) termination.Event {
		return termination.Event{Kind: termination.KindToolCall, Tool: tool, CallID: id}
	}
	result := func(tool, id string) termination.Event {
		return termination.Event{Kind: termination.KindToolResult, Tool: tool, CallID: id}
	}
	msg := termination.Event{Kind: termination.KindMessage}
	for _, tc := range []struct {
		name   string
		events []termination.Event
		err    string
	}{
		{"Paired", []termination.Event{msg, call("a", "1"), call("a", "2"), result("a", "2"), result("a", "1")}, ""},
		{"CallWithoutID", []termination.Event{call("a", "")}, "tool_call a has no call id"},
		{"ReusedID", []termination.Event{call("a", "1"), call("b", "1")}, "reuses call id"},
		{"ResultWithoutID", []termination.Event{call("a", "1"), result("a", "")}, "tool_result a has no call id"},
		{"UnknownID", []termination.Event{call("a", "1"), result("a", "9")}, "of no earlier tool_call"},
		{"OtherTool", []termination.Event{call("a", "1"), result("b", "1")}, "of a call to a"},
		{"TwoResults", []termination.Event{call("a", "1"), result("a", "1"), result("a", "1")}, "second tool_result"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := adaptertest.CheckCallIDs(tc.events)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}
