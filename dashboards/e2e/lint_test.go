package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// specMetrics are the Prometheus series names of spec §5 (with the default
// OTel exporter translation). The static checks hold every raw metric name in
// dashboards and rules to this list; the end-to-end test holds them to the
// live /metrics.
var specMetrics = map[string]bool{
	"agent_stage_terminations_total":        true,
	"agent_stage_duration_seconds_bucket":   true,
	"agent_stage_duration_seconds_sum":      true,
	"agent_stage_duration_seconds_count":    true,
	"agent_stage_iterations_bucket":         true,
	"agent_stage_iterations_sum":            true,
	"agent_stage_iterations_count":          true,
	"agent_stage_tool_calls_bucket":         true,
	"agent_stage_tool_calls_sum":            true,
	"agent_stage_tool_calls_count":          true,
	"agent_stage_tokens_total":              true,
	"agent_stage_budget_utilization_bucket": true,
	"agent_stage_budget_utilization_sum":    true,
	"agent_stage_budget_utilization_count":  true,
	"agent_stage_budget_pressure_total":     true,
	"agent_stage_active":                    true,
	"agent_stage_stall_warnings_total":      true,
	"agent_stage_idle_stops_total":          true,
	// Shadow policies (spec §5.2): stage, policy, termination_cause.
	"agent_stage_shadow_stops_total": true,
	// Holds (spec §3 hold:, §5).
	"agent_stage_held":                true,
	"agent_stage_held_oldest_seconds": true,
	// Trees of runs (spec §8): stage of the holder / of the cancelled run.
	"agent_tree_limits_reached_total": true,
	"agent_tree_runs_cancelled_total": true,
	// Fleet control (spec §7): process-wide, no stage label.
	"agent_fleet_errors_total":           true,
	"agent_fleet_budget_pressure_total":  true,
	"agent_fleet_budget_exhausted_total": true,
	"agent_fleet_runs_stopped_total":     true,
	"agent_fleet_runs_rejected_total":    true,
}

// fleetMetric tells whether a metric is one of the fleet's (spec §7): they
// carry no stage label, so queries on them cannot follow the stage filter.
func fleetMetric(name string) bool { return strings.HasPrefix(name, "agent_fleet_") }

// specLabels are the attribute keys of spec §5, plus the histogram bucket
// label and __name__.
var specLabels = map[string]bool{
	"stage": true, "termination_cause": true, "outcome": true, "token_type": true,
	"resource": true, "le": true, "__name__": true,
	"signal":    true, // agent_stage_stall_warnings_total
	"operation": true, // agent_fleet_errors_total
	"reason":    true, // agent_fleet_runs_rejected_total
	"policy":    true, // agent_stage_shadow_stops_total
}

var requiredAlerts = []string{
	"AgentStageStallRateHigh",
	"AgentStageBudgetExhausted",
	"AgentStageBudgetPressureHigh",
	"AgentStageFailureRatioHigh",
	"AgentStageTimeoutsHigh",
	"AgentStageIdleStopsHigh",
	"AgentTreeLimitsReachedHigh",
	"AgentFleetBudgetExhausted",
	"AgentFleetErrors",
}

