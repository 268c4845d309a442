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

# Python's websocket-client over TLS: it sends "Origin: http://host:port" on wss:// too, which
# a default edge admits (same host and port); a page of another site is still refused.
tls_dir=$(mktemp -d)
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$tls_dir/key.pem" -out "$tls_dir/cert.pem" 2>/dev/null
tls_port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
SLUICE_ADMIN_LISTEN=off SLUICE_TLS__CERT_FILE="$tls_dir/cert.pem" SLUICE_TLS__KEY_FILE="$tls_dir/key.pem" \
  ./bin/sluice serve --listen "127.0.0.1:$tls_port" >"$tls_dir/log" 2>&1 &
tls_pid=$!
trap 'kill $pid $tls_pid 2>/dev/null; wait $pid $tls_pid 2>/dev/null; rm -rf "$log" "$tls_dir"' EXIT
for _ in $(seq 1 100); do
  curl -sk -o /dev/null "https://127.0.0.1:$tls_port/" && break
  kill -0 $tls_pid 2>/dev/null || { cat "$tls_dir/log"; exit 1; }
  sleep 0.1
done
export TOPIC=python-tls-$$
check env PULSAR_WS_URL="wss://127.0.0.1:$tls_port" WEBSOCKET_CLIENT_CA_BUNDLE="$tls_dir/cert.pem" \
  "$PY" examples/clients/python/producer.py 2
cross_site() {
  local code
  code=$(curl -sk -o /dev/null -w '%{http_code}' -H 'Connection: Upgrade' -H 'Upgrade: websocket' \
    -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' \
    -H 'Origin: https://elsewhere.example' "https://127.0.0.1:$tls_port/ws/v2/producer/persistent/public/default/x")
  echo "cross-site origin: HTTP $code"
  [ "$code" = 403 ]
}
if cross_site; then passed=$((passed+1)); else failed=$((failed+1)); echo "FAILED: cross-site origin admitted"; fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
