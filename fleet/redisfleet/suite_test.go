package redisfleet

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/fleettest"
	"github.com/agentstop/agentstop/internal/redistest"
)

var prefixes atomic.Int64

// deployment is what a test runs against: a *redistest.Server or a
// redistest.Redis (one server or a cluster).
type deployment interface{ URL() string }

// newTestFleet returns a Fleet on r under a prefix of its own, closed
// when the test ends. In tests (not benchmarks) its scripts run under the
// key guard (withKeyGuard).
func newTestFleet(t testing.TB, r deployment, opts ...Option) *Fleet {
	t.Helper()
	p := WithPrefix("t" + time.Now().Format("150405") + "x" + itoa(prefixes.Add(1)) + ":")
	base := []Option{p, WithLease(2 * time.Second)}
	if _, bench := t.(*testing.B); !bench {
		base = append(base, withKeyGuard(t))
	}
	f, err := New(context.Background(), r.URL(), append(base, opts...)...)
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

// rawClient returns a plain go-redis client of r (a cluster client for a
// cluster), closed when the test ends.
func rawClient(t testing.TB, r deployment) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	if isClusterURL(r.URL()) {
		o, err := parseClusterURL(r.URL())
		if err != nil {
			t.Fatal(err)
		}
		c = redis.NewClusterClient(o)
	} else {
		o, err := parseURL(r.URL())
		if err != nil {
			t.Fatal(err)
		}
		c = redis.NewClient(o)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// keysMatching returns the keys matching pattern on every master of c.
func keysMatching(ctx context.Context, c redis.UniversalClient, pattern string) ([]string, error) {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return c.Keys(ctx, pattern).Result()
	}
	var out []string
	ch := make(chan []string, 16) // one per master (a cluster of a few)
	err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		ks, err := n.Keys(ctx, pattern).Result()
		if err == nil {
			ch <- ks
		}
		return err
	})
	close(ch)
	for ks := range ch {
		out = append(out, ks...)
	}
	return out, err
}

func itoa(n int64) string { return fmtFloat(float64(n)) }

func TestSuite(t *testing.T) {
	redistest.Each(t, func(t *testing.T, r redistest.Redis) {
		fleettest.Run(t, func(t *testing.T) (fleet.Fleet, fleet.Control) {
			f := newTestFleet(t, r)
			return f, f
		})
	})
}