func TestDashboardConventions(t *testing.T) {
	uids := map[string]string{}
	for _, d := range loadDashboards(t) {
		t.Run(d.path, func(t *testing.T) {
			check(t, regexp.MustCompile(`^[a-z0-9][a-z0-9-]{2,39}$`).MatchString(d.UID), "uid %q must be set, short and stable", d.UID)
			if prev, dup := uids[d.UID]; dup {
				t.Errorf("uid %q also used by %s", d.UID, prev)
			}
			uids[d.UID] = d.path
			id, present := d.raw["id"]
			check(t, present && id == nil, "id must be present and null so imports never clash")
			check(t, d.SchemaVersion >= 41, "schemaVersion %d < 41", d.SchemaVersion)
			check(t, d.Title != "", "no title")

			vars := map[string]jsonVariable{}
			for _, v := range d.Templating.List {
				vars[v.Name] = v
			}
			ds, ok := vars["datasource"]
			check(t, ok && ds.Type == "datasource" && ds.queryText() == "prometheus",
				"need a datasource variable of type datasource for prometheus, have %+v", ds)
			for _, name := range []string{"stage", "outcome"} {
				v, ok := vars[name]
				if !check(t, ok, "no %s variable", name) {
					continue
				}
				check(t, v.Type == "query", "%s: type %q, want query", name, v.Type)
				check(t, v.Multi && v.IncludeAll, "%s: want multi-select with All", name)
				check(t, v.AllValue == ".*", "%s: allValue %q, want .* so All matches every value", name, v.AllValue)
				_, label, ok := parseLabelValues(v.queryText())
				check(t, ok && label == name, "%s: query %q is not label_values(..., %s)", name, v.queryText(), name)
				check(t, v.Datasource != nil && v.Datasource.UID == "${datasource}", "%s: must use the datasource variable", name)
			}

			ids := map[int]bool{}
			titles := map[string]bool{}
			rateRe := regexp.MustCompile(`\b(rate|irate|increase|delta|idelta|deriv|[a-z]+_over_time)\(([^()]|\([^()]*\))*\[([^\]]+)\]`)
			for _, p := range allPanels(d.Panels) {
				check(t, !ids[p.ID], "panel id %d is used twice", p.ID)
				ids[p.ID] = true
				if p.Type == "row" {
					continue
				}
				check(t, !titles[p.Title], "panel title %q is used twice", p.Title)
				titles[p.Title] = true
				check(t, p.Title != "", "panel %d has no title", p.ID)
				check(t, p.Description != "", "panel %q has no description", p.Title)
				check(t, p.Datasource != nil && p.Datasource.UID == "${datasource}", "panel %q must use the datasource variable", p.Title)
				check(t, len(p.Targets) > 0, "panel %q has no query", p.Title)
				histogram := false
				for _, tg := range p.Targets {
					if strings.Contains(tg.Expr, "_bucket") {
						histogram = true
					}
				}
				for _, tg := range p.Targets {
					where := p.Title + "/" + tg.RefID
					check(t, tg.Datasource != nil && tg.Datasource.UID == "${datasource}", "%s must use the datasource variable", where)
					check(t, !strings.Contains(tg.Expr, "[["), "%s: deprecated [[var]] syntax", where)
					if e, err := substitute(tg.Expr, lintVars); err == nil && onlyFleet(e) {
						// Fleet metrics have no stage: a stage matcher would
						// hide every series.
						check(t, !strings.Contains(tg.Expr, "stage"), "%s: fleet metrics have no stage label", where)
					} else {
						check(t, strings.Contains(tg.Expr, `stage=~"$stage"`), "%s: every query follows the stage filter", where)
					}
					for _, m := range rateRe.FindAllStringSubmatch(tg.Expr, -1) {
						window := m[3]
						switch {
						case m[1] == "rate" || m[1] == "irate":
							check(t, window == "$__rate_interval", "%s: %s[%s] must use $__rate_interval", where, m[1], window)
						default:
							check(t, window == "$__rate_interval" || window == "$__range", "%s: %s[%s] must use $__rate_interval or $__range", where, m[1], window)
						}
						if window == "$__range" {
							check(t, tg.Instant, "%s: a $__range query must be an instant query", where)
						}
					}
					if histogram && tg.Format != "table" {
						check(t, tg.Exemplar, "%s: histogram panels must show exemplars", where)
					}
					checkNames(t, where, tg.Expr, nil)
				}
			}
		})
	}
}

// onlyFleet tells whether every metric expr reads is a fleet metric.
func onlyFleet(expr string) bool {
	metrics, _ := exprNames(expr)
	for _, m := range metrics {
		if !fleetMetric(m) {
			return false
		}
	}
	return len(metrics) > 0
}

// checkNames checks that expr only uses metrics from the spec (or recorded
// series defined in records) and labels from the spec.
func checkNames(t *testing.T, where, expr string, records map[string]bool) {
	t.Helper()
	e, err := substitute(expr, lintVars)
	if !check(t, err == nil, "%s: %v", where, err) {
		return
	}
	metrics, labels := exprNames(e)
	for _, m := range metrics {
		if strings.Contains(m, ":") {
			check(t, records[m], "%s: recorded series %s is not defined by any rule", where, m)
			continue
		}
		check(t, specMetrics[m], "%s: metric %s is not exported by agentstop (spec §5)", where, m)
	}
	for _, l := range labels {
		check(t, specLabels[l], "%s: label %s is not an agentstop attribute", where, l)
	}
}

