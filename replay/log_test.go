package replay_test

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/codec"
	"github.com/agentstop/agentstop/replay"
	"github.com/agentstop/agentstop/termination"
)

// TestReplayLenient: a lenient replay evaluates the events before a
// truncated last line and marks the result; a strict one fails; a replay
// that stops before it never reads it, either way.
func TestReplayLenient(t *testing.T) {
	const log = `{"kind":"input","time":"2026-11-20T09:00:00Z"}
{"kind":"message","usage":{"input_tokens":10},"time":"2026-11-20T09:00:10Z"}
{"kind":"tool_call","tool":"search","args":{"q":"x"},"time":"2026-11-20T09:00:41Z"}
{"kind":"message","text":"cut her`
	t.Run("strict", func(t *testing.T) {
		_, err := replay.Log(termination.IterationLimits{Limit: 10}, strings.NewReader(log))
		require.ErrorIs(t, err, codec.ErrTruncated)
		var de *codec.DecodeError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, 4, de.Line)
	})
	t.Run("lenient", func(t *testing.T) {
		res, err := replay.Log(termination.IterationLimits{Limit: 10}, strings.NewReader(log), replay.WithLenient())
		require.NoError(t, err)
		assert.True(t, res.Truncated)
		assert.Equal(t, termination.NaturalCompletion{}, res.Cause)
		assert.Equal(t, 3, res.Events)
		assert.Equal(t, 1, res.Iterations)
		assert.Equal(t, 41*time.Second, res.Duration)
		b, err := json.Marshal(res)
		require.NoError(t, err)
		assert.Contains(t, string(b), `"duration":"41s","truncated":true}`)
	})
	t.Run("stops before the truncated line", func(t *testing.T) {
		// IterationLimits{Limit: 1} fires on line 3; the truncated line 4 comes in
		// a read of its own, which fails if it is ever made.
		const head = "{\"kind\":\"input\"}\n{\"kind\":\"message\"}\n{\"kind\":\"message\"}\n"
		for _, opts := range [][]replay.Option{nil, {replay.WithLenient()}} {
			r := &stagedReader{chunks: []string{head, `{"kind":"message","text":"cut`}, fail: errors.New("read past the stop")}
			res, err := replay.Log(termination.IterationLimits{Limit: 1}, r, opts...)
			require.NoError(t, err)
			assert.False(t, res.Truncated)
			assert.Equal(t, 3, res.StoppedAt)
			assert.Equal(t, 1, r.reads, "the truncated line is never read")
		}
	})
	t.Run("other errors stay errors", func(t *testing.T) {
		_, err := replay.Log(nil, strings.NewReader("{\"kind\":\"input\"}\n{\"kind\":\"x\"}\n{\"kind\":\"fin"), replay.WithLenient())
		var de *codec.DecodeError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, 2, de.Line)
		_, err = replay.Log(nil, failingReader{errors.New("disk on fire")}, replay.WithLenient(), nil)
		assert.ErrorContains(t, err, "disk on fire")
	})
	t.Run("a complete log is not truncated", func(t *testing.T) {
		res, err := replay.Log(nil, strings.NewReader(strings.TrimSuffix(log, "\n{\"kind\":\"message\",\"text\":\"cut her")), replay.WithLenient())
		require.NoError(t, err)
		assert.False(t, res.Truncated)
		assert.Equal(t, 3, res.Events)
	})
	// A truncated line after the log's end is reached is the decoder's
	// last word: Next then reports the end.
	d := codec.NewDecoder(strings.NewReader(log))
	for range 3 {
		_, err := d.Next()
		require.NoError(t, err)
	}
	_, err := d.Next()
	require.ErrorIs(t, err, codec.ErrTruncated)
	_, err = d.Next()
	assert.ErrorIs(t, err, io.EOF)
}

