#!/usr/bin/env bash
# Regenerates core/broker/embedded/pulsarpb from pulsar-client-go's PulsarApi.proto.
#
# The proto is copied from Sluice's pulsar-client-go fork (third_party/pulsar-client-go), with its proto
# package renamed to sluice.pulsar.proto and its file renamed: linking a second copy of
# "PulsarApi.proto" registered under package pulsar.proto panics at init in any binary that
# also links pulsar-client-go. The wire encoding does not depend on the package name.
set -euo pipefail
cd "$(dirname "$0")/.."

PROTOC_GEN_GO_VERSION=v1.36.6
out=core/broker/embedded/pulsarpb
bin="$PWD/bin"

command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }
GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"

src=third_party/pulsar-client-go/pulsar/internal/pulsar_proto/PulsarApi.proto
sed -e 's/^package pulsar\.proto;/package sluice.pulsar.proto;/' \
    -e 's#^option go_package = .*#option go_package = "github.com/sluicehq/sluice/core/broker/embedded/pulsarpb";#' \
    "$src" > "$out/sluice_pulsar_api.proto"

PATH="$bin:$PATH" protoc --proto_path="$out" --go_out="$out" --go_opt=paths=source_relative \
    "$out/sluice_pulsar_api.proto"
echo "regenerated $out"
