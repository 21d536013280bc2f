package main

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentstop/agentstop/fleet/redisfleet"
	"github.com/agentstop/agentstop/middleware"
)

// fleetOptions are added to every stage: with -redis, the Redis fleet.
var fleetOptions []middleware.Option

// joinRedis makes every stage join the fleet at url (-redis), so that
// `agentstop runs`, `stop` and `block` see and steer the quickstart's runs.
// The returned func closes the fleet.
func joinRedis(ctx context.Context, url string) (func(), error) {
	if url == "" {
		return func() {}, nil
	}
	// go-redis logs connection failures to stderr, over the live table;
	// the fleet counts them in agent.fleet.errors instead.
	redis.SetLogger(quietRedis{})
	f, err := redisfleet.New(ctx, url)
	if err != nil {
		return nil, err
	}
	fleetOptions = append(fleetOptions, middleware.WithFleet(f))
	return func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = f.Close(cctx)
	}, nil
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

var tenants = []string{"acme", "globex", "initech"}

// tenantLabel gives a run one of the demo tenants as its tenant label.
func tenantLabel(rng *rand.Rand) middleware.RunOption {
	return middleware.WithLabels(map[string]string{"tenant": tenants[rng.IntN(len(tenants))]})
}
