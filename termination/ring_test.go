package termination

import (
	"math"
	"testing"
	"unsafe"

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

// TestKeyAt: a window entry keeps its 64-bit key and its event index, the
// index read on any later event less than 2^32 events on (the high bits
// come from the event it is read on), in 12 bytes.
func TestKeyAt(t *testing.T) {
	const big = 1 << 32
	cases := []struct {
		name    string
		key     uint64
		at, now int
	}{
		{"first event", 0xdeadbeefcafef00d, 1, 1},
		{"later", 1, 7, 1000},
		{"high bits", 1 << 63, big + 5, big + 10},
		{"across 2^32", ^uint64(0), big - 3, big + 2},
		{"just under 2^32 apart", 42, 3, big + 2},
		{"past 2^33", 7, 3*big + 1, 3*big + 9},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := entry(c.key, c.at)
			if got := e.key(); got != c.key {
				t.Errorf("key() = %#x, want %#x", got, c.key)
			}
			if !e.is(c.key) || e.is(c.key^1) || e.is(c.key^(1<<40)) {
				t.Errorf("is(%#x) is wrong", c.key)
			}
			if !e.sameKey(entry(c.key, c.at+1)) || e.sameKey(entry(c.key^(1<<33), c.at)) {
				t.Errorf("sameKey is wrong")
			}
			if got := e.index(c.now); got != c.at {
				t.Errorf("index(%d) = %d, want %d", c.now, got, c.at)
			}
		})
	}
	if n := unsafe.Sizeof(keyAt{}); n != 12 {
		t.Errorf("an entry is %d bytes, want 12", n)
	}
}
