#!/usr/bin/env bash
# Proves the dashboards, recording rules and alerts against a real Prometheus.
# Called by `make test`; runs from any directory.
#
#   1. makes sure prometheus and promtool exist (Debian's `prometheus` package,
#      installed with apt-get when missing and running as root; no service is
#      started);
#   2. promtool check config/rules, promtool test rules;
#   3. docker-compose config (Debian's docker-compose, installed with apt-get
#      when missing and running as root; skipped with a note otherwise);
#   4. dashboards/render, the docs tool in its own Go module (not in the root
#      module, so `go test ./...` there does not reach it): go vet and its tests;
#   5. the Go end-to-end test in dashboards/e2e (AGENTSTOP_E2E=1): quickstart +
#      Prometheus on 127.0.0.1, every panel, variable and rule query evaluated.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '== dashboards: %s\n' "$*"; }

install_prometheus() {
	if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
		return
	fi
	if [[ $(id -u) -ne 0 ]]; then
		echo "dashboards/test.sh: prometheus and promtool are needed; install Debian's 'prometheus' package (apt-get install prometheus) or run as root" >&2
		exit 1
	fi
	log "installing Debian's prometheus package"
	# Keep the package's maintainer scripts from starting a Prometheus service:
	# policy-rc.d exit 101 forbids invoke-rc.d from starting anything.
	local policy=/usr/sbin/policy-rc.d made_policy=
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod +x "$policy"
		made_policy=1
	fi
	export DEBIAN_FRONTEND=noninteractive
	local rc=0
	{ apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus >/dev/null; } || rc=$?
	if [[ -n $made_policy ]]; then rm -f "$policy"; fi
	if [[ $rc -ne 0 ]]; then
		echo "dashboards/test.sh: apt-get install prometheus failed ($rc)" >&2
		exit "$rc"
	fi
}

install_prometheus
prometheus --version 2>&1 | head -1

log "promtool check"
promtool check config --syntax-only dashboards/prometheus/prometheus.yml
promtool check rules dashboards/prometheus/rules.yaml dashboards/prometheus/alerts.yaml

log "promtool test rules"
promtool test rules dashboards/prometheus/tests/*.yaml

if ! command -v docker-compose >/dev/null && [[ $(id -u) -eq 0 ]]; then
	log "installing Debian's docker-compose to validate the compose file"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >/dev/null ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >/dev/null; } ||
		log "apt-get install docker-compose failed: compose file not validated"
fi
if command -v docker-compose >/dev/null; then
	log "docker-compose config"
	docker-compose -f docker-compose.yml config -q
else
	log "docker-compose not installed: compose file not validated (apt-get install docker-compose)"
fi

log "dashboards/render module: go vet, go test"
(cd dashboards/render && go vet ./... && go test -race -count=1 ./...)

log "end-to-end test against the quickstart and a real Prometheus"
AGENTSTOP_E2E=1 go test -count=1 -v ./dashboards/e2e/
