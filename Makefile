# agentstop — make test is the project's test command (CI runs it via .ci/run).
SHELL := /usr/bin/env bash
GO ?= go
ADAPTERS := $(sort $(dir $(wildcard adapters/*/go.mod)))
FUZZTIME ?= 1m
# Go minimizes each new interesting input for up to 60s by default, and the
# fuzz log counts none of those execs: it shows 0 execs/s meanwhile.
FUZZMINIMIZETIME ?= 500x
BENCHTIME ?= 1s
BENCHCOUNT ?= 5
BENCHOUT ?= /tmp/agentstop-bench.txt
# The packages whose benchmarks make up the contract's §6 figures (backtest
# once it exists: a figure whose benchmark is absent prints as missing).
# ./cmd/agentstop/ measures replay's and backtest's peak RSS over a generated
# 200 MB log (BenchmarkManyRunsMemory: about 10 s and 200 MB of TMPDIR per count).
BENCHPKGS := ./middleware/ ./importer/ ./termination/ ./codec/ ./replay/ ./telemetry/ ./telemetry/otelsetup/ ./fleet/ ./fleet/redisfleet/ $(if $(wildcard backtest/*.go),./backtest/) ./cmd/agentstop/

.PHONY: all build vet test test-core test-adapters test-dashboards bench bench-readme fuzz soak quickstart clean

all: build test

build:
	$(GO) build ./...

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

## test: vet, race tests of the core and every adapter module, then the dashboards' promtool and end-to-end tests.
test: vet test-core test-adapters test-dashboards

# The fleet tests start their own redis-server processes (one server and a
# three-master cluster) on free 127.0.0.1 ports: ensure-redis.sh installs
# redis-server when it is missing.
test-core:
	bash fleet/redisfleet/ensure-redis.sh
	$(GO) test -race -count=1 -timeout 30m ./... # internal/adaptertest installs every adapter from a module proxy: minutes on a cold cache

test-adapters:
	@set -e; for d in $(ADAPTERS); do \
		echo "== adapter module $$d"; \
		(cd $$d && $(GO) vet ./... && $(GO) test -race -count=1 ./...); \
	done

test-dashboards:
	bash dashboards/test.sh

## bench: the hot-path benchmarks, -count BENCHCOUNT (default 5), each result line echoed as it
## arrives, then every benchmark's medians and the contract's §6 figures with their limits and a
## pass/fail mark, ratios taken within this run (internal/benchreport). Raw output in BENCHOUT.
## BENCHSTRICT=1 makes a missed limit fail the target.
bench:
	@bash fleet/redisfleet/ensure-redis.sh
	@set -o pipefail; $(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) -benchtime $(BENCHTIME) $(BENCHPKGS) | tee $(BENCHOUT) | \
		$(GO) run ./internal/benchreport $(if $(BENCHSTRICT),-strict)

## bench-readme: rewrite the README's performance table from the last make bench (BENCHOUT).
bench-readme:
	$(GO) run ./internal/benchreport -q -in $(BENCHOUT) -readme README.md

## fuzz: each fuzz target for FUZZTIME (default 1m).
fuzz:
	@set -e; for pkg in ./termination ./codec ./replay ./internal/canonical ./internal/jsonscan ./backtest ./importer ./fleet/redisfleet; do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg; \
		done; \
	done

## soak: over a million events through 1,000 concurrent runs with random policies, under the race detector.
soak:
	$(GO) test -race -count=1 -run TestSoak -v ./middleware/ -args -soak

quickstart:
	$(GO) run ./examples/quickstart

clean:
	$(GO) clean -testcache
