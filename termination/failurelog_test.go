package termination

import (
	"slices"
	"testing"
)

// TestFailureLog: the chunked list of a run's failures (errors.total)
// holds the last size indices pushed, oldest first, across chunk
// boundaries and past size (a raised run), like the ring it replaced.
func TestFailureLog(t *testing.T) {
	for _, tc := range []struct{ size, pushed int }{
		{0, 5}, {1, 3}, {3, 2}, {8, 8}, {8, 9}, {20, 600}, {300, 299}, {300, 300}, {300, 301}, {300, 1000}, {1000, 5000},
	} {
		l := failureLog{head: make([]int, 0, min(tc.size, failuresPrealloc)), size: tc.size}
		if tc.pushed%2 == 1 {
			l.head = nil // no first slots (as a zero failureLog)
		}
		var all []int
		for i := 1; i <= tc.pushed; i++ {
			l.push(10 * i)
			all = append(all, 10*i)
		}
		want := all[max(0, len(all)-tc.size):]
		if tc.size == 0 {
			want = nil
		}
		var got []int
		l.each(func(at int) { got = append(got, at) })
		if !slices.Equal(got, want) || l.n != len(want) {
			t.Errorf("size %d, %d pushed: held %v (n %d), want %v", tc.size, tc.pushed, got, l.n, want)
		}
		for _, w := range []int{0, min(1, len(want)), len(want) / 2, len(want)} {
			if last := l.last(w); !slices.Equal(last, want[len(want)-w:]) {
				t.Errorf("size %d, %d pushed: last(%d) = %v, want %v", tc.size, tc.pushed, w, last, want[len(want)-w:])
			}
		}
		if len(l.rest) > tc.size/failureChunk+1 {
			t.Errorf("size %d, %d pushed: %d chunks kept", tc.size, tc.pushed, len(l.rest)+1)
		}
	}
}
