package redistest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of three masters without replicas, each a
// redis-server process of its own on 127.0.0.1 (a free client port and a
// free cluster-bus port), in a temporary directory, stopped when the test
// ends. The 16384 slots are split evenly: node 0 serves 0–5460, node 1
// 5461–10922, node 2 10923–16383.
type Cluster struct {
	// Nodes are the three masters, in slot order.
	Nodes []*Server
	// Replicas are the masters' replicas (StartClusterWithReplicas), in
	// the same order; none for StartCluster.
	Replicas []*Server
}

// clusterNodes is the number of masters StartCluster starts.
const clusterNodes = 3

// StartCluster starts a three-master cluster for tb, forms it (CLUSTER
// ADDSLOTSRANGE on each node, CLUSTER MEET from the first), waits until
// every node reports cluster_state:ok with every slot served, and registers
// the nodes' shutdown with tb.Cleanup. args are added to every node's
// configuration arguments, as for Start (e.g. "--requirepass", pw).
func StartCluster(tb testing.TB, args ...string) *Cluster {
	tb.Helper()
	return startCluster(tb, false, args)
}

// StartClusterWithReplicas starts a cluster as StartCluster does, plus one
// replica of each master (Replicas[i] of Nodes[i]), and waits until every
// replica is in sync: killing a master (Nodes[i].Kill) then makes the
// cluster promote its replica after the node timeout (3 s) and an
// election, a failover as in production.
func StartClusterWithReplicas(tb testing.TB, args ...string) *Cluster {
	tb.Helper()
	return startCluster(tb, true, args)
}

func startCluster(tb testing.TB, replicas bool, args []string) *Cluster {
	tb.Helper()
	c := &Cluster{}
	n := clusterNodes
	if replicas {
		n *= 2
	}
	busPorts := make([]int, n)
	for i := range n {
		// A fresh bus port at each attempt, as the client port.
		srv := startWith(tb, func() ([]string, error) {
			bus, err := freePort()
			if err != nil {
				return nil, fmt.Errorf("redistest: free port: %w", err)
			}
			busPorts[i] = bus
			return append([]string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				"--cluster-port", strconv.Itoa(bus),
				"--cluster-node-timeout", "3000",
				// A test that stops a node must not leave every slot unserved.
				"--cluster-require-full-coverage", "no",
			}, args...), nil
		})
		if i < clusterNodes {
			c.Nodes = append(c.Nodes, srv)
		} else {
			c.Replicas = append(c.Replicas, srv)
		}
	}
	if err := c.form(busPorts); err != nil {
		tb.Fatal(err)
	}
	return c
}

func (c *Cluster) form(busPorts []int) error {
	const slots = 16384
	per := slots / clusterNodes
	for i, n := range c.Nodes {
		lo, hi := i*per, (i+1)*per-1
		if i == clusterNodes-1 {
			hi = slots - 1
		}
		if r, err := do(n.Addr, n.password, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil || r != "+OK" {
			return fmt.Errorf("redistest: CLUSTER ADDSLOTSRANGE on %s: %q %v", n.Addr, r, err)
		}
	}
	first := c.Nodes[0]
	all := append(append([]*Server(nil), c.Nodes...), c.Replicas...)
	for i, n := range all[1:] {
		_, port, _ := net.SplitHostPort(n.Addr)
		if r, err := do(first.Addr, first.password, "CLUSTER", "MEET", "127.0.0.1", port, strconv.Itoa(busPorts[i+1])); err != nil || r != "+OK" {
			return fmt.Errorf("redistest: CLUSTER MEET %s: %q %v", n.Addr, r, err)
		}
	}
	if err := c.replicate(all); err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		bad := ""
		for _, n := range all {
			info, err := do(n.Addr, n.password, "CLUSTER", "INFO")
			if err != nil {
				bad = n.Addr + ": " + err.Error()
				break
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") ||
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(all))) {
				bad = n.Addr + ": " + strings.Join(strings.Fields(info)[:min(6, len(strings.Fields(info)))], " ")
				break
			}
		}
		if bad == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: the cluster did not form within 20s (%s)", bad)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replicate makes each replica replicate its master once every node knows
// every other, and waits until each is in sync.
func (c *Cluster) replicate(all []*Server) error {
	if len(c.Replicas) == 0 {
		return nil
	}
	deadline := time.Now().Add(20 * time.Second)
	for i, r := range c.Replicas {
		m := c.Nodes[i]
		id, err := do(m.Addr, m.password, "CLUSTER", "MYID")
		if err != nil {
			return fmt.Errorf("redistest: CLUSTER MYID on %s: %v", m.Addr, err)
		}
		for {
			// The replica must have learned of its master through gossip.
			reply, err := do(r.Addr, r.password, "CLUSTER", "REPLICATE", id)
			if err == nil && reply == "+OK" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("redistest: CLUSTER REPLICATE on %s: %q %v", r.Addr, reply, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, r := range c.Replicas {
		for {
			info, err := do(r.Addr, r.password, "INFO", "replication")
			if err == nil && strings.Contains(info, "master_link_status:up") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("redistest: replica %s not in sync within 20s", r.Addr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// URL returns the cluster in go-redis's cluster URL form:
// redis://NODE0?addr=NODE1&addr=NODE2 (no credentials).
func (c *Cluster) URL() string {
	var b strings.Builder
	b.WriteString("redis://" + c.Nodes[0].Addr)
	for i, n := range c.Nodes[1:] {
		if i == 0 {
			b.WriteString("?addr=")
		} else {
			b.WriteString("&addr=")
		}
		b.WriteString(n.Addr)
	}
	return b.String()
}

// Addrs returns the nodes' host:port addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// Do sends one command to every node, replicas included (e.g. ACL
// SETUSER, which a cluster does not propagate), and returns the first
// failure's reply.
func (c *Cluster) Do(args ...string) (string, error) {
	var r string
	for _, n := range append(append([]*Server(nil), c.Nodes...), c.Replicas...) {
		var err error
		if r, err = do(n.Addr, n.password, args...); err != nil || strings.HasPrefix(r, "-") {
			return r, err
		}
	}
	return r, nil
}

// Redis is what a test runs against: one server or a cluster.
type Redis interface {
	// URL names the deployment as redisfleet.New and the CLI's -redis take
	// it (no credentials).
	URL() string
	// Addr is the address errors name: the server's, or the cluster's
	// first node's.
	Addr() string
	// Do sends one command to every server (see Cluster.Do).
	Do(args ...string) (string, error)
	// IsCluster reports whether this is a cluster.
	IsCluster() bool
}

type single struct{ *Server }

func (s single) Addr() string    { return s.Server.Addr }
func (s single) IsCluster() bool { return false }

type cluster struct{ *Cluster }

func (c cluster) Addr() string    { return c.Nodes[0].Addr }
func (c cluster) IsCluster() bool { return true }

// AsRedis returns s as a Redis.
func (s *Server) AsRedis() Redis { return single{s} }

// AsRedis returns c as a Redis.
func (c *Cluster) AsRedis() Redis { return cluster{c} }

// Each runs f as two subtests, "server" against one redis-server and
// "cluster" against a three-master cluster, each started for it with
// args (redis-server configuration arguments, as for Start).
func Each(t *testing.T, f func(t *testing.T, r Redis), args ...string) {
	t.Helper()
	t.Run("server", func(t *testing.T) { f(t, Start(t, args...).AsRedis()) })
	t.Run("cluster", func(t *testing.T) { f(t, StartCluster(t, args...).AsRedis()) })
}
