package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

const (
	// scrapeInterval is how often the test Prometheus scrapes and evaluates
	// rules. Grafana's $__rate_interval is derived from it.
	scrapeInterval = time.Second
	// dataDeadline bounds the wait for every query to return data. The
	// quickstart produces every cause within 15s.
	dataDeadline = 75 * time.Second
	// alertDeadline bounds the wait for the alerts to reach the webhook
	// receiver once every query returns data.
	alertDeadline = 60 * time.Second
	// alertForInTest replaces every alert's `for:` duration in the test.
	alertForInTest = "2s"
)

func TestEndToEnd(t *testing.T) {
	if os.Getenv("AGENTSTOP_E2E") != "1" {
		t.Skip("end-to-end test against a real Prometheus: run `bash dashboards/test.sh` (or set AGENTSTOP_E2E=1 with prometheus on PATH)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Second)
	defer cancel()
	root := repoRoot(t)
	tmp := t.TempDir()

	promBin := os.Getenv("AGENTSTOP_E2E_PROMETHEUS")
	if promBin == "" {
		promBin = "prometheus"
	}
	if _, err := exec.LookPath(promBin); err != nil {
		t.Fatalf("prometheus not found (%v): run dashboards/test.sh, which installs it", err)
	}

	amBin := os.Getenv("AGENTSTOP_E2E_ALERTMANAGER")
	if amBin == "" {
		amBin = "prometheus-alertmanager" // Debian's name
		if _, err := exec.LookPath(amBin); err != nil {
			amBin = "alertmanager"
		}
	}
	if _, err := exec.LookPath(amBin); err != nil {
		t.Fatalf("alertmanager not found (%v): run dashboards/test.sh, which installs Debian's prometheus-alertmanager", err)
	}

	// alertlog, the demo stack's webhook receiver, built from this tree.
	alertlogBin := filepath.Join(tmp, "alertlog")
	build := exec.CommandContext(ctx, "go", "build", "-o", alertlogBin, "./examples/alertlog")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/alertlog: %v\n%s", err, out)
	}

	qsBin := os.Getenv("AGENTSTOP_E2E_QUICKSTART")
	if qsBin == "" {
		qsBin = filepath.Join(tmp, "quickstart")
		build := exec.CommandContext(ctx, "go", "build", "-o", qsBin, "./examples/quickstart")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build ./examples/quickstart: %v\n%s", err, out)
		}
	}

	// The quickstart: metrics on a free loopback port; it stops by itself
	// after -duration even if this test dies before its cleanup.
	qsAddr := freeAddr(t)
	qsEnv := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_EXPORTER_OTLP_") {
			qsEnv = append(qsEnv, kv) // no trace export to anywhere
		}
	}
	start(t, "quickstart", tmp, qsEnv, qsBin, "-listen", qsAddr, "-duration", "5m")
	metricsURL := "http://" + qsAddr + "/metrics"
	waitFor(t, ctx, 60*time.Second, "quickstart /metrics", func() error {
		_, err := httpGet(ctx, metricsURL, nil)
		return err
	})

	// alertlog and Alertmanager: dashboards/alertmanager/alertmanager.yml
	// with the receivers' URL pointed at this alertlog and the group
	// timings shortened.
	alertlogAddr := freeAddr(t)
	start(t, "alertlog", tmp, os.Environ(), alertlogBin, "-listen", alertlogAddr)
	alertsURL := "http://" + alertlogAddr + "/api/alerts"
	waitFor(t, ctx, 30*time.Second, "alertlog", func() error {
		_, err := httpGet(ctx, alertsURL, nil)
		return err
	})
	amCfg, err := alertmanagerConfigForTest(readFile(t, "dashboards", "alertmanager", "alertmanager.yml"), "http://"+alertlogAddr+"/webhook")
	if err != nil {
		t.Fatal(err)
	}
	amCfgPath := filepath.Join(tmp, "alertmanager.yml")
	if err := os.WriteFile(amCfgPath, amCfg, 0o644); err != nil {
		t.Fatal(err)
	}
	amAddr := freeAddr(t)
	start(t, "alertmanager", tmp, os.Environ(), amBin,
		"--config.file="+amCfgPath,
		"--storage.path="+filepath.Join(tmp, "alertmanager"),
		"--web.listen-address="+amAddr,
		"--cluster.listen-address=", // no gossip port: a single instance
		"--log.level=warn",
	)
	waitFor(t, ctx, 60*time.Second, "alertmanager ready", func() error {
		_, err := httpGet(ctx, "http://"+amAddr+"/-/ready", nil)
		return err
	})

	// The alerts with every `for:` shortened, so that they fire within
	// the test.
	alerts, err := alertsForTest(readFile(t, "dashboards", "prometheus", "alerts.yaml"), alertForInTest)
	if err != nil {
		t.Fatal(err)
	}
	alertsPath := filepath.Join(tmp, "alerts.yaml")
	if err := os.WriteFile(alertsPath, alerts, 0o644); err != nil {
		t.Fatal(err)
	}

	// Prometheus: scrapes the quickstart every second, loads the rules,
	// sends alerts to the Alertmanager.
	promAddr := freeAddr(t)
	cfg := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