// TestReplayDuration: duration runs from the first event that carries a
// time to the last evaluated event that carries one, or to the timeout; it
// is absent when no event carries a time.
func TestReplayDuration(t *testing.T) {
	at := func(s string) string { return `,"time":"2026-11-20T09:` + s + `Z"` }
	cases := []struct {
		name    string
		cond    termination.Condition
		lines   []string
		want    time.Duration
		untimed bool
	}{
		{"no event carries a time", nil, []string{`{"kind":"input"}`, `{"kind":"final"}`}, 0, true},
		{"one timed event", nil, []string{`{"kind":"input"` + at("00:05") + `}`, `{"kind":"final"}`}, 0, false},
		{"first to last timed event", nil, []string{`{"kind":"input"}`, `{"kind":"message"` + at("00:05") + `}`,
			`{"kind":"message"` + at("01:30") + `}`, `{"kind":"final"}`}, 85 * time.Second, false},
		{"the last evaluated event, not the log's last", termination.IterationLimits{Limit: 1}, []string{`{"kind":"input"` + at("00:00") + `}`,
			`{"kind":"message"` + at("00:10") + `}`, `{"kind":"message"` + at("00:20") + `}`, `{"kind":"message"` + at("09:00") + `}`}, 20 * time.Second, false},
		{"to the timeout", termination.TimeLimits{Timeout: time.Minute}, []string{`{"kind":"input"` + at("00:00") + `}`,
			`{"kind":"message"` + at("00:50") + `}`, `{"kind":"message"` + at("13:55") + `}`}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := replay.Log(tc.cond, strings.NewReader(strings.Join(tc.lines, "\n")))
			require.NoError(t, err)
			assert.Equal(t, tc.untimed, res.Untimed)
			b, err := json.Marshal(res)
			require.NoError(t, err)
			if tc.untimed {
				assert.NotContains(t, string(b), `"duration"`)
				return
			}
			if to, ok := res.Cause.(termination.Timeout); ok {
				// However the timeout fires, the run lasted until the limit.
				assert.Equal(t, to.Elapsed, res.Duration)
				assert.GreaterOrEqual(t, res.Duration, time.Minute)
				return
			}
			assert.Equal(t, tc.want, res.Duration)
			assert.Contains(t, string(b), `"duration":"`+tc.want.String()+`"`)
		})
	}
}

func TestReplay(t *testing.T) {
	t.Run("testdata runs", func(t *testing.T) {
		data, err := os.ReadFile("../testdata/policy.yaml")
		require.NoError(t, err)
		p, err := termination.ParsePolicy(data)
		require.NoError(t, err)
		for _, tc := range []struct {
			file  string
			cause termination.Cause
			at    int
		}{
			{"react_complete.jsonl", termination.NaturalCompletion{}, 0},
			{"runaway_search.jsonl", termination.StallDetected{Signal: termination.SignalRepeatedToolCall, Repeats: 3}, 9},
			{"budget_burner.jsonl", termination.BudgetExhausted{Resource: termination.ResourceTotalTokens, Used: 21900, Limit: 20000}, 17},
		} {
			f, err := os.Open("../testdata/" + tc.file)
			require.NoError(t, err)
			res, err := replay.Log(p.Condition(), f)
			f.Close()
			require.NoError(t, err, tc.file)
			assert.Equal(t, tc.cause, res.Cause, tc.file)
			assert.Equal(t, tc.at, res.StoppedAt, tc.file)
		}
	})
	t.Run("the lines after the stop are not read", func(t *testing.T) {
		// Eleven good lines arrive in the first read; any further read
		// fails. Replay stops at the eleventh event without reading on.
		var head strings.Builder
		for range 11 {
			head.WriteString("{\"kind\":\"message\"}\n")
		}
		r := &stagedReader{chunks: []string{head.String(), "{oops\n"}, fail: errors.New("read past the stop")}
		res, err := replay.Log(termination.IterationLimits{Limit: 10}, r)
		require.NoError(t, err)
		assert.Equal(t, 11, res.StoppedAt)
		assert.Equal(t, 1, r.reads, "one read: the corrupt tail and the failing read are never reached")
	})
	t.Run("a huge log that stops early returns at once", func(t *testing.T) {
		// 5 M events would be about 100 MB; the count shows how little is read.
		r := &endlessLog{line: []byte("{\"kind\":\"message\",\"usage\":{\"input_tokens\":10}}\n"), limit: 5_000_000}
		res, err := replay.Log(termination.IterationLimits{Limit: 10}, r)
		require.NoError(t, err)
		assert.Equal(t, 11, res.StoppedAt)
		assert.Equal(t, 11, res.Events)
		assert.LessOrEqual(t, r.bytes, 64<<10, "no more than one buffer read")
	})
	t.Run("a bad line before the stop is an error", func(t *testing.T) {
		_, err := replay.Log(termination.IterationLimits{Limit: 2}, strings.NewReader("{\"kind\":\"message\"}\n{oops\n{\"kind\":\"message\"}\n{\"kind\":\"message\"}\n"))
		var de *codec.DecodeError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, 2, de.Line)
	})
	t.Run("events after the stop are not evaluated", func(t *testing.T) {
		res, err := replay.Log(termination.IterationLimits{Limit: 1}, strings.NewReader("{\"kind\":\"message\"}\n{\"kind\":\"message\"}\n{\"kind\":\"message\"}\n"))
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
			_, err = replay.Log(nil, f)
			f.Close()
			assert.ErrorContains(t, err, want)
		}
	})
	t.Run("a read error", func(t *testing.T) {
		_, err := replay.Log(nil, failingReader{errors.New("disk on fire")})
		assert.ErrorContains(t, err, "disk on fire")
	})
}

