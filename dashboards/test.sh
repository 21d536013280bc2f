#!/usr/bin/env bash
# Proves the dashboards, recording rules and alerts against a real Prometheus.
# Called by `make test`; runs from any directory.
#
#   1. makes sure prometheus, promtool and Alertmanager exist (Debian's
#      `prometheus` and `prometheus-alertmanager` packages, installed with
#      apt-get when missing and running as root; no service is started);
#   2. promtool check config/rules, promtool test rules, amtool check-config
#      (when amtool is installed: Debian ships it with the alertmanager);
#   3. docker-compose config (Debian's docker-compose, installed with apt-get
#      when missing and running as root; skipped with a note otherwise);
#   4. dashboards/render, the docs tool in its own Go module (not in the root
#      module, so `go test ./...` there does not reach it): go vet and its tests;
#   5. the Go end-to-end test in dashboards/e2e (AGENTSTOP_E2E=1): quickstart,
#      Prometheus, Alertmanager and alertlog on 127.0.0.1; every panel,
#      variable and rule query evaluated; the stall, budget and tree alerts
#      delivered to the webhook receiver.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '== dashboards: %s\n' "$*"; }

alertmanager_bin() {
	command -v prometheus-alertmanager || command -v alertmanager || true
}

# install_packages installs Debian packages without letting their
# maintainer scripts start a service.
install_packages() {
	if [[ $(id -u) -ne 0 ]]; then
		echo "dashboards/test.sh: needed: $*; install them (apt-get install $*) or run as root" >&2
		exit 1
	fi
	log "installing Debian's $*"
	# policy-rc.d exit 101 forbids invoke-rc.d from starting anything.
	local policy=/usr/sbin/policy-rc.d made_policy=
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod +x "$policy"
		made_policy=1
	fi
	export DEBIAN_FRONTEND=noninteractive
	local rc=0
	{ apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@" >/dev/null; } || rc=$?
	if [[ -n $made_policy ]]; then rm -f "$policy"; fi
	if [[ $rc -ne 0 ]]; then
		echo "dashboards/test.sh: apt-get install $* failed ($rc)" >&2
		exit "$rc"
	fi
}

missing=()
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
	missing+=(prometheus)
fi
if [[ -z $(alertmanager_bin) ]]; then
	missing+=(prometheus-alertmanager)
fi
if ((${#missing[@]})); then
	install_packages "${missing[@]}"
fi
alertmanager=$(alertmanager_bin)
prometheus --version 2>&1 | head -1

log "promtool check"
promtool check config --syntax-only dashboards/prometheus/prometheus.yml
promtool check rules dashboards/prometheus/rules.yaml dashboards/prometheus/alerts.yaml

log "promtool test rules"
promtool test rules dashboards/prometheus/tests/*.yaml

"$alertmanager" --version 2>&1 | head -1
if command -v amtool >/dev/null; then
	log "amtool check-config"
	amtool check-config dashboards/alertmanager/alertmanager.yml
else
	log "amtool not installed: alertmanager.yml is checked by the e2e test's Alertmanager only"
fi

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

log "end-to-end test against the quickstart, a real Prometheus and a real Alertmanager"
AGENTSTOP_E2E=1 AGENTSTOP_E2E_ALERTMANAGER="$alertmanager" go test -count=1 -v ./dashboards/e2e/
