package canonical

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentstop/agentstop/internal/jsonscan"
)

func TestArgsHashEqual(t *testing.T) {
	cases := []struct{ name, a, b string }{
		{"key order", `{"a":1,"b":2}`, `{"b":2,"a":1}`},
		{"whitespace", `{"a":[1,2],"b":{"c":null}}`, " {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\":{ \"c\" :null } } "},
		{"unicode escape", `{"q":"\u0041"}`, `{"q":"A"}`},
		{"escaped key", `{"\u0071":1}`, `{"q":1}`},
		{"short escapes", `"\"\\\/\b\f\n\r\t"`, "\"\\\"\\\\/\\u0008\\u000c\\u000a\\u000d\\u0009\""},
		{"surrogate pair", `"\ud83d\ude00"`, `"😀"`},
		{"non-ASCII escape", `"\u00e9"`, `"é"`},
		{"lone surrogate is U+FFFD", `"\ud800"`, `"\ufffd"`},
		{"surrogate then non-surrogate", `"\ud800\u0041"`, `"\ufffdA"`},
		{"invalid UTF-8 is U+FFFD", "\"a\xffb\"", `"a\ufffdb"`},
		{"1 vs 1.0", `1`, `1.0`},
		{"exponent", `100`, `1e2`},
		{"exponent forms", `1E+2`, `100.000`},
		{"-0 vs 0", `-0`, `0`},
		{"numbers beyond float precision", `9007199254740993`, `9007199254740992`},
		{"duplicate key: last wins", `{"a":1,"a":2}`, `{"a":2}`},
		{"nested duplicate key", `[{"a":1,"b":0,"a":2}]`, `[{"b":0,"a":2}]`},
		{"empty args and null", ``, `null`},
		{"blank args and null", "  \n", `null`},
		{"empty containers with space", `{ }`, `{}`},
		{"empty array with space", `[ ]`, `[]`},
		{"invalid JSON equal to itself", `{"a":`, ` {"a": `},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, ArgsKey([]byte(tc.a)), ArgsKey([]byte(tc.b)))
		})
	}
}

func TestArgsHashDifferent(t *testing.T) {
	docs := []string{
		`null`, `true`, `false`, `0`, `1`, `-1`, `1.5`, `""`, `"0"`, `"1"`, `"null"`, `"true"`, `[]`, `{}`, `[[]]`, `[{}]`, `{"":{}}`,
		`[1,2]`, `[2,1]`, `[1,[2]]`, `[[1],2]`, `[1,2,3]`, `{"a":1}`, `{"a":2}`, `{"b":1}`, `{"a":"1"}`, `{"a":[1]}`,
		`{"a":1,"b":2}`, `{"a":2,"b":1}`, `{"a":{"b":1}}`, `{"a":{"b":{}}}`, `{"ab":1}`, `"ab"`, `"ba"`, `"a"`, `["a","b"]`,
		`["ab"]`, `{"a":null}`, `{"a":false}`, `"A"`, `"é"`, `"\u0000"`, `{"a":1,"a2":1}`,
		`{"a":1,"b":1}`, `{"a":1}` + "", `{"x":[{"a":1},{"b":2}]}`, `{"x":[{"b":2},{"a":1}]}`,
		`{"a":1`, `[1,]`, `01`, `1.`, `nul`, `tru`, `"unterminated`, `{"a" 1}`, `[1 2]`, `+1`,
	}
	seen := map[uint64]string{}
	for _, d := range docs {
		h := ArgsKey([]byte(d))
		if prev, dup := seen[h]; dup && prev != d {
			t.Errorf("%s and %s hash the same", prev, d)
		}
		seen[h] = d
	}
}

func TestArgsHashSlowPaths(t *testing.T) {
	// More keys than the fast path tracks, in two orders.
	var a, b []string
	for i := range maxMembers + 5 {
		kv := `"k` + strings.Repeat("x", i) + `":` + string(rune('0'+i%10))
		a = append(a, kv)
		b = append([]string{kv}, b...)
	}
	assert.Equal(t, ArgsKey([]byte("{"+strings.Join(a, ",")+"}")), ArgsKey([]byte("{"+strings.Join(b, ",")+"}")))
	// And they agree with the fast path on the same value.
	small := `{"b":[1,"x",null,true,false,{"c":{}}],"a":-2.5e3}`
	var v any
	assert.NoError(t, json.Unmarshal([]byte(small), &v))
	assert.Equal(t, ArgsKey([]byte(small)), hashValue(v))
	// Deeper than maxDepth: still canonical, via encoding/json.
	deep := strings.Repeat("[", maxDepth+10) + `{"a":1,"b":2}` + strings.Repeat("]", maxDepth+10)
	deep2 := strings.Repeat("[ ", maxDepth+10) + `{"b":2, "a":1.0}` + strings.Repeat(" ]", maxDepth+10)
	assert.Equal(t, ArgsKey([]byte(deep)), ArgsKey([]byte(deep2)))
	assert.NotEqual(t, ArgsKey([]byte(deep)), ArgsKey([]byte(strings.Repeat("[", maxDepth+10)+`{"a":1}`+strings.Repeat("]", maxDepth+10))))
}

func TestArgsHashAllocatesNothing(t *testing.T) {
	doc := []byte(`{"query": "Acme Robotics CEO", "limit": 5, "filters": {"lang": ["en", "fr"], "since": 2020.5}, "s": "caf\u00e9 \ud83d\ude00"}`)
	allocs := testing.AllocsPerRun(100, func() { ArgsKey(doc) })
	assert.Zero(t, allocs)
}

// TestArgsHashManyKeys: up to maxMembers distinct keys stay on the fast
// path, whose duplicate check (a bit filter, then a rescan of the earlier
// keys) tells keys that only share a filter bit from true duplicates,
// escaped or not, wherever they are.
func TestArgsHashManyKeys(t *testing.T) {
	var keys []string
	for i := range maxMembers {
		keys = append(keys, fmt.Sprintf(`"key%d":{"v":[%d,"s"]}`, i, i))
	}
	doc := "{" + strings.Join(keys, ", ") + "}"
	var v any
	assert.NoError(t, json.Unmarshal([]byte(doc), &v))
	assert.Equal(t, hashValue(v), ArgsKey([]byte(doc)), "distinct keys")
	p := canonParser{Scanner: jsonscan.Scanner{Data: []byte(doc)}}
	_, ok := p.value(0)
	assert.True(t, ok && !p.slow, "%d distinct keys take the fast path", maxMembers)

	for _, dup := range []string{
		`{"a":1,` + strings.Join(keys[:20], ",") + `,"a":2}`,
		`{` + strings.Join(keys[:20], ",") + `,"\u006bey7":3}`,
		`{"x":{"a":1,"b":{"a":5},"a":2},"y":[{"k":1,"k":{}}]}`,
	} {
		var v any
		assert.NoError(t, json.Unmarshal([]byte(dup), &v))
		assert.Equal(t, hashValue(v), ArgsKey([]byte(dup)), dup)
	}
}
