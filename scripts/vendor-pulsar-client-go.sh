#!/usr/bin/env bash
# Rebuilds third_party/pulsar-client-go: pulsar-client-go at $version from the Go module
# proxy, only the packages Sluice builds (their Go files without tests, and their .proto), with
# the patches third_party/pulsar-client-go-*.patch applied in name order (third_party/README.md
# says what each does, why, and when the copy goes). go.mod replaces the module with the copy. With --check, it rebuilds into a
# temporary directory and fails when the committed copy differs.
set -euo pipefail
cd "$(dirname "$0")/.."

version=v0.19.0
module=github.com/apache/pulsar-client-go
packages=(oauth2 oauth2/cache oauth2/clock pulsar pulsar/auth pulsar/backoff pulsar/crypto
  pulsar/internal pulsar/internal/compression pulsar/internal/crypto pulsar/internal/pulsar_proto
  pulsar/log)
dest=third_party/pulsar-client-go

# Outside this module, so that go.mod's replace does not apply to the download.
src=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$module@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "no source directory for $module@$version" >&2; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cp "$src/go.mod" "$src/go.sum" "$src/LICENSE" "$src/NOTICE" "$out/"
for p in "${packages[@]}"; do
  mkdir -p "$out/$p"
  # The .proto files too: make proto (scripts/genproto.sh) reads PulsarApi.proto from here.
  find "$src/$p" -maxdepth 1 -type f \( -name '*.go' ! -name '*_test.go' -o -name '*.proto' \) \
    -exec cp {} "$out/$p/" \;
done
chmod -R u+w "$out"
for patch in "$PWD"/third_party/pulsar-client-go-*.patch; do
  (cd "$out" && git apply -p1 "$patch")
done

if [ "${1:-}" = "--check" ]; then
  if ! diff -r "$out" "$dest" >/dev/null; then
    echo "$dest differs from $module@$version with the patches; run scripts/vendor-pulsar-client-go.sh" >&2
    diff -r "$out" "$dest" | head -20 >&2
    exit 1
  fi
  echo "$dest is $module@$version with third_party/pulsar-client-go-*.patch"
  exit 0
fi
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
cp -r "$out" "$dest"
echo "wrote $dest ($module@$version with the patches)"
