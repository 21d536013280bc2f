package importer

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentstop/agentstop/termination"
)

func streamLines(t *testing.T, runs []Run) []string {
	var b bytes.Buffer
	if err := Runs(runs).WriteStream(&b); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var ev struct{ Kind, Run, Tool, Text string }
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Run+" "+ev.Kind+" "+ev.Tool+ev.Text)
	}
	return got
}

// TestWriteStreamSpawnBeforeChild (found by a review): a parent's turn
// stamped late (Gemini: the message is stamped after its first calls) must
// not push its correctly stamped tool_call, which started the child,
// behind the child's events: a tree replay would see the child before the
// call that started it.
func TestWriteStreamSpawnBeforeChild(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 1, 16, 11, 0, s, 0, time.UTC) }
	runs := []Run{
		{ID: "p", Events: []termination.Event{
			{Kind: termination.KindInput, Text: "go", Time: at(1)},
			{Kind: termination.KindMessage, Text: "turn", Time: at(40)},
			{Kind: termination.KindToolCall, Tool: "task", Time: at(10)},
			{Kind: termination.KindToolResult, Tool: "task", Time: at(30)},
			{Kind: termination.KindFinal, Time: at(50)},
		}},
		{ID: "c", Parent: "p", Events: []termination.Event{
			{Kind: termination.KindInput, Text: "sub", Time: at(11)},
			{Kind: termination.KindFinal, Time: at(29)},
		}},
	}
	got := streamLines(t, runs)
	want := []string{"p input go", "p message turn", "p tool_call task", "c input sub", "c final ", "p tool_result task", "p final "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stream = %q, want %q", got, want)
	}
	spawn, child := -1, -1
	for i, g := range got {
		if g == "p tool_call task" {
			spawn = i
		}
		if g == "c input sub" {
			child = i
		}
	}
	if child < spawn {
		t.Errorf("the child's first event (line %d) comes before the tool_call that spawned it (line %d)", child+1, spawn+1)
	}
}
