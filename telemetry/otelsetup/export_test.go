package otelsetup

import "time"

// DefaultShutdownTimeout bounds Shutdown without a deadline.
const DefaultShutdownTimeout = defaultShutdownTimeout

// DefaultCardinalityLimit is the series limit Setup sets by default.
const DefaultCardinalityLimit = defaultCardinalityLimit

// SetExportTimings shortens the span export gate's timings for a test and
// returns a func that restores them. Telemetry built before the call keeps
// its own.
func SetExportTimings(stall, retry, retryMax time.Duration) (restore func()) {
	s, r, m := exportStall, exportRetry, exportRetryMax
	exportStall, exportRetry, exportRetryMax = stall, retry, retryMax
	return func() { exportStall, exportRetry, exportRetryMax = s, r, m }
}

// TracesDetached reports whether span export is paused (no batch span
// processor registered).
func TracesDetached(t *Telemetry) bool { return t.gate != nil && t.gate.detached() }

// SpanProcessorsStarted is how many batch span processors the gate has
// registered so far (one, plus one per retry).
func SpanProcessorsStarted(t *Telemetry) int {
	t.gate.mu.Lock()
	defer t.gate.mu.Unlock()
	return t.gate.processors
}