// TestLogJSONDocument: a replay, lenient or not, reports a JSON document
// with the decoder's error (codec's TestDecoderJSONDocument).
func TestLogJSONDocument(t *testing.T) {
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
			for _, opts := range [][]replay.Option{nil, {replay.WithLenient()}} {
				_, err := replay.Log(nil, strings.NewReader(tc.input), opts...)
				assert.ErrorIs(t, err, codec.ErrJSONDocument)
				var de *codec.DecodeError
				require.ErrorAs(t, err, &de)
				assert.Equal(t, tc.line, de.Line)
				assert.Contains(t, err.Error(), tc.what)
			}
		})
	}
}

// FuzzLogLenient: a lenient replay differs from a strict one only on a
// truncation, where it evaluates every event before the cut line.
func FuzzLogLenient(f *testing.F) {
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
		data = data[:min(len(data), 512)] // as codec's FuzzDecoder
		events := 0
		d := codec.NewDecoder(strings.NewReader(string(data)))
		for {
			if _, err := d.Next(); err != nil {
				break
			}
			events++
		}
		strict, serr := replay.Log(nil, strings.NewReader(string(data)))
		lenient, lerr := replay.Log(nil, strings.NewReader(string(data)), replay.WithLenient())
		switch {
		case errors.Is(serr, codec.ErrTruncated):
			if lerr != nil || !lenient.Truncated || lenient.Events != events {
				t.Fatalf("lenient replay of a truncated log: %v, truncated %v, %d events (want %d)", lerr, lenient.Truncated, lenient.Events, events)
			}
		case (serr == nil) != (lerr == nil) || serr != nil && serr.Error() != lerr.Error():
			t.Fatalf("strict %v, lenient %v", serr, lerr)
		case serr == nil && (strict.Events != lenient.Events || lenient.Truncated):
			t.Fatalf("strict and lenient replays differ: %+v, %+v", strict, lenient)
		}
	})
}

// TestLogMixedRuns: a replay that reads a line breaking the log's pattern
// of runs fails on it with the decoder's error; one that stops before the
// line never reads it (as for any bad line after the stop).
func TestLogMixedRuns(t *testing.T) {
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
			_, err := replay.Log(termination.IterationLimits{Limit: 100}, strings.NewReader(tc.log))
			assert.EqualError(t, err, tc.want, "a replay that reads the line fails on it")
			assert.ErrorIs(t, err, codec.ErrMixedRuns)
		})
	}
	res, err := replay.Log(termination.IterationLimits{Limit: 1}, strings.NewReader("{\"kind\":\"message\"}\n{\"kind\":\"message\"}\n{\"kind\":\"message\",\"run\":\"b\"}\n"))
	assert.NoError(t, err)
	assert.Equal(t, 2, res.StoppedAt)
}

