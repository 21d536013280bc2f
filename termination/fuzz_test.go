package termination

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
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
		if argsHash(e.Args) != argsHash(e2.Args) {
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
		ev := NewEvaluator(MustParsePolicy(fuzzPolicy).Condition(), EventClock)
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

func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, fuzzPolicy, `max_iterations: 0`, `max_iterations: "3"`, `timeout: soon`,
		`token_budget: {total: 10, pressure: 1}`, `token_budget: {total: 10, grace: 1}`, `cost_budget: {limit: .inf}`,
		`stall: {repeats: 1}`, `errors: {}`, `text_mention: X`, `function_call: []`, `stop_message: yes`,
		`any: [{max_iterations: 1}, {max_tool_calls: 0}]`, `all: [{any: [{stall: {repeats: 1}}]}]`, `max_iteratons: 5`,
		`{"max_iterations": 25, "any": [{"handoff": ["user"]}]}`, "a: &x 1\nb: *x", `[1,2]`, "max_iterations: 1\nmax_iterations: 2",
		`{"max_iterations": 25`, "\t- x", `max_iterations: 1e300`, `max_iterations: -0.0`, `cost_budget: {limit: 1e-320}`,
		`max_iterations: {limit: 25, pressure: 0.8}`, `max_iterations: {pressure: 0.8}`, `max_tool_calls: {per_tool: {search: 10}}`,
		`max_tool_calls: {limit: 5, pressure: 1, per_tool: {a.b: 0, "": 1}}`, `max_tool_calls: {per_tool: {}}`,
		`stall: {repeats: 3, window: 8, warn_at: 2, cycle: 3}`, `stall: {cycle: 2}`, `stall: {repeats: 3, window: 2, warn_at: 3}`,
		`stall: {repeats: 1e9, window: 4e18, cycle: 9e18}`, `any: [{stall: {cycle: 2, window: 4}}]`,
		"a: &a [*a, *a]\nb: &b [*a, *a]\nc: [*b, *b]", "any: &x [{max_iterations: 1}]\nall: *x",
		`stall: {repeats: 3, window: 8, same_result: true}`, `stall: {cycle: 2, same_result: true}`, `stall: {repeats: 2, same_result: 1}`,
		`errors: {consecutive: 3, ignore_tools: [grep]}`, `errors: {ignore_tools: grep}`, `errors: {total: 2, ignore_tools: []}`,
		`errors: {total: 2, ignore_tools: [""]}`,
		`idle: 90s`, `idle: 0s`, `idle: -1m`, `idle: 90`, `{timeout: 1m, idle: 1m}`, `tree: {idle: 1m}`,
		`stall: {repeats: 3, same_result: true, any_args: true}`, `stall: {repeats: 3, any_args: true}`,
		`stall: {repeats: 3, any_args: 1}`, `stall: {cycle: 2, ignore_tools: [poll_job]}`, `stall: {repeats: 2, ignore_tools: []}`,
		`stall: {repeats: 2, ignore_tools: poll}`, `max_tool_calls: {limit: 2, per_tool: {a: 3}}`,
		`max_tool_calls: {limit: 2, per_tool: {a: 2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		if err != nil {
			var pe *PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *PolicyError", err, err)
			}
			if pe.Path != "policy" && !strings.HasPrefix(pe.Path, "policy.") {
				t.Fatalf("error path %q does not start with policy", pe.Path)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		// An accepted policy is valid and can be evaluated.
		if err := Validate(p.Condition()); err != nil {
			t.Fatalf("ParsePolicy accepted %q but Validate says %v", data, err)
		}
		_ = p.String()
		ev := NewEvaluator(p.Condition(), EventClock)
		for _, e := range []Event{input("x").at(0), msg("a", "DONE").used(10, 10).costs(0.5), call("t", `{}`), result("t", "e"),
			call("grep", `1`), result("grep", "exit 1"), call("grep", `1`), result("grep", "exit 1"),
			call("search", `1`), call("t", `{}`), call("search", `1`), msg("a", "DONE"),
			errEv("x"), handoffEv("a", "user"), stopEv("s"), final("critic", "x").at(time.Hour)} {
			if _, stop := ev.Observe(e); stop {
				break
			}
		}
		_ = ev.Result()
	})
}

func FuzzCauseJSON(f *testing.F) {
	for _, tc := range causeJSON {
		f.Add([]byte(tc.json))
	}
	for _, s := range []string{
		`{"$kind":"test.Escalated","team":"sre"}`, `{"$kind":"test.Parked"}`, `{"$kind":"Nope"}`, `{}`, `[]`,
		`{"$kind":"All","causes":[{"$kind":"All","causes":null}]}`, `{"$kind":"All"}`,
		`{"$kind":"Timeout","limit":"-1.5h","elapsed":""}`, `{"$kind":"Custom","reason":"r","properties":{"n":1e300,"a":[{}]}}`,
		`{"$kind":"Failed","reason":"panic","error":"\ud800"}`, `{"$kind":"Completed","CONDITION":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := UnmarshalCause(data)
		if err != nil {
			return
		}
		b, err := MarshalCause(c)
		if err != nil {
			t.Fatalf("unmarshalled %q into %#v, which does not marshal: %v", data, c, err)
		}
		c2, err := UnmarshalCause(b)
		if err != nil {
			t.Fatalf("marshalled %#v as %s, which does not unmarshal: %v", c, b, err)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip changed the cause:\n%#v\n%#v\n%s", c, c2, b)
		}
		b2, err := MarshalCause(c2)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("marshal is not stable: %s vs %s (%v)", b, b2, err)
		}
		_ = Tag(c, func(string) bool { return true })
		_ = DefaultOutcome(c)
		_ = c.Error()
	})
}