func TestRequiredPanels(t *testing.T) {
	want := []string{
		"Stop causes over time", "Share of stop causes", "Success ratio", "Stages",
		"Duration by cause (p50, p95)", "Iterations per run (p50, p95)", "Tool calls per run (p50, p95)",
		"Budget utilization", "Budget-pressure warnings", "Stall and budget-exhausted stops", "Active stages",
		"Stall warnings", "Fleet runs rejected by reason", "Fleet budget pressure and exhaustion", "Fleet errors by operation",
		"Fleet runs stopped", "Tree limits reached by resource", "Runs cancelled by a parent",
		"Shadow would-stop rate", "Shadow stops by cause",
	}
	titles := map[string]bool{}
	for _, d := range loadDashboards(t) {
		for _, p := range allPanels(d.Panels) {
			titles[p.Title] = true
		}
	}
	for _, w := range want {
		check(t, titles[w], "no panel titled %q", w)
	}
}

func TestRuleConventions(t *testing.T) {
	rules := loadRules(t)
	records := map[string]bool{}
	thresholdFor := map[string]string{} // alert name -> `for` label of its parameter
	for _, r := range rules {
		if r.Record != "" {
			records[r.Record] = true
			if a := r.Labels["alert"]; a != "" {
				thresholdFor[a] = r.Labels["for"]
			}
		}
	}
	runbook := readFile(t, "dashboards", "RUNBOOK.md")
	anchors := markdownAnchors(runbook)
	alerts := map[string]bool{}
	for _, r := range rules {
		where := r.File + "/" + r.name()
		checkNames(t, where, r.Expr, records)
		if r.Alert == "" {
			continue
		}
		alerts[r.Alert] = true
		sev := r.Labels["severity"]
		check(t, sev == "info" || sev == "warning" || sev == "critical", "%s: severity %q", where, sev)
		check(t, r.Annotations["summary"] != "", "%s: no summary", where)
		check(t, r.Annotations["description"] != "", "%s: no description", where)
		url := r.Annotations["runbook_url"]
		i := strings.LastIndex(url, "/dashboards/RUNBOOK.md#")
		if check(t, i >= 0, "%s: runbook_url %q must point at a section of dashboards/RUNBOOK.md", where, url) {
			anchor := url[i+len("/dashboards/RUNBOOK.md#"):]
			check(t, anchors[anchor], "%s: RUNBOOK.md has no section #%s", where, anchor)
		}
		// One place for parameters: the alert's for: is the anchor of its
		// threshold rule, and its expression reads that threshold.
		want, ok := thresholdFor[r.Alert]
		if check(t, ok, "%s: no threshold rule labelled alert=%s", where, r.Alert) {
			check(t, want == r.For, "%s: for: %q, but its parameter says %q", where, r.For, want)
		}
		check(t, strings.Contains(r.Expr, "agentstop:alert_threshold:"), "%s: threshold must be a parameter series", where)
	}
	for _, a := range requiredAlerts {
		check(t, alerts[a], "missing alert %s", a)
	}
}

func TestReadmeDescribesEveryPanelAndAlert(t *testing.T) {
	readme := readFile(t, "dashboards", "README.md")
	for _, d := range loadDashboards(t) {
		for _, p := range allPanels(d.Panels) {
			if p.Type != "row" {
				check(t, strings.Contains(readme, "**"+p.Title+"**"), "README does not describe panel %q (as **title**)", p.Title)
			}
		}
	}
	for _, r := range loadRules(t) {
		if r.Alert != "" {
			check(t, strings.Contains(readme, r.Alert), "README does not list alert %s", r.Alert)
		}
	}
}

