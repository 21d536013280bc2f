package codec

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/termination"
)

func decodeAll(t *testing.T, s string) ([]termination.Event, error) {
	t.Helper()
	d := NewDecoder(strings.NewReader(s))
	var out []termination.Event
	for {
		e, err := d.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
}

func TestDecodeEveryField(t *testing.T) {
	line := `{"kind":"tool_call","source":"assistant","text":"t","tool":"search","args":{"q": [1, "x"]},` +
		`"target":"user","usage":{"input_tokens":12,"output_tokens":3},"cost":0.25,"error":"e",` +
		`"time":"2026-11-20T09:00:04.5+01:00","call_id":"call_1","model":"gpt-5","future_field":{"nested":[1,2]},"id":7}`
	e, err := DecodeEvent([]byte(line))
	require.NoError(t, err)
	assert.Equal(t, termination.KindToolCall, e.Kind)
	assert.Equal(t, "assistant", e.Source)
	assert.Equal(t, "t", e.Text)
	assert.Equal(t, "search", e.Tool)
	assert.JSONEq(t, `{"q":[1,"x"]}`, string(e.Args))
	assert.Equal(t, "user", e.Target)
	assert.Equal(t, termination.Usage{InputTokens: 12, OutputTokens: 3}, e.Usage)
	assert.Equal(t, 0.25, e.Cost)
	assert.Equal(t, "e", e.Err)
	assert.True(t, e.Time.Equal(time.Date(2026, 11, 20, 8, 0, 4, 5e8, time.UTC)))
	assert.Equal(t, "call_1", e.CallID)
	assert.Equal(t, "gpt-5", e.Model)
}

func TestDecodeKinds(t *testing.T) {
	for k := termination.KindInput; k <= termination.KindFinal; k++ {
		e, err := DecodeEvent([]byte(`{"kind":"` + k.String() + `"}`))
		require.NoError(t, err)
		assert.Equal(t, k, e.Kind)
		b, err := json.Marshal(e)
		require.NoError(t, err)
		assert.Equal(t, `{"kind":"`+k.String()+`"}`, string(b))
	}
	assert.Equal(t, []string{"input", "message", "tool_call", "tool_result", "handoff", "stop", "error", "final"},
		[]string{termination.KindInput.String(), termination.KindMessage.String(), termination.KindToolCall.String(), termination.KindToolResult.String(),
			termination.KindHandoff.String(), termination.KindStop.String(), termination.KindError.String(), termination.KindFinal.String()})
	assert.Equal(t, "Kind(9)", termination.Kind(9).String())
	assert.False(t, termination.Kind(0).Valid())
	_, err := json.Marshal(termination.Event{})
	assert.Error(t, err, "the zero Kind cannot be written")
}

func TestDecoder(t *testing.T) {
	cases := []struct {
		name  string
		input string
		kinds []termination.Kind // events decoded before the error (or all of them)
		line  int                // 0: no error
		err   string             // substring of the error
	}{
		{name: "empty input", input: ""},
		{name: "blank lines and whitespace skipped",
			input: "\n{\"kind\":\"input\"}\n\n   \t\n{\"kind\":\"final\"}\n\n", kinds: []termination.Kind{termination.KindInput, termination.KindFinal}},
		{name: "CRLF line ends", input: "{\"kind\":\"input\"}\r\n\r\n{\"kind\":\"message\"}\r\n", kinds: []termination.Kind{termination.KindInput, termination.KindMessage}},
		{name: "no final newline", input: `{"kind":"stop"}`, kinds: []termination.Kind{termination.KindStop}},
		{name: "unknown fields ignored", input: `{"kind":"message","x":1,"meta":{"a":[true]},"model":"gpt"}`, kinds: []termination.Kind{termination.KindMessage}},
		{name: "missing kind", input: "{\"kind\":\"input\"}\n{\"text\":\"hi\"}\n", kinds: []termination.Kind{termination.KindInput}, line: 2, err: "missing kind"},
		{name: "empty kind", input: `{"kind":""}`, line: 1, err: "missing kind"},
		{name: "null kind", input: `{"kind":null}`, line: 1, err: "missing kind"},
		{name: "null line", input: `null`, line: 1, err: "missing kind"},
		{name: "unknown kind names the line after blank lines",
			input: "{\"kind\":\"input\"}\n\n{\"kind\":\"thinking\"}\n", kinds: []termination.Kind{termination.KindInput}, line: 3, err: `unknown kind "thinking"`},
		{name: "kind is case-sensitive", input: `{"kind":"Message"}`, line: 1, err: `unknown kind "Message"`},
		{name: "malformed JSON", input: "{\"kind\":\"input\"}\n{\"kind\":\"message\",\"text\":\"ok\"\n", kinds: []termination.Kind{termination.KindInput},
			line: 2, err: "malformed JSON"},
		{name: "not JSON at all", input: "kind: message\n", line: 1, err: "malformed JSON"},
		{name: "two objects on one line", input: `{"kind":"input"} {"kind":"input"}`, line: 1, err: "malformed JSON"},
		{name: "trailing comma", input: `{"kind":"input",}`, line: 1, err: "malformed JSON"},
		{name: "kind of the wrong type", input: `{"kind":3}`, line: 1, err: "kind"},
		{name: "not an object", input: "{\"kind\":\"input\"}\n[{\"kind\":\"input\"}]", kinds: []termination.Kind{termination.KindInput}, line: 2, err: "an event must be a JSON object, got an array"},
		{name: "an array first is a JSON document", input: `[{"kind":"input"}]`, line: 1, err: "JSON document"},
		{name: "bad usage", input: `{"kind":"message","usage":{"input_tokens":"12"}}`, line: 1, err: "input_tokens"},
		{name: "bad time", input: `{"kind":"message","time":"yesterday"}`, line: 1, err: "yesterday"},
		{name: "negative input tokens", input: "{\"kind\":\"input\"}\n{\"kind\":\"message\",\"usage\":{\"input_tokens\":-5}}", kinds: []termination.Kind{termination.KindInput},
			line: 2, err: "usage.input_tokens: must be >= 0, got -5"},
		{name: "negative output tokens", input: `{"kind":"message","usage":{"output_tokens":-1}}`, line: 1, err: "usage.output_tokens: must be >= 0, got -1"},
		{name: "negative cost", input: `{"kind":"message","cost":-0.5}`, line: 1, err: "cost: must be a finite amount >= 0, got -0.5"},
		{name: "overflowing cost", input: `{"kind":"message","cost":1e999}`, line: 1, err: "cost"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeAll(t, tc.input)
			var kinds []termination.Kind
			for _, e := range got {
				kinds = append(kinds, e.Kind)
			}
			assert.Equal(t, tc.kinds, kinds)
			if tc.line == 0 {
				require.NoError(t, err)
				return
			}
			var de *DecodeError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, tc.line, de.Line)
			assert.ErrorContains(t, err, tc.err)
			assert.True(t, strings.HasPrefix(err.Error(), "line "+itoa(tc.line)+": "), err.Error())
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestDecoderLine(t *testing.T) {
	d := NewDecoder(strings.NewReader("\n\n{\"kind\":\"input\"}\n\n{\"kind\":\"final\"}"))
	_, err := d.Next()
	require.NoError(t, err)
	assert.Equal(t, 3, d.Line())
	_, err = d.Next()
	require.NoError(t, err)
	assert.Equal(t, 5, d.Line())
	_, err = d.Next()
	assert.ErrorIs(t, err, io.EOF)
}

func TestDecoderLineTooLong(t *testing.T) {
	long := `{"kind":"message","text":"` + strings.Repeat("x", maxLineBytes) + `"}`
	_, err := decodeAll(t, "{\"kind\":\"input\"}\n"+long+"\n")
	var de *DecodeError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, 2, de.Line)
	assert.Equal(t, "line 2: longer than 16 MiB, the limit for one event", err.Error())
}

// TestDecodeMessages pins every message the decoder gives for a bad line:
// each names the field and the form it must have, in the user's terms.
func TestDecodeMessages(t *testing.T) {
	const kinds = "one of input, message, tool_call, tool_result, handoff, stop, error, final"
	cases := []struct{ name, line, want string }{
		{"missing kind", `{"text":"hi"}`, "missing kind"},
		{"unknown kind", `{"kind":"thinking"}`, `unknown kind "thinking" (want ` + kinds + `)`},
		{"kind a number", `{"kind":3}`, "kind: must be a string, " + kinds + ", got a number"},
		{"kind an object", `{"kind":{}}`, "kind: must be a string, " + kinds + ", got an object"},
		{"malformed JSON", `{"kind":"message"`, "malformed JSON: the line ends inside an event (a string, object or array is not closed)"},
		{"not JSON", `kind: message`, "malformed JSON at column 1: unexpected 'k' where a value should be"},
		{"single quotes", `{'kind':'input'}`, "malformed JSON at column 2: unexpected single quote (JSON strings take double quotes) where a quoted key should be"},
		{"a missing colon", `{"kind" "input"}`, `malformed JSON at column 9: unexpected '"' after a key (want a colon)`},
		{"a missing comma", `{"kind":"input" "text":"x"}`, `malformed JSON at column 17: unexpected '"' after a value (want a comma or a closing brace)`},
		{"a missing comma in an array", `{"kind":"tool_call","args":[1 2]}`, `malformed JSON at column 31: unexpected '2' after an array element (want a comma or a closing bracket)`},
		{"a bad number", `{"kind":"message","cost":1.}`, "malformed JSON at column 28: unexpected '}' in a number (numbers look like 12, -0.5 or 1e3)"},
		{"a bad literal", `{"kind":"input","x":tru}`, "malformed JSON at column 24: unexpected '}' in true, false or null"},
		{"too deep", `{"kind":"tool_call","args":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, "malformed JSON at column 10027: values nested more than 10000 levels deep"},
		{"a bad escape", `{"kind":"message","text":"é\x41"}`, `malformed JSON at column 28: a backslash in a string must start an escape such as \n, \" or \u00e9`},
		{"a short unicode escape", `{"kind":"message","text":"\u12"}`, `malformed JSON at column 27: a backslash in a string must start an escape such as \n, \" or \u00e9`},
		{"a raw control character", "{\"kind\":\"message\",\"text\":\"a\x01\"}", "malformed JSON at column 28: a control character (U+0001) in a string must be escaped"},
		{"two events on a line", `{"kind":"input"} {"kind":"input"}`, `malformed JSON at column 18: unexpected '{' after the event's closing brace (one event per line)`},
		{"a trailing comma", `{"kind":"input",}`, "malformed JSON at column 17: unexpected '}' where a quoted key should be"},
		{"a non-breaking space", "{\"kind\":\"input\",\u00a0\"text\":\"x\"}", "malformed JSON at column 17: unexpected character U+00A0 where a quoted key should be"},
		{"invalid UTF-8 outside a string", "{\"kind\":\"input\",\xff}", "malformed JSON at column 17: unexpected byte that is not UTF-8 where a quoted key should be"},
		{"both args and args_hash", `{"kind":"tool_call","tool":"t","args":{"a":1},"args_hash":"ab12"}`, "args and args_hash: an event carries one or the other (args_hash stands in for args in a log recorded without content)"},
		{"both text and text_hash", `{"kind":"message","text":"hi","text_hash":"ab12"}`, "text and text_hash: an event carries one or the other (text_hash stands in for text in a log recorded without content)"},
		{"run a number", `{"kind":"message","run":7}`, "run: must be a string, got a number"},
		{"parent an object", `{"kind":"message","parent":{}}`, "parent: must be a string, got an object"},
		{"args_hash a number", `{"kind":"tool_call","args_hash":1}`, "args_hash: must be a string, got a number"},
		{"text_hash an array", `{"kind":"message","text_hash":[]}`, "text_hash: must be a string, got an array"},
		{"an array", `[{"kind":"input"}]`, "an event must be a JSON object, got an array"},
		{"a string", `"input"`, "an event must be a JSON object, got a string"},
		{"a number", `42`, "an event must be a JSON object, got a number"},
		{"tokens a string", `{"kind":"message","usage":{"input_tokens":"12"}}`, "usage.input_tokens: must be an integer, got a string"},
		{"tokens a fraction", `{"kind":"message","usage":{"output_tokens":1.5}}`, "usage.output_tokens: must be an integer, got 1.5"},
		{"tokens an exponent", `{"kind":"message","usage":{"input_tokens":1e3}}`, "usage.input_tokens: must be an integer, got 1e3"},
		{"tokens too large", `{"kind":"message","usage":{"input_tokens":99999999999999999999}}`,
			"usage.input_tokens: must be an integer from 0 to 9223372036854775807, got 99999999999999999999"},
		{"tokens a folded key", `{"kind":"message","usage":{"Input_Tokens":true}}`, `usage: unknown key "Input_Tokens" (want input_tokens or output_tokens)`}, // keys are case-sensitive (§1)
		{"tokens negative", `{"kind":"message","usage":{"input_tokens":-5}}`, "usage.input_tokens: must be >= 0, got -5"},
		{"usage an array", `{"kind":"message","usage":[1]}`, `usage: must be an object such as {"input_tokens": 120, "output_tokens": 40}, got an array`},
		{"usage a number", `{"kind":"message","usage":12}`, `usage: must be an object such as {"input_tokens": 120, "output_tokens": 40}, got a number`},
		{"usage key typo", `{"kind":"message","usage":{"input_token":5}}`, `usage: unknown key "input_token" (want input_tokens or output_tokens)`},
		{"usage extra key", `{"kind":"message","usage":{"input_tokens":5,"cached_tokens":2}}`, `usage: unknown key "cached_tokens" (want input_tokens or output_tokens)`},
		{"usage unknown key in an earlier usage", `{"kind":"message","usage":{"total":5},"usage":{"input_tokens":1}}`, `usage: unknown key "total" (want input_tokens or output_tokens)`},
		{"cost a string", `{"kind":"message","cost":"0.1"}`, "cost: must be a number, got a string"},
		{"cost out of range", `{"kind":"message","cost":1e999}`, "cost: must be a finite number, got 1e999"},
		{"cost negative", `{"kind":"message","cost":-0.5}`, "cost: must be a finite amount >= 0, got -0.5"},
		{"time a word", `{"kind":"message","time":"yesterday"}`, `time: must be an RFC 3339 timestamp such as 2026-11-20T09:00:04Z, got "yesterday"`},
		{"time without a zone", `{"kind":"message","time":"2026-11-20T09:00:04"}`, `time: must be an RFC 3339 timestamp such as 2026-11-20T09:00:04Z, got "2026-11-20T09:00:04"`},
		{"time a number", `{"kind":"message","time":1763629200}`, "time: must be an RFC 3339 timestamp such as 2026-11-20T09:00:04Z, got 1763629200"},
		{"time an object", `{"kind":"message","time":{}}`, "time: must be an RFC 3339 timestamp such as 2026-11-20T09:00:04Z, got an object"},
		{"source a number", `{"kind":"message","source":1}`, "source: must be a string, got a number"},
		{"text an array", `{"kind":"message","text":["a"]}`, "text: must be a string, got an array"},
		{"tool a bool", `{"kind":"tool_call","tool":false}`, "tool: must be a string, got true or false"},
		{"call_id a number", `{"kind":"tool_call","call_id":7}`, "call_id: must be a string, got a number"},
		{"model an object", `{"kind":"message","model":{"name":"x"}}`, "model: must be a string, got an object"},
		{"error a number", `{"kind":"error","error":500}`, "error: must be a string, got a number"},
		{"target null is fine, target a number is not", `{"kind":"handoff","target":2}`, "target: must be a string, got a number"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeEvent([]byte(tc.line))
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
			assertUserTerms(t, err.Error())
			// Through the Decoder the same message names the line.
			_, err = decodeAll(t, "{\"kind\":\"input\"}\n"+tc.line+"\n")
			require.Error(t, err)
			assert.Equal(t, "line 2: "+tc.want, err.Error())
		})
	}
}

// assertUserTerms fails if msg leaks Go types, layouts or library internals.
func assertUserTerms(t *testing.T, msg string) {
	t.Helper()
	for _, leak := range []string{"Go ", "int64", "float64", "struct", "unmarshal", "json:", "2006", "bufio", "token too long", "termination.", "wireEvent", "Usage"} {
		assert.NotContains(t, msg, leak)
	}
	assert.NotContains(t, msg, "\n")
}

func TestDecoderByteOrderMark(t *testing.T) {
	got, err := decodeAll(t, "\xef\xbb\xbf{\"kind\":\"input\"}\n{\"kind\":\"final\"}\n")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, termination.KindInput, got[0].Kind)

	// A mark alone on the first line is a blank line.
	got, err = decodeAll(t, "\xef\xbb\xbf\n{\"kind\":\"final\"}\n")
	require.NoError(t, err)
	require.Len(t, got, 1)

	// Only at the start of the file: later it is malformed JSON.
	_, err = decodeAll(t, "{\"kind\":\"input\"}\n\xef\xbb\xbf{\"kind\":\"final\"}\n")
	var de *DecodeError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, 2, de.Line)
	assert.ErrorContains(t, err, "malformed JSON")
}

func TestDecoderReadError(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Open(dir)
	require.NoError(t, err)
	defer f.Close()
	_, err = decodeAll(t, "")
	require.NoError(t, err)
	_, err = NewDecoder(f).Next()
	var de *DecodeError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, 1, de.Line)
	assert.Equal(t, "line 1: cannot read the events: is a directory", err.Error(), "the caller names the file, once")
}

// TestDecodeErrorsPrint: every error the decoder returns prints without
// panicking, through the Decoder and on its own.
func TestDecodeErrorsPrint(t *testing.T) {
	for _, line := range []string{`{"kind":"message","usage":[1]}`, `{"kind":"message","usage":"x"}`, `{"kind":"message","usage":true}`} {
		var w wireEvent
		err := json.Unmarshal([]byte(line), &w)
		require.Error(t, err)
		assert.NotPanics(t, func() { _ = err.Error() })
		assert.NotPanics(t, func() { _ = describeJSONError(err).Error() })
	}
}
