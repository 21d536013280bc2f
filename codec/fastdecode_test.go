package codec

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentstop/agentstop/internal/benchlog"
	"github.com/agentstop/agentstop/internal/canonical"
	"github.com/agentstop/agentstop/termination"
)

// fastDecodeCases are edge cases of the event schema: encoding/json's key
// matching, nulls, duplicates, escapes, invalid UTF-8, numbers, times and
// malformed input. fast says whether the fast path must decode the line
// itself (true) or hand it to encoding/json (false); either way the result
// must be encoding/json's.
var fastDecodeCases = []struct {
	name string
	line string
	fast bool
}{
	// Well-formed lines the fast path decodes.
	{"every field", `{"kind":"tool_call","source":"assistant","text":"t","tool":"search","args":{"q": [1, "x"]},` +
		`"target":"user","usage":{"input_tokens":12,"output_tokens":3},"cost":0.25,"error":"e",` +
		`"time":"2026-11-20T09:00:04.5+01:00","future_field":{"nested":[1,2]},"id":7}`, true},
	{"call_id and model", `{"kind":"tool_call","tool":"search","call_id":"call_7f3a","model":"gpt-5"}`, true},
	{"run, parent and hashes", `{"kind":"tool_call","run":"r-2","parent":"r-1","tool":"bash","args_hash":"0f3a","text_hash":"9c"}`, true},
	{"run escaped", `{"kind":"input","run":"a\u002fb\n"}`, true},
	{"args with args_hash is an error", `{"kind":"tool_call","args":{"a":1},"args_hash":"0f3a"}`, true},
	{"text with text_hash is an error", `{"kind":"message","text":"x","text_hash":"9c"}`, true},
	{"null run", `{"kind":"input","run":null}`, false},
	{"parent a number", `{"kind":"input","parent":1}`, false},
	{"folded args_hash", `{"kind":"tool_call","Args_Hash":"x"}`, true},
	{"call_id escaped", `{"kind":"tool_result","call_id":"call\u005f1\n"}`, true},
	{"model non-ASCII", `{"kind":"final","model":"modèle"}`, true},
	{"duplicate call_id: last wins", `{"kind":"tool_call","call_id":"a","call_id":"b"}`, true},
	{"whitespace everywhere", " \t{ \"kind\" :\r\n\"input\" , \"usage\" : { \"input_tokens\" : 1 } , \"args\" : [ 1 , { } , [ ] ] }\n ", true},
	{"all kinds: final", `{"kind":"final"}`, true},
	{"duplicate kind: last wins", `{"kind":"input","kind":"final"}`, true},
	{"duplicate text: last wins", `{"kind":"input","text":"a","text":"b"}`, true},
	{"duplicate usage merges", `{"kind":"input","usage":{"input_tokens":1},"usage":{"output_tokens":2}}`, true},
	{"duplicate usage field", `{"kind":"input","usage":{"input_tokens":1,"input_tokens":5}}`, true},
	{"duplicate args", `{"kind":"input","args":{"a":1},"args":[true]}`, true},
	{"duplicate time", `{"kind":"input","time":"2026-11-20T09:00:04Z","time":"2026-11-21T09:00:04+02:00"}`, true},
	{"args null is RawMessage null", `{"kind":"tool_call","args":null}`, true},
	{"args of every type", `{"kind":"tool_call","args":"s\"\u00e9"}`, true},
	{"args number", `{"kind":"tool_call","args":-1.5e+3}`, true},
	{"args bytes kept exactly", `{"kind":"tool_call","args":{ "b" :2,"a":[ ],"c":"\ud800" }}`, true},
	{"unknown fields of every type", `{"x":null,"y":true,"z":false,"w":-0.5E-3,"v":"\n","u":[[],{}],"kind":"stop"}`, true},
	{"empty usage", `{"kind":"input","usage":{}}`, true},
	{"empty usage", `{"kind":"input","usage":{}}`, true},
	{"escapes", `{"kind":"message","text":"a\nb\"c\\d\/e\b\f\r\t\u00e9\u0000\ud83d\ude00"}`, true},
	{"lone high surrogate", `{"kind":"message","text":"\ud800"}`, true},
	{"high surrogate then letter", `{"kind":"message","text":"\ud800\u0041"}`, true},
	{"high surrogate twice", `{"kind":"message","text":"\ud800\ud800\udc00"}`, true},
	{"lone low surrogate", `{"kind":"message","text":"\udc00x"}`, true},
	{"high surrogate then escape", `{"kind":"message","text":"\ud800\n"}`, true},
	{"invalid UTF-8", "{\"kind\":\"message\",\"text\":\"a\xffb\xc3\"}", true},
	{"UTF-8 encoded surrogate", "{\"kind\":\"message\",\"text\":\"\xed\xa0\x80\"}", true},
	{"invalid UTF-8 and an escape", "{\"kind\":\"message\",\"text\":\"\xff\\n\xe2\x82\"}", true},
	{"literal U+FFFD and multibyte", `{"kind":"message","text":"� é 日本 🎉"}`, true},
	{"escaped kind", `{"kind":"\u0069nput"}`, true},
	{"DEL is not a control character", "{\"kind\":\"message\",\"text\":\"\x7f\"}", true},
	{"negative zero tokens", `{"kind":"input","usage":{"input_tokens":-0}}`, true},
	{"negative tokens", `{"kind":"input","usage":{"input_tokens":-12}}`, true},
	{"18-digit tokens", `{"kind":"input","usage":{"input_tokens":999999999999999999}}`, true},
	{"cost exponent", `{"kind":"input","cost":1E-5}`, true},
	{"cost negative zero", `{"kind":"input","cost":-0}`, true},
	{"cost integer", `{"kind":"input","cost":3}`, true},
	{"cost tiny", `{"kind":"input","cost":1e-400}`, true},
	{"time UTC", `{"kind":"input","time":"2026-11-20T09:00:04.123456789Z"}`, true},
	{"time offset", `{"kind":"input","time":"2026-11-20T09:00:04-07:30"}`, true},

	// Keys are case-sensitive (§1): a folded key is an unknown field, skipped
	// (encoding/json would match it; decodeEventJSON drops it first).
	{"folded key", `{"Kind":"input"}`, false},
	{"folded key then exact", `{"KIND":"input","kind":"message"}`, true},
	{"exact key then folded", `{"kind":"message","Kind":"input"}`, true},
	{"folded field", `{"kind":"input","Source":"x"}`, true},
	{"folded call_id", `{"kind":"tool_call","Call_ID":"x"}`, true},
	{"folded model", `{"kind":"message","MODEL":"x"}`, true},
	{"folded usage field", `{"kind":"input","usage":{"Input_Tokens":5}}`, false},

	// usage is closed: an unknown key is an error, reported by encoding/json's path.
	{"unknown usage key", `{"kind":"input","usage":{"cached_tokens":{"a":[1]},"output_tokens":4}}`, false},
	{"typo in usage key", `{"kind":"message","usage":{"input_token":5}}`, false},
	{"unknown key in an earlier usage", `{"kind":"input","usage":{"x":1},"usage":{"output_tokens":4}}`, false},
	{"escaped usage key", `{"kind":"input","usage":{"input\u005ftokens":4}}`, false},
	{"Kelvin sign in a usage key folds to k", "{\"kind\":\"input\",\"usage\":{\"input_to\xe2\x84\xaaens\":4}}", false},
	{"escaped key", `{"kind":"input","\u0074ext":"x"}`, false},
	{"Kelvin sign folds to k", "{\"\xe2\x84\xaaind\":\"input\"}", false},
	{"long s folds to s", "{\"kind\":\"input\",\"\xc5\xbfource\":\"x\"}", false},
	{"non-ASCII unknown key", `{"kind":"input","é":1}`, false},
	{"invalid UTF-8 key", "{\"kind\":\"input\",\"\xff\":1}", false},

	// Nulls leave a field as it is: handed over.
	{"null source", `{"kind":"input","source":null}`, false},
	{"null usage", `{"kind":"input","usage":null}`, false},
	{"null tokens", `{"kind":"input","usage":{"input_tokens":null}}`, false},
	{"null cost", `{"kind":"input","cost":null}`, false},
	{"null time", `{"kind":"input","time":null}`, false},
	{"null call_id", `{"kind":"tool_call","call_id":null}`, false},
	{"null model", `{"kind":"message","model":null}`, false},
	{"null kind after kind", `{"kind":"input","kind":null}`, false},

	// Numbers the fast path does not decode.
	{"19-digit tokens", `{"kind":"input","usage":{"input_tokens":1234567890123456789}}`, false},
	{"max int64 tokens", `{"kind":"input","usage":{"input_tokens":9223372036854775807}}`, false},
	{"min int64 tokens", `{"kind":"input","usage":{"input_tokens":-9223372036854775808}}`, false},
	{"overflowing tokens", `{"kind":"input","usage":{"input_tokens":9223372036854775808}}`, false},
	{"float tokens", `{"kind":"input","usage":{"input_tokens":1.0}}`, false},
	{"exponent tokens", `{"kind":"input","usage":{"input_tokens":1e3}}`, false},
	{"string tokens", `{"kind":"input","usage":{"input_tokens":"12"}}`, false},
	{"leading zero tokens", `{"kind":"input","usage":{"input_tokens":01}}`, false},
	{"plus tokens", `{"kind":"input","usage":{"input_tokens":+1}}`, false},
	{"minus only", `{"kind":"input","usage":{"input_tokens":-}}`, false},
	{"cost out of range", `{"kind":"input","cost":1e400}`, false},
	{"cost trailing dot", `{"kind":"input","cost":1.}`, false},
	{"cost leading dot", `{"kind":"input","cost":.5}`, false},
	{"cost empty exponent", `{"kind":"input","cost":1e}`, false},
	{"cost string", `{"kind":"input","cost":"0.1"}`, false},
	{"cost bool", `{"kind":"input","cost":true}`, false},

	// Times time.Time.UnmarshalJSON rejects or this path does not parse.
	{"time escaped", `{"kind":"input","time":"2026-11-20T09:00:04\u005a"}`, false},
	{"time with a space", `{"kind":"input","time":"2026-11-20 09:00:04Z"}`, false},
	{"time hour 24", `{"kind":"input","time":"2026-11-20T24:00:00Z"}`, false},
	{"time lower-case z", `{"kind":"input","time":"2026-11-20T09:00:00z"}`, false},
	{"time number", `{"kind":"input","time":1763629200}`, false},
	{"time object", `{"kind":"input","time":{}}`, false},

	// Type errors.
	{"kind number", `{"kind":3}`, false},
	{"kind object", `{"kind":{}}`, false},
	{"text number", `{"kind":"input","text":1}`, false},
	{"text array", `{"kind":"input","text":["a"]}`, false},
	{"call_id number", `{"kind":"tool_call","call_id":7}`, false},
	{"model object", `{"kind":"message","model":{"name":"x"}}`, false},
	{"usage array", `{"kind":"input","usage":[1]}`, false},
	{"usage string", `{"kind":"input","usage":"1"}`, false},
	{"type error after a good kind", `{"kind":"input","tool":false}`, false},

	// Kind errors.
	{"missing kind", `{"text":"hi"}`, false},
	{"empty object", `{}`, false},
	{"empty kind", `{"kind":""}`, false},
	{"unknown kind", `{"kind":"thinking"}`, false},
	{"kind is case-sensitive", `{"kind":"Message"}`, false},
	{"unknown kind then a good one", `{"kind":"thinking","kind":"input"}`, false},
	{"good kind then an unknown one", `{"kind":"input","kind":"thinking"}`, false},

	// Malformed JSON.
	{"empty", ``, false},
	{"spaces", `   `, false},
	{"null line", `null`, false},
	{"array", `[{"kind":"input"}]`, false},
	{"string", `"input"`, false},
	{"unterminated", `{"kind":"input"`, false},
	{"unterminated string", `{"kind":"input","text":"abc`, false},
	{"trailing garbage", `{"kind":"input"}x`, false},
	{"two objects", `{"kind":"input"} {"kind":"input"}`, false},
	{"trailing comma", `{"kind":"input",}`, false},
	{"leading comma", `{,"kind":"input"}`, false},
	{"missing colon", `{"kind" "input"}`, false},
	{"missing comma", `{"kind":"input" "text":"x"}`, false},
	{"single quotes", `{'kind':'input'}`, false},
	{"unquoted key", `{kind:"input"}`, false},
	{"raw control character", "{\"kind\":\"message\",\"text\":\"a\x01b\"}", false},
	{"raw tab in string", "{\"kind\":\"message\",\"text\":\"a\tb\"}", false},
	{"raw newline in string", "{\"kind\":\"message\",\"text\":\"a\nb\"}", false},
	{"bad escape", `{"kind":"message","text":"\'"}`, false},
	{"bad escape x", `{"kind":"message","text":"\x41"}`, false},
	{"short unicode escape", `{"kind":"message","text":"\u12"}`, false},
	{"non-hex unicode escape", `{"kind":"message","text":"\uZZZZ"}`, false},
	{"backslash at the end", `{"kind":"message","text":"\`, false},
	{"bad literal", `{"kind":"input","x":tru}`, false},
	{"bad literal null", `{"kind":"input","x":nul}`, false},
	{"literal with a tail", `{"kind":"input","x":truex}`, false},
	{"trailing comma in array", `{"kind":"input","x":[1,]}`, false},
	{"object without value", `{"kind":"input","x":{"a"}}`, false},
	{"bad number in args", `{"kind":"tool_call","args":-}`, false},
	{"bad value in args", `{"kind":"tool_call","args":[1 2]}`, false},
	{"NaN", `{"kind":"input","x":NaN}`, false},
	{"non-breaking space before", "\u00a0{\"kind\":\"input\"}", false},
	{"form feed is not JSON whitespace", "\f{\"kind\":\"input\"}", false},
	{"vertical tab after", "{\"kind\":\"input\"}\v", false},
	{"NUL after", "{\"kind\":\"input\"}\x00", false},
	{"deepest args the fast path takes", `{"kind":"tool_call","args":` + strings.Repeat("[", fastMaxDepth+1) + strings.Repeat("]", fastMaxDepth+1) + `}`, true},
	{"deep args", `{"kind":"tool_call","args":` + strings.Repeat("[", fastMaxDepth+2) + strings.Repeat("]", fastMaxDepth+2) + `}`, false},
	{"args with duplicate keys", `{"kind":"tool_call","args":{"a":1,"b":{"c":"x","c":"y"},"a":2}}`, true},
	{"args with many keys", `{"kind":"tool_call","args":{` + manyKeys(40) + `}}`, true},
	{"args out of range number", `{"kind":"tool_call","args":{"n":1e999}}`, true},
	{"args with escapes and invalid UTF-8", "{\"kind\":\"tool_call\",\"args\":{\"p\":\"a\\n\\u00e9\xff\\ud83d\\ude00\\/\"}}", true},
	{"deep unknown field", `{"kind":"input","x":{"a":` + strings.Repeat("[", fastMaxDepth+1) + strings.Repeat("]", fastMaxDepth+1) + `}}`, false},
	{"too deep for encoding/json", `{"kind":"tool_call","x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, false},
}

// checkFastDecode fails t unless decoding line takes the fast path exactly
// when encoding/json would accept it and decode the same event, and unless
// decodeEvent returns what decodeEventJSON (the oracle) returns, error text
// included (the oracle followed by checkDecoded). It reports whether the
// fast path decoded the line.
func checkFastDecode(t testing.TB, line []byte) bool {
	var want termination.Event
	wantErr := decodeEventJSON(line, &want)

	var fast termination.Event
	ok := decodeEventFast(bytes.Clone(line), &fast)
	if ok {
		if wantErr != nil {
			t.Fatalf("%q: fast path accepted what encoding/json rejects (%v):\n%+v", line, wantErr, fast)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("%q: fast path and encoding/json differ:\nfast: %#v\njson: %#v", line, fast, want)
		}
	}

	// Replay's decoder hashes the args while it reads them: the same
	// acceptance and event, and the hash argsHash gives the decoded args.
	var hashedEv termination.Event
	hok, h, hashed := decodeEventFastHashed(bytes.Clone(line), &hashedEv, true, nil)
	if hok != ok {
		t.Fatalf("%q: fast path with args hashing accepts: %v, without: %v", line, hok, ok)
	}
	if hok && !reflect.DeepEqual(hashedEv, fast) {
		t.Fatalf("%q: fast path with args hashing decodes:\n%#v\nwithout:\n%#v", line, hashedEv, fast)
	}
	if hok && hashed && h != canonical.ArgsKey(hashedEv.Args) {
		t.Fatalf("%q: args hashed while decoding as %x, argsHash says %x", line, h, canonical.ArgsKey(hashedEv.Args))
	}

	// decodeEvent also rejects amounts no model spends and a value with
	// its hash, on either path.
	if wantErr == nil {
		if err := checkDecoded(&want); err != nil {
			want, wantErr = termination.Event{}, err
		}
	}
	var got termination.Event
	gotErr := decodeEvent(line, &got)
	switch {
	case (gotErr == nil) != (wantErr == nil):
		t.Fatalf("%q: decodeEvent error %v, encoding/json error %v", line, gotErr, wantErr)
	case gotErr != nil && gotErr.Error() != wantErr.Error():
		t.Fatalf("%q: decodeEvent error %q, encoding/json error %q", line, gotErr, wantErr)
	case !reflect.DeepEqual(got, want):
		t.Fatalf("%q: decodeEvent and encoding/json differ:\ngot:  %#v\njson: %#v", line, got, want)
	}
	return ok
}

func TestDecodeEventFastEdgeCases(t *testing.T) {
	for _, tc := range fastDecodeCases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.fast, checkFastDecode(t, []byte(tc.line)), "fast path taken")
		})
	}
}

