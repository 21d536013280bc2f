package adaptertest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentstop/agentstop/internal/adaptertest"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

func TestDiffEvents(t *testing.T) {
	want := []termination.Event{
		{Kind: termination.KindMessage, Source: "m", Text: "hi", Usage: termination.Usage{InputTokens: 3}},
		{Kind: termination.KindToolCall, Tool: "search", Args: []byte(`{"q":1}`)},
	}
	if err := adaptertest.DiffEvents(want, want); err != nil {
		t.Errorf("equal events: %v", err)
	}
	// Fields DiffEvents does not compare (times, the log's fields) may differ.
	same := []termination.Event{want[0], want[1]}
	same[0].Time = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	if err := adaptertest.DiffEvents(same, want); err != nil {
		t.Errorf("events differing in time only: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(ev []termination.Event) []termination.Event
		err  string
	}{
		{"Count", func(ev []termination.Event) []termination.Event { return ev[:1] }, "got 1 events"},
		{"Kind", func(ev []termination.Event) []termination.Event { ev[0].Kind = termination.KindFinal; return ev }, "event 0 ="},
		{"Args", func(ev []termination.Event) []termination.Event { ev[1].Args = []byte(`{"q":2}`); return ev }, `event 1 = `},
		{"Usage", func(ev []termination.Event) []termination.Event { ev[0].Usage.OutputTokens = 1; return ev }, "event 0 ="},
		{"Err", func(ev []termination.Event) []termination.Event { ev[1].Err = "boom"; return ev }, "event 1 ="},
		{"CallID", func(ev []termination.Event) []termination.Event { ev[1].CallID = "c1"; return ev }, "event 1 ="},
		{"Model", func(ev []termination.Event) []termination.Event { ev[0].Model = "other"; return ev }, "event 0 ="},
		{"Cost", func(ev []termination.Event) []termination.Event { ev[0].Cost = 0.01; return ev }, "event 0 ="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.edit([]termination.Event{want[0], want[1]})
			err := adaptertest.DiffEvents(got, want)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("err = %v, want one containing %q", err, tc.err)
			}
		})
	}
}

func TestCheckToolResultEvent(t *testing.T) {
	good := func(out string, err error) termination.Event {
		ev := termination.Event{Kind: termination.KindToolResult, Tool: "search", Text: out}
		if err != nil {
			ev.Err = err.Error()
		}
		return ev
	}
	if err := adaptertest.CheckToolResultEvent(good); err != nil {
		t.Errorf("a correct builder: %v", err)
	}
	for name, bad := range map[string]func(string, error) termination.Event{
		"WrongKind": func(out string, err error) termination.Event {
			ev := good(out, err)
			ev.Kind = termination.KindMessage
			return ev
		},
		"NoText":       func(_ string, err error) termination.Event { return good("", err) },
		"ErrorDropped": func(out string, _ error) termination.Event { return good(out, nil) },
	} {
		if err := adaptertest.CheckToolResultEvent(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestCheckObserveError(t *testing.T) {
	if err := adaptertest.CheckObserveError((*middleware.Run).ObserveError); err != nil {
		t.Errorf("Run.ObserveError: %v", err)
	}
	ignores := func(run *middleware.Run, _ error) (termination.Cause, bool) { return run.Cause() }
	if err := adaptertest.CheckObserveError(ignores); err == nil {
		t.Error("an ObserveError that reports nothing passed")
	}
}

func TestDecodeEvents(t *testing.T) {
	type reply struct{ Text string }
	decode := func(r *reply, emit func(termination.Event)) {
		emit(termination.Event{Kind: termination.KindFinal, Text: r.Text})
	}
	got, err := adaptertest.DecodeEvents(`{"Text":"done"}`, decode)
	if err != nil || len(got) != 1 || got[0].Text != "done" {
		t.Errorf("DecodeEvents = %+v, %v; want one final event with text done", got, err)
	}
	if _, err := adaptertest.DecodeEvents(`{"Text":`, decode); err == nil || !strings.Contains(err.Error(), "reply") {
		t.Errorf("truncated JSON: err = %v, want one naming the type", err)
	}
}
