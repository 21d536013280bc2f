package main

import (
	"strings"
	"testing"
	"time"
)

// An alert is one log line and one line of the page, whatever its labels
// and annotations hold: a newline in a summary (a templated stage name, a
// description pasted into summary) must not start a line that looks like
// another alert.
func TestLineIsOneLine(t *testing.T) {
	r := Received{At: time.Date(2026, 11, 23, 11, 5, 0, 0, time.UTC), Receiver: "warning\nx", Status: "firing",
		Labels: map[string]string{"alertname": "AgentStageStallRateHigh", "severity": "warning",
			"stage": "a\n2026-11-23T11:05:00Z FIRING [critical] Forged", "tab": "x\ty", "bell\r": "\x07"},
		Annotations: map[string]string{"summary": "first line\r\nsecond line\u2028third"}}
	got := r.line()
	if strings.ContainsAny(got, "\n\r\x07\u2028") {
		t.Errorf("line() = %q: holds a line break or control character", got)
	}
	for _, want := range []string{`stage=a\n2026-11-23T11:05:00Z FIRING [critical] Forged`, `first line\r\nsecond line`, `receiver=warning\nx`} {
		if !strings.Contains(got, want) {
			t.Errorf("line() = %q, want it to show %q", got, want)
		}
	}
	ok := Received{At: r.At, Receiver: "warning", Status: "firing",
		Labels:      map[string]string{"alertname": "A", "severity": "warning", "stage": "researcher"},
		Annotations: map[string]string{"summary": "Stage researcher: 33.33% of runs stop — on a stall"}}
	if got, want := ok.line(), "2026-11-23T11:05:00Z FIRING [warning] A stage=researcher receiver=warning: Stage researcher: 33.33% of runs stop — on a stall"; got != want {
		t.Errorf("line() = %q, want %q (printable text unchanged)", got, want)
	}
}