// TestDecodeEventFastTakesRealLogs checks that the recorded logs and the
// benchmark's log take the fast path, line for line, so that the
// benchmarks measure it.
func TestDecodeEventFastTakesRealLogs(t *testing.T) {
	lines := testdataLines(t)
	lines = append(lines, bytes.Split(bytes.TrimSpace(benchlog.ReAct(30)), []byte("\n"))...)
	fast := 0
	for _, line := range lines {
		if checkFastDecode(t, line) {
			fast++
		} else {
			var ev termination.Event
			assert.Error(t, decodeEventJSON(line, &ev), "a good line left to encoding/json: %s", line)
		}
	}
	assert.Greater(t, fast, 30)
}

// testdataLines returns the non-blank lines of ../testdata/*.jsonl.
func testdataLines(t testing.TB) [][]byte {
	files, err := filepath.Glob("../testdata/*.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var lines [][]byte
	for _, file := range files {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, line := range bytes.Split(b, []byte("\n")) {
			if line = bytes.TrimSpace(line); len(line) > 0 {
				lines = append(lines, line)
			}
		}
	}
	return lines
}

func TestDecodeEventFastAllocations(t *testing.T) {
	line := []byte(`{"kind":"tool_call","source":"assistant","tool":"web_search","args":{"query":"x","limit":5},` +
		`"usage":{"input_tokens":12,"output_tokens":3},"cost":0.25,"time":"2026-11-20T09:00:04.5Z","extra":[1,{"a":null}]}`)
	var ev termination.Event
	allocs := testing.AllocsPerRun(100, func() {
		ev = termination.Event{}
		if !decodeEventFast(line, &ev) {
			t.Fatal("not decoded")
		}
	})
	assert.Equal(t, 3.0, allocs, "source, tool and args only")
}

// maxFuzzLine is the longest line FuzzDecodeEventFast decodes.
const maxFuzzLine = 512

// FuzzDecodeEventFast checks the hand-written decoder against encoding/json:
// the same event, or both an error (with the same text through
// decodeEvent).
func FuzzDecodeEventFast(f *testing.F) {
	for _, line := range testdataLines(f) {
		f.Add(line)
	}
	for _, tc := range fastDecodeCases {
		if len(tc.line) < 1000 {
			f.Add([]byte(tc.line))
		}
	}
	for _, line := range bytes.Split(bytes.TrimSpace(benchlog.ReAct(3)), []byte("\n")) {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		// Long lines add no paths (the depth limit is reached well below
		// this length) but make the fuzzer's minimization of every new
		// input, quadratic in its length, take tens of seconds. Cut, not
		// skipped: a skip would be a branch of its own to minimize.
		checkFastDecode(t, line[:min(len(line), maxFuzzLine)])
	})
}

// manyKeys is n members "k0":0, "k1":1, ... of an object.
func manyKeys(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("%q:%d", fmt.Sprint("k", i), i)
	}
	return strings.Join(parts, ",")
}
