package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentstop/agentstop/internal/testutil"
	"github.com/agentstop/agentstop/termination"
)

// TestMain checks that run leaves nothing behind: fleet workers, the
// metrics server and the telemetry providers all stop. No goroutine is
// ignored (goleak already ignores os/signal's own).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var (
	addrRE  = regexp.MustCompile(`metrics on http://(\S+)/metrics`)
	causeRE = regexp.MustCompile(`(?m)^agent_stage_terminations_total\{[^}]*termination_cause="([^"]+)"`)
	// fleetSeries are the fleet's series the quickstart's in-process fleet
	// exports within the run: its operator's stop and block, the
	// summarizer's shared tenant budget crossing pressure and running out.
	// (agent_fleet_errors_total stays at 0: nothing fails; see quietSeries.)
	fleetSeries = map[string]*regexp.Regexp{
		"stopped":                         regexp.MustCompile(`(?m)^agent_fleet_runs_stopped_total(\{[^}]*\})? [1-9]`),
		"rejected blocked":                regexp.MustCompile(`(?m)^agent_fleet_runs_rejected_total\{[^}]*reason="blocked"[^}]*\} [1-9]`),
		"rejected fleet_budget_exhausted": regexp.MustCompile(`(?m)^agent_fleet_runs_rejected_total\{[^}]*reason="fleet_budget_exhausted"[^}]*\} [1-9]`),
		"budget pressure total_tokens":    regexp.MustCompile(`(?m)^agent_fleet_budget_pressure_total\{[^}]*resource="total_tokens"[^}]*\} [1-9]`),
		"budget exhausted total_tokens":   regexp.MustCompile(`(?m)^agent_fleet_budget_exhausted_total\{[^}]*resource="total_tokens"[^}]*\} [1-9]`),
	}
	// treeSeries are the trees' counters (spec §8): the planner's tree
	// budget reached by its analysts, and the live analysts cancelled by
	// the planner's end; and the per-run call histograms of §5.1.
	treeSeries = map[string]*regexp.Regexp{
		"tree limit planner total_tokens": regexp.MustCompile(`(?m)^agent_tree_limits_reached_total\{[^}]*resource="total_tokens"[^}]*stage="planner"[^}]*\} [1-9]`),
		"runs cancelled by a parent":      regexp.MustCompile(`(?m)^agent_tree_runs_cancelled_total\{[^}]*stage="analyst"[^}]*\} [1-9]`),
		"inference calls per run":         regexp.MustCompile(`(?m)^gen_ai_invoke_agent_inference_calls_count\{[^}]*gen_ai_agent_name="analyst"[^}]*\} [1-9]`),
		"tool calls per run":              regexp.MustCompile(`(?m)^gen_ai_invoke_agent_tool_calls_count\{[^}]*gen_ai_agent_name="analyst"[^}]*\} [1-9]`),
	}
	// warningSeries are the warnings of runs that went on: the researcher's
	// stall.warn_at (stall warnings) and its max_tool_calls pressure
	// (count pressure on tool_calls).
	warningSeries = map[string]*regexp.Regexp{
		"stall warning researcher":   regexp.MustCompile(`(?m)^agent_stage_stall_warnings_total\{[^}]*stage="researcher"[^}]*\} [1-9]`),
		"budget pressure tool_calls": regexp.MustCompile(`(?m)^agent_stage_budget_pressure_total\{[^}]*resource="tool_calls"[^}]*stage="researcher"[^}]*\} [1-9]`),
		// The fixer's two kinds of runs side by side on the dashboard: the
		// edit-and-test runs end by themselves, the re-runs of one failing
		// command stop as a stall.
		"fixer natural_completion": regexp.MustCompile(`(?m)^agent_stage_terminations_total\{[^}]*stage="fixer"[^}]*termination_cause="natural_completion"[^}]*\} [1-9]`),
		"fixer stall":              regexp.MustCompile(`(?m)^agent_stage_terminations_total\{[^}]*stage="fixer"[^}]*termination_cause="stall"[^}]*\} [1-9]`),
		// ... and the runs hung on a tool, stopped by its idle limit.
		"fixer idle": regexp.MustCompile(`(?m)^agent_stage_idle_stops_total\{[^}]*stage="fixer"[^}]*\} [1-9]`),
	}
)

