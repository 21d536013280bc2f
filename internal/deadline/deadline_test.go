package deadline

import (
	"context"
	"testing"
	"time"
)

func TestEarliest(t *testing.T) {
	far, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	cases := []struct {
		name     string
		ctx      context.Context
		timeouts []time.Duration
		want     time.Duration // from now; 0: none
	}{
		{"none", context.Background(), nil, 0},
		{"zero timeouts ignored", context.Background(), []time.Duration{0, -time.Second}, 0},
		{"the context's", far, nil, time.Hour},
		{"a shorter timeout", far, []time.Duration{time.Minute, 0}, time.Minute},
		{"a longer timeout loses", far, []time.Duration{2 * time.Hour}, time.Hour},
		{"the shortest of several", context.Background(), []time.Duration{time.Hour, time.Second, time.Minute}, time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, ok := Earliest(c.ctx, c.timeouts...)
			if ok != (c.want > 0) {
				t.Fatalf("ok = %v, want %v", ok, c.want > 0)
			}
			if ok {
				if got := time.Until(d); got > c.want || got < c.want-time.Second {
					t.Fatalf("deadline in %s, want %s", got, c.want)
				}
			}
		})
	}
}

func TestReport(t *testing.T) {
	d := time.Now().Add(time.Minute)
	ctx := Report(context.Background(), d)
	if got, ok := ctx.Deadline(); !ok || !got.Equal(d) {
		t.Fatalf("Deadline = %v, %v", got, ok)
	}
	if ctx.Done() != nil {
		t.Fatal("a reported deadline must not end the context")
	}
}