alerting:
  alertmanagers:
    - static_configs:
        - targets: [%[5]q]
rule_files:
  - %[2]q
  - %[3]q
scrape_configs:
  - job_name: agentstop-quickstart
    static_configs:
      - targets: [%[4]q]
`, scrapeInterval, filepath.Join(root, "dashboards", "prometheus", "rules.yaml"), alertsPath, qsAddr, amAddr)
	cfgPath := filepath.Join(tmp, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, "prometheus", tmp, os.Environ(), promBin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(tmp, "tsdb"),
		"--web.listen-address="+promAddr,
		"--enable-feature=exemplar-storage",
		"--log.level=warn",
	)
	prom := &promAPI{base: "http://" + promAddr}
	waitFor(t, ctx, 60*time.Second, "prometheus ready", func() error {
		_, err := httpGet(ctx, prom.base+"/-/ready", nil)
		return err
	})
	started := time.Now()

	rules := loadRules(t)
	records := map[string]bool{}
	for _, r := range rules {
		if r.Record != "" {
			records[r.Record] = true
		}
	}
	dashboards := loadDashboards(t)

	// Wait until every panel query and recording rule returns data, then
	// report whatever still does not.
	type pending struct {
		name    string
		eval    func(vars map[string]string, now time.Time) (bool, error)
		needsOK bool     // must return data, not only succeed
		reads   []string // the raw metrics it reads
	}
	reads := func(expr string) []string {
		e, err := substitute(expr, lintVars)
		if err != nil {
			return nil
		}
		metrics, _ := exprNames(e)
		return metrics
	}
	var checks []pending
	for _, d := range dashboards {
		for _, v := range d.Templating.List {
			match, label, ok := parseLabelValues(v.queryText())
			if !ok {
				continue
			}
			checks = append(checks, pending{
				name: d.path + " / variable $" + v.Name, needsOK: true,
				eval: func(vars map[string]string, now time.Time) (bool, error) {
					m, err := substitute(match, vars)
					if err != nil {
						return false, err
					}
					vals, err := prom.labelValues(ctx, label, m, started.Add(-time.Minute), now)
					return len(vals) > 0, err
				},
			})
		}
		for _, q := range d.queries() {
			checks = append(checks, pending{
				name: q.String(), needsOK: true, reads: reads(q.target.Expr),
				eval: func(vars map[string]string, now time.Time) (bool, error) {
					e, err := substitute(q.target.Expr, vars)
					if err != nil {
						return false, err
					}
					// Every query must also be a valid instant query.
					instant, err := prom.query(ctx, e, now)
					if err != nil || q.target.Instant {
						return instant, err
					}
					return prom.queryRange(ctx, e, started, now, scrapeInterval)
				},
			})
		}
	}
	for _, r := range rules {
		checks = append(checks, pending{
			name: r.File + " / " + r.name(), needsOK: r.Record != "", reads: reads(r.Expr),
			eval: func(_ map[string]string, now time.Time) (bool, error) {
				has, err := prom.query(ctx, r.Expr, now)
				if err != nil || r.Record == "" {
					return has, err
				}
				// The recorded series itself must exist in Prometheus.
				return prom.query(ctx, r.Record, now)
			},
		})
	}

	if !t.Run("every query evaluates and returns data", func(t *testing.T) {
		deadline := started.Add(dataDeadline)
		for {
			now := time.Now()
			vars := grafanaVars(now.Sub(started), ".*", ".*")
			// A query that reads an optional metric the quickstart does not
			// export (yet) must evaluate, but may return no data.
			exposition, err := httpGet(ctx, metricsURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			exported := parseExposition(exposition).metrics
			var left, failed, empty []string
			for _, c := range checks {
				has, err := c.eval(vars, now)
				why := absentOptional(c.reads, exported)
				switch {
				case err != nil:
					failed = append(failed, fmt.Sprintf("%s: %v", c.name, err))
				case c.needsOK && !has && why != "":
					empty = append(empty, fmt.Sprintf("%s (%s)", c.name, why))
				case c.needsOK && !has:
					left = append(left, c.name)
				}
			}
			if len(failed) > 0 {
				t.Fatalf("queries failed:\n  %s", strings.Join(failed, "\n  "))
			}
			if len(left) == 0 {
				t.Logf("all %d queries evaluated; %d returned data after %s", len(checks), len(checks)-len(empty), time.Since(started).Round(time.Second))
				if len(empty) > 0 {
					t.Logf("%d evaluated without error and are empty as expected, since they read metrics this run does not export:\n  %s",
						len(empty), strings.Join(empty, "\n  "))
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s these queries still return no data:\n  %s", dataDeadline, strings.Join(left, "\n  "))
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(2 * time.Second):
			}
		}

		// The same queries with a stage and an outcome picked, as Grafana
		// formats a multi-select: they must still evaluate.
		stages, err := prom.labelValues(ctx, "stage", "agent_stage_terminations_total", started, time.Now())
		if err != nil || len(stages) == 0 {
			t.Fatalf("stage values: %v %v", stages, err)
		}
		pick := stages
		if len(pick) > 2 {
			pick = pick[:2]
		}
		vars := grafanaVars(time.Since(started), "("+strings.Join(quoteRegex(pick), "|")+")", "(failed|succeeded)")
		for _, c := range checks {
			if _, err := c.eval(vars, time.Now()); err != nil {
				t.Errorf("%s with stage=%v: %v", c.name, pick, err)
			}
		}
	}) {
		return // the checks below need the data
	}

	// What the quickstart really exports, now that it has produced every cause.
	exposition, err := httpGet(ctx, metricsURL, map[string]string{"Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"})
	if err != nil {
		t.Fatal(err)
	}
	live := parseExposition(exposition)

	t.Run("names exist in /metrics", func(t *testing.T) {
		check := func(where, expr string) {
			e, err := substitute(expr, lintVars)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				return
			}
			metrics, labels := exprNames(e)
			for _, m := range metrics {
				if strings.Contains(m, ":") {
					if !records[m] {
						t.Errorf("%s: recorded series %s is not defined", where, m)
					}
				} else if !live.metrics[m] && optionalMetrics[m] == "" {
					t.Errorf("%s: metric %s is not in the quickstart's /metrics", where, m)
				}
			}
			// Labels of an absent optional metric cannot be seen live; the
			// static checks hold them to the spec's attribute keys.
			optional := absentOptional(metrics, live.metrics) != ""
			for _, l := range labels {
				if !live.labels[l] && l != "__name__" && !optional {
					t.Errorf("%s: label %s is not on any agent_stage_* or agent_fleet_* series in /metrics", where, l)
				}
			}
		}
		for _, d := range dashboards {
			for _, q := range d.queries() {
				check(q.String(), q.target.Expr)
			}
			for _, v := range d.Templating.List {
				if match, label, ok := parseLabelValues(v.queryText()); ok {
					check(d.path+" / $"+v.Name, fmt.Sprintf("%s{%s=\"\"}", match, label))
				}
			}
		}
		for _, r := range rules {
			check(r.File+" / "+r.name(), r.Expr)
		}
	})

	t.Run("rules are healthy", func(t *testing.T) {
		groups, err := prom.rules(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, g := range groups {
			for _, r := range g.Rules {
				seen[r.Name] = true
				if r.Health != "ok" || r.LastError != "" {
					t.Errorf("rule %s/%s: health %q, error %q", g.Name, r.Name, r.Health, r.LastError)
				}
			}
		}
		for _, r := range rules {
			if !seen[r.name()] {
				t.Errorf("rule %s from %s is not loaded by Prometheus", r.name(), r.File)
			}
		}
	})

	t.Run("exemplars reach Prometheus", func(t *testing.T) {
		var wanted []string
		for _, d := range dashboards {
			for _, q := range d.queries() {
				if !q.target.Exemplar {
					continue
				}
				e, _ := substitute(q.target.Expr, lintVars)
				metrics, _ := exprNames(e)
				wanted = append(wanted, metrics...)
			}
		}
		if !live.exemplars {
			t.Fatalf("dashboards show exemplars for %v but the quickstart's OpenMetrics /metrics has none", uniq(wanted))
		}
		for _, m := range uniq(wanted) {
			n, err := prom.exemplars(ctx, m, started, time.Now())
			if err != nil {
				t.Errorf("%s: %v", m, err)
			} else if n == 0 {
				t.Errorf("%s: Prometheus stored no exemplars", m)
			}
		}
	})

	t.Run("stall, budget and tree alerts reach the webhook receiver", func(t *testing.T) {
		// The quickstart's researcher stalls on a third of its runs, its
		// summarizer exhausts its token budget on half, and its planner's
		// analysts overspend its tree budget on a quarter of its runs: with
		// the `for:` durations shortened, Prometheus fires the three alerts,
		// Alertmanager routes them by severity and alertlog receives them.
		want := map[string]string{"AgentStageStallRateHigh": "researcher", "AgentStageBudgetExhausted": "summarizer",
			"AgentTreeLimitsReachedHigh": "planner"}
		var got []receivedAlert
		deadline := time.Now().Add(alertDeadline)
		for {
			body, err := httpGet(ctx, alertsURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			got = nil
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("alertlog /api/alerts: %v", err)
			}
			missing := missingAlerts(got, want)
			if len(missing) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s these alerts were not delivered to alertlog: %v\nreceived: %+v", alertDeadline, missing, got)
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(time.Second):
			}
		}
		for _, a := range got {
			// Routing by severity: each alert went to the receiver named
			// after its severity.
			if a.Receiver != a.Labels["severity"] {
				t.Errorf("%s (severity %q) was delivered to receiver %q", a.Labels["alertname"], a.Labels["severity"], a.Receiver)
			}
			if a.Annotations["summary"] == "" || a.Annotations["runbook_url"] == "" {
				t.Errorf("%s arrived without its summary or runbook_url: %v", a.Labels["alertname"], a.Annotations)
			}
		}
		t.Logf("delivered after %s: %d alerts", time.Since(started).Round(time.Second), len(got))
	})
}

// grafanaVars are the values Grafana would substitute for a dashboard whose
// time range is the run so far, at a resolution of one scrape interval.
func grafanaVars(elapsed time.Duration, stage, outcome string) map[string]string {
	rng := int(math.Ceil(elapsed.Seconds()))
	interval := scrapeInterval
	// Grafana: max($__interval + scrape interval, 4 * scrape interval).
	rate := max(interval+scrapeInterval, 4*scrapeInterval)
	return map[string]string{
		"__interval": promDuration(interval), "__interval_ms": strconv.FormatInt(interval.Milliseconds(), 10),
		"__rate_interval": promDuration(rate),
		"__range":         fmt.Sprintf("%ds", rng), "__range_s": strconv.Itoa(rng), "__range_ms": strconv.Itoa(rng * 1000),
		"stage": stage, "outcome": outcome,
	}
}

func promDuration(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

func quoteRegex(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = regexp.QuoteMeta(x)
	}
	return out
}

// start runs a process until the test ends. Its output goes to a log file
// that is printed if the test fails. Cleanup sends SIGTERM and waits; the
// process also gets SIGKILL if the test binary dies first.
func start(t *testing.T, name, dir string, env []string, bin string, args ...string) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("--- %s output (last 4 KiB) ---\n%s", name, tail(b, 4096))
		}
	})
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitFor(t *testing.T, ctx context.Context, limit time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

func httpGet(ctx context.Context, u string, headers map[string]string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", u, resp.Status, tail(b, 512))
	}
	return string(b), nil
}

// liveMetrics is what a /metrics page exposes.
type liveMetrics struct {
	metrics   map[string]bool // sample names
	labels    map[string]bool // label names on agent_stage_* and agent_fleet_* samples
	exemplars bool
}

var labelNameRe = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)="(?:[^"\\]|\\.)*"`)

