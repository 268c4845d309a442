# Sluice. `make run` starts the edge with its embedded broker; `make test` runs the test suite.
GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
BENCHTIME ?= 3s
COUNT     ?= 5

.PHONY: all build run test test-clients vet fuzz proto bench-broker clean

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

# Regenerates the embedded broker's protocol code (needs protoc: apt-get install protobuf-compiler).
proto:
	./scripts/genproto.sh

# pulsar-client-go producing to and consuming from the embedded broker, 1 KiB messages.
bench-broker:
	$(GO) test -run '^$$' -bench 'BenchmarkProduceConsume' -benchtime $(BENCHTIME) -count $(COUNT) ./core/broker/embedded/

clean:
	rm -rf $(BIN)
