package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentstop/agentstop/internal/canonical"
	"github.com/agentstop/agentstop/termination"
)

func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{
		`{"kind":"input","source":"user","text":"hi","time":"2026-11-20T09:00:00Z"}`,
		`{"kind":"message","source":"a","text":"x","usage":{"input_tokens":10,"output_tokens":2},"cost":0.001}`,
		`{"kind":"tool_call","tool":"search","args":{"q":"x","n":[1,2.5,null,true]}}`,
		`{"kind":"tool_result","tool":"search","error":"timeout","call_id":"call_1"}`,
		`{"kind":"message","model":"gpt-5","call_id":"x","Model":"y"}`,
		`{"kind":"handoff","source":"planner","target":"user"}`,
		`{"kind":"stop","text":"escalate"}`,
		`{"kind":"error","text":"rate limited","unknown":{"x":1}}`,
		`{"kind":"final","text":"done","time":"2026-11-20T09:00:04.123456789+02:00"}`,
		`{"kind":"thinking"}`, `{"text":"no kind"}`, `{"kind":""}`, `{"kind":3}`, `{"kind":"message"`, `null`, `[]`, ``,
		`{"kind":"message","usage":{"input_tokens":1e3}}`, `{"kind":"message","time":"nope"}`, "{\"kind\":\"message\",\"text\":\"\xff\"}",
		`{"kind":"tool_call","run":"r2","parent":"r1","tool":"t","args_hash":"ab"}`, `{"kind":"message","text_hash":"cd","text":"x"}`,
		`{"kind":"tool_call","args":{"a":1},"args_hash":"ab"}`, `{"kind":"input","run":7}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEvent(data)
		if err != nil {
			if e.Kind != 0 {
				t.Fatalf("error %v with a non-zero event", err)
			}
			// Through the Decoder the same line is a DecodeError naming line 1.
			if bytes.ContainsAny(data, "\r\n") {
				return
			}
			_, derr := NewDecoder(bytes.NewReader(data)).Next()
			var de *DecodeError
			if len(bytes.TrimSpace(data)) > 0 && (!errors.As(derr, &de) || de.Line != 1) {
				t.Fatalf("decoder error %v, want a DecodeError on line 1", derr)
			}
			return
		}
		if !e.Kind.Valid() {
			t.Fatalf("decoded an invalid kind %d", e.Kind)
		}
		// What decodes re-encodes and decodes to the same event.
		b, err := json.Marshal(e)
		if err != nil {
			if strings.Contains(err.Error(), "Time.MarshalJSON") {
				return // a time that parses but cannot be written (year outside [0,9999] after offsets)
			}
			t.Fatalf("marshal %+v: %v", e, err)
		}
		e2, err := DecodeEvent(b)
		if err != nil {
			t.Fatalf("re-decode %s: %v", b, err)
		}
		if canonical.ArgsKey(e.Args) != canonical.ArgsKey(e2.Args) {
			t.Fatalf("args changed: %s vs %s", e.Args, e2.Args)
		}
		e.Args, e2.Args = nil, nil
		if !e.Time.Equal(e2.Time) {
			t.Fatalf("time changed: %v vs %v", e.Time, e2.Time)
		}
		e.Time = e2.Time
		if e.Cost == 0 {
			e.Cost = 0 // -0 is omitted and reads back as 0
		}
		if !reflect.DeepEqual(e, e2) {
			t.Fatalf("round trip changed the event:\n%+v\n%+v", e, e2)
		}
		// Any decoded event can be evaluated.
		ev := termination.NewEvaluator(termination.MustParsePolicy(fuzzPolicy).Condition(), time.Time{})
		ev.Observe(e)
		_ = ev.Result()
	})
}

const fuzzPolicy = `
max_iterations: {limit: 3, pressure: 0.5}
max_tool_calls: {limit: 3, pressure: 0.5, per_tool: {t: 1, search: 2}}
timeout: 1m
idle: 30s
token_budget: {total: 1000, pressure: 0.5, grace: 0}
cost_budget: {limit: 1, pressure: 0.5}
stall: {repeats: 3, window: 5, warn_at: 2, cycle: 2, token_tolerance: 0.1, ignore_tools: [poll]}
any: [{stall: {repeats: 2, same_result: true, any_args: true, ignore_tools: [t]}}]
errors: {consecutive: 1}
text_mention: {text: DONE}
function_call: approve
handoff: user
source_match: critic
stop_message: true
all: [{max_iterations: 1}, {any: [{text_mention: {text: x}}]}]
`