// TestQuickstartExposesEveryCause is the acceptance check "go run
// ./examples/quickstart -duration 20s exposes all 13 causes on /metrics":
// it runs the quickstart for at most 20s on a free port, scrapes /metrics
// once a second, and stops as soon as every termination_cause of the
// contract has appeared (with an exemplar, since traces are sampled), and
// so have the in-process fleet's metrics (fleetSeries) and the warnings of
// runs that went on (warningSeries).
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
	out := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- run(ctx, options{listen: "127.0.0.1:0", duration: duration, refresh: 100 * time.Millisecond, drain: 5 * time.Second, feed: 8}, out)
	}()

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
	fleetSeen := map[string]bool{}
	warnSeen := map[string]bool{}
	treeSeen := map[string]bool{}
	for time.Since(start) < duration-time.Second && (len(seen) < len(termination.TagValues()) || len(fleetSeen) < len(fleetSeries) ||
		len(warnSeen) < len(warningSeries) || len(treeSeen) < len(treeSeries)) {
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
		for name, re := range fleetSeries {
			if re.MatchString(text) {
				fleetSeen[name] = true
			}
		}
		for name, re := range warningSeries {
			if re.MatchString(text) {
				warnSeen[name] = true
			}
		}
		for name, re := range treeSeries {
			if re.MatchString(text) {
				treeSeen[name] = true
			}
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
	for name := range fleetSeries {
		assert.True(t, fleetSeen[name], "fleet metric %s not on /metrics after %s", name, took)
	}
	for name := range warningSeries {
		assert.True(t, warnSeen[name], "warning metric %s not on /metrics after %s", name, took)
	}
	for name := range treeSeries {
		assert.True(t, treeSeen[name], "tree metric %s not on /metrics after %s", name, took)
	}
	assert.NotRegexp(t, `(?m)^agent_fleet_errors_total\{[^}]*\} [1-9]`, text, "the in-process fleet reported an error")
	// The fleet's counters are exported at 0 from the start (§5.1): the
	// dashboard's fleet panels show 0, not "No data", when nothing fails.
	for _, op := range []string{"join", "leave", "renew", "reserve", "settle", "stop", "block", "list", "connect", "internal"} {
		assert.Regexp(t, `(?m)^agent_fleet_errors_total\{[^}]*operation="`+op+`"[^}]*\} 0(\.0)?$`, text, "agent_fleet_errors_total{operation=%q} not exported at 0", op)
	}
	assert.Regexp(t, `(?m)^agent_fleet_runs_rejected_total\{[^}]*reason="fleet_unavailable"[^}]*\} 0(\.0)?$`, text, "agent_fleet_runs_rejected_total{reason=\"fleet_unavailable\"} not exported at 0")
	for _, name := range []string{"agent_stage_duration_seconds_bucket", "agent_stage_iterations_bucket", "agent_stage_tool_calls_bucket",
		"agent_stage_tokens_total", "agent_stage_budget_utilization_bucket", "agent_stage_budget_pressure_total", "agent_stage_active"} {
		assert.Contains(t, text, name+"{")
	}

	// Plain output (not a terminal): the summary lines, then the final table.
	final := out.String()
	assert.Contains(t, final, "Why the stages stopped:")
	for _, stage := range []string{"planner", "analyst", "researcher", "coder", "fixer", "critic", "summarizer", "executor"} {
		assert.Contains(t, final, stage)
	}
	assert.NotContains(t, final, "\033[", "no terminal escapes when stdout is not a terminal")
	// One line per stage saying what it does, and a feed of stops with
	// their details.
	for _, spec := range stages {
		assert.Regexp(t, scenarioPattern(spec), final)
	}
	assert.Contains(t, final, "Latest stops:")
	assert.Regexp(t, `(?m)^  stop t=\S+ +\w+ +.+ +→ [a-z_]+: .+$`, final)
	assert.Contains(t, final, "At shutdown: ")
	assert.Contains(t, final, "runs join an in-process fleet")
}

func TestRunRejectsBadOptions(t *testing.T) {
	o := defaultOptions()
	o.listen = "127.0.0.1:0"
	o.duration = -time.Second
	assert.ErrorContains(t, run(context.Background(), o, io.Discard), "-duration")
	o.duration, o.refresh = time.Second, 0
	assert.ErrorContains(t, run(context.Background(), o, io.Discard), "-refresh")
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want func(*options)
		err  string
	}{
		{name: "defaults", want: func(*options) {}},
		{name: "all", args: []string{"-listen", ":0", "-duration", "20s", "-refresh", "100ms", "-drain", "0", "-feed", "3"},
			want: func(o *options) {
				o.listen, o.duration, o.refresh, o.drain, o.feed = ":0", 20*time.Second, 100*time.Millisecond, 0, 3
			}},
		{name: "negative duration", args: []string{"-duration", "-1s"}, err: "-duration must be >= 0, got -1s"},
		{name: "zero refresh", args: []string{"-refresh", "0s"}, err: "-refresh must be > 0, got 0s"},
		{name: "negative drain", args: []string{"-drain", "-2s"}, err: "-drain must be >= 0, got -2s"},
		{name: "feed too long", args: []string{"-feed", "5000"}, err: "-feed must be between 0 and 1000, got 5000"},
		{name: "empty listen", args: []string{"-listen", ""}, err: "-listen must not be empty"},
		{name: "not a duration", args: []string{"-duration", "soon"}, err: `invalid value "soon" for flag -duration: want a duration such as 30m, 90s or 1h30m`},
		{name: "a number without a unit", args: []string{"-refresh", "5"}, err: `invalid value "5" for flag -refresh: want a duration such as 30m, 90s or 1h30m; a number needs a unit: 5s, 5m or 5h`},
		{name: "unknown flag", args: []string{"-verbose"}, err: "flag provided but not defined: -verbose"},
		{name: "argument", args: []string{"run"}, err: `unexpected argument "run"`},
		{name: "redis", args: []string{"-redis", "redis://127.0.0.1:6379/0"}, want: func(o *options) { o.redis = "redis://127.0.0.1:6379/0" }},
		{name: "not a redis URL", args: []string{"-redis", "http://127.0.0.1:6379"}, err: "-redis: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			got, err := parseFlags(tc.args, &stderr)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			want := defaultOptions()
			tc.want(&want)
			assert.Equal(t, want, got)
			assert.Empty(t, stderr.String())
		})
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	var stderr bytes.Buffer
	_, err := parseFlags([]string{"-h"}, &stderr)
	require.ErrorIs(t, err, flag.ErrHelp)
	for _, f := range []string{"-listen", "-duration", "-refresh", "-drain", "-feed", "-redis"} {
		assert.Contains(t, stderr.String(), "  "+f+" ")
	}
}

