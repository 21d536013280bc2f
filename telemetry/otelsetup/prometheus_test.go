package otelsetup_test

import (
	"bufio"
	"context"
	"flag"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentstop/agentstop/internal/testutil"
	"github.com/agentstop/agentstop/middleware"
	"github.com/agentstop/agentstop/telemetry/otelsetup"
	"github.com/agentstop/agentstop/termination"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// promRun sets up Setup's Prometheus exporter (not global), runs two
// deterministic stage runs through it, and returns the OpenMetrics
// exposition and the recorded spans.
func promRun(t *testing.T, opts ...otelsetup.Option) (string, *tracetest.SpanRecorder) {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	tel, err := otelsetup.Setup(context.Background(), append([]otelsetup.Option{
		otelsetup.WithoutGlobal(), otelsetup.WithSpanProcessor(spans)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })

	st, err := middleware.New("planner", middleware.WithParticipant(tel.Recorder()), middleware.WithPolicy(termination.MustParsePolicy(
		"token_budget: {total: 1000, pressure: 0.5, grace: 1}\nmax_tool_calls: 1\n")))
	require.NoError(t, err)
	testutil.Observe(st, testutil.Msg("p", "a", 600, 0), testutil.Msg("p", "b", 100, 50))
	testutil.Observe(st, testutil.Call("t", `{}`), testutil.Result("t", ""), testutil.Call("t", `{}`))

	return scrape(t, tel.Handler()), spans
}

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0; charset=utf-8")
	resp, err := srv.Client().Do(req) // closed with srv, so no idle connection outlives the test
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "application/openmetrics-text")
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// sample is one line of an exposition.
type sample struct {
	name     string
	labels   map[string]string
	value    string
	exemplar map[string]string // nil: none
}

var (
	sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)(?: # \{([^}]*)\} .*)?$`)
	labelRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

func parseLabels(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range labelRE.FindAllStringSubmatch(s, -1) {
		m[kv[1]] = kv[2]
	}
	return m
}

// samples parses the samples of an exposition (comments skipped).
func samples(t *testing.T, text string) []sample {
	t.Helper()
	var out []sample
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if strings.HasPrefix(l, "#") || l == "" {
			continue
		}
		m := sampleRE.FindStringSubmatch(l)
		require.NotNil(t, m, "unparsable line %q", l)
		s := sample{name: m[1], labels: parseLabels(m[2]), value: m[3]}
		if m[4] != "" {
			s.exemplar = parseLabels(m[4])
		}
		out = append(out, s)
	}
	return out
}

// find returns the samples named name whose labels include want.
func find(all []sample, name string, want map[string]string) []sample {
	var out []sample
next:
	for _, s := range all {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

type labels = map[string]string

// TestPrometheusNames finds the Prometheus names and labels of spec §5 in
// the exposition, and a trace exemplar pointing at the run's span.
func TestPrometheusNames(t *testing.T) {
	text, spans := promRun(t)
	all := samples(t, text)
	for _, re := range []string{
		`(?m)^# TYPE agent_stage_terminations counter$`,
		`(?m)^# TYPE agent_stage_duration_seconds histogram$`,
		`(?m)^# TYPE agent_stage_iterations histogram$`,
		`(?m)^# TYPE agent_stage_tool_calls histogram$`,
		`(?m)^# TYPE agent_stage_tokens counter$`,
		`(?m)^# TYPE agent_stage_budget_utilization histogram$`,
		`(?m)^# TYPE agent_stage_budget_pressure counter$`,
		`(?m)^# TYPE agent_stage_active gauge$`,
		`(?m)^# TYPE gen_ai_invoke_agent_duration_seconds histogram$`,
		`(?m)^# TYPE gen_ai_execute_tool_duration_seconds histogram$`,
		`(?m)^# EOF$`,
	} {
		assert.Regexp(t, regexp.MustCompile(re), text)
	}
	failed := labels{"stage": "planner", "termination_cause": "max_tool_calls", "outcome": "failed"}
	pressured := labels{"stage": "planner", "termination_cause": "budget_pressure", "outcome": "succeeded"}
	with := func(base labels, kv ...string) labels {
		m := maps.Clone(base)
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	one := func(name string, want labels, value string) sample {
		t.Helper()
		got := find(all, name, want)
		require.Len(t, got, 1, "%s%v in\n%s", name, want, text)
		if value != "" {
			assert.Equal(t, value, got[0].value, "%s%v", name, want)
		}
		return got[0]
	}
	term := one("agent_stage_terminations_total", failed, "1.0")
	one("agent_stage_terminations_total", pressured, "1.0")
	one("agent_stage_duration_seconds_bucket", with(failed, "le", "409.6"), "1")
	one("agent_stage_duration_seconds_count", failed, "1")
	one("agent_stage_duration_seconds_sum", failed, "")
	cause := labels{"stage": "planner", "termination_cause": "budget_pressure"}
	one("agent_stage_iterations_bucket", with(cause, "le", "1.0"), "0")
	one("agent_stage_iterations_bucket", with(cause, "le", "2.0"), "1")
	one("agent_stage_tool_calls_bucket", with(cause, "le", "1024.0"), "1")
	one("agent_stage_tool_calls_bucket", labels{"termination_cause": "max_tool_calls", "le": "1.0"}, "0")
	one("agent_stage_tokens_total", labels{"stage": "planner", "token_type": "input"}, "700.0")
	one("agent_stage_tokens_total", labels{"stage": "planner", "token_type": "output"}, "50.0")
	one("agent_stage_budget_utilization_bucket", labels{"stage": "planner", "resource": "total_tokens", "le": "0.75"}, "2")
	one("agent_stage_budget_pressure_total", labels{"stage": "planner", "resource": "total_tokens"}, "1.0")
	one("agent_stage_active", labels{"stage": "planner"}, "0.0")
	one("gen_ai_invoke_agent_duration_seconds_count", labels{"gen_ai_operation_name": "invoke_agent", "gen_ai_agent_name": "planner",
		"error_type": "max_tool_calls"}, "1")
	one("gen_ai_execute_tool_duration_seconds_bucket", labels{"gen_ai_tool_name": "t", "le": "81.92"}, "1")

	// Every agentstop sample has only the contract's labels (plus the
	// exporter's scope labels and le).
	allowed := []string{"stage", "termination_cause", "outcome", "token_type", "resource", "le",
		"otel_scope_name", "otel_scope_version", "otel_scope_schema_url"}
	for _, s := range all {
		if !strings.HasPrefix(s.name, "agent_stage_") {
			continue
		}
		for k, v := range s.labels {
			assert.Contains(t, allowed, k, "label of %s", s.name)
			if k == "termination_cause" {
				assert.Contains(t, termination.TagValues(), v)
			}
		}
	}

	// The exemplar of the failed run's termination carries its trace.
	var span sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == "termination_cause" && kv.Value.AsString() == "max_tool_calls" {
				span = s
			}
		}
	}
	require.NotNil(t, span)
	require.NotNil(t, term.exemplar, "no exemplar on the terminations counter:\n%s", text)
	assert.Equal(t, span.SpanContext().TraceID().String(), term.exemplar["trace_id"])
	assert.Equal(t, span.SpanContext().SpanID().String(), term.exemplar["span_id"])
	dur := find(all, "agent_stage_duration_seconds_bucket", with(failed, "le", "0.1"))
	require.Len(t, dur, 1)
	require.NotNil(t, dur[0].exemplar, "no exemplar on the duration histogram")
	assert.Equal(t, span.SpanContext().TraceID().String(), dur[0].exemplar["trace_id"])
}

// TestNoExemplarWhenNotSampled: with a sampler that drops every trace, the
// exposition carries no exemplar.
func TestNoExemplarWhenNotSampled(t *testing.T) {
	text, spans := promRun(t, otelsetup.WithSampler(sdktrace.NeverSample()))
	assert.Empty(t, spans.Started())
	got := find(samples(t, text), "agent_stage_terminations_total", labels{"termination_cause": "max_tool_calls"})
	require.Len(t, got, 1)
	assert.Nil(t, got[0].exemplar)
	assert.NotContains(t, text, "trace_id")
	assert.NotContains(t, text, " # {")
}

// TestPrometheusExposition compares the agentstop part of the exposition
// of a deterministic run with testdata/exposition.golden, promhttp style,
// after normalising what changes from run to run: exemplars and durations.
// go test ./telemetry -run TestPrometheusExposition -update rewrites it.
func TestPrometheusExposition(t *testing.T) {
	text, _ := promRun(t)
	got := normalise(text)
	path := filepath.Join("testdata", "exposition.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), got)
}

var (
	exemplarRE = regexp.MustCompile(` # \{[^}]*\} \S+( \S+)?$`)
	durationRE = regexp.MustCompile(`^(agent_stage_duration_seconds_sum\{[^}]*\}) \S+$`)
	versionRE  = regexp.MustCompile(`otel_scope_version="[^"]*"`)
)

// normalise keeps the agentstop families, drops _created samples, and
// replaces exemplars, duration sums and the scope version. The registry
// already orders families by name and series by labels.
func normalise(text string) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(l, "# HELP "), "# TYPE "), "# UNIT "), "agent_stage_") {
			continue
		}
		if strings.Contains(l, "_created{") {
			continue
		}
		l = exemplarRE.ReplaceAllString(l, " # {EXEMPLAR}")
		l = durationRE.ReplaceAllString(l, "$1 DURATION")
		l = versionRE.ReplaceAllString(l, `otel_scope_version="VERSION"`)
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n") + "\n"
}
