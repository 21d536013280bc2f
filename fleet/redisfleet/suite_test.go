package redisfleet

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/fleettest"
	"github.com/agentstop/agentstop/fleet/redisfleet/redistest"
)

var prefixes atomic.Int64

// newTestFleet returns a Fleet on srv under a prefix of its own, closed
// when the test ends.
func newTestFleet(t testing.TB, srv *redistest.Server, opts ...Option) *Fleet {
	t.Helper()
	p := WithPrefix("t" + time.Now().Format("150405") + "x" + itoa(prefixes.Add(1)) + ":")
	f, err := New(context.Background(), srv.URL(), append([]Option{p, WithLease(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = f.Close(ctx)
	})
	return f
}

func itoa(n int64) string { return fmtFloat(float64(n)) }

func TestSuite(t *testing.T) {
	srv := redistest.Start(t)
	fleettest.Run(t, func(t *testing.T) (fleet.Fleet, fleet.Control) {
		f := newTestFleet(t, srv)
		return f, f
	})
}