// TestShutdownDrainsRunsInFlight: at shutdown, the runs in flight finish by
// their own cause; none is counted as cancelled (only the executor cancels
// on purpose), and none is interrupted when the drain timeout is long
// enough. Before, every run in flight ended as cancelled.
func TestShutdownDrainsRunsInFlight(t *testing.T) {
	f, err := newFleet(nil, inProcess(t), 8)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	f.run(ctx)
	waitInFlight(t, f.tally, 8)
	cancel()
	f.wait(10 * time.Second)

	f.tally.mu.Lock()
	defer f.tally.mu.Unlock()
	assert.Empty(t, f.tally.interrupted, "runs interrupted although -drain was long enough")
	assert.Positive(t, f.tally.drained, "no run finished after the shutdown began")
	assert.Zero(t, f.tally.active)
	for stage, m := range f.tally.counts {
		// The executor's runs are cancelled on purpose, and so are the
		// analysts the planner's tree budget ends (reason parent).
		if stage != "executor" && stage != delegateStage {
			assert.Zero(t, m["cancelled"], "stage %s: runs counted as cancelled", stage)
		}
	}
}

// TestShutdownReportsInterruptedRunsApart: with no time to drain, the runs
// in flight are interrupted and reported apart, not counted as cancelled.
func TestShutdownReportsInterruptedRunsApart(t *testing.T) {
	f, err := newFleet(nil, inProcess(t), 8)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	f.run(ctx)
	waitInFlight(t, f.tally, 8)
	cancel()
	f.wait(0)

	var out bytes.Buffer
	(&tableWriter{out: &out, tally: f.tally}).final()
	f.tally.mu.Lock()
	defer f.tally.mu.Unlock()
	assert.NotEmpty(t, f.tally.interrupted)
	for stage, m := range f.tally.counts {
		// The executor's runs are cancelled on purpose, and so are the
		// analysts the planner's tree budget ends (reason parent).
		if stage != "executor" && stage != delegateStage {
			assert.Zero(t, m["cancelled"], "stage %s: runs counted as cancelled", stage)
		}
	}
	assert.Regexp(t, `still running after -drain (was|were) interrupted \(not counted above\): (\w+=\d+ ?)+\n`, out.String())
}

