package codec

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLineRun: the run read from a line without decoding it is the run
// decoding gives, or lineRun says it cannot tell.
func TestLineRun(t *testing.T) {
	tests := []struct {
		line string
		run  string
		ok   bool
	}{
		{`{"kind":"message","run":"a"}`, "a", true},
		{`{"run":"a","kind":"message","text":"{\"run\":\"b\"}"}`, "a", true},
		{`{"kind":"message","text":"\"run\":\"b\""}`, "", true},
		{`{"kind":"message","args":{"run":"b"},"run":"a"}`, "a", true},
		{`{"kind":"message","run":"a","run":"c"}`, "c", true}, // the last one counts, as in decoding
		{` { "kind" : "message" , "run" : "a" } `, "a", true},
		{`{}`, "", true},
		{`{"kind":"message","run":"\u0061"}`, "", false}, // escapes: decoded whole
		{`{"kind":"message","r\u0075n":"a"}`, "", false},
		{`{"kind":"message","run":"é"}`, "", false},
		{`{"kind":"message","run":null}`, "", false},
		{`{"kind":"message","run":"a"`, "", false}, // truncated
		{`{"kind":"message","run":"a"} x`, "", false},
		{`[1]`, "", false},
	}
	for _, tc := range tests {
		run, ok := lineRun([]byte(tc.line))
		assert.Equal(t, tc.ok, ok, tc.line)
		if ok {
			assert.Equal(t, tc.run, string(run), tc.line)
		}
		if ev, err := DecodeEvent([]byte(tc.line)); ok && err == nil {
			assert.Equal(t, ev.Logged().Run, string(run), "%s: decoding reads another run", tc.line)
		}
	}
}

// FuzzLineRun: whenever lineRun reads a run and the line decodes, the run
// is the decoded event's.
func FuzzLineRun(f *testing.F) {
	for _, s := range []string{`{"kind":"message","run":"a"}`, `{"run":"a","run":"b","kind":"final"}`,
		`{"kind":"tool_call","args":{"run":"x"},"run":"r1","parent":"p"}`, `{"kind":"message","Run":"a","run":"b"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		run, ok := lineRun(line)
		ev, err := DecodeEvent(line)
		if ok && err == nil && ev.Logged().Run != string(run) {
			t.Fatalf("%q: lineRun reads %q, decoding %q", line, run, ev.Logged().Run)
		}
	})
}

// TestIndexRuns: each run's last line, numbered as the Decoder numbers
// lines (blank lines and a byte-order mark included); lines that do not
// decode name no run; the pass stops at a line it cannot read.
func TestIndexRuns(t *testing.T) {
	log := "\xef\xbb\xbf" + `{"kind":"input","run":"a"}` + "\n" +
		"\n" +
		`{"kind":"input","run":"b","parent":"a"}` + "\n" +
		`{"kind":"message","run":"a"}` + "\n" +
		`{"kind":"nope","run":"b"}` + "\n" + // bad: the replay reports it
		`{"kind":"message","r\u0075n":"b"}` + "\n" + // decoded whole
		`{"kind":"message","run":"a","te` // truncated
	x := IndexRuns(strings.NewReader(log))
	assert.Equal(t, 2, x.Runs())
	for _, c := range []struct {
		run  string
		line int
		last bool
	}{{"a", 1, false}, {"a", 4, true}, {"b", 3, false}, {"b", 5, false}, {"b", 6, true}, {"a", 7, false}, {"c", 1, false}, {"", 2, false}} {
		assert.Equal(t, c.last, x.IsLast(c.run, c.line), "run %q line %d", c.run, c.line)
	}
	// The Decoder numbers the lines alike.
	dec := NewDecoder(strings.NewReader(log))
	var lines, bad []int
	for {
		ev, err := dec.Next()
		if errors.Is(err, io.EOF) || errors.Is(err, ErrTruncated) {
			break
		}
		if err != nil {
			bad = append(bad, dec.Line())
			continue
		}
		lines = append(lines, dec.Line())
		assert.True(t, x.IsLast(ev.Logged().Run, dec.Line()) == (dec.Line() >= 4), "line %d", dec.Line())
	}
	assert.Equal(t, []int{1, 3, 4, 6}, lines)
	assert.Equal(t, []int{5}, bad)

	long := `{"kind":"input","run":"a"}` + "\n" + `{"kind":"input","run":"b","text":"` + strings.Repeat("x", maxLineBytes) + `"}` + "\n" + `{"kind":"input","run":"a"}` + "\n"
	x = IndexRuns(strings.NewReader(long))
	assert.True(t, x.IsLast("a", 1), "the pass stops at the line too long to read")
	assert.Equal(t, 1, x.Runs())
}
