#!/usr/bin/env bash
# Regenerates docs/dashboard.png, the picture of the Grafana dashboard
# (dashboards/grafana/agent-termination.json) drawn from real data. Not part of
# `make test`; runs from any directory and takes about 4 minutes:
#
#   1. builds examples/quickstart and runs it on a free 127.0.0.1 port;
#   2. runs a real Prometheus (Debian's `prometheus` package) on a free
#      127.0.0.1 port, scraping the quickstart every 2s with
#      dashboards/prometheus/rules.yaml loaded and its storage in a temp dir;
#   3. waits $WAIT seconds (default 180) so that the rates have shape;
#   4. `go -C dashboards/render run .` (its own module) evaluates every panel query over the last
#      $MINUTES minutes (default 3) and writes an HTML page with an inline SVG
#      laid out like the dashboard;
#   5. screenshots the page with headless Chromium (`apt-get install chromium`,
#      installed here when missing and running as root) and rewrites the PNG
#      with a 256-color palette (`render -shrink`).
#
# Everything it starts is stopped when it exits.
#
#   bash dashboards/render/render.sh                 # writes docs/dashboard.png
#   WAIT=60 MINUTES=1 bash dashboards/render/render.sh /tmp/dashboard.png
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-docs/dashboard.png}
case $out in /*) ;; *) out=$PWD/$out ;; esac
WAIT=${WAIT:-180}
MINUTES=${MINUTES:-3}

log() { printf '== render: %s\n' "$*"; }

command -v prometheus >/dev/null || {
	echo "render.sh: prometheus not found: apt-get install prometheus (or run dashboards/test.sh as root)" >&2
	exit 1
}
chromium=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z $chromium ]]; then
	if [[ $(id -u) -ne 0 ]]; then
		echo "render.sh: headless Chromium is needed: apt-get install chromium" >&2
		exit 1
	fi
	log "installing Debian's chromium package"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
	chromium=$(command -v chromium)
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_http() { # url what
	for _ in $(seq 300); do
		curl -fsS -o /dev/null "$1" 2>/dev/null && return
		sleep 0.2
	done
	echo "render.sh: $2 did not come up ($1)" >&2
	exit 1
}

log "building the quickstart"
go build -o "$tmp/quickstart" ./examples/quickstart
qs=127.0.0.1:$(free_port)
(cd "$tmp" && exec env -u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_TRACES_ENDPOINT \
	./quickstart -listen "$qs" -duration "$((WAIT + 60))s" >quickstart.log 2>&1) &
pids+=($!)
wait_http "http://$qs/metrics" quickstart

prom=127.0.0.1:$(free_port)
cat >"$tmp/prometheus.yml" <<YAML
global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
rule_files:
  - $PWD/dashboards/prometheus/rules.yaml
scrape_configs:
  - job_name: agentstop-quickstart
    static_configs:
      - targets: ["$qs"]
YAML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
	--web.listen-address="$prom" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
pids+=($!)
wait_http "http://$prom/-/ready" Prometheus

log "quickstart on $qs, Prometheus on $prom; waiting ${WAIT}s for data"
sleep "$((WAIT + 10))"

log "rendering the last $MINUTES minutes"
# dashboards/render is its own Go module: `go -C` runs it from its directory,
# so every path given to it is absolute.
size=$(go -C dashboards/render run . -prometheus "http://$prom" -scrape-interval 2s -minutes "$MINUTES" \
	-dashboard "$PWD/dashboards/grafana/agent-termination.json" -dashboard-label dashboards/grafana/agent-termination.json \
	-source "examples/quickstart, scraped every 2s" -out "$tmp/dashboard.html")
mkdir -p "$(dirname "$out")"
timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
	--user-data-dir="$tmp/chromium" --screenshot="$out" --window-size="${size/x/,}" \
	"file://$tmp/dashboard.html" >"$tmp/chromium.log" 2>&1 || {
	cat "$tmp/chromium.log" >&2
	exit 1
}
go -C dashboards/render run . -shrink "$out"
log "wrote $out ($size, $(($(stat -c %s "$out") / 1024)) KiB)"