func waitInFlight(t *testing.T, tl *tally, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		return tl.active >= n
	}, 10*time.Second, time.Millisecond, "fewer than %d runs in flight at once", n)
}

// costly is what 0.00029 and 0.00145 add up to in float64:
// 0.0017399999999999998.
var costly = func() float64 { a, b := 0.00029, 0.00145; return a + b }()

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  termination.Result
		info runInfo
		want string
	}{
		{"completed", termination.Result{Cause: termination.Completed{Condition: "text_mention", Detail: "APPROVE"}}, runInfo{},
			`text_mention matched "APPROVE"`},
		{"natural", termination.Result{Cause: termination.NaturalCompletion{}}, runInfo{}, "the loop ended by itself"},
		{"handoff", termination.Result{Cause: termination.HandoffRequested{Source: "planner", Target: "coder"}}, runInfo{},
			"planner handed off to coder"},
		{"iterations", termination.Result{Cause: termination.MaxIterationsReached{Limit: 6, Count: 7}}, runInfo{}, "7 turns, limit 6"},
		{"tool calls", termination.Result{Cause: termination.MaxToolCallsReached{Limit: 5, Count: 6}}, runInfo{}, "6 tool calls, limit 5"},
		{"per-tool calls", termination.Result{Cause: termination.MaxToolCallsReached{Limit: 2, Count: 3, Tool: "web_fetch"}}, runInfo{},
			"3 calls of web_fetch, limit 2"},
		{"budget exhausted", termination.Result{Cause: termination.BudgetExhausted{Resource: "total_tokens", Used: 6000, Limit: 5000},
			Warnings: []termination.Cause{termination.BudgetPressure{Resource: "total_tokens", Threshold: 0.7, Used: 4000, Limit: 5000}}},
			runInfo{}, "total_tokens budget spent: 6000 of 5000 (after warning: total_tokens at 4000 of 5000, past the 70% pressure mark)"},
		{"held, then raised", termination.Result{Cause: termination.NaturalCompletion{},
			Warnings: []termination.Cause{termination.MaxIterationsReached{Limit: 3, Count: 4}}},
			runInfo{raised: true}, "the loop ended by itself (held at 4 turns, limit 3, then raised by 2 turns)"},
		{"held, raised, held again", termination.Result{Cause: termination.MaxIterationsReached{Limit: 5, Count: 6},
			Warnings: []termination.Cause{termination.MaxIterationsReached{Limit: 3, Count: 4}, termination.MaxIterationsReached{Limit: 5, Count: 6}}},
			runInfo{raised: true}, "6 turns, limit 5 (held at 4 turns, limit 3, then raised by 2 turns; held again at 6 turns, limit 5)"},
		{"held until the hold timed out", termination.Result{Cause: termination.MaxIterationsReached{Limit: 3, Count: 4},
			Warnings: []termination.Cause{termination.BudgetPressure{Resource: "cost", Threshold: 0.5, Used: 1, Limit: 2},
				termination.MaxIterationsReached{Limit: 3, Count: 4}}},
			runInfo{}, "4 turns, limit 3 (after warning: cost at $1 of $2, past the 50% pressure mark) (held at 4 turns, limit 3)"},
		{"fleet cost", termination.Result{Cause: termination.BudgetExhausted{Resource: "cost", Used: 50.5, Limit: 50, Scope: "fleet"}},
			runInfo{}, "fleet cost budget spent: $50.5 of $50"},
		{"cost to 6 significant digits", termination.Result{Cause: termination.BudgetExhausted{Resource: "cost", Used: costly, Limit: 0.0015}},
			runInfo{}, "cost budget spent: $0.00174 of $0.0015"},
		{"stall names the tool", termination.Result{Cause: termination.StallDetected{Signal: "repeated_tool_call", Repeats: 3}},
			runInfo{lastTool: "web_search"}, "web_search repeated 3 times with the same arguments (repeated_tool_call)"},
		{"repeated result names the tool", termination.Result{Cause: termination.StallDetected{Signal: "repeated_result", Repeats: 3}},
			runInfo{lastTool: "run_tests"}, "run_tests gave the same result 3 times (repeated_result)"},
		{"cycle", termination.Result{Cause: termination.StallDetected{Signal: "cycle", Repeats: 2, Period: 2}}, runInfo{lastTool: "x"},
			"cycle, 2 repeats, period 2"},
		{"timeout", termination.Result{Cause: termination.Timeout{Limit: 2 * time.Second, Elapsed: 2*time.Second + 300*time.Microsecond}},
			runInfo{}, "ran 2s, limit 2s"},
		{"timeout at its limit", termination.Result{Cause: termination.Timeout{Limit: 2 * time.Second, Elapsed: 2 * time.Second}},
			runInfo{}, "ran for its 2s limit"},
		{"idle", termination.Result{Cause: termination.Timeout{Limit: time.Second, Elapsed: time.Second, Idle: true}},
			runInfo{}, "no event for 1s (idle limit)"},
		{"stopped", termination.Result{Cause: termination.Cancelled{Reason: "external", Detail: "operator pressed Stop"}}, runInfo{},
			"external: operator pressed Stop"},
		{"caller", termination.Result{Cause: termination.Cancelled{Reason: "context"}}, runInfo{}, "context"},
		{"failed", termination.Result{Cause: termination.Failed{Reason: "error_threshold", Err: "exit status 1"}}, runInfo{},
			"error_threshold: exit status 1"},
		{"skipped", termination.Result{Cause: termination.Skipped{Reason: "no changes to deploy"}}, runInfo{}, "no changes to deploy"},
		{"custom", termination.Result{Cause: termination.Custom{Reason: "dangerous_tool", Properties: map[string]any{"tool": "drop_database"}}},
			runInfo{}, "dangerous_tool tool=drop_database"},
		{"all", termination.Result{Cause: termination.All{Causes: []termination.Cause{termination.MaxIterationsReached{Limit: 1, Count: 1},
			termination.NaturalCompletion{}}}}, runInfo{}, "all of: max_iterations: 1 turn, limit 1; natural_completion: the loop ended by itself"},
		{"none", termination.Result{}, runInfo{}, "no cause"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, describe(tc.res, tc.info))
		})
	}
}

