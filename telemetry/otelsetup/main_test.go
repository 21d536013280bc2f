package otelsetup_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the SDK's batch
// span processors, periodic readers and OTLP clients must all stop on
// Shutdown. No goroutine is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
