package codec

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/termination"
)

// TestDecodeRunParentAndHashes: run, parent, args_hash and text_hash are
// read on both paths (the fast path takes the line itself), and written
// back by Event's JSON form.
func TestDecodeRunParentAndHashes(t *testing.T) {
	cases := []struct {
		name string
		line string
		want termination.Event
	}{
		{"run and parent", `{"kind":"input","run":"r-2","parent":"r-1","text":"task"}`,
			termination.Event{Kind: termination.KindInput, Text: "task", Log: &termination.LogFields{Run: "r-2", Parent: "r-1"}}},
		{"hashed call", `{"kind":"tool_call","tool":"bash","args_hash":"0f3a","run":"r"}`,
			termination.Event{Kind: termination.KindToolCall, Tool: "bash", Log: &termination.LogFields{ArgsHash: "0f3a", Run: "r"}}},
		{"hashed result with its error", `{"kind":"tool_result","tool":"bash","text_hash":"9c1e","error":"exit code 1"}`,
			termination.Event{Kind: termination.KindToolResult, Tool: "bash", Err: "exit code 1", Log: &termination.LogFields{TextHash: "9c1e"}}},
		{"hashed message", `{"kind":"message","source":"agent","text_hash":"77aa"}`,
			termination.Event{Kind: termination.KindMessage, Source: "agent", Log: &termination.LogFields{TextHash: "77aa"}}},
		{"args null with args_hash", `{"kind":"tool_call","tool":"t","args":null,"args_hash":"ab"}`,
			termination.Event{Kind: termination.KindToolCall, Tool: "t", Args: json.RawMessage("null"), Log: &termination.LogFields{ArgsHash: "ab"}}},
		{"empty text with text_hash", `{"kind":"message","text":"","text_hash":"ab"}`,
			termination.Event{Kind: termination.KindMessage, Log: &termination.LogFields{TextHash: "ab"}}},
		{"escaped run", `{"kind":"input","run":"a\u002fb"}`, termination.Event{Kind: termination.KindInput, Log: &termination.LogFields{Run: "a/b"}}},
		{"keys are case-sensitive", `{"kind":"input","Run":"x","PARENT":"y","Args_Hash":"z"}`, termination.Event{Kind: termination.KindInput}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeEvent([]byte(tc.line))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			checkFastDecode(t, []byte(tc.line))
			b, err := json.Marshal(got)
			require.NoError(t, err)
			back, err := DecodeEvent(b)
			require.NoError(t, err)
			assert.Equal(t, got, back)
		})
	}
	// The common forms take the fast path.
	for _, line := range []string{cases[0].line, cases[1].line, cases[2].line, cases[3].line} {
		var ev termination.Event
		assert.True(t, decodeEventFast([]byte(line), &ev), line)
	}
}