func TestComposeFile(t *testing.T) {
	root := repoRoot(t)
	var compose struct {
		Services map[string]struct {
			Ports   []string `yaml:"ports"`
			Volumes []string `yaml:"volumes"`
			Build   *struct {
				Context    string `yaml:"context"`
				Dockerfile string `yaml:"dockerfile"`
			} `yaml:"build"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "docker-compose.yml")), &compose); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"quickstart", "prometheus", "grafana", "jaeger", "alertmanager", "alertlog"} {
		_, ok := compose.Services[name]
		check(t, ok, "no service %s", name)
	}
	for name, s := range compose.Services {
		for _, p := range s.Ports {
			check(t, strings.HasPrefix(p, "127.0.0.1:"), "%s: port %q must bind to 127.0.0.1", name, p)
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") {
				_, err := os.Stat(filepath.Join(root, src))
				check(t, err == nil, "%s: volume source: %v", name, err)
			}
		}
		if s.Build != nil {
			_, err := os.Stat(filepath.Join(root, s.Build.Context, s.Build.Dockerfile))
			check(t, err == nil, "%s: Dockerfile: %v", name, err)
		}
	}
}

// TestPrometheusSendsAlerts: the compose stack's Prometheus sends its alerts
// to the compose stack's Alertmanager.
func TestPrometheusSendsAlerts(t *testing.T) {
	var cfg struct {
		Alerting struct {
			Alertmanagers []struct {
				StaticConfigs []struct {
					Targets []string `yaml:"targets"`
				} `yaml:"static_configs"`
			} `yaml:"alertmanagers"`
		} `yaml:"alerting"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "dashboards", "prometheus", "prometheus.yml")), &cfg); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, am := range cfg.Alerting.Alertmanagers {
		for _, sc := range am.StaticConfigs {
			targets = append(targets, sc.Targets...)
		}
	}
	check(t, slices.Equal(targets, []string{"alertmanager:9093"}), "prometheus.yml sends alerts to %v, want [alertmanager:9093]", targets)
}

func TestExprNames(t *testing.T) {
	m, l := exprNames(`topk by (stage) (1, sum by (stage, termination_cause) (increase(agent_stage_terminations_total{stage=~"a|b", outcome!="x"}[5m])))
		/ on (stage) group_left () (stage:agent_stage_terminations:increase5m > 0) or vector(1e-9) and histogram_quantile(0.95, x_bucket offset 5m)`)
	if got, want := strings.Join(m, " "), "agent_stage_terminations_total stage:agent_stage_terminations:increase5m x_bucket"; got != want {
		t.Errorf("metrics: got %s, want %s", got, want)
	}
	if got, want := strings.Join(l, " "), "outcome stage termination_cause"; got != want {
		t.Errorf("labels: got %s, want %s", got, want)
	}
}

func readFile(t testing.TB, elem ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{repoRoot(t)}, elem...)...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// markdownAnchors returns the GitHub anchors of a Markdown file's headings.
func markdownAnchors(md string) map[string]bool {
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := drop.ReplaceAllString(strings.ToLower(h), "")
		out[strings.ReplaceAll(a, " ", "-")] = true
	}
	return out
}

// check reports a test error when ok is false and returns ok.
func check(t testing.TB, ok bool, format string, args ...any) bool {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
	return ok
}

