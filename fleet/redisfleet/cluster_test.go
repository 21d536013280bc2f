package redisfleet

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/redisfleet/redistest"
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
