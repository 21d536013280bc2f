package codec

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// decodeEntries reads every entry of log and returns the records' kinds and
// the events' kinds in order, or the first error.
func decodeEntries(log string) ([]string, error) {
	d := NewDecoder(strings.NewReader(log))
	var got []string
	for {
		e, err := d.NextEntry()
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		if e.Record != nil {
			got = append(got, e.Record.Kind.String())
		} else {
			got = append(got, e.Event.Kind.String())
		}
	}
}

const (
	first  = `{"kind":"message","run":"a","stage":"planner","time":"2026-11-28T10:00:00Z"}`
	child  = `{"kind":"message","run":"b","parent":"a","stage":"analyst","time":"2026-11-28T10:00:01Z"}`
	endA   = `{"kind":"end","run":"a","stage":"planner","time":"2026-11-28T10:00:02Z","cause":{"$kind":"NaturalCompletion"},"outcome":"succeeded","stopped_at":0,"events":1,"policy":"code"}`
	endB   = `{"kind":"end","run":"b","parent":"a","stage":"analyst","time":"2026-11-28T10:00:02Z","cause":{"$kind":"Cancelled","reason":"parent","detail":"planner ended: natural_completion"},"outcome":"failed","stopped_at":0,"events":1,"policy":"code"}`
	raiseA = `{"kind":"raise","run":"a","time":"2026-11-28T10:00:01Z","limits":{"total_tokens":1000,"cost":0.5}}`
)

func TestRecordLines(t *testing.T) {
	for _, tc := range []struct {
		name, log string
		want      []string
		err       string // substring of the error, naming the line
	}{
		{"events and records", lines(first, child, raiseA, endB, endA), []string{"message", "message", "raise", "end", "end"}, ""},
		{"no end records", lines(first, child), []string{"message", "message"}, ""},
		{"an end record alone", lines(endA), []string{"end"}, ""},
		{"a line after the end", lines(first, endA, `{"kind":"message","run":"a"}`), nil, "line 3: an event of run \"a\" after its end record (line 2)"},
		{"a raise after the end", lines(first, endA, raiseA), nil, "line 3: a raise record of run \"a\" after its end record (line 2)"},
		{"a second end record", lines(first, endA, endA), nil, "line 3: a second end record for run \"a\" (its end record is line 2)"},
		{"stage differs", lines(first, strings.Replace(endA, `"stage":"planner"`, `"stage":"coder"`, 1)), nil, `line 2: end record: stage "coder" differs from the run's first line's "planner"`},
		{"parent differs", lines(first, child, strings.Replace(endB, `"parent":"a"`, `"parent":"x"`, 1)), nil, `line 3: end record: parent "x" differs`},
		{"cause not §2 JSON", lines(first, strings.Replace(endA, `{"$kind":"NaturalCompletion"}`, `{"$kind":"Nope"}`, 1)), nil, "line 2: end record: cause: not a cause in its JSON form"},
		{"cause missing", lines(first, strings.Replace(endA, `"cause":{"$kind":"NaturalCompletion"},`, ``, 1)), nil, "line 2: end record: cause: missing"},
		{"cause a string", lines(first, strings.Replace(endA, `{"$kind":"NaturalCompletion"}`, `"done"`, 1)), nil, "line 2: end record: cause: not a cause"},
		{"raise amount missing", lines(first, `{"kind":"raise","run":"a","limits":{}}`), nil, "line 2: raise record: limits: missing"},
		{"raise without limits", lines(first, `{"kind":"raise","run":"a"}`), nil, "line 2: raise record: limits: missing"},
		{"raise amount zero", lines(first, `{"kind":"raise","run":"a","limits":{"iterations":0}}`), nil, "line 2: raise record: limits.iterations: must be a positive amount, got 0"},
		{"raise amount negative", lines(first, `{"kind":"raise","run":"a","limits":{"cost":-1}}`), nil, "line 2: raise record: limits.cost: must be a positive amount, got -1"},
		{"raise amount null", lines(first, `{"kind":"raise","run":"a","limits":{"cost":null}}`), nil, "line 2: raise record: limits.cost: must be a positive amount"},
		{"raise unknown resource", lines(first, `{"kind":"raise","run":"a","limits":{"tokens":5}}`), nil, `line 2: raise record: limits: unknown resource "tokens"`},
		{"raise fractional count", lines(first, `{"kind":"raise","run":"a","limits":{"tool_calls":1.5}}`), nil, "line 2: raise record: limits.tool_calls: must be a positive integer"},
		{"stopped_at past events", lines(first, strings.Replace(endA, `"stopped_at":0`, `"stopped_at":3`, 1)), nil, "line 2: end record: stopped_at 3 and events 1"},
		// §1: the mixed-run rule looks at events only.
		{"records do not count for the mixed-run rule", lines(`{"kind":"message"}`, `{"kind":"end","cause":{"$kind":"NaturalCompletion"},"events":1}`), []string{"message", "end"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeEntries(tc.log)
			if tc.err != "" {
				require.Error(t, err)
				require.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// TestNextSkipsRecords: Next returns events only, and checks the records.
func TestNextSkipsRecords(t *testing.T) {
	d := NewDecoder(strings.NewReader(lines(first, raiseA, endA)))
	ev, err := d.Next()
	require.NoError(t, err)
	require.Equal(t, "planner", ev.Logged().Stage)
	_, err = d.Next()
	require.ErrorIs(t, err, io.EOF)

	d = NewDecoder(strings.NewReader(lines(first, endA, first)))
	_, err = d.Next()
	require.NoError(t, err)
	_, err = d.Next()
	require.ErrorContains(t, err, "line 3: an event of run \"a\" after its end record")
}

// FuzzDecodeLog: any log, events and records mixed, decodes without a
// panic; every error names a line of the log, and a record's Line is its
// line.
func FuzzDecodeLog(f *testing.F) {
	f.Add(lines(first, child, raiseA, endB, endA))
	f.Add(lines(first, endA, first))
	f.Add(lines(`{"kind":"end","run":"x","cause":{"$kind":"All","causes":[{"$kind":"Timeout","limit":"1s","elapsed":"1s"}]}}`))
	f.Add(lines(`{"kind":"raise","run":"x","limits":{"cost":1e308,"iterations":2}}`))
	f.Add(lines(`{"kind":"end","run":"x","cause":{"$kind":"NaturalCompletion"},"stopped_at":"x"}`))
	f.Fuzz(func(t *testing.T, log string) {
		d := NewDecoder(strings.NewReader(log))
		for range 1000 {
			e, err := d.NextEntry()
			if err != nil {
				var de *DecodeError
				if !errors.Is(err, io.EOF) && (!errors.As(err, &de) || de.Line < 1) {
					t.Fatalf("error without a line: %v", err)
				}
				return
			}
			if e.Record != nil && e.Record.Line != d.Line() {
				t.Fatalf("record line %d, decoder at %d", e.Record.Line, d.Line())
			}
			if e.Record != nil && e.Record.Kind == RecordEnd && e.Record.Cause == nil {
				t.Fatal("an end record without a cause")
			}
		}
	})
}
