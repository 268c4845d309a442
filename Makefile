# Sluice. `make run` starts the edge with its embedded broker; `make test` runs the test suite.
GO        ?= go
BIN       := bin
# The version stamped into bin/sluice; empty leaves it to Go's build information (the module
# version and the VCS commit), which `sluice version` prints too.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null)
LDFLAGS   := $(if $(VERSION),-X main.version=$(VERSION))
BENCHTIME ?= 3s
COUNT     ?= 5

.PHONY: pulsar pulsar-stop pulsar-wipe pulsar-proxy pulsar-proxy-stop pulsar-status test-pulsar \
	third-party third-party-check check-install all build image helm test-deploy build-bench cross run test test-norace test-load test-browser screenshot test-clients vet lint fuzz proto examples bench-broker bench-broker-cpu bench-plugins clean bench bench-memory bench-throughput bench-consumers \
	bench-deliveries bench-flood bench-connections bench-floor bench-compare bench-peers bench-pulsar bench-pulsar-stop

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/sluice ./cmd/sluice

# The container image (docs/operations.md, "Deploying"): sluice built static for linux as build
# stamps it (the version is never empty here, since it labels the image), in scratch layers
# that deploy/cmd/sluice-image assembles. That program is a Go module of its own (deploy/), so
# that go-containerregistry and the Kubernetes API types never enter the product's go.mod.
# Writes dist/sluice-image.tar (docker load) and dist/sluice-oci (an OCI image layout).
DIST          := dist
IMAGE_ARCH    ?= $(shell $(GO) env GOARCH)
IMAGE_VERSION := $(or $(VERSION),dev)
IMAGE_BIN     := $(BIN)/linux-$(IMAGE_ARCH)/sluice
image:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags "-X main.version=$(IMAGE_VERSION)" -o $(IMAGE_BIN) ./cmd/sluice
	@mkdir -p $(DIST)
	cd deploy && SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) $(GO) run ./cmd/sluice-image \
	  -binary $(CURDIR)/$(IMAGE_BIN) -version $(IMAGE_VERSION) -revision "$$(git rev-parse HEAD 2>/dev/null)" \
	  -out $(CURDIR)/$(DIST)/sluice-image.tar -oci $(CURDIR)/$(DIST)/sluice-oci

# helm, pinned, built from the Go module proxy once into bin/helm-VERSION (with an empty build
# cache it takes about 230 CPU-seconds; the file's presence makes it idempotent).
HELM_VERSION := v3.22.0
HELM         := $(BIN)/helm-$(HELM_VERSION)
helm: $(HELM)
$(HELM):
	GOBIN=$(CURDIR)/$(BIN)/.helm-$(HELM_VERSION) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(BIN)/.helm-$(HELM_VERSION)/helm $@ && rmdir $(BIN)/.helm-$(HELM_VERSION)

# The image and the Helm chart (deploy/): the image read back, its filesystem extracted and
# its entrypoint run (--version, then serve on loopback until /healthz and /readyz answer and
# SIGTERM drains it); the chart linted, rendered with several values and decoded strictly into
# the Kubernetes API types, its invariants checked and its configuration validated by sluice.
test-deploy: image $(HELM)
	cd deploy && $(GO) vet ./...
	cd deploy && DEPLOY_IMAGE=$(CURDIR)/$(DIST)/sluice-image.tar DEPLOY_IMAGE_VERSION=$(IMAGE_VERSION) \
	  HELM=$(CURDIR)/$(HELM) DEPLOY_SLUICE=$(CURDIR)/$(IMAGE_BIN) $(GO) test -race -count 1 -timeout 10m ./...

# The benchmark and load tools, a command of their own (never linked into sluice); they run
# bin/sluice as the server under test.
build-bench: build
	$(GO) build -o $(BIN)/sluice-bench ./cmd/sluice-bench

# make run [LISTEN=host:port] [CONFIG="a.yaml b.yaml"]: the edge with its embedded broker, on
# loopback by default. CONFIG names configuration files, merged in order; LISTEN overrides
# their listen (LISTEN= leaves it to them).
LISTEN ?= 127.0.0.1:8080
run: build
	$(BIN)/sluice serve $(foreach c,$(CONFIG),-c $(c)) $(if $(LISTEN),--listen $(LISTEN))

test: vet
	$(GO) test -race -timeout 15m ./...

# The checks the race detector would falsify, run without it: allocation budgets of the data
# path and the codecs, the heap cost of a frame's properties, and the client library's copies
# of a payload (under the race detector sync.Pool drops buffers on purpose). An allocation
# regression fails here.
test-norace:
	$(GO) test -p 1 -count 1 -run 'AllocBudget|TestCodecAllocations|TestFrameLimitsBoundTheCost|TestPropertyOverheadMeasured|TestUncompressedPayloadsAreNotCopied|TestFlushWhenIdleWaitsForReadySenders' ./...

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(find . -name '*.go' -not -name '*.pb.go' -not -path './.git/*' -not -path './third_party/*')); \
	  if [ -n "$$out" ]; then echo "not gofmt-ed:"; echo "$$out"; exit 1; fi