// maxFuzzArgs is the longest document FuzzArgsHash hashes: long enough to
// go deeper than maxDepth and past maxMembers keys, short enough that the
// fuzzer minimizes a new input (quadratic in its length) in a second or two.
const maxFuzzArgs = 320

func FuzzArgsHash(f *testing.F) {
	for _, p := range [][2]string{
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`}, {`{"q":"\u0041"}`, `{"q":"A"}`}, {`1`, `1.0`}, {`[1,{"x":null}]`, `[1, {"x": null}]`},
		{`{"a":1,"a":2}`, `{"a":2}`}, {"\"\xff\"", `"\ufffd"`}, {`"\ud800"`, `"\ufffd"`}, {`-0`, `0`}, {`1e2`, `100`},
		{`{"a":{"b":[true,false,"x"]}}`, `{"a":{"b":[true,false,"y"]}}`}, {``, `null`}, {`[1,]`, `[1]`},
		{strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2), strings.Repeat("[ ", maxDepth+2) + strings.Repeat(" ]", maxDepth+2)},
		{`{"a":{"b":1,"c":2,"b":3}}`, `{"a":{"c":2,"b":3}}`}, {`"-01"`, `-01`}, {`1.e5`, `1e5`},
	} {
		f.Add([]byte(p[0]), []byte(p[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		// Long inputs add no new paths (the depth and key-count limits are
		// reached well below this length) but make each execution, and the
		// fuzzer's minimization of every new input (quadratic in its length),
		// slow. They are cut rather than skipped: a skip is a branch of its
		// own, whose first long input the fuzzer would spend half a minute
		// minimizing.
		a, b = a[:min(len(a), maxFuzzArgs)], b[:min(len(b), maxFuzzArgs)]
		// Property: documents equal after json.Unmarshal hash equal.
		var va, vb any
		errA, errB := json.Unmarshal(a, &va), json.Unmarshal(b, &vb)
		if errA == nil && errB == nil && reflect.DeepEqual(va, vb) && argsHash(a) != argsHash(b) {
			t.Fatalf("equal documents hash differently:\n%q\n%q", a, b)
		}
		if errA != nil {
			return
		}
		// The same property against a's canonical re-encodings, which differ
		// from a in key order, whitespace, escapes and number spelling.
		h := argsHash(a)
		for _, enc := range canonicalForms(t, va) {
			if got := argsHash(enc); got != h {
				t.Fatalf("%q and its re-encoding %q hash differently", a, enc)
			}
		}
		// And the converse, up to 64-bit collisions: different documents
		// hash differently.
		if errB == nil && !reflect.DeepEqual(va, vb) && argsHash(a) == argsHash(b) {
			t.Fatalf("different documents hash the same:\n%q\n%q", a, b)
		}
	})
}

func canonicalForms(t *testing.T, v any) [][]byte {
	t.Helper()
	compact, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %#v: %v", v, err)
	}
	// Indented with a prefix and no indent, so that the size stays linear
	// in the input's (an indent per level is quadratic in the depth).
	indented, err := json.MarshalIndent(v, "\t ", "")
	if err != nil {
		t.Fatalf("marshal %#v: %v", v, err)
	}
	var ascii bytes.Buffer
	enc := json.NewEncoder(&ascii)
	enc.SetEscapeHTML(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return [][]byte{compact, indented, ascii.Bytes()}
}