func parseExposition(text string) liveMetrics {
	l := liveMetrics{metrics: map[string]bool{}, labels: map[string]bool{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sample, exemplar, hasExemplar := strings.Cut(line, " # {")
		if hasExemplar && exemplar != "" {
			l.exemplars = true
		}
		name := sample
		if i := strings.IndexAny(sample, "{ "); i >= 0 {
			name = sample[:i]
		}
		l.metrics[name] = true
		if strings.HasPrefix(name, "agent_stage_") || strings.HasPrefix(name, "agent_fleet_") {
			if i := strings.IndexByte(sample, '{'); i >= 0 {
				for _, m := range labelNameRe.FindAllStringSubmatch(sample[i:], -1) {
					l.labels[m[1]] = true
				}
			}
		}
	}
	return l
}

// promAPI is the little of Prometheus' HTTP API the test needs.
type promAPI struct{ base string }

type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

func (p *promAPI) get(ctx context.Context, path string, params url.Values) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path+"?"+params.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r apiResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", path, resp.Status, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	return r.Data, nil
}

type sampleValue [2]any // [unix time, "value"]

func (v sampleValue) finite() bool {
	s, _ := v[1].(string)
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
}

// query runs an instant query and tells whether it returned a finite value.
func (p *promAPI) query(ctx context.Context, expr string, at time.Time) (bool, error) {
	data, err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}, "time": {unix(at)}})
	if err != nil {
		return false, err
	}
	return hasFinite(data)
}

