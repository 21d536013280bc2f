// Package e2e proves that the Grafana dashboards and Prometheus rules in
// dashboards/ work against what agentstop actually exports.
//
// It holds only tests, in two layers:
//
//   - Static checks (lint_test.go) run with every `go test ./...`. They read
//     dashboards/grafana/*.json, dashboards/prometheus/{rules,alerts}.yaml,
//     RUNBOOK.md, README.md and docker-compose.yml and check the conventions
//     the issue asks for: a stable uid and `id: null`, schemaVersion >= 41, one
//     datasource variable used by every panel and target, `$__rate_interval` in
//     every rate, exemplars on histogram panels, a runbook section behind every
//     alert's runbook_url, alert `for:` durations equal to their parameter, and
//     loopback-only ports in the compose file.
//
//   - The end-to-end test (e2e_test.go) runs only when AGENTSTOP_E2E=1, which
//     dashboards/test.sh sets after it has made sure `prometheus` and `promtool`
//     are installed. It builds examples/quickstart, starts it and a real
//     Prometheus on free 127.0.0.1 ports (Prometheus scraping every second,
//     with rules.yaml and alerts.yaml loaded and exemplar storage on), waits
//     for data, and then evaluates through Prometheus' HTTP API every panel
//     query and template-variable query of every dashboard (with Grafana's
//     variables substituted) and every recording and alerting rule
//     expression. Every query must succeed, every panel query and recording
//     rule must return data, every rule must be healthy in /api/v1/rules, and
//     every metric and label name the files use must appear in the live
//     /metrics. It also runs a real Alertmanager (dashboards/alertmanager/
//     alertmanager.yml, receivers pointed at examples/alertlog, group
//     timings shortened) with every alert's `for:` shortened, and checks that
//     the stall, budget and tree alerts of the quickstart reach alertlog through
//     the receiver named after their severity. Processes it starts are
//     stopped when the test ends.
//
// Environment knobs for the end-to-end test:
//
//	AGENTSTOP_E2E=1                 run it (otherwise it is skipped)
//	AGENTSTOP_E2E_QUICKSTART=PATH   use this prebuilt quickstart binary instead of building one
//	AGENTSTOP_E2E_PROMETHEUS=PATH   the prometheus binary (default: prometheus on PATH)
//	AGENTSTOP_E2E_ALERTMANAGER=PATH the Alertmanager binary (default: prometheus-alertmanager,
//	                                then alertmanager, on PATH)
package e2e
