package main

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	agentfleet "github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/redisfleet"
	"github.com/agentstop/agentstop/middleware"
)

// membership is the fleet the quickstart's stages join, and the control
// through which its simulated operator stops runs and blocks new ones.
// Both fleets implement agentfleet.Fleet and agentfleet.Control, so the
// quickstart drives them the same way.
type membership struct {
	fleet   agentfleet.Fleet
	control agentfleet.Control
	where   string // what the start line says the runs joined
	close   func()
}

// joinFleet returns the fleet the stages join: without -redis (url ""),
// the in-process fleet, the embedded default; with it, the Redis fleet at
// url, so that `agentstop runs`, `stop` and `block` also see and steer the
// quickstart's runs. The fleet's own metrics (agent.fleet.*) go to mp (nil:
// the global MeterProvider). close leaves the fleet.
func joinFleet(ctx context.Context, url string, mp metric.MeterProvider) (*membership, error) {
	if url == "" {
		l := agentfleet.NewLocal(agentfleet.WithMeterProvider(mp))
		return &membership{fleet: l, control: l, where: "an in-process fleet", close: func() {}}, nil
	}
	// go-redis logs connection failures to stderr, over the live table;
	// the fleet counts them in agent.fleet.errors instead.
	redis.SetLogger(quietRedis{})
	f, err := redisfleet.New(ctx, url, redisfleet.WithMeterProvider(mp))
	if err != nil {
		return nil, err
	}
	return &membership{fleet: f, control: f, where: "the Redis fleet at " + redisfleet.Redact(url), close: func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = f.Close(cctx)
	}}, nil
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// tenants are the demo tenants, with how often a run belongs to each: acme
// runs most, so its shared budget runs out first in each window.
var tenants = []struct {
	name   string
	weight int
}{{"acme", 5}, {"globex", 3}, {"initech", 2}}

// pickTenant gives a run one of the demo tenants, by weight.
func pickTenant(rng *rand.Rand) string {
	total := 0
	for _, t := range tenants {
		total += t.weight
	}
	n := rng.IntN(total)
	for _, t := range tenants {
		if n < t.weight {
			return t.name
		}
		n -= t.weight
	}
	return tenants[0].name
}

// tenantLabel gives a run tenant as its tenant label.
func tenantLabel(tenant string) middleware.RunOption {
	return middleware.WithLabels(map[string]string{"tenant": tenant})
}
