package termination

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRingSize: a ring's size is its setting, none for a negative one, at
// most 2^31-1 values.
func TestRingSize(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want int32
	}{{-3, 0}, {0, 0}, {8, 8}, {math.MaxInt32, math.MaxInt32}, {math.MaxInt, math.MaxInt32}} {
		r := newRing[keyAt](tc.n)
		assert.Equal(t, tc.want, r.size, "setting %d", tc.n)
		assert.LessOrEqual(t, cap(r.buf), ringPrealloc)
	}
}
