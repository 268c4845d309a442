# Sluice. `make run` starts the edge with its embedded broker; `make test` runs the test suite.
GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
BENCHTIME ?= 3s
COUNT     ?= 5

.PHONY: all build run test test-clients vet fuzz proto examples bench-broker bench-plugins clean bench bench-memory bench-throughput bench-consumers \
	bench-deliveries bench-flood bench-connections bench-floor bench-compare

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
	$(BIN)/sluice bench throughput -rounds $(BENCH_ROUNDS) -round $(BENCH_ROUND) -configs hybrid,none -plugin $(BIN)/sluice-strategies $(BENCH_PIN) $(BENCH_FLAGS)

# pulsar-client-go producing to and consuming from the embedded broker, 1 KiB messages.
bench-broker:
	$(GO) test -run '^$$' -bench 'BenchmarkProduceConsume' -benchtime $(BENCHTIME) -count $(COUNT) ./core/broker/embedded/

clean:
	rm -rf $(BIN)

# The edge benchmarks (docs/benchmarks.md): each starts `sluice broker` and `sluice serve` (and
# the reference servers) as separate processes and stops them at the end. BENCH_FLAGS is passed
# to every one (e.g. BENCH_FLAGS=-markdown, or BENCH_FLAGS="-out results/"). On a machine with
# two or more CPUs the throughput and delivery benchmarks pin the servers to CPU 1 and the load
# generator to CPU 0 (DESIGN.md, "Measuring performance"); BENCH_CPUS= turns that off.
BENCH_DURATION ?= 20s
BENCH_ROUNDS   ?= 5
BENCH_ROUND    ?= 5s
BENCH_CONSUMER_DURATION ?= 30s
BENCH_CONSUMER_LIMIT    ?= 32MiB
BENCH_FLOOD_DURATION    ?= 5m
BENCH_CONNECTIONS       ?= 10000
BENCH_CPUS     ?= $(shell [ "$$(nproc 2>/dev/null || echo 1)" -ge 2 ] && echo server=1,load=0)
BENCH_PIN      := $(if $(BENCH_CPUS),-cpus $(BENCH_CPUS))
BENCH_FLAGS    ?=
# bench-compare: the sluice binary to compare against, e.g. one built from an older commit.
BENCH_OLD      ?=

bench: bench-memory bench-throughput bench-consumers bench-deliveries

bench-memory: build
	$(BIN)/sluice bench memory -duration $(BENCH_DURATION) $(BENCH_FLAGS)

bench-throughput: build
	$(BIN)/sluice bench throughput -rounds $(BENCH_ROUNDS) -round $(BENCH_ROUND) -ceiling -direct $(BENCH_PIN) $(BENCH_FLAGS)

bench-consumers: build
	$(BIN)/sluice bench consumers -duration $(BENCH_CONSUMER_DURATION) -consumer-limit $(BENCH_CONSUMER_LIMIT) $(BENCH_FLAGS)

bench-deliveries: build
	$(BIN)/sluice bench deliveries -configs edge,single $(BENCH_PIN) $(BENCH_FLAGS)

bench-flood: build
	$(BIN)/sluice bench flood -duration $(BENCH_FLOOD_DURATION) $(BENCH_FLAGS)

bench-connections: build
	$(BIN)/sluice bench connections -conns $(BENCH_CONNECTIONS) $(BENCH_FLAGS)

# The latency floor: one connection, one message in flight.
bench-floor: build
	$(BIN)/sluice bench throughput -conns 1 -window 1 -rounds $(BENCH_ROUNDS) -round $(BENCH_ROUND) -ceiling -direct $(BENCH_PIN) $(BENCH_FLAGS)

# Before/after: every throughput configuration with bin/sluice and with BENCH_OLD, interleaved.
bench-compare: build
	@test -n "$(BENCH_OLD)" || { echo "set BENCH_OLD=/path/to/old/sluice"; exit 2; }
	$(BIN)/sluice bench throughput -rounds $(BENCH_ROUNDS) -round $(BENCH_ROUND) -ceiling -direct -compare $(BENCH_OLD) $(BENCH_PIN) $(BENCH_FLAGS)