// queryRange runs a range query and tells whether any point is finite.
func (p *promAPI) queryRange(ctx context.Context, expr string, from, to time.Time, step time.Duration) (bool, error) {
	data, err := p.get(ctx, "/api/v1/query_range", url.Values{
		"query": {expr}, "start": {unix(from)}, "end": {unix(to)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
	})
	if err != nil {
		return false, err
	}
	return hasFinite(data)
}

func hasFinite(data json.RawMessage) (bool, error) {
	var r struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return false, err
	}
	switch r.ResultType {
	case "scalar":
		var v sampleValue
		if err := json.Unmarshal(r.Result, &v); err != nil {
			return false, err
		}
		return v.finite(), nil
	case "vector", "matrix":
		var series []struct {
			Value  *sampleValue  `json:"value"`
			Values []sampleValue `json:"values"`
		}
		if err := json.Unmarshal(r.Result, &series); err != nil {
			return false, err
		}
		for _, s := range series {
			if s.Value != nil && s.Value.finite() {
				return true, nil
			}
			for _, v := range s.Values {
				if v.finite() {
					return true, nil
				}
			}
		}
		return false, nil
	}
	return false, fmt.Errorf("unexpected result type %q", r.ResultType)
}

func (p *promAPI) labelValues(ctx context.Context, label, match string, from, to time.Time) ([]string, error) {
	params := url.Values{"start": {unix(from)}, "end": {unix(to)}}
	if match != "" {
		params.Set("match[]", match)
	}
	data, err := p.get(ctx, "/api/v1/label/"+label+"/values", params)
	if err != nil {
		return nil, err
	}
	var vals []string
	err = json.Unmarshal(data, &vals)
	sort.Strings(vals)
	return vals, err
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []struct {
		Name      string `json:"name"`
		Health    string `json:"health"`
		LastError string `json:"lastError"`
	} `json:"rules"`
}

