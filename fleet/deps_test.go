package fleet_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoRedisInCore: termination, middleware and fleet import nothing of
// Redis (contract §7); only fleet/redisfleet may.
func TestNoRedisInCore(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps",
		"github.com/agentstop/agentstop/termination",
		"github.com/agentstop/agentstop/middleware",
		"github.com/agentstop/agentstop/fleet").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages: %s", len(deps), out)
	}
	for _, p := range deps {
		if strings.Contains(strings.ToLower(p), "redis") {
			t.Errorf("the core imports %s", p)
		}
	}
}