func TestRunReportsListenError(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	o := defaultOptions()
	o.listen, o.duration = "256.0.0.1:bad", time.Second
	err := run(context.Background(), o, io.Discard)
	assert.ErrorContains(t, err, "listen on 256.0.0.1:bad")
}

// TestReadmeListsEveryFlag: the README's quickstart section has a row for
// every flag that -h lists.
func TestReadmeListsEveryFlag(t *testing.T) {
	var help bytes.Buffer
	_, err := parseFlags([]string{"-h"}, &help)
	require.ErrorIs(t, err, flag.ErrHelp)
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## The quickstart\n")
	require.True(t, ok, "README.md has no \"## The quickstart\" section")
	section, _, _ = strings.Cut(section, "\n## ")
	flags := regexp.MustCompile(`(?m)^  -(\w+)`).FindAllStringSubmatch(help.String(), -1)
	require.NotEmpty(t, flags)
	for _, f := range flags {
		assert.Regexp(t, "(?m)^\\| `-"+f[1]+"[ `]", section, "flag -%s is not in the README's quickstart table", f[1])
	}
}

// TestShutdownReportAgrees: the shutdown line agrees its nouns and verbs
// with the counts ("1 run ... was", not "1 runs ... were").
func TestShutdownReportAgrees(t *testing.T) {
	for _, tc := range []struct {
		drained     int
		interrupted map[string]int
		want        string
	}{
		{1, map[string]int{"coder": 1}, "\nAt shutdown: 1 run in flight finished by its own cause (counted above); 1 still running after -drain was interrupted (not counted above): coder=1\n"},
		{2, map[string]int{"coder": 1, "fixer": 2}, "\nAt shutdown: 2 runs in flight finished by their own cause (counted above); 3 still running after -drain were interrupted (not counted above): coder=1 fixer=2\n"},
		{0, map[string]int{}, "\nAt shutdown: 0 runs in flight finished by their own cause (counted above); none was interrupted.\n"},
	} {
		tl := newTally(0)
		tl.stopping, tl.drained, tl.interrupted = true, tc.drained, tc.interrupted
		var out bytes.Buffer
		(&tableWriter{out: &out, tally: tl}).shutdownReport()
		assert.Equal(t, tc.want, out.String())
	}
}