func (p *promAPI) rules(ctx context.Context) ([]ruleGroup, error) {
	data, err := p.get(ctx, "/api/v1/rules", nil)
	if err != nil {
		return nil, err
	}
	var r struct {
		Groups []ruleGroup `json:"groups"`
	}
	return r.Groups, json.Unmarshal(data, &r)
}

func (p *promAPI) exemplars(ctx context.Context, metric string, from, to time.Time) (int, error) {
	data, err := p.get(ctx, "/api/v1/query_exemplars", url.Values{"query": {metric}, "start": {unix(from)}, "end": {unix(to)}})
	if err != nil {
		return 0, err
	}
	var r []struct {
		Exemplars []json.RawMessage `json:"exemplars"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return 0, err
	}
	n := 0
	for _, s := range r {
		n += len(s.Exemplars)
	}
	return n, nil
}

func unix(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64)
}

// optionalMetrics are the metrics that the quickstart, as this test runs it,
// does not export, and why. A panel query or rule that reads one of them
// while it is absent from the quickstart's /metrics must evaluate without
// error but may return no data; once the quickstart exports it, it must
// return data like every other query.
// (None today: the fleet's counters, agent_fleet_errors_total included, are
// exported at 0 from the start, so every fleet panel returns data.)
var optionalMetrics = map[string]string{}

// absentOptional returns why a query that reads metrics may be empty: the
// reason of the first optional metric it reads that exported lacks, or "".
func absentOptional(metrics []string, exported map[string]bool) string {
	for _, m := range metrics {
		if why := optionalMetrics[m]; why != "" && !exported[m] {
			return m + ": " + why
		}
	}
	return ""
}

// alertsForTest returns alerts.yaml with the value of every `for:` anchor
// (`for: &name 10m`, see the file's header) replaced by d. It fails if the
// file has no such anchor, so that a change of layout cannot silently keep
// the long durations.
func alertsForTest(alerts, d string) ([]byte, error) {
	re := regexp.MustCompile(`(for: &[A-Za-z0-9_]+) [0-9a-z]+`)
	n := len(re.FindAllString(alerts, -1))
	if n == 0 {
		return nil, fmt.Errorf("alerts.yaml: no `for: &anchor DURATION` parameter to shorten")
	}
	return []byte(re.ReplaceAllString(alerts, "${1} "+d)), nil
}

// alertmanagerConfigForTest returns alertmanager.yml with every webhook
// receiver's URL replaced by url and every group timing shortened to one
// second. It fails if a receiver is not a webhook, since the test could
// not see its deliveries.
func alertmanagerConfigForTest(cfg, url string) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(cfg), &doc); err != nil {
		return nil, fmt.Errorf("alertmanager.yml: %w", err)
	}
	var shorten func(route map[string]any)
	shorten = func(route map[string]any) {
		route["group_wait"], route["group_interval"] = "1s", "1s"
		routes, _ := route["routes"].([]any)
		for _, r := range routes {
			if m, ok := r.(map[string]any); ok {
				shorten(m)
			}
		}
	}
	route, ok := doc["route"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("alertmanager.yml: no route")
	}
	shorten(route)
	receivers, _ := doc["receivers"].([]any)
	if len(receivers) == 0 {
		return nil, fmt.Errorf("alertmanager.yml: no receivers")
	}
	for _, r := range receivers {
		m, _ := r.(map[string]any)
		hooks, _ := m["webhook_configs"].([]any)
		if len(hooks) == 0 {
			return nil, fmt.Errorf("alertmanager.yml: receiver %v has no webhook_configs", m["name"])
		}
		for _, h := range hooks {
			if hm, ok := h.(map[string]any); ok {
				hm["url"] = url
			}
		}
	}
	return yaml.Marshal(doc)
}

// receivedAlert is one alert as alertlog's /api/alerts lists it.
type receivedAlert struct {
	Receiver    string            `json:"receiver"`
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// missingAlerts returns the alerts of want (alert name -> stage) that got
// has no firing notification of.
func missingAlerts(got []receivedAlert, want map[string]string) []string {
	var missing []string
	for name, stage := range want {
		found := false
		for _, a := range got {
			found = found || a.Status == "firing" && a.Labels["alertname"] == name && a.Labels["stage"] == stage
		}
		if !found {
			missing = append(missing, name+"{stage="+stage+"}")
		}
	}
	sort.Strings(missing)
	return missing
}
