package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/agentstop/agentstop/fleet"
)

// Reasons, stage names, hosts and label values come from applications and
// operators and may hold tabs and newlines: a table row must stay one line
// with its columns, the value shown escaped.
func TestFleetTablesEscapeControlCharacters(t *testing.T) {
	now := time.Now()
	var b bytes.Buffer
	blocksTable(&b, []fleet.Block{{
		Selector: fleet.Selector{Stage: "coder"},
		Reason:   "bad\tdeploy\nline2",
		By:       "ops\n@host",
		Created:  now,
	}})
	runsTable(&b, []fleet.RunInfo{{
		ID: "0123456789abcdef0123456789abcdef", Stage: "re\tsearch\n", Host: "h\nx",
		Labels: map[string]string{"tenant": "a\nb\tc"}, Started: now, Updated: now,
	}})
	budgetsTable(&b, []fleet.Budget{{Key: "label:tenant", Value: "a\nb\tc", WindowStart: now, WindowEnd: now}})
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	// header, row, count line for each of the three tables
	if len(lines) != 9 {
		t.Fatalf("tables have %d lines, want 9 (a row broken by a control character):\n%s", len(lines), b.String())
	}
	for _, want := range []string{`bad\tdeploy\nline2`, `ops\n@host`, `re\tsearch\n`, `h\nx`, `tenant=a\nb\tc`, `a\nb\tc`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("tables do not show %s escaped:\n%s", want, b.String())
		}
	}
}
