package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentstop/agentstop/termination"
)

// TestMain checks that run leaves nothing behind: fleet workers, the
// metrics server and the telemetry providers all stop. No goroutine is
// ignored (goleak already ignores os/signal's own).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	addrRE  = regexp.MustCompile(`metrics on http://(\S+)/metrics`)
	causeRE = regexp.MustCompile(`(?m)^agent_stage_terminations_total\{[^}]*termination_cause="([^"]+)"`)
)

// TestQuickstartExposesEveryCause is the acceptance check "go run
// ./examples/quickstart -duration 20s exposes all 13 causes on /metrics":
// it runs the quickstart for at most 20s on a free port, scrapes /metrics
// once a second, and stops as soon as every termination_cause of the
// contract has appeared (with an exemplar, since traces are sampled).
func TestQuickstartExposesEveryCause(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet for up to 20s")
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER",
		"OTEL_METRICS_EXPORTER", "OTEL_TRACES_SAMPLER"} {
		t.Setenv(k, "")
	}
	const duration = 20 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- run(ctx, "127.0.0.1:0", duration, 100*time.Millisecond, out) }()

	var addr string
	require.Eventually(t, func() bool {
		if m := addrRE.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	}, 5*time.Second, 10*time.Millisecond, "no address printed: %q", out.String())

	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	seen := map[string]bool{}
	var text string
	exemplar := false
	for time.Since(start) < duration-time.Second && len(seen) < len(termination.TagValues()) {
		time.Sleep(time.Second)
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
		require.NoError(t, err)
		req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
		resp, err := client.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		text = string(b)
		for _, m := range causeRE.FindAllStringSubmatch(text, -1) {
			seen[m[1]] = true
		}
		exemplar = exemplar || regexp.MustCompile(`(?m)^agent_stage_terminations_total\{.*\} \S+ # \{[^}]*trace_id="[0-9a-f]{32}"`).MatchString(text)
	}
	took := time.Since(start)
	cancel() // Ctrl-C
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
	t.Logf("all causes after %s", took.Round(100*time.Millisecond))
	for _, tag := range termination.TagValues() {
		assert.True(t, seen[tag], "termination_cause=%q not on /metrics after %s", tag, took)
	}
	for tag := range seen {
		assert.Contains(t, termination.TagValues(), tag, "a termination_cause outside the closed set")
	}
	assert.True(t, exemplar, "no trace exemplar on agent_stage_terminations_total")
	for _, name := range []string{"agent_stage_duration_seconds_bucket", "agent_stage_iterations_bucket", "agent_stage_tool_calls_bucket",
		"agent_stage_tokens_total", "agent_stage_budget_utilization_bucket", "agent_stage_budget_pressure_total", "agent_stage_active"} {
		assert.Contains(t, text, name+"{")
	}

	// Plain output (not a terminal): the summary lines, then the final table.
	final := out.String()
	assert.Contains(t, final, "Why the stages stopped:")
	for _, stage := range []string{"planner", "researcher", "coder", "critic", "summarizer", "executor"} {
		assert.Contains(t, final, stage)
	}
	assert.NotContains(t, final, "\033[", "no terminal escapes when stdout is not a terminal")
}

func TestRunRejectsBadFlags(t *testing.T) {
	assert.ErrorContains(t, run(context.Background(), "127.0.0.1:0", -time.Second, time.Second, io.Discard), "-duration")
	assert.ErrorContains(t, run(context.Background(), "127.0.0.1:0", time.Second, 0, io.Discard), "-refresh")
}

func TestRunReportsListenError(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	err := run(context.Background(), "256.0.0.1:bad", time.Second, time.Second, io.Discard)
	assert.ErrorContains(t, err, "listen on 256.0.0.1:bad")
}
