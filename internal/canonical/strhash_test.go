package canonical

import (
	"fmt"
	"testing"
)

// TestStringKey: a string and its bytes hash the same, at every length
// class of BytesKey (empty, 1-3, 4-7, 8-16 bytes, longer), and strings
// that differ in any one byte, or only in length, hash differently.
func TestStringKey(t *testing.T) {
	seen := map[uint64]string{}
	add := func(s string) {
		t.Helper()
		checkKey(t, seen, s)
	}
	for n := range 24 {
		base := make([]byte, n)
		for i := range base {
			base[i] = 'a' + byte(i%26)
		}
		add(string(base))
		for i := range n {
			for _, c := range []byte{'A', 0, 0xff, 'a' + byte(i%26) + 1} {
				v := append([]byte(nil), base...)
				v[i] = c
				add(string(v))
			}
		}
		add(string(append(base, 0))) // a trailing zero byte is not padding
	}
	for i := range 2000 {
		add(fmt.Sprint(i))
		add(fmt.Sprintf("page=%d", i))
	}
}

// TestShortString: the one-load path hashes a short plain string as
// BytesKey does, and leaves every other string to the general path.
func TestShortString(t *testing.T) {
	for _, tc := range []struct {
		tok string
		ok  bool
	}{
		{`""`, true}, {`"a"`, true}, {`"query"`, true}, {`"1234567"`, true},
		{`"12345678"`, false}, {`"a\nb"`, false}, {"\"caf\xc3\xa9\"", false}, {"\"a\tb\"", false},
	} {
		data := []byte(tc.tok + `:1234567890}`)
		h, end, ok := shortString(data, 0)
		if ok != tc.ok {
			t.Errorf("%s: ok %v, want %v", tc.tok, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		if want := BytesKey([]byte(tc.tok[1:len(tc.tok)-1])) ^ hashString; h != want || end != len(tc.tok) {
			t.Errorf("%s: hash %x end %d, want %x end %d", tc.tok, h, end, want, len(tc.tok))
		}
	}
	if _, _, ok := shortString([]byte(`"ab"}`), 0); ok {
		t.Error("fewer than 8 bytes after the quote: not read")
	}
}

// TestPlainString: the word-at-a-time path finds the end of a plain
// string of any length wherever it ends in the data (the last word is read
// from the end of the data), hashes it as BytesKey does up to 32 bytes
// (longer ones are left to the caller), and leaves every other string to
// the general path.
func TestPlainString(t *testing.T) {
	for n := range 40 {
		s := make([]byte, n)
		for i := range s {
			s[i] = 'a' + byte(i%26)
		}
		for _, tail := range []string{"", "}", `,"k":1}`, "       }"} {
			tok := `"` + string(s) + `"`
			data := []byte(tok + tail)
			h, end, ok := plainString(data, 0)
			if len(data) < 8 {
				if ok {
					t.Errorf("%q: read from fewer than 8 bytes", data)
				}
				continue
			}
			want := BytesKey(s) ^ hashString
			if n > 32 {
				want = 0 // the caller hashes a long string
			}
			if !ok || h != want || end != len(tok) {
				t.Errorf("%q: hash %x end %d ok %v, want %x end %d", data, h, end, ok, want, len(tok))
			}
		}
	}
	for _, tok := range []string{`"abcdefghij\nk"`, "\"abcdefghijcaf\xc3\xa9\"", "\"abcdefghi\tb\"", `"abcdefghijklmnop`, `"abcdefgh`} {
		if _, _, ok := plainString([]byte(tok), 0); ok {
			t.Errorf("%s: taken by the plain path", tok)
		}
	}
}

// TestStringKeyTwoWords: strings of 17 to 32 bytes (two multiplies) and
// just past them (maphash) hash apart when they differ in any one byte,
// or only in length, and a string and its bytes hash the same.
func TestStringKeyTwoWords(t *testing.T) {
	seen := map[uint64]string{}
	for n := 15; n <= 40; n++ {
		base := make([]byte, n)
		for i := range base {
			base[i] = 'A' + byte(i%26)
		}
		variants := []string{string(base), string(append(base, 0))}
		for i := range n {
			for _, c := range []byte{'a', 0, 0xff} {
				v := append([]byte(nil), base...)
				v[i] = c
				variants = append(variants, string(v))
			}
		}
		for _, s := range variants {
			checkKey(t, seen, s)
		}
	}
}

// checkKey fails when s's StringKey differs from its bytes' BytesKey, or
// equals the key of another string in seen; it adds s to seen.
func checkKey(t *testing.T, seen map[uint64]string, s string) {
	t.Helper()
	h := StringKey(s)
	if b := BytesKey([]byte(s)); b != h {
		t.Fatalf("%q: StringKey %x, BytesKey %x", s, h, b)
	}
	if other, dup := seen[h]; dup && other != s {
		t.Fatalf("%q and %q hash the same", s, other)
	}
	seen[h] = s
}
