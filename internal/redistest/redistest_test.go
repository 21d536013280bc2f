package redistest

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// TestStartOnATakenPort: a port taken between freePort and redis-server's
// bind (here by another test's server, which would answer the new one's
// PING) is detected and the server starts on another port; for a cluster
// node, its bus port too.
func TestStartOnATakenPort(t *testing.T) {
	other := Start(t)
	_, taken, _ := net.SplitHostPort(other.Addr)
	takenPort, _ := strconv.Atoi(taken)
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) *Server
		calls int // the freePort call that hands out the taken port
	}{
		{"client port", func(t *testing.T) *Server { return Start(t) }, 1},
		{"cluster bus port", func(t *testing.T) *Server { return StartCluster(t).Nodes[0] }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			freePort = func() (int, error) {
				n++
				if n == tc.calls {
					return takenPort, nil
				}
				return pickFreePort()
			}
			t.Cleanup(func() { freePort = pickFreePort })
			s := tc.start(t)
			if s.Addr == other.Addr {
				t.Fatalf("started on the taken port %s", s.Addr)
			}
			if info, err := s.Do("INFO", "server"); err != nil || !strings.Contains(info, "process_id:") {
				t.Fatalf("INFO server: %q, %v", info, err)
			}
			if !s.ours(s.cmd.Process.Pid) {
				t.Error("the server answering on its address is not the one started")
			}
		})
	}
}
