package codec

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLineIDs: the run, parent and stage read from a line without
// decoding it are those decoding gives, or lineIDs says it cannot tell.
func TestLineIDs(t *testing.T) {
	tests := []struct {
		line               string
		run, parent, stage string
		ok                 bool
	}{
		{`{"kind":"message","run":"a"}`, "a", "", "", true},
		{`{"run":"a","kind":"message","text":"{\"run\":\"b\"}"}`, "a", "", "", true},
		{`{"kind":"message","text":"\"run\":\"b\""}`, "", "", "", true},
		{`{"kind":"message","args":{"run":"b","parent":"q"},"run":"a"}`, "a", "", "", true},
		{`{"kind":"message","run":"a","run":"c"}`, "c", "", "", true}, // the last one counts, as in decoding
		{` { "kind" : "message" , "run" : "a" , "parent" : "p" , "stage" : "s" } `, "a", "p", "s", true},
		{`{"kind":"end","run":"a","parent":"p","stage":"s","cause":{"$kind":"NaturalCompletion"}}`, "a", "p", "s", true},
		{`{}`, "", "", "", true},
		{`{"kind":"message","run":"\u0061"}`, "", "", "", false}, // escapes: decoded whole
		{`{"kind":"message","run":"a","parent":"\u0070"}`, "", "", "", false},
		{`{"kind":"message","r\u0075n":"a"}`, "", "", "", false},
		{`{"kind":"message","run":"é"}`, "", "", "", false},
		{`{"kind":"message","run":"a","stage":"é"}`, "", "", "", false},
		{`{"kind":"message","run":null}`, "", "", "", false},
		{`{"kind":"message","run":"a","parent":7}`, "", "", "", false},
		{`{"kind":"message","run":"a"`, "", "", "", false}, // truncated
		{`{"kind":"message","run":"a"} x`, "", "", "", false},
		{`[1]`, "", "", "", false},
	}
	for _, tc := range tests {
		ids, ok := lineIDs([]byte(tc.line))
		assert.Equal(t, tc.ok, ok, tc.line)
		if ok {
			assert.Equal(t, []string{tc.run, tc.parent, tc.stage}, []string{string(ids.run), string(ids.parent), string(ids.stage)}, tc.line)
		}
		if ev, err := DecodeEvent([]byte(tc.line)); ok && err == nil {
			l := ev.Logged()
			assert.Equal(t, []string{l.Run, l.Parent, l.Stage}, []string{string(ids.run), string(ids.parent), string(ids.stage)}, "%s: decoding reads others", tc.line)
		}
	}
}

// FuzzLineIDs: whenever lineIDs reads a line and the line decodes, its
// run, parent and stage are the decoded event's.
func FuzzLineIDs(f *testing.F) {
	for _, s := range []string{`{"kind":"message","run":"a"}`, `{"run":"a","run":"b","kind":"final"}`,
		`{"kind":"tool_call","args":{"run":"x"},"run":"r1","parent":"p","stage":"s"}`, `{"kind":"message","Run":"a","run":"b","Parent":"c"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ids, ok := lineIDs(line)
		ev, err := DecodeEvent(line)
		if !ok || err != nil {
			return
		}
		if l := ev.Logged(); l.Run != string(ids.run) || l.Parent != string(ids.parent) || l.Stage != string(ids.stage) {
			t.Fatalf("%q: lineIDs reads %q %q %q, decoding %q %q %q", line, ids.run, ids.parent, ids.stage, l.Run, l.Parent, l.Stage)
		}
	})
}

// TestIndexLateParent: a run whose first line comes after the first line
// of one of its descendants starts late, and the index says what that
// first line says (parent, stage), ancestors included; one that comes
// before its descendants does not; a cycle of parents ends the walk; a
// parent not in the log is none; an end record is a first line too.
func TestIndexLateParent(t *testing.T) {
	log := lines(
		`{"kind":"input","run":"a","stage":"root"}`,
		`{"kind":"input","run":"g","parent":"c","stage":"leaf"}`, // c and its parent p come later
		`{"kind":"input","run":"x","parent":"remote"}`,
		`{"kind":"input","run":"c","parent":"p","stage":"mid"}`,
		`{"kind":"end","run":"p","parent":"a","stage":"top","cause":{"$kind":"NaturalCompletion"},"outcome":"succeeded","stopped_at":0,"events":0,"policy":"code"}`,
		`{"kind":"input","run":"y","parent":"z"}`, // a cycle: z names y
		`{"kind":"input","run":"z","parent":"y","stage":"loop"}`,
		`{"kind":"input","run":"k","parent":"a"}`,
	)
	x := IndexRuns(strings.NewReader(log))
	for _, c := range []struct {
		run, parent, stage string
		late               bool
	}{
		{"c", "p", "mid", true}, {"p", "a", "top", true}, {"z", "y", "loop", true},
		{"a", "", "", false}, {"g", "", "", false}, {"x", "", "", false}, {"remote", "", "", false},
		{"y", "", "", false}, {"k", "", "", false},
	} {
		parent, stage, ok := x.LateParent(c.run)
		assert.Equal(t, c.late, ok, c.run)
		assert.Equal(t, []string{c.parent, c.stage}, []string{parent, stage}, c.run)
	}
	x = IndexRuns(strings.NewReader(lines(`{"kind":"input","run":"a"}`, `{"kind":"input","run":"b","parent":"a"}`)))
	assert.Nil(t, x.late, "no run starts late")
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

// TestRaiseRecordPlacesNoRun: a raise record names no stage or parent, so
// a run whose first line is one (a holder raised through its tree before
// its own first line) is placed by its first event or end record: the
// Decoder checks the end record against that, and the index says the run
// starts late with what that line says.
func TestRaiseRecordPlacesNoRun(t *testing.T) {
	log := lines(
		`{"kind":"message","run":"k","parent":"p","stage":"kid"}`,
		`{"kind":"raise","run":"p","limits":{"iterations":5}}`,
		`{"kind":"message","run":"k"}`,
		`{"kind":"end","run":"p","stage":"planner","cause":{"$kind":"NaturalCompletion"},"outcome":"succeeded","stopped_at":0,"events":0,"policy":"code"}`,
	)
	d := NewDecoder(strings.NewReader(log))
	for {
		_, err := d.NextEntry()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("line %d: %v", d.Line(), err)
		}
	}
	x := IndexRuns(strings.NewReader(log))
	parent, stage, ok := x.LateParent("p")
	assert.True(t, ok)
	assert.Equal(t, []string{"", "planner"}, []string{parent, stage})
	assert.True(t, x.IsLast("p", 4))
}
