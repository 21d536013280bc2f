package canonical

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

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
		// Property: the flat path (flat.go) hashes what it takes exactly
		// as the general parser does.
		for _, d := range [][]byte{a, b} {
			if d = bytes.TrimSpace(d); len(d) > 0 && d[0] == '{' {
				if h, g := ArgsKey(d), parsedKey(d); h != g {
					t.Fatalf("ArgsKey(%q) = %x through flatObject, the parser says %x", d, h, g)
				}
			}
		}
		// Property: documents equal after json.Unmarshal hash equal.
		var va, vb any
		errA, errB := json.Unmarshal(a, &va), json.Unmarshal(b, &vb)
		if errA == nil && errB == nil && reflect.DeepEqual(va, vb) && ArgsKey(a) != ArgsKey(b) {
			t.Fatalf("equal documents hash differently:\n%q\n%q", a, b)
		}
		if errA != nil {
			return
		}
		// The same property against a's canonical re-encodings, which differ
		// from a in key order, whitespace, escapes and number spelling.
		h := ArgsKey(a)
		for _, enc := range canonicalForms(t, va) {
			if got := ArgsKey(enc); got != h {
				t.Fatalf("%q and its re-encoding %q hash differently", a, enc)
			}
		}
		// And the converse, up to 64-bit collisions: different documents
		// hash differently.
		if errB == nil && !reflect.DeepEqual(va, vb) && ArgsKey(a) == ArgsKey(b) {
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
