package redisfleet

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/internal/redistest"
	"github.com/agentstop/agentstop/internal/runid"
	"github.com/agentstop/agentstop/internal/tree"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/termination"
)

// TestControlReachesEveryNode: on a cluster, a block, an unblock and a
// stop, each stored and published by a script on the node of its family's
// slot, reach a subscriber on every node (a process's subscription may be
// on any of them), and a stop counts the subscribers of all the nodes.
func TestControlReachesEveryNode(t *testing.T) {
	cl := redistest.StartCluster(t)
	c, err := NewControl(cl.URL(), WithPrefix(testPrefix(t)), withKeyGuard(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var subs []<-chan *redis.Message
	for _, n := range cl.Nodes {
		node := redis.NewClient(&redis.Options{Addr: n.Addr})
		ps := node.Subscribe(t.Context(), c.k.ctl())
		if _, err := ps.Receive(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ps.Close(); _ = node.Close() })
		subs = append(subs, ps.Channel())
	}
	expect := func(kind string) {
		t.Helper()
		for i, ch := range subs {
			select {
			case m := <-ch:
				if !strings.HasPrefix(m.Payload, kind+" ") {
					t.Errorf("node %d received %q, want a %s", i, m.Payload, kind)
				}
			case <-time.After(2 * time.Second):
				t.Errorf("node %d's subscriber received no %s", i, kind)
			}
		}
	}
	if _, err := c.Block(t.Context(), fleet.BlockRequest{Selector: fleet.Selector{Stage: "x"}, Reason: "r", By: "b"}); err != nil {
		t.Fatal(err)
	}
	expect("block")
	if n, err := c.Unblock(t.Context(), fleet.Selector{Stage: "x"}); err != nil || n != 1 {
		t.Fatalf("Unblock = %d, %v", n, err)
	}
	expect("unblock")
	if got := c.subscribers(t.Context(), 0); got != int64(len(cl.Nodes)) {
		t.Errorf("subscribers = %d, want one per node (%d)", got, len(cl.Nodes))
	}
	if _, err := c.Stop(t.Context(), fleet.StopRequest{Selector: fleet.Selector{All: true}, Reason: "r", By: "b", Wait: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	expect("stop")
}

// TestClusterFailover: the master that holds the runs' slot dies; its
// replica takes over (the cluster's failover). Meanwhile the live run goes
// on (fail-open) and new runs start; afterwards the process lists its runs
// again, and a block and a stop issued after the failover apply.
func TestClusterFailover(t *testing.T) {
	cl := redistest.StartClusterWithReplicas(t)
	t.Cleanup(func() { waitDialers(t) }) // after the fleet's and the control's Close
	f := newTestFleet(t, cl.AsRedis(), WithTimeout(time.Second))
	ctl := newTestControl(t, cl.AsRedis(), f.cfg.prefix)
	s, err := middleware.New("failover", middleware.WithParticipant(fleet.Membership(f)))
	if err != nil {
		t.Fatal(err)
	}
	_, live := s.Start(t.Context())
	defer live.Finish(nil)
	listed := func(id string) bool {
		rs, err := ctl.Runs(t.Context(), fleet.Selector{RunID: id})
		return err == nil && len(rs) == 1
	}
	eventually(t, 3*time.Second, "the run is listed", func() bool { return listed(live.ID()) })

	reply, err := cl.Nodes[0].Do("CLUSTER", "KEYSLOT", f.k.runs())
	if err != nil || !strings.HasPrefix(reply, ":") {
		t.Fatalf("CLUSTER KEYSLOT: %q, %v", reply, err)
	}
	slot, _ := strconv.Atoi(reply[1:])
	victim := min(slot/(16384/len(cl.Nodes)), len(cl.Nodes)-1)
	cl.Nodes[victim].Kill()

	if _, stop := live.Observe(termination.Event{Kind: termination.KindMessage, Text: "on"}); stop {
		t.Fatalf("the live run stopped when a master died: %v", context.Cause(live.Context()))
	}
	_, during := s.Start(t.Context())
	defer during.Finish(nil)
	if c, ok := during.Cause(); ok {
		t.Fatalf("a new run ended while the master was down (fail-open): %v", c)
	}
	eventually(t, 30*time.Second, "after the failover both runs are listed", func() bool {
		return listed(live.ID()) && listed(during.ID())
	})
	if _, err := ctl.Block(t.Context(), fleet.BlockRequest{Selector: fleet.Selector{Stage: "failover"}, Reason: "after failover", By: "ops"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the block issued after the failover applies", func() bool {
		_, r := s.Start(t.Context())
		sk, ok := r.Finish(nil).Cause.(termination.Skipped)
		return ok && sk.Reason == termination.SkipBlocked
	})
	rep, err := ctl.Stop(t.Context(), fleet.StopRequest{Selector: fleet.Selector{RunID: live.ID()}, Reason: "bye", By: "ops"})
	if err != nil || rep.Stopped != 1 {
		t.Errorf("Stop after the failover = %+v, %v", rep, err)
	}
	var x termination.Cancelled
	if !errors.As(context.Cause(live.Context()), &x) || x.Detail != "bye (by ops)" {
		t.Errorf("cause = %v, want Cancelled{external, bye (by ops)}", context.Cause(live.Context()))
	}
}

// waitDialers waits, up to 5 s, until go-redis's dial probers have ended:
// a pool whose server died probes it every second until the pool is
// closed, and the prober ends at its next wake after Close.
func waitDialers(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if !bytes.Contains(buf[:n], []byte("pool.(*ConnPool).tryDial")) {
			return
		}
		if time.Now().After(deadline) {
			t.Error("go-redis dial probers still run 5s after their clients were closed")
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterTrees: on a 3-master cluster each shared tree's record is in
// a slot of its own (trees spread over the masters), its script runs
// there under the key guard, and a tree's exhaustion, published by the
// node of its slot, stops the holder in the other process.
func TestClusterTrees(t *testing.T) {
	cl := redistest.StartCluster(t)
	fs := treeFleets(t, cl, 2)
	a, b := fs[0], fs[1]
	const trees = 8
	planners := make([]*treeRun, trees)
	joins := make([]tree.Member, trees)
	holders := make([]string, trees)
	for i := range trees {
		holders[i] = runid.New()
		planners[i] = &treeRun{}
		hm := a.HoldTree(tree.Spec{Holder: holders[i], Stage: "planner",
			Limits: termination.Limits{Has: termination.LimitIterations, Iterations: 3}}, tree.Usage{}, planners[i])
		defer hm.Leave(plannerEnded)
	}
	flushAll(t, a)
	for i := range trees {
		joins[i] = b.JoinTree(t.Context(), holders[i], nil)
		if joins[i] == nil {
			t.Fatalf("tree %d: not found", i)
		}
		defer joins[i].Leave(joinEnded)
	}
	flushAll(t, b, b)
	masters := map[string]bool{}
	for i := range trees {
		for _, n := range cl.Nodes {
			c := redis.NewClient(&redis.Options{Addr: n.Addr})
			if k, err := c.Exists(t.Context(), a.k.tree(escape(holders[i]))).Result(); err == nil && k == 1 {
				masters[n.Addr] = true
			}
			_ = c.Close()
		}
	}
	if len(masters) < 2 {
		t.Errorf("%d trees' records are on %d master(s), want them spread", trees, len(masters))
	}
	for i := range trees {
		var stop termination.Cause
		for n := 0; n < 4 && stop == nil; n++ {
			stop = joins[i].Spend(tree.Usage{Totals: termination.Totals{Iterations: 1}})
			flushAll(t, b)
		}
		wantParentStop(t, "tree "+strconv.Itoa(i), stop, "planner", termination.TagMaxIterations)
	}
	eventually(t, 3*time.Second, "every holder is stopped", func() bool {
		for _, p := range planners {
			if p.stopped() == nil {
				return false
			}
		}
		return true
	})
	for i, p := range planners {
		if x, ok := p.stopped().(termination.MaxIterationsReached); !ok || x.Limit != 3 || x.Count != 4 || x.Scope != termination.ScopeTree {
			t.Errorf("holder %d: %#v, want MaxIterationsReached{3, 4, tree}", i, p.stopped())
		}
	}
}
