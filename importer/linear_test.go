package importer

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJSONValuesLinear: splitting 8 times more JSON Lines takes about 8
// times as long, not 64 (a line count from the file's start for every
// value made it quadratic). Best of three, with a wide margin.
func TestJSONValuesLinear(t *testing.T) {
	lines := func(n int) []byte {
		var b bytes.Buffer
		for i := range n {
			fmt.Fprintf(&b, "{\"i\": %d, \"text\": \"some text to make a line of about a hundred bytes long\"}\n", i)
		}
		return b.Bytes()
	}
	best := func(data []byte) time.Duration {
		d := time.Duration(1 << 62)
		for range 3 {
			start := time.Now()
			values, _, err := jsonValues(data)
			d = min(d, time.Since(start))
			require.NoError(t, err)
			require.NotEmpty(t, values)
		}
		return d
	}
	small, large := lines(5000), lines(40000)
	ts, tl := best(small), best(large)
	ratio := float64(tl) / float64(ts)
	t.Logf("%d bytes: %v; %d bytes: %v; ratio %.1f", len(small), ts, len(large), tl, ratio)
	assert.Less(t, ratio, 20.0, "8 times the input should take about 8 times as long")
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