// TestAlertmanagerConfig checks dashboards/alertmanager/alertmanager.yml:
// every severity the alerts use has a route of its own to a receiver of
// that name, every receiver exists and is a webhook to the compose stack's
// alertlog service, and the e2e test's rewrite of it and of alerts.yaml
// changes what it must.
func TestAlertmanagerConfig(t *testing.T) {
	raw := readFile(t, "dashboards", "alertmanager", "alertmanager.yml")
	type route struct {
		Receiver string   `yaml:"receiver"`
		Matchers []string `yaml:"matchers"`
		GroupBy  []string `yaml:"group_by"`
		Routes   []route  `yaml:"routes"`
	}
	var cfg struct {
		Route     route `yaml:"route"`
		Receivers []struct {
			Name     string `yaml:"name"`
			Webhooks []struct {
				URL string `yaml:"url"`
			} `yaml:"webhook_configs"`
		} `yaml:"receivers"`
	}
	if err := yaml.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	receivers := map[string]bool{}
	for _, r := range cfg.Receivers {
		receivers[r.Name] = true
		check(t, len(r.Webhooks) > 0, "receiver %s: no webhook_configs", r.Name)
		for _, w := range r.Webhooks {
			check(t, w.URL == "http://alertlog:9095/webhook", "receiver %s: url %q, want the compose stack's alertlog (http://alertlog:9095/webhook)", r.Name, w.URL)
		}
	}
	check(t, receivers[cfg.Route.Receiver], "default route: unknown receiver %q", cfg.Route.Receiver)
	check(t, slices.Contains(cfg.Route.GroupBy, "stage"), "alerts must be grouped by stage, group_by: %v", cfg.Route.GroupBy)
	bySeverity := map[string]string{}
	for _, r := range cfg.Route.Routes {
		check(t, receivers[r.Receiver], "route %v: unknown receiver %q", r.Matchers, r.Receiver)
		for _, m := range r.Matchers {
			if sev, ok := strings.CutPrefix(m, `severity="`); ok {
				bySeverity[strings.TrimSuffix(sev, `"`)] = r.Receiver
			}
		}
	}
	alerts := 0
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		alerts++
		sev := r.Labels["severity"]
		check(t, bySeverity[sev] == sev, "alert %s: severity %q has no route to a receiver %q (routes: %v)", r.Alert, sev, sev, bySeverity)
	}

	// The e2e test's rewrites.
	out, err := alertmanagerConfigForTest(raw, "http://127.0.0.1:1/webhook")
	if err != nil {
		t.Fatal(err)
	}
	check(t, !strings.Contains(string(out), "alertlog:9095"), "rewritten config still points at alertlog:9095:\n%s", out)
	check(t, strings.Count(string(out), "http://127.0.0.1:1/webhook") == len(cfg.Receivers), "rewritten config:\n%s", out)
	check(t, strings.Count(string(out), "group_wait: 1s") == 1+len(cfg.Route.Routes), "group_wait not shortened on every route:\n%s", out)
	short, err := alertsForTest(readFile(t, "dashboards", "prometheus", "alerts.yaml"), "2s")
	if err != nil {
		t.Fatal(err)
	}
	var shortRules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				For   string `yaml:"for"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(short, &shortRules); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range shortRules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				n++
				check(t, r.For == "2s", "alert %s: for %q after the rewrite, want 2s", r.Alert, r.For)
			}
		}
	}
	check(t, n == alerts, "%d alerts after the rewrite, %d before", n, alerts)
	_, err = alertsForTest("groups: []\n", "2s")
	check(t, err != nil, "alertsForTest of a file without for: anchors: no error")
	_, err = alertmanagerConfigForTest("route: {receiver: x}\nreceivers: [{name: x, email_configs: [{to: a@b}]}]\n", "http://x")
	check(t, err != nil && strings.Contains(err.Error(), "receiver x has no webhook_configs"), "a non-webhook receiver: %v", err)
}

func TestAbsentOptional(t *testing.T) {
	for m := range optionalMetrics {
		check(t, specMetrics[m], "optional metric %s is not a spec metric", m)
	}
	// The mechanism, on an optional metric of the test's own (the real
	// list may be empty: the fleet's counters are exported at 0 now).
	saved := optionalMetrics
	optionalMetrics = map[string]string{"agent_fleet_errors_total": "an optional metric of this test"}
	defer func() { optionalMetrics = saved }()
	exported := map[string]bool{"agent_stage_terminations_total": true, "agent_stage_stall_warnings_total": true}
	const noErrors = "agent_fleet_errors_total: an optional metric of this test"
	for _, tc := range []struct {
		reads []string
		want  string
	}{
		{[]string{"agent_stage_terminations_total"}, ""},
		{[]string{"agent_stage_stall_warnings_total"}, ""},                                  // exported (the researcher's stall.warn_at): must have data
		{[]string{"agent_stage_terminations_total", "agent_fleet_runs_stopped_total"}, ""},  // the quickstart's fleet exports it
		{[]string{"agent_stage_terminations_total", "agent_fleet_runs_rejected_total"}, ""}, // not optional: must have data
		{[]string{"agent_fleet_budget_pressure_total", "agent_fleet_errors_total"}, noErrors},
		{[]string{"agent_fleet_errors_total"}, noErrors},
		{[]string{"agent_stage_active"}, ""}, // absent but not optional: must have data
		{nil, ""},
	} {
		check(t, absentOptional(tc.reads, exported) == tc.want, "absentOptional(%v) = %q, want %q", tc.reads, absentOptional(tc.reads, exported), tc.want)
	}
}
