package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	agentfleet "github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/termination"
)

// inProcess is the fleet the quickstart joins without -redis.
func inProcess(t *testing.T) *membership {
	t.Helper()
	m, err := joinFleet(context.Background(), "", nil)
	require.NoError(t, err)
	t.Cleanup(m.close)
	return m
}

// fleetCounts sums the fleet's counters collected from reader, by name and
// by "name key=value" for their attribute.
func fleetCounts(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				out[m.Name] += dp.Value
				for _, kv := range dp.Attributes.ToSlice() {
					out[fmt.Sprintf("%s %s=%s", m.Name, kv.Key, kv.Value.Emit())] += dp.Value
				}
			}
		}
	}
	return out
}

// assertSteered checks the feed for the operator's fleet stop of an
// executor run and a planner run its block skipped, each with the
// operator named.
func assertSteered(t *testing.T, tl *tally) {
	t.Helper()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var stopped, blocked bool
	for _, s := range tl.feed {
		stopped = stopped || s.stage == "executor" && s.tag == "cancelled" && s.detail == "external: operator pressed Stop (by quickstart)"
		blocked = blocked || s.stage == blockStage && s.tag == "skipped" &&
			s.detail == "blocked: incident drill: planner paused for tenant globex (by quickstart)"
	}
	assert.True(t, stopped, "no executor run stopped through the fleet by the quickstart")
	assert.True(t, blocked, "no planner run skipped by the quickstart's block")
}

// TestInProcessFleetIsSteered: without -redis, the runs join the
// in-process fleet, whose metrics go to the given MeterProvider: the
// operator's stops are counted in agent.fleet.runs.stopped and its block's
// skips in agent.fleet.runs.rejected{reason=blocked}.
func TestInProcessFleetIsSteered(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet for a few seconds")
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	m, err := joinFleet(context.Background(), "", mp)
	require.NoError(t, err)
	defer m.close()
	assert.Equal(t, "an in-process fleet", m.where)
	f, err := newFleet(nil, m, 1000)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.run(ctx)
	require.Eventually(t, func() bool {
		c := fleetCounts(t, reader)
		return c["agent.fleet.runs.stopped"] > 0 && c["agent.fleet.runs.rejected reason=blocked"] > 0
	}, 10*time.Second, 100*time.Millisecond, "no fleet stop or block counted")
	cancel()
	f.wait(10 * time.Second)
	assertSteered(t, f.tally)
}

func TestNewFleetNeedsAFleet(t *testing.T) {
	_, err := newFleet(nil, nil, 8)
	assert.ErrorContains(t, err, "no fleet to join")
}

func TestPickTenantFollowsTheWeights(t *testing.T) {
	rng := newRand(7)
	n := map[string]int{}
	for range 10000 {
		n[pickTenant(rng)]++
	}
	assert.Len(t, n, len(tenants))
	assert.Greater(t, n["acme"], n["globex"])
	assert.Greater(t, n["globex"], n["initech"])
}

func TestDescribeNamesTheTenantOfAFleetBudget(t *testing.T) {
	r := termination.Result{Cause: termination.BudgetExhausted{Resource: "total_tokens", Used: 40100, Limit: 40000, Scope: termination.ScopeFleet},
		Warnings: []termination.Cause{termination.BudgetPressure{Resource: "total_tokens", Threshold: 0.5, Used: 20300, Limit: 40000, Scope: termination.ScopeFleet}}}
	assert.Equal(t, "fleet total_tokens budget spent: 40100 of 40000 shared by tenant acme (after warning: "+
		"fleet total_tokens at 20300 of 40000, past the 50% pressure mark shared by tenant acme)", describe(r, runInfo{tenant: "acme"}))
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

// unreachable is a fleet Control whose every call fails, as the Redis
// fleet's does while its server is down.
type unreachable struct{ agentfleet.Control }

func (unreachable) Stop(context.Context, agentfleet.StopRequest) (agentfleet.StopReport, error) {
	return agentfleet.StopReport{}, errors.New("redis: connection refused")
}

func (unreachable) Block(context.Context, agentfleet.BlockRequest) (agentfleet.Block, error) {
	return agentfleet.Block{}, errors.New("redis: connection refused")
}

// TestStopRunWithoutTheFleet: when the fleet cannot deliver the operator's
// stop, the run is stopped directly, and its detail says so.
func TestStopRunWithoutTheFleet(t *testing.T) {
	f, err := newFleet(nil, inProcess(t), 8)
	require.NoError(t, err)
	f.control = unreachable{}
	_, run := f.stages[len(f.stages)-1].Start(context.Background(), tenantLabel("acme"))
	f.stopRun(run)
	res := run.Finish(nil)
	assert.Equal(t, termination.Cancelled{Reason: termination.CancelExternal,
		Detail: "operator pressed Stop (fleet unreachable) (by quickstart)"}, res.Cause)
}

// TestStopRunThroughTheFleet: the operator's stop names the run by id, so
// that it ends that run only, with the operator in its detail.
func TestStopRunThroughTheFleet(t *testing.T) {
	f, err := newFleet(nil, inProcess(t), 8)
	require.NoError(t, err)
	st := f.stages[len(f.stages)-1]
	_, other := st.Start(context.Background(), tenantLabel("acme"))
	_, run := st.Start(context.Background(), tenantLabel("acme"))
	f.stopRun(run)
	assert.Equal(t, termination.Cancelled{Reason: termination.CancelExternal,
		Detail: "operator pressed Stop (by quickstart)"}, run.Finish(nil).Cause)
	_, stopped := other.Cause()
	assert.False(t, stopped, "the stop reached another run")
	other.Finish(nil)
}