// TestDecoderJSONDocument: a file that is a JSON document, not JSON Lines,
// is one error on its first line that says so and names agentstop import,
// never "unexpected end of JSON input".
func TestDecoderJSONDocument(t *testing.T) {
	cases := []struct {
		name, input string
		line        int
		what        string
	}{
		{"pretty-printed object", "{\n  \"kind\": \"input\",\n  \"text\": \"hi\"\n}\n", 1, "a pretty-printed object"},
		{"pretty-printed trajectory", "{\n  \"info\": {\"exit_status\": \"Submitted\"},\n  \"messages\": [\n    {\"role\": \"user\"}\n  ]\n}\n", 1, "a pretty-printed object"},
		{"object opening on a line of its own after blank lines", "\n\n{\n\"messages\": []}\n", 3, "a pretty-printed object"},
		{"array of events on one line", `[{"kind":"input"},{"kind":"final"}]` + "\n", 1, "a list of events or of runs"},
		{"pretty-printed array of runs", "[\n  {\"run\": \"a\", \"events\": []}\n]\n", 1, "a list of events or of runs"},
		{"empty array", "[]", 1, "a list of events or of runs"},
		{"an object holding a list on one line", `{"messages":[{"role":"user","content":"hi"}],"model":"gpt-5"}` + "\n", 1, `"messages"`},
		{"OTLP/JSON on one line", `{"resourceSpans":[ {"resource":{},"scopeSpans":[]}]}`, 1, `"resourceSpans"`},
		{"with a byte-order mark", "\xef\xbb\xbf[\n{\"kind\":\"input\"}\n]\n", 1, "a list of events or of runs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeAll(t, tc.input)
			require.ErrorIs(t, err, ErrJSONDocument)
			require.NotErrorIs(t, err, ErrTruncated)
			var de *DecodeError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, tc.line, de.Line)
			msg := err.Error()
			assert.True(t, strings.HasPrefix(msg, "line "+itoa(tc.line)+": the file is a JSON document, not JSON Lines (one event object per line): "), msg)
			assert.Contains(t, msg, tc.what)
			assert.Contains(t, msg, "agentstop import")
			assert.NotContains(t, msg, "unexpected end")
			assertUserTerms(t, msg)

		})
	}

	// Once an event has been read, a line that is not one is a bad line of
	// a JSON Lines file, not a document.
	for _, input := range []string{
		"{\"kind\":\"input\"}\n[1]\n",
		"{\"kind\":\"input\"}\n{\n\"kind\": \"final\"}\n",
		"{\"kind\":\"input\"}\n{\"messages\":[]}\n",
	} {
		_, err := decodeAll(t, input)
		var de *DecodeError
		require.ErrorAs(t, err, &de, input)
		assert.Equal(t, 2, de.Line)
		assert.NotErrorIs(t, err, ErrJSONDocument, input)
		assert.NotErrorIs(t, err, ErrTruncated, input)
		assertUserTerms(t, err.Error())
	}
	// An event without a kind is still "missing kind", not a document.
	for _, line := range []string{`{"text":"hi","args":[{"a":1}]}`, `{"text":"hi","tags":["a","b"]}`, `{"text":"hi","steps":[]}`} {
		_, err := decodeAll(t, line+"\n")
		assert.NotErrorIs(t, err, ErrJSONDocument, line)
		assert.ErrorContains(t, err, "missing kind", line)
	}
}

// TestDecoderTruncated: a last line that ends inside a value with no
// newline after it is a truncated log, typed (ErrTruncated) and worded as
// such, with every event before it returned first.
func TestDecoderTruncated(t *testing.T) {
	const head = "{\"kind\":\"input\"}\n{\"kind\":\"message\",\"text\":\"x\"}\n"
	cases := []struct {
		name, input string
		events      int
		line        int
		truncated   bool
	}{
		{"inside a string escape", head + `{"kind":"message","text":"a\`, 2, 3, true},
		{"inside a unicode escape", head + `{"kind":"message","text":"a\u00`, 2, 3, true},
		{"inside a string", head + `{"kind":"tool_call","tool":"bas`, 2, 3, true},
		{"inside a number", head + `{"kind":"message","cost":0.`, 2, 3, true},
		{"after a key", head + `{"kind":"message","text"`, 2, 3, true},
		{"inside nested args", head + `{"kind":"tool_call","args":{"a":[1,{"b":`, 2, 3, true},
		{"after blank lines", head + "\n\n" + `{"kind":"fin`, 2, 5, true},
		{"the only line", `{"kind":"mess`, 0, 1, true},
		{"with CR", head + "{\"kind\":\"message\",\"text\":\"a\r", 2, 3, true},
		// Not truncated: the line is followed by a newline, or is wrong
		// before its end.
		{"newline after it", head + `{"kind":"message","text":"a` + "\n", 2, 3, false},
		{"wrong before its end", head + `{"kind":"message","text":x`, 2, 3, false},
		{"a whole bad event", head + `{"kind":"thinking"}`, 2, 3, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeAll(t, tc.input)
			assert.Len(t, got, tc.events)
			var de *DecodeError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, tc.line, de.Line)
			assertUserTerms(t, err.Error())
			assert.NotContains(t, err.Error(), "escape code")
			if !tc.truncated {
				assert.NotErrorIs(t, err, ErrTruncated)
				return
			}
			require.ErrorIs(t, err, ErrTruncated)
			assert.Equal(t, "the log looks truncated at line "+itoa(tc.line)+
				": its last line ends inside an event, with no newline after it (was the agent stopped while writing?)", err.Error())
		})
	}
}

