package termination

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
)

func decodeAll(t *testing.T, s string) ([]Event, error) {
	t.Helper()
	d := NewDecoder(strings.NewReader(s))
	var out []Event
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
	assert.Equal(t, KindToolCall, e.Kind)
	assert.Equal(t, "assistant", e.Source)
	assert.Equal(t, "t", e.Text)
	assert.Equal(t, "search", e.Tool)
	assert.JSONEq(t, `{"q":[1,"x"]}`, string(e.Args))
	assert.Equal(t, "user", e.Target)
	assert.Equal(t, Usage{InputTokens: 12, OutputTokens: 3}, e.Usage)
	assert.Equal(t, 0.25, e.Cost)
	assert.Equal(t, "e", e.Err)
	assert.True(t, e.Time.Equal(time.Date(2026, 11, 20, 8, 0, 4, 5e8, time.UTC)))
	assert.Equal(t, "call_1", e.CallID)
	assert.Equal(t, "gpt-5", e.Model)
}

func TestDecodeKinds(t *testing.T) {
	for k := KindInput; k <= KindFinal; k++ {
		e, err := DecodeEvent([]byte(`{"kind":"` + k.String() + `"}`))
		require.NoError(t, err)
		assert.Equal(t, k, e.Kind)
		b, err := json.Marshal(e)
		require.NoError(t, err)
		assert.Equal(t, `{"kind":"`+k.String()+`"}`, string(b))
	}
	assert.Equal(t, []string{"input", "message", "tool_call", "tool_result", "handoff", "stop", "error", "final"},
		[]string{KindInput.String(), KindMessage.String(), KindToolCall.String(), KindToolResult.String(),
			KindHandoff.String(), KindStop.String(), KindError.String(), KindFinal.String()})
	assert.Equal(t, "Kind(9)", Kind(9).String())
	assert.False(t, Kind(0).Valid())
	_, err := json.Marshal(Event{})
	assert.Error(t, err, "the zero Kind cannot be written")
}

