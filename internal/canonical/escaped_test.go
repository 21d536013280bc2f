package canonical

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShortEscaped: the one-pass hash of short strings with escapes agrees
// with the general path (String, then decoding) where it takes a token,
// and leaves every other token to it.
func TestShortEscaped(t *testing.T) {
	for _, tc := range []struct {
		tok  string
		take bool
	}{
		{`"# Findings\n..."`, true},
		{`"a\"b\\c\/d\be\ff\ng\r\t"`, true}, // 15 decoded
		{`""`, true},
		{`"x"`, true},
		{`"0123456789abcdef"`, true},    // 16 bytes
		{`"0123456789abcde\n"`, true},   // 16 decoded, 17 raw
		{`"0123456789abcdefg"`, false},  // 17 bytes
		{`"0123456789abcdef\n"`, false}, // 17 decoded
		{`"\u0041"`, false},             // \u: the general path
		{`"caf\u00e9"`, false},
		{`"café"`, false},   // not ASCII
		{"\"a\tb\"", false}, // a control character: invalid
		{`"a\qb"`, false},   // a bad escape: invalid
		{`"abc`, false},     // unterminated
		{`"ab\`, false},
		{`abc"`, false}, // no opening quote: not a string at all
		{`x"`, false},
		{``, false},
	} {
		data := []byte(tc.tok)
		if tc.take {
			data = append(data, `,"next"`...) // it stops at the token's end
		}
		h, end, ok := shortEscaped(data, 0)
		require.Equal(t, tc.take, ok, tc.tok)
		if !ok {
			continue
		}
		assert.Equal(t, len(tc.tok), end, tc.tok)
		assert.Equal(t, hashEscaped([]byte(tc.tok)), h, tc.tok)
		p := canonParser{}
		p.Data = data
		h2, ok2 := p.str()
		require.True(t, ok2, tc.tok)
		assert.Equal(t, h, h2, tc.tok)
		// The same string written as encoding/json writes it (\u0008 for
		// \b, / for \/, ...) hashes the same.
		var str string
		require.NoError(t, json.Unmarshal([]byte(tc.tok), &str), tc.tok)
		again, err := json.Marshal(str)
		require.NoError(t, err)
		assert.Equal(t, ArgsKey([]byte(`{"k":`+tc.tok+`}`)), ArgsKey([]byte(`{"k":`+string(again)+`}`)), "%s and %s", tc.tok, again)
	}
}

// TestArgsKeyUnquotedKeyIsInvalid: an object key without its opening quote
// is invalid JSON, hashed as its text, never as the valid document that
// reading past its first byte would make of it.
func TestArgsKeyUnquotedKeyIsInvalid(t *testing.T) {
	for _, tc := range []struct{ invalid, valid string }{
		{`{abc":1}`, `{"bc":1}`},
		{`{x":1}`, `{"":1}`},
		{`{"k":1,zz":2}`, `{"k":1,"z":2}`},
		{`{query":"weather"}`, `{"uery":"weather"}`},
	} {
		assert.NotEqual(t, ArgsKey([]byte(tc.valid)), ArgsKey([]byte(tc.invalid)), "%s hashes as %s", tc.invalid, tc.valid)
		assert.Equal(t, mix(hashInvalid^fnv(fnvOffset, []byte(tc.invalid))), ArgsKey([]byte(tc.invalid)), "%s: hashed as its text", tc.invalid)
	}
	assert.NotEqual(t, ArgsKey([]byte(`{query":"weather"}`)), ArgsKey([]byte(`{Query":"weather"}`)))
}