// TestLogOfOneRun: Log replays one run. A recorded end ends it (§4
// "Recorded runs"); a second run, a mixed log, an invalid condition and a
// nil reader are errors that say so.
func TestLogOfOneRun(t *testing.T) {
	ended := `{"kind":"message","run":"r1","stage":"coder","text":"a","time":"2026-11-29T10:00:00Z"}
{"kind":"tool_call","run":"r1","tool":"x","args":{},"time":"2026-11-29T10:00:01Z"}
{"kind":"end","run":"r1","stage":"coder","time":"2026-11-29T10:00:05Z","cause":{"$kind":"Timeout","limit":"5s","elapsed":"5s"},"outcome":"failed","stopped_at":2,"events":2,"policy":"code"}
`
	res, err := replay.Log(termination.IterationLimits{Limit: 10}, strings.NewReader(ended))
	require.NoError(t, err)
	assert.Equal(t, termination.Timeout{Limit: 5 * time.Second, Elapsed: 5 * time.Second}, res.Cause)
	assert.True(t, res.FromRecord)
	assert.Equal(t, "timeout", res.Live)
	assert.Equal(t, termination.OutcomeFailed, res.Outcome)
	assert.Equal(t, 2, res.StoppedAt)
	assert.Equal(t, 2, res.Events)
	assert.Equal(t, 5*time.Second, res.Duration, "from the first event to the recorded end")
	assert.Equal(t, []termination.Cause{res.Cause}, res.Fired)

	// A condition that stops the run before its end record: its own result.
	res, err = replay.Log(termination.CompletionSignals{FunctionCall: []string{"x"}, TextMention: "a"}, strings.NewReader(ended))
	require.NoError(t, err)
	assert.Equal(t, termination.Completed{Condition: "text_mention", Detail: "a"}, res.Cause)
	assert.False(t, res.FromRecord)

	for name, tc := range map[string]struct{ log, want string }{
		"a second run": {`{"kind":"message","run":"r1","text":"a"}
{"kind":"message","run":"r2","text":"b"}
`, `line 2: a line of run "r2" after lines of run "r1": replay.Log reads a log of one run; replay.Runs and a replay.Runner replay a log of many`},
		"a record of another run": {`{"kind":"message","run":"r1","text":"a"}
{"kind":"end","run":"r2","time":"2026-11-29T10:00:05Z","cause":{"$kind":"NaturalCompletion"},"outcome":"succeeded","stopped_at":0,"events":0,"policy":"code"}
`, `line 2: a line of run "r2" after lines of run "r1"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := replay.Log(termination.IterationLimits{Limit: 10}, strings.NewReader(tc.log))
			var de *codec.DecodeError
			require.ErrorAs(t, err, &de)
			assert.ErrorContains(t, err, tc.want)
		})
	}

	_, err = replay.Log(termination.AnyOf(termination.TimeLimits{}), strings.NewReader(ended))
	assert.EqualError(t, err, "replay: the condition: any[0].time limits: needs Timeout or Idle")
	_, err = replay.Log(termination.IterationLimits{Limit: 1}, nil)
	assert.EqualError(t, err, "replay: nil reader")
}

// TestRunsWithCondition: a log of many runs replays under a condition
// written in Go as under the policy that says the same, its recorded ends
// included; runs WithPolicies gives a policy keep it.
func TestRunsWithCondition(t *testing.T) {
	log := `{"kind":"message","run":"p","stage":"planner","text":"plan","time":"2026-11-29T10:00:00Z"}
{"kind":"message","run":"c","parent":"p","stage":"coder","text":"a","time":"2026-11-29T10:00:01Z"}
{"kind":"message","run":"c","text":"b","time":"2026-11-29T10:00:02Z"}
{"kind":"message","run":"c","text":"c","time":"2026-11-29T10:00:03Z"}
{"kind":"message","run":"p","text":"go on","time":"2026-11-29T10:00:04Z"}
{"kind":"end","run":"p","stage":"planner","time":"2026-11-29T10:00:09Z","cause":{"$kind":"Timeout","limit":"9s","elapsed":"9s"},"outcome":"failed","stopped_at":2,"events":2,"policy":"code"}
`
	run := func(opts ...replay.Option) []termination.Result {
		t.Helper()
		res, _, err := replay.NewRunner(nil, opts...).Log(strings.NewReader(log))
		require.NoError(t, err)
		return res
	}
	policy := termination.MustParsePolicy("max_iterations: 2")
	want, _, err := replay.NewRunner(&policy).Log(strings.NewReader(log))
	require.NoError(t, err)
	got := run(replay.WithCondition(termination.IterationLimits{Limit: 2}))
	require.Len(t, got, 2)
	assert.Equal(t, want, got)
	byRun := map[string]termination.Result{}
	for _, r := range got {
		byRun[r.Run] = r
	}
	assert.Equal(t, termination.MaxIterationsReached{Limit: 2, Count: 3}, byRun["c"].Cause)
	assert.True(t, byRun["p"].FromRecord, "the planner's recorded end stands")
	assert.Equal(t, "timeout", byRun["p"].Live)

	// With per-stage policies, the condition is for the stages without one.
	coder := termination.MustParsePolicy("max_iterations: 1")
	got = run(replay.WithPolicies(func(stage string) (*termination.Policy, bool) { return &coder, stage == "coder" }),
		replay.WithCondition(termination.IterationLimits{Limit: 5}))
	require.Len(t, got, 2)
	for _, r := range got {
		if r.Run == "c" {
			assert.Equal(t, termination.MaxIterationsReached{Limit: 1, Count: 2}, r.Cause)
		} else {
			assert.True(t, r.FromRecord)
		}
	}
}
