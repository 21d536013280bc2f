package main

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	agentfleet "github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/redisfleet"
	"github.com/agentstop/agentstop/internal/redistest"
)

// TestJoinRedis: with -redis, the quickstart's runs are in the Redis
// fleet's registry with a tenant label, on one server and on a cluster.
func TestJoinRedis(t *testing.T) {
	o := defaultOptions()
	o.redis = "http://nope"
	assert.ErrorContains(t, o.validate(), "-redis: ")
	redistest.Each(t, func(t *testing.T, srv redistest.Redis) {
		o.redis = srv.URL()
		require.NoError(t, o.validate())
		m, err := joinFleet(context.Background(), srv.URL(), nil)
		require.NoError(t, err)
		t.Cleanup(m.close)
		assert.Contains(t, m.where, "Redis fleet")
		f, err := newFleet(nil, m, 8)
		require.NoError(t, err)
		ctl, err := redisfleet.NewControl(srv.URL())
		require.NoError(t, err)
		defer ctl.Close()
		ctx, run := f.stages[0].Start(context.Background(), tenantLabel(pickTenant(rand.New(rand.NewPCG(1, 2)))))
		defer run.Finish(nil)
		var rs []agentfleet.RunInfo
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && len(rs) == 0; time.Sleep(20 * time.Millisecond) {
			rs, _ = ctl.Runs(ctx, agentfleet.Selector{RunID: run.ID()})
		}
		if len(rs) != 1 || rs[0].Labels["tenant"] == "" || rs[0].Stage != f.stages[0].Name() {
			t.Fatalf("registry = %+v, want the run with a tenant label", rs)
		}
	})
}

// TestRedisFleetIsSteered: on the Redis fleet, as on the in-process one,
// the operator's stops go through the fleet (counted in
// agent.fleet.runs.stopped, detail "by quickstart") and its block skips
// planner runs of its tenant (agent.fleet.runs.rejected{reason=blocked}).
func TestRedisFleetIsSteered(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet for a few seconds")
	}
	srv := redistest.Start(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	m, err := joinFleet(context.Background(), srv.URL(), mp)
	require.NoError(t, err)
	defer m.close()
	f, err := newFleet(nil, m, 1000)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.run(ctx)
	require.Eventually(t, func() bool {
		c := fleetCounts(t, reader)
		return c["agent.fleet.runs.stopped"] > 0 && c["agent.fleet.runs.rejected reason=blocked"] > 0
	}, 15*time.Second, 200*time.Millisecond, "no fleet stop or block counted: %v", fleetCounts(t, reader))
	cancel()
	f.wait(10 * time.Second)
	assertSteered(t, f.tally)
}
