#!/usr/bin/env bash
# Makes sure redis-server (Redis >= 7) exists for the fleet/redisfleet,
# cmd/agentstop and quickstart tests, which start their own servers on free
# 127.0.0.1 ports: single servers, and three-master clusters of the same
# binary (--cluster-enabled yes, formed by the tests with CLUSTER
# ADDSLOTSRANGE and CLUSTER MEET, so redis-cli is not needed).
# Called by `make test-core`. Installs Debian's redis-server package with
# apt-get when it is missing and this runs as root; no service is started.
set -euo pipefail

have_redis() {
	[[ -n ${REDIS_SERVER:-} && -x ${REDIS_SERVER} ]] || command -v redis-server >/dev/null 2>&1 || [[ -x /usr/bin/redis-server ]]
}

if have_redis; then
	exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "fleet/redisfleet/ensure-redis.sh: redis-server is needed by the fleet tests; install Debian's 'redis-server' package (apt-get install redis-server) or run as root" >&2
	exit 1
fi
echo "== installing Debian's redis-server package"
# Keep the package's maintainer scripts from starting a Redis service:
# policy-rc.d exit 101 forbids invoke-rc.d from starting anything.
policy=/usr/sbin/policy-rc.d
made_policy=
if [[ ! -e $policy ]]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod +x "$policy"
	made_policy=1
fi
export DEBIAN_FRONTEND=noninteractive
rc=0
{ apt-get update -qq && apt-get install -y -qq --no-install-recommends redis-server >/dev/null; } || rc=$?
if [[ -n $made_policy ]]; then rm -f "$policy"; fi
if [[ $rc -ne 0 ]]; then
	echo "fleet/redisfleet/ensure-redis.sh: apt-get install redis-server failed ($rc)" >&2
	exit "$rc"
fi
have_redis || { echo "fleet/redisfleet/ensure-redis.sh: redis-server still missing after install" >&2; exit 1; }
