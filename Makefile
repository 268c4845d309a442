# Sluice. `make run` starts the edge with its embedded broker; `make test` runs the test suite.
GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
BENCHTIME ?= 3s
COUNT     ?= 5

.PHONY: all build run test test-clients vet fuzz proto examples bench-broker bench-broker-cpu bench-plugins clean bench bench-memory bench-throughput bench-consumers

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/sluice ./cmd/sluice

run: build
	$(BIN)/sluice serve $(if $(CONFIG),-c $(CONFIG))

test: vet
	$(GO) test -race -timeout 15m ./...

vet:
	$(GO) vet ./...

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
bench-plugins: build examples
	$(GO) test -run '^$$' -bench 'BenchmarkDecision' -benchtime 10000x -count $(COUNT) ./plugins/
	$(BIN)/sluice bench throughput -rounds $(BENCH_ROUNDS) -round $(BENCH_ROUND) -plugin $(BIN)/sluice-strategies $(BENCH_FLAGS)

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

# The edge benchmarks (docs/benchmarks.md): each starts `sluice broker` and one `sluice serve`
# per configuration as separate processes, and stops them at the end. BENCH_FLAGS is passed to
# every one (e.g. BENCH_FLAGS=-markdown).
BENCH_DURATION ?= 20s
BENCH_ROUNDS   ?= 5
BENCH_ROUND    ?= 5s
BENCH_CONSUMER_DURATION ?= 30s
BENCH_CONSUMER_LIMIT    ?= 32MiB
BENCH_FLAGS    ?=

bench: bench-memory bench-throughput bench-consumers

bench-memory: build
	$(BIN)/sluice bench memory -duration $(BENCH_DURATION) $(BENCH_FLAGS)

bench-throughput: build
	$(BIN)/sluice bench throughput -rounds $(BENCH_ROUNDS) -round $(BENCH_ROUND) $(BENCH_FLAGS)

bench-consumers: build
	$(BIN)/sluice bench consumers -duration $(BENCH_CONSUMER_DURATION) -consumer-limit $(BENCH_CONSUMER_LIMIT) $(BENCH_FLAGS)
