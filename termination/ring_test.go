package termination

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestKeyAtEventOf: a window entry keeps the low 32 bits of its event's
// index; the index of a later event restores it, across 2^32 too.
func TestKeyAtEventOf(t *testing.T) {
	for _, tc := range []struct{ at, now int }{
		{1, 1}, {1, 12}, {7, 1 << 20},
		{math.MaxUint32, math.MaxUint32 + 5}, // the later event past 2^32
		{1<<32 + 3, 1<<32 + 3},
		{5_000_000_000, 5_000_000_017},
		{math.MaxInt - 10, math.MaxInt},
	} {
		k := newKeyAt(0xdeadbeefcafef00d, tc.at)
		assert.Equal(t, tc.at, k.eventOf(tc.now), "at %d, now %d", tc.at, tc.now)
		assert.Equal(t, uint64(0xdeadbeefcafef00d), k.key())
		assert.True(t, k.is(0xdeadbeefcafef00d))
		assert.False(t, k.is(0xdeadbeefcafef00d^1<<40))
	}
}

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