// FuzzDecoder reads whole files: the decoder never panics, every error is
// one line naming a line of the file, a truncation is reported only for a
// last line without a newline and a document only before the first event.
// (replay's FuzzLogLenient: a lenient replay differs from a strict one
// only on a truncation.)
func FuzzDecoder(f *testing.F) {
	for _, s := range []string{
		"{\"kind\":\"input\"}\n{\"kind\":\"final\"}\n",
		"{\"kind\":\"input\"}\n{\"kind\":\"message\",\"text\":\"a\\",
		"{\n  \"kind\": \"input\"\n}\n", "[{\"kind\":\"input\"}]", "[\n]\n", "{\"messages\":[{}]}\n",
		"\xef\xbb\xbf{\"kind\":\"stop\"}", "{\"kind\":\"message\",\"time\":\"2026-11-20T09:00:00Z\"}\n{\"kind\":\"fin",
		"{\"kind\":\"tool_call\",\"run\":\"a\",\"parent\":\"b\",\"args_hash\":\"c\"}\n{\"kind\":\"message\",\"text_hash\":\"d\",\"text\":\"e\"}",
		"\n\n{\"kind\":\"input\"}\r\n{\"kind\":\"message\",\"cost\":1.", "{\"kind\":\"input\",}\n", "{\"kind\":\"input\"}\n{\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		data = data[:min(len(data), maxFuzzLine)]
		lines := strings.Count(string(data), "\n") + 1
		d := NewDecoder(strings.NewReader(string(data)))
		events := 0
		var err error
		for {
			if _, err = d.Next(); err != nil {
				break
			}
			events++
		}
		if !errors.Is(err, io.EOF) {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is not a *DecodeError", err)
			}
			if de.Line < 1 || de.Line > lines {
				t.Fatalf("error on line %d of %d: %v", de.Line, lines, err)
			}
			msg := err.Error()
			for _, leak := range []string{"\n", "unexpected end of JSON input", "escape code", "looking for beginning"} {
				if strings.Contains(msg, leak) {
					t.Fatalf("message %q contains %q", msg, leak)
				}
			}
			if errors.Is(err, ErrTruncated) && (len(data) > 0 && data[len(data)-1] == '\n' || de.Line != lines) {
				t.Fatalf("truncated at line %d of %d, input ending %q", de.Line, lines, data[max(0, len(data)-4):])
			}
			if errors.Is(err, ErrJSONDocument) && events > 0 {
				t.Fatalf("a JSON document after %d events", events)
			}
		}
	})
}

// TestDecoderMixedRuns: a log in which some events carry run and others do
// not is an error naming the first line that breaks the pattern the first
// event set (§4), whichever way round, and a replay of it too.
func TestDecoderMixedRuns(t *testing.T) {
	const tail = "every event of a log names its run, or none does"
	cases := []struct {
		name, log string
		line      int
		want      string
	}{
		{"first names its run", "{\"kind\":\"input\",\"run\":\"a\"}\n\n{\"kind\":\"message\",\"run\":\"a\"}\n{\"kind\":\"message\"}\n{\"kind\":\"message\"}\n",
			4, `line 4: this event names no run, but the first event (line 1) names run "a": ` + tail},
		{"first names none", "\n{\"kind\":\"input\"}\n{\"kind\":\"message\"}\n{\"kind\":\"message\",\"run\":\"b\"}\n{\"kind\":\"message\"}\n",
			4, `line 4: this event names run "b", but the first event (line 2) names none: ` + tail},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dec := NewDecoder(strings.NewReader(tc.log))
			var err error
			n := 0
			for err == nil {
				_, err = dec.Next()
				n++
			}
			var de *DecodeError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, tc.line, de.Line)
			assert.EqualError(t, err, tc.want)
			assert.ErrorIs(t, err, ErrMixedRuns)
			assert.Equal(t, 3, n, "two events, then the error")

		})
	}
	// Logs that keep to one pattern are fine.
	for _, log := range []string{"{\"kind\":\"input\"}\n{\"kind\":\"final\"}\n", "{\"kind\":\"input\",\"run\":\"a\"}\n{\"kind\":\"input\",\"run\":\"b\"}\n"} {
		dec := NewDecoder(strings.NewReader(log))
		for {
			_, err := dec.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, log)
		}
	}
}
