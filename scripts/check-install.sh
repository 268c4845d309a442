#!/usr/bin/env bash
# Checks that Sluice installs and embeds as a user gets it, without this repository's go.mod
# around it: it serves this tree's files (those git tracks, as they are in the work tree) as
# github.com/sluicehq/sluice@v0.0.0-ci.<time>.<pid> from a file:// module proxy, then
#   1. runs `go install github.com/sluicehq/sluice/cmd/sluice@$version` into a temporary GOBIN
#      and runs the binary;
#   2. builds examples/embed in a module of its own in a temporary directory, with
#      `go get github.com/sluicehq/sluice@$version` and no replace, and runs it: a publish and
#      consume round trip through sdk/edge and its embedded broker, an empty key among the
#      messages, with no warning logged; checks that it links Sluice's pulsar-client-go fork
#      and not upstream's; and runs, from that module, the tests of the fork's patches that
#      core/broker/embedded has.
# Other modules come from the local module cache, then from the machine's GOPROXY.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# A version of its own per run, so that the module cache holds no earlier zip under it and
# runs side by side do not meet; its entries in the module cache go at the end.
version=v0.0.0-ci.$(date +%s).$$
module=github.com/sluicehq/sluice
modcache=$(go env GOMODCACHE)

tmp=$(mktemp -d)
cleanup() {
  chmod -R u+w "$modcache/$module@$version" 2>/dev/null || true
  rm -rf "$tmp" "$modcache/$module@$version" "$modcache/cache/download/$module/@v/$version".*
  rm -f "$modcache/cache/download/$module/@v/list"
}
trap cleanup EXIT

# The module's files: what git tracks, as the work tree has them.
src="$tmp/src"
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do
    [ -f "$f" ] && printf '%s\0' "$f"
  done | xargs -0 cp --parents -t "$src"
go run ./scripts/modzip -dir "$src" -version "$version" -proxy "$tmp/proxy"

export GOPROXY="file://$tmp/proxy,$(go env GOPROXY)"
export GONOSUMDB=$module GOFLAGS=-mod=mod GOWORK=off
export GOBIN="$tmp/bin"

echo "== go install $module/cmd/sluice@$version"
(cd "$tmp" && go install "$module/cmd/sluice@$version")
"$GOBIN/sluice" version

echo "== examples/embed in a module of its own"
mkdir -p "$tmp/embed"
cp examples/embed/main.go "$tmp/embed/"
cd "$tmp/embed"
go mod init example.com/embed >/dev/null 2>&1
go get "$module@$version"
go mod tidy
if grep -q '^replace' go.mod; then
  echo "the embedding module has a replace" >&2
  exit 1
fi
deps=$(go list -deps .)
if grep -q '^github.com/apache/pulsar-client-go' <<<"$deps"; then
  echo "the embedding program links upstream pulsar-client-go" >&2
  exit 1
fi
grep -q "^$module/third_party/pulsar-client-go/pulsar$" <<<"$deps" || {
  echo "the embedding program does not link $module/third_party/pulsar-client-go" >&2
  exit 1
}
go build -o embed .
if ! ./embed >out.txt 2>err.txt; then
  cat out.txt err.txt >&2
  exit 1
fi
cat out.txt
if grep -qi 'dialer' err.txt; then
  echo "the embedding program logged about a dialer:" >&2
  cat err.txt >&2
  exit 1
fi
grep -q 'delivered "empty key" key ""' out.txt

# The fork's tests, run from the embedding module on the code it builds: the receipt race
# (patch 2), sends queued at a close (patch 5) and sends racing the library's close (patch 8).
go test -count 1 -run 'TestReceiptsAcrossDroppedConnections|TestCloseAnswersQueuedSends|TestSendRacingTheLibrarysClose' \
  "$module/core/broker/embedded"
cd "$root"
echo "check-install: go install and an embedding module at $version are fine"
