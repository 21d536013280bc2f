package codec

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestContentHashes(t *testing.T) {
	tests := []struct {
		name  string
		a, b  string
		equal bool
	}{
		{"key order and whitespace", `{"a":1,"b":[1,2]}`, ` { "b" : [1, 2], "a" : 1 } `, true},
		{"escapes", `{"q":"\u0041"}`, `{"q":"A"}`, true},
		{"numbers by value", `{"n":1.0}`, `{"n":1}`, true},
		{"different values", `{"q":"a"}`, `{"q":"b"}`, false},
		{"empty is null", ``, `null`, true},
		{"invalid JSON as trimmed text", ` {oops `, `{oops`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ha, hb := ArgsHash([]byte(tc.a)), ArgsHash([]byte(tc.b))
			assert.Len(t, ha, 32)
			assert.Equal(t, tc.equal, ha == hb)
		})
	}
	assert.Equal(t, TextHash(" done\n"), TextHash("done"))
	assert.NotEqual(t, TextHash("done"), TextHash("Done"))
	assert.Equal(t, ResultHash(" ok ", ""), ResultHash("ok", " "))
	assert.NotEqual(t, ResultHash("ok", ""), ResultHash("", "ok"), "text and error are told apart")
	assert.NotEqual(t, ResultHash("ok", ""), TextHash("ok"), "a result's hash is not a message's")
	// Stable across processes and versions: a recorded log compares with a
	// later replay.
	assert.Equal(t, "65ef535b1f930dbb", ArgsHash([]byte(`{"q":1}`))[:16])
}
