#!/usr/bin/env bash
# Runs the Python, Node and Go example clients against a real `sluice serve` with its embedded
# broker, on a loopback port. Needs python3-websocket (Debian) and node with npm.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
"$PY" -c 'import websocket' || { echo "python3-websocket is not installed" >&2; exit 1; }
(cd examples/clients/node && npm ci --no-audit --no-fund --silent)

make -s build
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log=$(mktemp)
./bin/sluice serve --listen "127.0.0.1:$port" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.1
done
export PULSAR_WS_URL="ws://127.0.0.1:$port"

run() { echo "== $*"; timeout 60 "$@"; }
passed=0
failed=0
check() { if run "$@"; then passed=$((passed+1)); else failed=$((failed+1)); echo "FAILED: $*"; fi; }

# Python: one docs-style message with a numeric context, then a batch; consume and read back.
export TOPIC=python-$$
check "$PY" examples/clients/python/producer.py 1
check "$PY" examples/clients/python/producer.py 5
check "$PY" examples/clients/python/consumer.py 6
check "$PY" examples/clients/python/reader.py 6

# Node.
export TOPIC=node-$$
check node examples/clients/node/producer.js 5
check node examples/clients/node/consumer.js 5
check node examples/clients/node/reader.js 5

# Go.
check go run ./examples/clients/go -topic go-$$ -n 20

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