// scenarioPattern matches a stage's entry in the list of stages: its name,
// its wrapper, and its description, folded over lines or not.
func scenarioPattern(spec stageSpec) *regexp.Regexp {
	words := strings.Fields(spec.scenario)
	for i, w := range words {
		words[i] = regexp.QuoteMeta(w)
	}
	return regexp.MustCompile(`(?m)^  ` + spec.name + ` +\S+ +` + strings.Join(words, `\s+`) + `$`)
}

// TestScenariosWrap: the stages' descriptions (some over 300 characters)
// are folded to the output's width — 80 when it is not a terminal —
// beside their stage, or under it when the width leaves no room; no word
// is lost or cut.
func TestScenariosWrap(t *testing.T) {
	for _, width := range []int{0, 80, 120, 40} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			var out bytes.Buffer
			(&tableWriter{out: &out, width: width, tally: newTally(0)}).scenarios()
			limit := width
			if width == 0 {
				limit = 80
			}
			longest := 0
			for line := range strings.Lines(out.String()) {
				line = strings.TrimSuffix(line, "\n")
				assert.Equal(t, line, strings.TrimRight(line, " "), "no trailing blanks")
				n := utf8.RuneCountInString(line)
				assert.LessOrEqual(t, n, limit, "%q", line)
				longest = max(longest, n)
			}
			assert.Greater(t, longest, limit*3/4, "the width is used")
			for _, spec := range stages {
				if width >= 80 || width == 0 {
					assert.Regexp(t, scenarioPattern(spec), out.String())
				}
				assert.Contains(t, strings.Join(strings.Fields(out.String()), " "), spec.scenario, "every word, in order")
			}
		})
	}
}
