package importer

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJSONValuesLinear: splitting JSON Lines counts each byte's newline
// once, however many values there are (a line count from the file's start
// for every value made import quadratic: 8 times the input took 30 times
// as long). The timing is measured by BenchmarkImportOpenAIChat10MB/80MB;
// on a shared machine a timing test is too noisy to fail reliably.
func TestJSONValuesLinear(t *testing.T) {
	var b bytes.Buffer
	for i := range 5000 {
		fmt.Fprintf(&b, "{\"i\": %d, \"text\": \"a line of about sixty bytes\"}\n\n", i)
	}
	data := b.Bytes()
	lc := &lineCounter{data: data, line: 1}
	values, lines, err := jsonValuesCounted(data, lc)
	require.NoError(t, err)
	require.Len(t, values, 5000)
	assert.Equal(t, 9999, lines[4999])
	assert.LessOrEqual(t, lc.scanned, len(data), "every byte counted over at most once")
}

func TestLineCounter(t *testing.T) {
	c := lineCounter{data: []byte("a\nb\n\nc"), line: 1}
	for _, tt := range []struct{ off, line int }{{0, 1}, {2, 2}, {4, 3}, {5, 4}, {99, 4}, {1, 1}} {
		assert.Equal(t, tt.line, c.lineAt(tt.off), "offset %d", tt.off)
	}
	values, lines, err := jsonValues([]byte("{}\n\n  [1]\n\"x\"\n"))
	require.NoError(t, err)
	assert.Len(t, values, 3)
	assert.Equal(t, []int{1, 3, 4}, lines)
	_, _, err = jsonValues([]byte("{}\n{}\n{\"a\":,}\n"))
	assert.ErrorContains(t, err, "line 3: malformed JSON")
}
