package redisfleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/termination"
)

// aclUsers are the ACLs doc.go shows: applications register runs and spend
// budgets; only operators stop and block.
var aclUsers = [][]string{
	strings.Fields("ACL SETUSER agentstop-app on >app-pw resetkeys resetchannels " +
		"%RW~agentstop:{runs}* %RW~agentstop:{budget* %RW~agentstop:{tree:* %R~agentstop:{stops}* %RW~agentstop:{stops}:ack:* %R~agentstop:{raises}* %RW~agentstop:{raises}:ack:* %R~agentstop:{blocks}* " +
		"&agentstop:ctl -@all +@connection +@scripting +@read +@write +@pubsub +time +cluster|slots -@dangerous -@admin"),
	strings.Fields("ACL SETUSER agentstop-ops on >ops-pw resetkeys resetchannels ~agentstop:* &agentstop:ctl " +
		"-@all +@connection +@scripting +@read +@write +@pubsub +time +cluster|slots -@dangerous -@admin"),
	strings.Fields("ACL SETUSER default off"),
}

func TestACLAppCannotStopOrBlock(t *testing.T) {
	redistest.Each(t, testACL)
}

func testACL(t *testing.T, srv redistest.Redis) {
	for _, cmd := range aclUsers {
		if r, err := srv.Do(cmd...); err != nil || r != "+OK" {
			t.Fatalf("%v: %q, %v", cmd, r, err)
		}
	}
	appURL := strings.Replace(srv.URL(), "redis://", "redis://agentstop-app:app-pw@", 1)
	opsURL := strings.Replace(srv.URL(), "redis://", "redis://agentstop-ops:ops-pw@", 1)
	app, err := New(context.Background(), appURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Close(context.Background()) })
	ops, err := NewControl(opsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ops.Close() })

	budget := termination.FleetBudget{Key: "stage", Window: time.Hour, TotalTokens: 1_000_000}
	ctx, run := budgetStage(t, "acl", app, budget).Start(context.Background())
	defer run.Finish(nil)
	run.Observe(termination.Event{Kind: termination.KindMessage, Text: "x", Usage: termination.Usage{InputTokens: 500, OutputTokens: 20}})
	eventually(t, 3*time.Second, "the app's run is listed with its figures and its budget usage settled", func() bool {
		_ = app.Flush(context.Background())
		rs, err := ops.Runs(context.Background(), fleet.Selector{RunID: run.ID()})
		bs, err2 := ops.Budgets(context.Background())
		return err == nil && err2 == nil && len(rs) == 1 && rs[0].InputTokens == 500 && len(bs) == 1 && bs[0].Used.Total() == 520
	})
	if !app.up.Load() {
		t.Fatal("the app fleet reports the server unreachable")
	}
	// It shares tree limits.
	hm := app.HoldTree(tree.Spec{Holder: run.ID(), Stage: "acl",
		Limits: termination.Limits{Has: termination.LimitTotalTokens, TotalTokens: 1000}}, tokens(10), nil)
	defer hm.Leave(plannerEnded)
	if err := app.Flush(context.Background()); err != nil || !app.up.Load() {
		t.Fatalf("the app fleet could not share a tree: %v", err)
	}
	app.mu.Lock()
	sh := app.trees[escape(run.ID())]
	app.mu.Unlock()
	sh.mu.Lock()
	settled, bal := sh.settled[2], sh.bal[2]
	sh.mu.Unlock()
	if settled != 10 || bal != 10 {
		t.Fatalf("the app's tree: settled %g, lease %g; want 10 and 10", settled, bal)
	}

	// The application user can neither store a stop nor a block...
	appCtl, err := NewControl(appURL)
	if err != nil {
		t.Fatal(err)
	}
	defer appCtl.Close()
	if _, err := appCtl.Stop(context.Background(), fleet.StopRequest{Selector: fleet.Selector{All: true}, Reason: "x", Wait: time.Millisecond}); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("app Stop: err = %v, want NOPERM", err)
	}
	if _, err := appCtl.Block(context.Background(), fleet.BlockRequest{Selector: fleet.Selector{All: true}, Reason: "x"}); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("app Block: err = %v, want NOPERM", err)
	}
	// ...and a stop it publishes by hand, without a stored record, is ignored.
	raw := rawClient(t, urlOnly(appURL))
	fake := "stop " + runid.New() + " 1 0 " + `{"selector":{"all":true},"reason":"fake","by":"app"}`
	if err := raw.Publish(context.Background(), "agentstop:ctl", fake).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if c, ok := run.Cause(); ok {
		t.Fatalf("a fake stop ended the run: %v", c)
	}

	// The operator can.
	if _, err := ops.Block(context.Background(), fleet.BlockRequest{Selector: fleet.Selector{Stage: "other"}, Reason: "x", By: "ops"}); err != nil {
		t.Fatalf("ops Block: %v", err)
	}
	rep, err := ops.Stop(context.Background(), fleet.StopRequest{Selector: fleet.Selector{Stage: "acl"}, Reason: "real", By: "ops"})
	if err != nil || rep.Stopped != 1 {
		t.Fatalf("ops Stop = %+v, %v", rep, err)
	}
	if c := context.Cause(ctx); c == nil || !strings.Contains(c.Error(), "cancelled") && !strings.Contains(c.Error(), "real") {
		t.Errorf("cause = %v", c)
	}
}

// urlOnly is a deployment named by its URL alone.
type urlOnly string

func (u urlOnly) URL() string { return string(u) }
