#!/usr/bin/env bash
# Regenerates plugins/internal/strategypb, the strategy plugin wire protocol, from
# plugins/internal/strategypb/strategy.proto. Tool versions are pinned: protoc-gen-go matches
# google.golang.org/protobuf in go.mod; protoc-gen-go-grpc 1.5.1 emits code for
# grpc >= 1.64 (go-plugin v1.8.0 pulls grpc 1.71).
set -euo pipefail
cd "$(dirname "$0")/.."

PROTOC_GEN_GO_VERSION=v1.36.6
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1
out=plugins/internal/strategypb
bin="$PWD/bin"

command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }
GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
GOBIN="$bin" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@${PROTOC_GEN_GO_GRPC_VERSION}"

PATH="$bin:$PATH" protoc --proto_path="$out" \
    --go_out="$out" --go_opt=paths=source_relative \
    --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
    "$out/strategy.proto"
echo "regenerated $out"
