#!/usr/bin/env bash
# Rebuilds third_party/pulsar-client-go, Sluice's fork of pulsar-client-go: the module at
# $version from the Go module proxy, only the packages Sluice builds (their Go files without
# tests, and their .proto) less the files in $omit, with the patches
# third_party/pulsar-client-go-N-*.patch applied in the order of their numbers, then its imports
# rewritten from github.com/apache/pulsar-client-go/… to $fork/…. The copy has no go.mod: its
# packages are packages of github.com/sluicehq/sluice, so every build of Sluice, `go install` and
# programs that import sdk/edge included, compiles this code (third_party/README.md says why,
# what each patch does and when it goes). The patches keep upstream's paths, so that each can
# be proposed upstream as it is; the rewrite comes after them.
#
# With --check, it rebuilds into a temporary directory and fails when the committed copy
# differs.
set -euo pipefail
cd "$(dirname "$0")/.."

version=v0.19.0
module=github.com/apache/pulsar-client-go
fork=github.com/sluicehq/sluice/third_party/pulsar-client-go
packages=(oauth2 oauth2/cache oauth2/clock pulsar pulsar/auth pulsar/backoff pulsar/crypto
  pulsar/internal pulsar/internal/compression pulsar/internal/crypto pulsar/internal/pulsar_proto
  pulsar/log)
# Athenz authentication links the Athenz and Kubernetes client libraries into every program
# that links the client; pulsar-client-go-9-no-athenz.patch removes what refers to it.
omit=(pulsar/auth/athenz.go)
dest=third_party/pulsar-client-go

# Outside this module, so that the download does not touch this module's go.mod.
src=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$module@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "no source directory for $module@$version" >&2; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cp "$src/LICENSE" "$src/NOTICE" "$out/"
for p in "${packages[@]}"; do
  mkdir -p "$out/$p"
  # The .proto files too: make proto (scripts/genproto.sh) reads PulsarApi.proto from here.
  find "$src/$p" -maxdepth 1 -type f \( -name '*.go' ! -name '*_test.go' -o -name '*.proto' \) \
    -exec cp {} "$out/$p/" \;
done
chmod -R u+w "$out"
for f in "${omit[@]}"; do
  rm "$out/$f"
done
# In the order of their numbers (a plain glob would put 10 before 2).
root=$PWD
for patch in $(ls third_party/pulsar-client-go-*.patch | sort -t- -k4,4n); do
  (cd "$out" && git apply -p1 "$root/$patch")
done

# The fork's own import path. Only imports: text that names the upstream module (links to its
# issues, its module path in internal/version.go) stays as it is.
find "$out" -name '*.go' -exec sed -i "s#\"$module/#\"$fork/#" {} +
# internal/version.go finds the library's version in the program's build information under
# upstream's module path, which a fork is not: it is the version the fork was cut from.
sed -i -e "s#^\tVersion = \"unknown\"#\tVersion = \"$version\"#" \
  -e "s#^\tClientVersionString = \"Pulsar-Go-version-unknown\"#\tClientVersionString = \"Pulsar-Go-$version\"#" \
  "$out/pulsar/internal/version.go"
gofmt -w "$out" # the rewritten imports sort differently

if [ "${1:-}" = "--check" ]; then
  if ! diff -r "$out" "$dest" >/dev/null; then
    echo "$dest differs from $module@$version with the patches; run scripts/vendor-pulsar-client-go.sh" >&2
    diff -r "$out" "$dest" | head -20 >&2
    exit 1
  fi
  echo "$dest is $module@$version with third_party/pulsar-client-go-*.patch, as $fork"
  exit 0
fi
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
cp -r "$out" "$dest"
echo "wrote $dest ($module@$version with the patches, as $fork)"
