# Setpoint's build. `make run` and `make test` do all set-up on a fresh machine.
SHELL := /bin/bash
GO    ?= go
BIN   := bin
DATA  ?= $(CURDIR)/.data
ADDR  ?= 127.0.0.1:6443
# Race-enabled tests of the whole tree; a package past this is a bug, not slowness.
TEST_TIMEOUT ?= 20m

.PHONY: all build plugins test test-go vet lint run soak soak-store soak-server soak-linearizability fuzz bench bench-store \
	bench-api bench-watch bench-plugin bench-upload bench-reconcile bench-hostile bench-replicas deps clean

all: build plugins

## build: the one binary, bin/setpoint
build:
	@# -buildvcs=auto stamps the commit that /version reports; a checkout git
	@# will not read (another owner) builds without it.
	$(GO) build -buildvcs=auto -o $(BIN)/setpoint ./cmd/setpoint 2>/dev/null || $(GO) build -buildvcs=false -o $(BIN)/setpoint ./cmd/setpoint

## plugins: every guest module (first-party plugins, examples, host test guests)
## built to .wasm: Go guests with the standard Go toolchain, the Widget plugin
## in C, Rust and AssemblyScript with the toolchains `make deps` installs
## (a missing one is skipped with a warning); see docs/ABI.md. Then each
## module compiled into bin/wasm-cache, the compile cache the in-process tests
## share, by a test binary without the race detector (host/hosttest's
## TestFillCompileCache says why a test): a race-enabled test binary takes
## several times as long to compile a Go guest.
plugins:
	@./.ci/build-wasm
	@$(GO) test -tags compilecache -count=1 -run '^TestFillCompileCache$$' ./host/hosttest/

## deps: what the tests need beyond Go (browser, etcd, the C, Rust and
## AssemblyScript toolchains), installed when missing
deps:
	@./.ci/install-deps

## test: vet, then every test under the race detector, then the SDK module.
## go test starts packages in the order given, -p at a time: the longest
## (TEST_FIRST) go first so that the short ones fill in beside them rather
## than make them start late. `make vet` has already run every vet check
## go test would (-vet=off). The end-to-end tests run the bin/setpoint that
## `make build` made (SETPOINT_BIN) instead of linking their own.
TEST_FIRST ?= ./test/ ./host/ ./cmd/setpoint/
test: deps build plugins vet
	SETPOINT_BIN=$(CURDIR)/$(BIN)/setpoint $(GO) test -race -vet=off -timeout $(TEST_TIMEOUT) $(TEST_FIRST) ./...
	@if [ -f sdk/go.mod ]; then cd sdk && $(GO) test -race -vet=off ./...; fi

vet:
	$(GO) vet ./...
	@if [ -f sdk/go.mod ]; then cd sdk && $(GO) vet ./...; fi
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lint: vet

