package redisfleet

import (
	"testing"
	"time"

	"github.com/agentstop/agentstop/internal/redistest"
)

// withClockEvery sets how often a Fleet estimates the server's clock again.
func withClockEvery(d time.Duration) Option {
	return optionFunc(func(c *config) { c.clockEvery = d })
}

// clockError samples the server's TIME once and returns how far the
// fleet's estimate, taken at the middle of the sample's round trip, is
// from it, and half that round trip (the sample's own uncertainty).
func clockError(t *testing.T, f *Fleet, r deployment) (diff, half time.Duration) {
	t.Helper()
	raw := rawClient(t, r)
	sent := time.Now()
	server, err := raw.Time(t.Context()).Result()
	rtt := time.Since(sent)
	if err != nil {
		t.Fatal(err)
	}
	mid := sent.Add(rtt / 2)
	est := mid.UnixMicro() + f.offset.Load()
	diff = time.Duration(est-server.UnixMicro()) * time.Microsecond
	return diff.Abs(), rtt/2 + time.Microsecond
}

// TestClockWithinBound: the fleet's estimate of the server's clock is
// within ClockBound of it (as a fresh sample, with its own half round
// trip of uncertainty, sees it), whatever the load: the bound is measured,
// no slack is added. A wrong estimate (a clock step) is corrected by the
// periodic re-estimate.
func TestClockWithinBound(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		f := newTestFleet(t, r, withClockEvery(300*time.Millisecond))
		if b := f.ClockBound(); b <= 0 || b >= time.Hour {
			t.Fatalf("ClockBound() = %v after New reached the server", b)
		}
		for range 20 {
			bound := f.ClockBound()
			diff, half := clockError(t, f, r)
			if after := f.ClockBound(); after > bound {
				bound = after // re-estimated meanwhile
			}
			if diff > bound+half {
				t.Errorf("estimate off by %v, more than the bound %v + the check's own %v", diff, bound, half)
			}
			time.Sleep(20 * time.Millisecond)
		}
		f.offset.Add(int64(5 * time.Second / time.Microsecond))
		eventually(t, 3*time.Second, "the periodic re-estimate corrects a clock 5s off", func() bool {
			diff, half := clockError(t, f, r)
			return diff <= f.ClockBound()+half
		})
	})
}

// TestClockBoundBeforeFirstEstimate: a Fleet that never reached its server
// claims no precision.
func TestClockBoundBeforeFirstEstimate(t *testing.T) {
	f := &Fleet{}
	if b := f.ClockBound(); b != time.Hour {
		t.Errorf("ClockBound() = %v, want 1h", b)
	}
}
