package e2e

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the processes' waiters and the HTTP clients leave
// nothing running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