## run: the server on the embedded store with the example kinds and plugins
## (it builds only the examples' modules; the server prints "examples ready"
## and where to point kubectl once they are loaded)
RUN_PLUGINS ?= $(wildcard examples/*/plugin)
run: build
	@./.ci/build-wasm $(RUN_PLUGINS)
	$(BIN)/setpoint server --addr $(ADDR) --data-dir $(DATA) --examples

## test-replicas: the end-to-end tests of CRUD, watch, apply, finalizers
## and GC, and plugins (kubectl and client-go) against three replicas on
## etcd, each test's requests spread over the replicas; `make test` runs a
## shorter list (TestReplicasE2E); then the failover of the widget plugin's
## leader with 1,000 Widgets (300 in make test)
REPLICAS_TESTS ?= TestClientGo|TestKubectl|TestServerSideApplyKubectl|TestServerSideApplyClientGo|TestAPIFinalizersAndGarbageCollection|TestMutatingPluginCannotSetSystemFields|TestCLIPlugins|TestPluginWrites
test-replicas: deps build plugins
	SETPOINT_BIN=$(CURDIR)/$(BIN)/setpoint SETPOINT_TEST_REPLICAS=3 $(GO) test -race -count=1 -timeout 20m -run '^($(REPLICAS_TESTS))$$' -v ./test/
	SETPOINT_BIN=$(CURDIR)/$(BIN)/setpoint SETPOINT_FAILOVER_WIDGETS=1000 $(GO) test -race -count=1 -timeout 20m -run '^TestReplicasFailover$$' -v ./test/

## soak: the long crash and load runs kept out of `make test`
soak: soak-store soak-server soak-linearizability

## soak-store: 500 crash-and-recover cycles of the store
soak-store: build
	SETPOINT_CRASH_CYCLES=500 $(GO) test -race -timeout 120m -run 'Crash' -v ./store/...

## soak-server: the server with the example plugins under churn, hot swaps and
## reconnecting watches for SOAK_DURATION, then convergence, watch-cache and
## leak checks (test/soak_test.go)
SOAK_DURATION ?= 10m
soak-server: build plugins
	SETPOINT_SOAK=$(SOAK_DURATION) $(GO) test -run '^TestSoak$$' -count=1 -timeout 120m -v ./test/

## soak-linearizability: LIN_HISTORIES short histories of concurrent clients
## through kill -9 and restart, each checked with porcupine and the watch and
## list checkers, on the embedded store and on etcd; a history too thin to
## count or whose check timed out is replaced by another, at most
## LIN_HISTORIES/5 (at least 2) times (test/linearizability_test.go; make
## test runs 2 on each)
LIN_HISTORIES ?= 100
soak-linearizability: build
	SETPOINT_LIN_HISTORIES=$(LIN_HISTORIES) $(GO) test -race -run '^TestLinearizability$$' -count=1 -timeout 120m -v ./test/

## fuzz: each fuzz target for a while (FUZZTIME per target)
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; done

bench: bench-store bench-api bench-watch bench-plugin bench-upload bench-reconcile bench-hostile bench-restart bench-replicas bench-peer

bench-store:
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m -v ./store/badger/bench

bench-api: build deps
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m -v ./test/bench/api

bench-watch: build
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m -v ./test/bench/watch

bench-plugin: plugins
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m -v ./host/bench

bench-upload: build plugins
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m -v ./test/bench/upload

bench-reconcile: build plugins
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m -v ./test/bench/reconcile

bench-hostile: build plugins
	SETPOINT_BIN=$(CURDIR)/bin/setpoint $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m -v ./test/bench/hostile

## bench-replicas: creates/s and watch fan-out on Badger, one replica on etcd
## and three replicas on one etcd, next to raw etcd Puts and watchers, then
## the time for REPLICAS_WIDGETS Widgets to converge through the widget
## plugin on each, and two plugins converging at once on three replicas
## with their controllers on one replica or on two (test/bench/replicas;
## REPLICAS_* are the sizes, its defaults without make are small)
REPLICAS_CREATES ?= 10000
REPLICAS_WIDGETS ?= 10000
REPLICAS_WATCHERS ?= 100
REPLICAS_UPDATES ?= 1000
REPLICAS_SPREAD ?= 2000
REPLICAS_TIMEOUT ?= 1200
bench-replicas: build plugins deps
	SETPOINT_BIN=$(CURDIR)/bin/setpoint SETPOINT_BENCH_REPLICAS_CREATES=$(REPLICAS_CREATES) \
	  SETPOINT_BENCH_REPLICAS_WIDGETS=$(REPLICAS_WIDGETS) SETPOINT_BENCH_REPLICAS_WATCHERS=$(REPLICAS_WATCHERS) \
	  SETPOINT_BENCH_REPLICAS_UPDATES=$(REPLICAS_UPDATES) SETPOINT_BENCH_REPLICAS_SPREAD=$(REPLICAS_SPREAD) \
	  SETPOINT_BENCH_REPLICAS_TIMEOUT=$(REPLICAS_TIMEOUT) \
	  $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m -v ./test/bench/replicas

## bench-restart: time to ready, resumed watches and served plugins after a
## restart with 100,000 objects and 3 plugins (OBJECTS, ROUNDS)
.PHONY: bench-restart
bench-restart: build plugins
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m -v ./test/bench/restart

## bench-peer: Setpoint beside kube-apiserver v1.34.4 on etcd v3.6.4 on the
## same client-go workload (creates, GETs, LISTs, watch fan-out to 200 and
## 2,000 watchers, start-up, memory, disk), printing each figure's ratio
## (test/bench/peer). build-peer.sh builds the peer into
## ~/.cache/setpoint/peer the first time (half an hour or more on two
## cores) and finds it there afterwards; KUBE_APISERVER_BIN and ETCD_BIN
## name ready-made binaries instead. The sizes are env vars (OBJECTS, GETS,
## WATCHERS, WATCH_UPDATES; see the package comment).
.PHONY: bench-peer
bench-peer: build
	@peer=$$(./test/bench/peer/build-peer.sh) && eval "$$peer" && export KUBE_APISERVER_BIN ETCD_BIN && \
	  echo "$$peer" && \
	  SETPOINT_BIN=$(CURDIR)/$(BIN)/setpoint $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m -v ./test/bench/peer

## bench-bundle: the scaling benchmarks prebuilt for a many-core machine
## with no Go toolchain: bench-bundle/setpoint-bench.tar.xz (stripped test
## binaries, server, widget plugin, the peer's etcd and kube-apiserver; at
## most BUNDLE_MAX_MIB, 64). test/bench/device/run.sh runs it there, pinned
## to 2 cores and on all; its header is the procedure.
.PHONY: bench-bundle
bench-bundle:
	GO=$(GO) ./test/bench/device/bundle.sh

clean:
	rm -rf $(BIN)