# golangci-lint with .golangci.yml (every linter and exclusion is explained there). .ci/run
# installs the pinned version into bin/; elsewhere the one on PATH runs.
GOLANGCI_LINT ?= $(firstword $(wildcard $(BIN)/golangci-lint) golangci-lint)
lint:
	$(GOLANGCI_LINT) run ./...

# Sluice, its SDK and its tests vet on the systems other than Linux that users run them on
# (the tests that send signals or stop plugins with them are Unix's).
cross:
	GOOS=windows $(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=freebsd $(GO) vet ./...

# third_party/pulsar-client-go is Sluice's fork of pulsar-client-go (third_party/README.md):
# third-party rebuilds it from the module proxy and the patches, third-party-check fails when it
# has drifted.
third-party:
	scripts/vendor-pulsar-client-go.sh

third-party-check:
	scripts/vendor-pulsar-client-go.sh --check

# `go install github.com/sluicehq/sluice/cmd/sluice@version`, and a program of its own module
# that embeds sdk/edge, built from this tree served by a file:// module proxy; the program runs
# a publish and consume round trip.
check-install:
	scripts/check-install.sh

# The load and chaos test (docs/security.md): 10,000 idle connections beside 500 producers
# against `sluice serve` and `sluice broker` as separate processes, then broker connections
# dropped, the broker killed and restarted and the plugin killed, every message answered and
# every ok read back. Not part of `make test`; it takes the benchmark lock.
test-load: build examples
	SLUICE_LOAD_TEST=1 flock /tmp/sluice-bench.lock $(GO) test -tags load -run TestLoadAndChaos -count 1 -timeout 15m -v ./cmd/sluice-bench/loadtest/

# Apache Pulsar 4.2.4 standalone on loopback (scripts/pulsar/pulsar.sh; needs Java 17 and
# Maven, which fetches the jars from Maven Central once into ~/.cache/sluice-pulsar): make pulsar
# starts it and prints the SLUICE_PULSAR_* variables to export; make pulsar-proxy starts Pulsar's
# WebSocket proxy in front of it.
PULSAR := scripts/pulsar/pulsar.sh
pulsar:
	@$(PULSAR) start

pulsar-stop:
	@$(PULSAR) proxy-stop
	@$(PULSAR) stop

pulsar-wipe:
	@$(PULSAR) wipe

pulsar-proxy:
	@$(PULSAR) proxy-start

pulsar-proxy-stop:
	@$(PULSAR) proxy-stop

pulsar-status:
	@$(PULSAR) status

# The edge against real Pulsar (core/server/pulsar_real_test.go, build tag pulsar), and the
# differential conformance run (core/server/pulsar_diff_test.go: Pulsar's own WebSocket service,
# its WebSocket proxy, Sluice in front of the same Pulsar and Sluice on its embedded broker, frame
# by frame), and sluice-bench's pulsar and deliveries modes in front of it (brief end-to-end runs
# against the proxy and sluice serve). Without SLUICE_PULSAR_URL it uses the Pulsar of `make
# pulsar` and its proxy, starting them first when they are not running and stopping them at the
# end if it started them.
test-pulsar:
	@set -e; \
	if [ -z "$$SLUICE_PULSAR_URL" ]; then \
	  if ! $(PULSAR) status >/dev/null 2>&1; then trap '$(PULSAR) proxy-stop; $(PULSAR) stop' EXIT; fi; \
	  eval "$$($(PULSAR) start)"; \
	  eval "$$($(PULSAR) proxy-start)"; \
	fi; \
	$(GO) test -race -tags pulsar -count 1 -v -timeout 20m -run '^(TestRealPulsar|TestPulsar.*|TestEmptyPayloadDelivered)$$' ./core/server/ ./cmd/sluice-bench/internal/bench/

# The dashboard in headless Chromium against an edge under load (needs Debian's chromium and
# chromium-driver; .ci/run installs them). `make screenshot` also writes docs/dashboard.png.
test-browser:
	$(GO) test -race -tags browser -run TestDashboardInBrowser -count 1 -v ./core/server/

screenshot:
	SLUICE_SCREENSHOT=$(CURDIR)/docs/dashboard.png $(GO) test -tags browser -run TestDashboardInBrowser -count 1 ./core/server/

# The Python, Node and Go example clients against a real `sluice serve`
# (needs python3-websocket and node/npm; .ci/run installs them).
test-clients:
	./scripts/test-clients.sh

# Short fuzzing of every parser; FUZZTIME per target.
FUZZTIME ?= 15s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# Regenerates the protocol code: the embedded broker's and the plugin protocol's (needs protoc:
# apt-get install protobuf-compiler; the Go generators are installed at pinned versions).
proto:
	./scripts/genproto.sh
	./scripts/genproto-plugins.sh

# The plugin binary serving the builtin strategies, and the example plugins.
examples:
	$(GO) build -o $(BIN)/ ./cmd/sluice-strategies ./examples/plugins/tenant-tiers ./examples/plugins/aimd

# A strategy served by a plugin against the same strategy in-process: the decision latency a
# plugin adds to a handshake, then edge throughput with each, in the same run.
bench-plugins: build-bench examples
	$(GO) test -run '^$$' -bench 'BenchmarkDecision' -benchtime 10000x -count $(COUNT) ./plugins/
	$(BIN)/sluice-bench throughput -rounds $(BENCH_ROUNDS) -round $(BENCH_ROUND) -configs hybrid,none -plugin $(BIN)/sluice-strategies $(BENCH_PIN) $(BENCH_FLAGS)

# pulsar-client-go producing to and consuming from the embedded broker, 1 KiB messages.
bench-broker:
	$(GO) test -run '^$$' -bench 'BenchmarkProduceConsume' -benchtime $(BENCHTIME) -count $(COUNT) ./core/broker/embedded/

# The embedded broker in a process of its own, pinned to CPU 1, pulsar-client-go on CPU 0:
# unbatched 1 KiB publishes per broker CPU-second; then the store filled past its bound for
# BENCH_FLOOD (throughput, broker CPU and RSS per 10 s window); then what stored messages cost
# the collector.
BENCH_FLOOD ?= 60s
bench-broker-cpu:
	SLUICE_BENCH_BROKER_CPUS=1 taskset -c 0 $(GO) test -run '^$$' -bench 'BenchmarkPublishBrokerCPU' -benchtime 400000x -count $(COUNT) ./core/broker/embedded/
	SLUICE_BENCH_BROKER_CPUS=1 SLUICE_BENCH_FLOOD=$(BENCH_FLOOD) taskset -c 0 $(GO) test -run '^$$' -bench 'BenchmarkStoreFlood' -benchtime 1x -timeout 30m ./core/broker/embedded/
	$(GO) test -run '^$$' -bench 'BenchmarkGCWithStoredMessages' -benchtime 20x ./core/broker/embedded/

clean:
	rm -rf $(BIN)

# The edge benchmarks (docs/benchmarks.md): each builds bin/sluice-bench, which starts
# `sluice broker` and `sluice serve` from bin/sluice (and the reference servers) as separate
# processes and stops them at the end. BENCH_FLAGS is passed to every one (e.g.
# BENCH_FLAGS=-markdown, or BENCH_FLAGS="-out results/"). On a machine with two or more CPUs the
# throughput, floor, compare, peers, plugins, deliveries, connections and Pulsar benchmarks pin the
# servers to CPU 1 and the load generator to CPU 0 (docs/benchmarks.md, "The method");
# BENCH_CPUS= turns that off.
BENCH_DURATION ?= 20s
BENCH_ROUNDS   ?= 5
BENCH_ROUND    ?= 5s
BENCH_CONSUMER_DURATION ?= 30s
BENCH_CONSUMER_LIMIT    ?= 32MiB
BENCH_FLOOD_DURATION    ?= 5m
BENCH_CONNECTIONS       ?= 10000
BENCH_KIND              ?= producer
BENCH_CPUS     ?= $(shell [ "$$(nproc 2>/dev/null || echo 1)" -ge 2 ] && echo server=1,load=0)
BENCH_PIN      := $(if $(BENCH_CPUS),-cpus $(BENCH_CPUS))
BENCH_FLAGS    ?=
# bench-compare: the sluice binary to compare against, e.g. one built from an older commit.
BENCH_OLD      ?=

bench: bench-memory bench-throughput bench-consumers bench-deliveries

bench-memory: build-bench
	$(BIN)/sluice-bench memory -duration $(BENCH_DURATION) $(BENCH_FLAGS)

bench-throughput: build-bench
	$(BIN)/sluice-bench throughput -rounds $(BENCH_ROUNDS) -round $(BENCH_ROUND) -ceiling -direct $(BENCH_PIN) $(BENCH_FLAGS)

bench-consumers: build-bench
	$(BIN)/sluice-bench consumers -duration $(BENCH_CONSUMER_DURATION) -consumer-limit $(BENCH_CONSUMER_LIMIT) $(BENCH_FLAGS)

bench-deliveries: build-bench
	$(BIN)/sluice-bench deliveries -configs edge,single $(BENCH_PIN) $(BENCH_FLAGS)

bench-flood: build-bench
	$(BIN)/sluice-bench flood -duration $(BENCH_FLOOD_DURATION) $(BENCH_FLAGS)

bench-connections: build-bench
	$(BIN)/sluice-bench connections -conns $(BENCH_CONNECTIONS) -kind $(BENCH_KIND) $(BENCH_PIN) $(BENCH_FLAGS)

# The latency floor: one connection, one message in flight.
bench-floor: build-bench
	$(BIN)/sluice-bench throughput -conns 1 -window 1 -rounds $(BENCH_ROUNDS) -round $(BENCH_ROUND) -ceiling -direct $(BENCH_PIN) $(BENCH_FLAGS)

# Before/after: every throughput configuration with bin/sluice and with BENCH_OLD, interleaved.
bench-compare: build-bench
	@test -n "$(BENCH_OLD)" || { echo "set BENCH_OLD=/path/to/old/sluice"; exit 2; }
	$(BIN)/sluice-bench throughput -rounds $(BENCH_ROUNDS) -round $(BENCH_ROUND) -ceiling -direct -compare $(BENCH_OLD) $(BENCH_PIN) $(BENCH_FLAGS)

# Sluice beside Centrifugo and NATS JetStream (each installed once by sluice-bench, never
# linked into sluice): the single process and the edge alone, unbatched and with batching: auto,
# at 16 x 64 and 1,000 x 4.
bench-peers: build-bench
	$(BIN)/sluice-bench throughput -rounds $(BENCH_ROUNDS) -round $(BENCH_ROUND) -configs single,edge,single-batched,edge-batched,centrifugo,nats $(BENCH_PIN) $(BENCH_FLAGS)
	$(BIN)/sluice-bench throughput -rounds $(BENCH_ROUNDS) -round $(BENCH_ROUND) -conns 1000 -window 4 -topics 100 -configs single,edge,single-batched,edge-batched,centrifugo,nats $(BENCH_PIN) $(BENCH_FLAGS)

# Pulsar's WebSocket proxy side by side with Sluice in front of the same real Apache Pulsar
# (docs/benchmarks.md): a Pulsar of the benchmark's own on ports apart from the default one
# that tests start and kill (its state in BENCH_PULSAR_STATE), started through
# scripts/pulsar/pulsar.sh; then 16 × 64 and 1,000 × 4 with the direct reference, consumers
# reading a backlog, and the flood under a namespace publish rate, each against a freshly
# started Pulsar WebSocket proxy (so that
# its memory is that run's, as sluice serve's is). At the end Pulsar is stopped and its data
# removed (the bookie keeps several GiB from one run) unless BENCH_PULSAR_KEEP=1; then make
# bench-pulsar-stop stops it, keeping the data.
BENCH_PULSAR_STATE  ?= $(HOME)/.cache/sluice-pulsar/state-bench
BENCH_PULSAR_PORTS  ?= SLUICE_PULSAR_PORT=6670 SLUICE_PULSAR_WEB_PORT=18280 SLUICE_PULSAR_PROXY_PORT=18290
BENCH_PULSAR_ROUNDS ?= 3
BENCH_PULSAR_ROUND  ?= 5s
BENCH_PULSAR_KEEP   ?=
BENCH_PULSAR_ENV    := SLUICE_PULSAR_STATE=$(BENCH_PULSAR_STATE) $(BENCH_PULSAR_PORTS)
bench-pulsar: build-bench
	@set -e; pulsar() { $(BENCH_PULSAR_ENV) scripts/pulsar/pulsar.sh "$$@" >/dev/null; }; \
	  $(if $(BENCH_PULSAR_KEEP),,trap 'pulsar wipe' EXIT;) \
	  pulsar start; \
	  run() { pulsar proxy-stop; pulsar proxy-start; echo "+ sluice-bench $$*"; \
	    SLUICE_PULSAR_STATE=$(BENCH_PULSAR_STATE) flock /tmp/sluice-bench.lock $(BIN)/sluice-bench "$$@" $(BENCH_FLAGS); }; \
	  run pulsar -rounds $(BENCH_PULSAR_ROUNDS) -round $(BENCH_PULSAR_ROUND) -conns 16 -window 64 $(BENCH_PIN); \
	  run pulsar -rounds $(BENCH_PULSAR_ROUNDS) -round $(BENCH_PULSAR_ROUND) -conns 1000 -window 4 -topics 100 $(BENCH_PIN); \
	  run deliveries -pulsar-state $(BENCH_PULSAR_STATE) -rounds $(BENCH_PULSAR_ROUNDS) $(BENCH_PIN); \
	  run pulsar-flood $(BENCH_PIN)

bench-pulsar-stop:
	-$(BENCH_PULSAR_ENV) scripts/pulsar/pulsar.sh proxy-stop
	-$(BENCH_PULSAR_ENV) scripts/pulsar/pulsar.sh stop