func TestDecoder(t *testing.T) {
	cases := []struct {
		name  string
		input string
		kinds []Kind // events decoded before the error (or all of them)
		line  int    // 0: no error
		err   string // substring of the error
	}{
		{name: "empty input", input: ""},
		{name: "blank lines and whitespace skipped",
			input: "\n{\"kind\":\"input\"}\n\n   \t\n{\"kind\":\"final\"}\n\n", kinds: []Kind{KindInput, KindFinal}},
		{name: "CRLF line ends", input: "{\"kind\":\"input\"}\r\n\r\n{\"kind\":\"message\"}\r\n", kinds: []Kind{KindInput, KindMessage}},
		{name: "no final newline", input: `{"kind":"stop"}`, kinds: []Kind{KindStop}},
		{name: "unknown fields ignored", input: `{"kind":"message","x":1,"meta":{"a":[true]},"model":"gpt"}`, kinds: []Kind{KindMessage}},
		{name: "missing kind", input: "{\"kind\":\"input\"}\n{\"text\":\"hi\"}\n", kinds: []Kind{KindInput}, line: 2, err: "missing kind"},
		{name: "empty kind", input: `{"kind":""}`, line: 1, err: "missing kind"},
		{name: "null kind", input: `{"kind":null}`, line: 1, err: "missing kind"},
		{name: "null line", input: `null`, line: 1, err: "missing kind"},
		{name: "unknown kind names the line after blank lines",
			input: "{\"kind\":\"input\"}\n\n{\"kind\":\"thinking\"}\n", kinds: []Kind{KindInput}, line: 3, err: `unknown kind "thinking"`},
		{name: "kind is case-sensitive", input: `{"kind":"Message"}`, line: 1, err: `unknown kind "Message"`},
		{name: "malformed JSON", input: "{\"kind\":\"input\"}\n{\"kind\":\"message\",\"text\":\"ok\"\n", kinds: []Kind{KindInput},
			line: 2, err: "malformed JSON"},
		{name: "not JSON at all", input: "kind: message\n", line: 1, err: "malformed JSON"},
		{name: "two objects on one line", input: `{"kind":"input"} {"kind":"input"}`, line: 1, err: "malformed JSON"},
		{name: "trailing comma", input: `{"kind":"input",}`, line: 1, err: "malformed JSON"},
		{name: "kind of the wrong type", input: `{"kind":3}`, line: 1, err: "kind"},
		{name: "not an object", input: `[{"kind":"input"}]`, line: 1, err: "cannot unmarshal"},
		{name: "bad usage", input: `{"kind":"message","usage":{"input_tokens":"12"}}`, line: 1, err: "input_tokens"},
		{name: "bad time", input: `{"kind":"message","time":"yesterday"}`, line: 1, err: "yesterday"},
		{name: "negative input tokens", input: "{\"kind\":\"input\"}\n{\"kind\":\"message\",\"usage\":{\"input_tokens\":-5}}", kinds: []Kind{KindInput},
			line: 2, err: "usage.input_tokens: must be >= 0, got -5"},
		{name: "negative output tokens", input: `{"kind":"message","usage":{"output_tokens":-1}}`, line: 1, err: "usage.output_tokens: must be >= 0, got -1"},
		{name: "negative cost", input: `{"kind":"message","cost":-0.5}`, line: 1, err: "cost: must be a finite amount >= 0, got -0.5"},
		{name: "overflowing cost", input: `{"kind":"message","cost":1e999}`, line: 1, err: "cost"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeAll(t, tc.input)
			var kinds []Kind
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
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

func TestReplay(t *testing.T) {
	t.Run("testdata runs", func(t *testing.T) {
		p, err := LoadPolicy("../testdata/policy.yaml")
		require.NoError(t, err)
		for _, tc := range []struct {
			file  string
			cause Cause
			at    int
		}{
			{"react_complete.jsonl", NaturalCompletion{}, 0},
			{"runaway_search.jsonl", StallDetected{Signal: SignalRepeatedToolCall, Repeats: 3}, 9},
			{"budget_burner.jsonl", BudgetExhausted{Resource: ResourceTotalTokens, Used: 21900, Limit: 20000}, 17},
		} {
			f, err := os.Open("../testdata/" + tc.file)
			require.NoError(t, err)
			res, err := Replay(p.Condition(), f)
			f.Close()
			require.NoError(t, err, tc.file)
			assert.Equal(t, tc.cause, res.Cause, tc.file)
			assert.Equal(t, tc.at, res.StoppedAt, tc.file)
		}
	})
	t.Run("a bad line after the stop is still an error", func(t *testing.T) {
		_, err := Replay(MaxIterations(1), strings.NewReader("{\"kind\":\"message\"}\n{\"kind\":\"message\"}\n{\"kind\":\"message\"}\n{oops\n"))
		var de *DecodeError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, 4, de.Line)
	})
	t.Run("events after the stop are not evaluated", func(t *testing.T) {
		res, err := Replay(MaxIterations(1), strings.NewReader("{\"kind\":\"message\"}\n{\"kind\":\"message\"}\n{\"kind\":\"message\"}\n"))
		require.NoError(t, err)
		assert.Equal(t, 2, res.Events)
		assert.Equal(t, 2, res.StoppedAt)
	})
	t.Run("testdata malformed and unknown kind", func(t *testing.T) {
		for file, want := range map[string]string{
			"malformed.jsonl":    "line 2: malformed JSON",
			"unknown_kind.jsonl": `line 3: unknown kind "thinking"`,
		} {
			f, err := os.Open("../testdata/" + file)
			require.NoError(t, err)
			_, err = Replay(nil, f)
			f.Close()
			assert.ErrorContains(t, err, want)
		}
	})
	t.Run("a read error", func(t *testing.T) {
		_, err := Replay(nil, failingReader{errors.New("disk on fire")})
		assert.ErrorContains(t, err, "disk on fire")
	})
}
