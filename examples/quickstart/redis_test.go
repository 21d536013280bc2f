package main

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	agentfleet "github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/redisfleet"
	"github.com/agentstop/agentstop/fleet/redisfleet/redistest"
)

// TestJoinRedis: with -redis, the quickstart's runs are in the fleet's
// registry with a tenant label, and a block skips them.
func TestJoinRedis(t *testing.T) {
	if _, err := joinRedis(context.Background(), "http://nope"); err == nil {
		t.Fatal("a malformed -redis URL was accepted")
	}
	srv := redistest.Start(t)
	leave, err := joinRedis(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leave(); fleetOptions = nil })
	f, err := newFleet(nil, 8)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := redisfleet.NewControl(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	ctx, run := f.stages[0].Start(context.Background(), tenantLabel(rand.New(rand.NewPCG(1, 2))))
	defer run.Finish(nil)
	var rs []agentfleet.RunInfo
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && len(rs) == 0; time.Sleep(20 * time.Millisecond) {
		rs, _ = ctl.Runs(ctx, agentfleet.Selector{RunID: run.ID()})
	}
	if len(rs) != 1 || rs[0].Labels["tenant"] == "" || rs[0].Stage != f.stages[0].Name() {
		t.Fatalf("registry = %+v, want the run with a tenant label", rs)
	}
}
