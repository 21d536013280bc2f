package jsonscan

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestString(t *testing.T) {
	cases := []struct {
		in            string
		ok            bool
		simple, ascii bool
		want          string // decoded
	}{
		{`"abc"`, true, true, true, "abc"},
		{`""`, true, true, true, ""},
		{`"é"`, true, true, false, "é"},
		{`"a\nb"`, true, false, true, "a\nb"},
		{`"\"\\\/\b\f\n\r\t"`, true, false, true, "\"\\/\b\f\n\r\t"},
		{`"\u0041\u00e9"`, true, false, true, "Aé"},
		{`"\ud83d\ude00"`, true, false, true, "😀"},
		{`"\ud800"`, true, false, true, "\ufffd"},
		{`"\ud800\u0041"`, true, false, true, "\ufffdA"},
		{`"\ud800\ud800\udc00"`, true, false, true, "\ufffd\U00010000"},
		{`"\udc00x"`, true, false, true, "\ufffdx"},
		{"\"a\xffb\"", true, true, false, "a\ufffdb"},
		{"\"\xed\xa0\x80\"", true, true, false, "\ufffd\ufffd\ufffd"},
		{"\"\xff\\n\xe2\x82\"", true, false, false, "\ufffd\n\ufffd\ufffd"},
		{"\"\x7f\"", true, true, true, "\x7f"},
		{`"abc`, false, false, false, ""},
		{`abc"`, false, false, false, ""},
		{"\"a\x01b\"", false, false, false, ""},
		{"\"a\tb\"", false, false, false, ""},
		{`"\'"`, false, false, false, ""},
		{`"\x41"`, false, false, false, ""},
		{`"\u12"`, false, false, false, ""},
		{`"\uZZZZ"`, false, false, false, ""},
		{`"\`, false, false, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			s := Scanner{Data: []byte(tc.in + " ,")}
			start, simple, ascii := s.String()
			var want string
			jsonErr := json.Unmarshal([]byte(tc.in), &want)
			assert.Equal(t, jsonErr == nil, start >= 0, "accepts what encoding/json accepts")
			if !tc.ok {
				assert.Equal(t, -1, start)
				return
			}
			require.Equal(t, 0, start)
			assert.Equal(t, len(tc.in), s.Pos)
			assert.Equal(t, tc.simple, simple, "simple")
			assert.Equal(t, tc.ascii, ascii, "ascii")
			got := string(AppendUnquoted(nil, s.Data[1:s.Pos-1]))
			assert.Equal(t, tc.want, got)
			assert.Equal(t, want, got, "as encoding/json decodes it")
			checkDecodeString(t, tc.in, want)
		})
	}
}

func TestNumber(t *testing.T) {
	cases := []struct {
		in  string
		end int // Pos after Number, or -1 when rejected
	}{
		{"0", 1}, {"-0", 2}, {"12", 2}, {"-12.5e+3", 8}, {"1E5", 3}, {"1e-0", 4}, {"0.0001", 6},
		{"01", 1}, {"1.5.5", 3}, {"2x", 1},
		{"-", -1}, {"+1", -1}, {".5", -1}, {"1.", -1}, {"1e", -1}, {"1e+", -1}, {"-a", -1}, {"", -1}, {"1.e5", -1},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			s := Scanner{Data: []byte(tc.in)}
			ok := s.Number()
			assert.Equal(t, tc.end >= 0, ok)
			if ok {
				assert.Equal(t, tc.end, s.Pos)
				assert.True(t, json.Valid([]byte(tc.in[:s.Pos])))
			}
		})
	}
}

func TestInt(t *testing.T) {
	cases := []struct {
		num  string
		max  int
		want int64
		ok   bool
	}{
		{"0", 18, 0, true}, {"-0", 18, 0, true}, {"42", 18, 42, true}, {"-42", 18, -42, true},
		{"999999999999999999", 18, 999999999999999999, true}, {"1234567890123456789", 18, 0, false},
		{"1234567890123456", 15, 0, false}, {"123456789012345", 15, 123456789012345, true},
		{"1.5", 18, 0, false}, {"1e3", 18, 0, false}, {"-", 18, 0, false}, {"", 18, 0, false},
		{"1234567890123456789", 25, 0, false}, // never more than 18 digits
	}
	for _, tc := range cases {
		got, ok := Int([]byte(tc.num), tc.max)
		assert.Equal(t, tc.ok, ok, tc.num)
		assert.Equal(t, tc.want, got, tc.num)
	}
}

func TestSkipSpaceAndLiteral(t *testing.T) {
	s := Scanner{Data: []byte(" \t\r\n true\f")}
	s.SkipSpace()
	assert.Equal(t, 5, s.Pos)
	assert.False(t, s.Literal("false"))
	assert.True(t, s.Literal("true"))
	s.SkipSpace()
	assert.Equal(t, byte('\f'), s.Peek(), "form feed is not JSON whitespace")
	s.Pos = len(s.Data)
	assert.Equal(t, byte(0), s.Peek())
	assert.False(t, s.Literal("null"))
}

func TestSkip(t *testing.T) {
	cases := []struct {
		in string
		ok bool
	}{
		{`{"a":[1,{"b":null}],"c":"x","d":true,"e":false,"f":-1.5e3}`, true},
		{`[ ]`, true}, {`{ }`, true}, {`[1 , 2]`, true}, {`"s"`, true}, {`null`, true},
		{`[1,]`, false}, {`{"a"}`, false}, {`{"a":1,}`, false}, {`{a:1}`, false}, {`[1 2]`, false}, {`tru`, false},
		{`nul`, false}, {`-`, false}, {`NaN`, false}, {`[`, false}, {`{"a":`, false},
		{strings.Repeat("[", 10) + strings.Repeat("]", 10), true},
		{strings.Repeat("[", 12) + strings.Repeat("]", 12), false}, // deeper than maxDepth 10
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			s := Scanner{Data: []byte(tc.in)}
			ok := s.Skip(0, 10)
			if ok {
				assert.Equal(t, len(tc.in), s.Pos)
			}
			assert.Equal(t, tc.ok, ok)
		})
	}
}

// FuzzString checks String and AppendUnquoted against encoding/json.
func FuzzString(f *testing.F) {
	for _, s := range []string{`"abc"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, "\"\xff\"", `"\n"`, `"`, `"\u12"`, "\"\x01\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s := Scanner{Data: in}
		s.SkipSpace()
		first := s.Pos
		start, simple, ascii := s.String()
		end := s.Pos
		s.SkipSpace()
		var want string
		err := json.Unmarshal(in, &want)
		if start < 0 || s.Pos != len(in) {
			if err == nil && first < len(in) && in[first] == '"' {
				t.Fatalf("%q: rejected what encoding/json accepts", in)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: accepted what encoding/json rejects: %v", in, err)
		}
		raw := in[start+1 : end-1]
		if got := string(AppendUnquoted(nil, raw)); got != want {
			t.Fatalf("%q: decoded %q, encoding/json %q", in, got, want)
		}
		d := Scanner{Data: in, Pos: first}
		if got, _, ok := d.DecodeString(nil); !ok || d.Pos != end || string(got) != want {
			t.Fatalf("%q: DecodeString %q, %v, end %d; encoding/json %q, end %d", in, got, ok, d.Pos, want, end)
		}
		if simple && ascii && string(raw) != want {
			t.Fatalf("%q: simple ASCII string decodes to something else", in)
		}
	})
}

// TestStringLong: strings longer than a word, with the bytes String must
// look at in every position of a word (String reads eight bytes at a time
// between them), agree with encoding/json and with a byte-by-byte reading.
func TestStringLong(t *testing.T) {
	pieces := []string{"abcdefg", "x", `\n`, `\"`, `\\`, `\u00e9`, "é", "日本", "\x7f", "\x01", "\xff", `"`, `\q`, "0123456789abcdef"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		b.WriteByte('"')
		for range r.IntN(12) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		b.WriteString(`"`)
		in := b.String()
		s := Scanner{Data: []byte(in + " ,")}
		start, simple, ascii := s.String()
		wantStart, wantSimple, wantASCII, wantEnd := slowString(in)
		require.Equal(t, wantStart, start, "%q", in)
		if start < 0 {
			continue
		}
		require.Equal(t, wantEnd, s.Pos, "%q", in)
		require.Equal(t, wantSimple, simple, "simple %q", in)
		require.Equal(t, wantASCII, ascii, "ascii %q", in)
		var want string
		if err := json.Unmarshal([]byte(in[:s.Pos]), &want); err == nil {
			require.Equal(t, want, string(AppendUnquoted(nil, []byte(in[1:s.Pos-1]))), "%q", in)
			checkDecodeString(t, in[:s.Pos], want)
		}
	}
}

// checkDecodeString: DecodeString accepts in (a valid string token) as
// String does, decodes it to want, and copies exactly when the token's
// bytes are not the decoded string.
func checkDecodeString(t *testing.T, in, want string) {
	t.Helper()
	s := Scanner{Data: []byte(in + ` ,"next"`)}
	str, copied, ok := s.DecodeString([]byte("prefix:"))
	require.True(t, ok, "%q", in)
	require.Equal(t, len(in), s.Pos, "%q", in)
	if copied {
		require.Equal(t, "prefix:"+want, string(str), "%q", in)
	} else {
		require.Equal(t, want, string(str), "%q", in)
	}
	require.Equal(t, in[1:len(in)-1] != want, copied, "copied %q", in)
}

// slowString is String byte by byte, as it was written before it read
// words.
func slowString(in string) (start int, simple, ascii bool, end int) {
	simple, ascii = true, true
	for i := 1; i < len(in); {
		c := in[i]
		switch {
		case c == '"':
			return 0, simple, ascii, i + 1
		case c == '\\':
			simple = false
			if i+1 >= len(in) {
				return -1, false, false, 0
			}
			switch in[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(in) || !isHex(in[i+2]) || !isHex(in[i+3]) || !isHex(in[i+4]) || !isHex(in[i+5]) {
					return -1, false, false, 0
				}
				i += 6
			default:
				return -1, false, false, 0
			}
		case c < ' ':
			return -1, false, false, 0
		case c >= 0x80:
			ascii = false
			i++
		default:
			i++
		}
	}
	return -1, false, false, 0
}

// TestValidRune agrees with utf8.DecodeRune on every lead byte >= 0x80
// followed by every pair of bytes, and on short inputs.
func TestValidRune(t *testing.T) {
	want := func(b []byte) int {
		if r, size := utf8.DecodeRune(b); r != utf8.RuneError || size > 1 {
			return size
		}
		return 0
	}
	b := make([]byte, 4)
	for c := 0x80; c <= 0xFF; c++ {
		for c1 := range 256 {
			for c2 := range 256 {
				b[0], b[1], b[2], b[3] = byte(c), byte(c1), byte(c2), 0x80
				if got, w := validRune(b), want(b); got != w {
					t.Fatalf("% x: %d, utf8 says %d", b, got, w)
				}
				for n := 1; n <= 3; n++ {
					if got, w := validRune(b[:n]), want(b[:n]); got != w {
						t.Fatalf("% x: %d, utf8 says %d", b[:n], got, w)
					}
				}
			}
		}
	}
}
