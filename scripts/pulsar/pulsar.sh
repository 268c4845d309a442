#!/usr/bin/env bash
# Apache Pulsar 4.2.4 on loopback for Sluice's tests, conformance runs and benchmarks: the
# standalone broker (one bookie, RocksDB metadata, the broker's own WebSocket service), Pulsar's
# WebSocket proxy as a process of its own, and the Java pulsar-client CLI. The jars come from
# Maven Central through scripts/pulsar/pom.xml and are cached in $SLUICE_PULSAR_HOME.
#
#   pulsar.sh start         start the standalone broker (if it is not running), wait until it
#                           serves, print the environment to use it (export lines, on stdout)
#   pulsar.sh env           print that environment again
#   pulsar.sh stop          stop the broker (SIGTERM, SIGKILL after SLUICE_PULSAR_STOP_TIMEOUT)
#   pulsar.sh kill          SIGKILL the broker and wait until it is gone (tests restart it with start)
#   pulsar.sh wipe          stop the broker and the proxy, remove their data and the token
#   pulsar.sh proxy-start   start Pulsar's WebSocket proxy in front of the broker
#   pulsar.sh proxy-stop    stop it
#   pulsar.sh status        what runs, with pids, ports and RSS
#   pulsar.sh cli ARGS...   the Java pulsar-client CLI (4.0.8), e.g.
#                           pulsar.sh cli --url ws://127.0.0.1:8080 produce -m hi persistent://public/default/t
#   pulsar.sh classpath     resolve the jars (what start does first) and exit
#
# Environment (defaults in brackets):
#   SLUICE_PULSAR_HOME        jar cache and state [~/.cache/sluice-pulsar]
#   SLUICE_PULSAR_STATE       data, logs, pid files, generated configuration [$SLUICE_PULSAR_HOME/state]
#   SLUICE_PULSAR_PORT        binary protocol port [6650]
#   SLUICE_PULSAR_WEB_PORT    admin REST and the broker's WebSocket service [18080]
#   SLUICE_PULSAR_PROXY_PORT  Pulsar's WebSocket proxy [18090]
#   SLUICE_PULSAR_AUTH        token: the broker requires a token (generated at the first start,
#                             kept until wipe; printed as SLUICE_PULSAR_TOKEN); none: no authentication [token]
#   SLUICE_PULSAR_JAVA        the java binary [Java 17's]
#   SLUICE_PULSAR_HEAP        [-Xms512m -Xmx1g -XX:MaxDirectMemorySize=1g]
#   SLUICE_PULSAR_START_TIMEOUT, SLUICE_PULSAR_STOP_TIMEOUT seconds [180, 30]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
home="${SLUICE_PULSAR_HOME:-$HOME/.cache/sluice-pulsar}"
state="${SLUICE_PULSAR_STATE:-$home/state}"
port="${SLUICE_PULSAR_PORT:-6650}"
web="${SLUICE_PULSAR_WEB_PORT:-18080}"
proxy="${SLUICE_PULSAR_PROXY_PORT:-18090}"
auth="${SLUICE_PULSAR_AUTH:-token}"
heap="${SLUICE_PULSAR_HEAP:--Xms512m -Xmx1g -XX:MaxDirectMemorySize=1g}"
start_timeout="${SLUICE_PULSAR_START_TIMEOUT:-180}"
stop_timeout="${SLUICE_PULSAR_STOP_TIMEOUT:-30}"
java="${SLUICE_PULSAR_JAVA:-}"
if [ -z "$java" ]; then
  if [ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/java ]; then
    java=/usr/lib/jvm/java-17-openjdk-amd64/bin/java
  else
    java=java
  fi
fi

broker_pid="$state/standalone.pid"
proxy_pid="$state/proxy.pid"
log_dir="$state/logs"

say() { echo "pulsar.sh: $*" >&2; }
die() { say "$*"; exit 1; }

# The JVM options of Pulsar's bin/pulsar: its --add-opens list, Netty's reflection, the
# BookKeeper metadata drivers and log4j's settings.
jvm_opts() { # log-file log-config
  echo "-XX:+UseG1GC -XX:+ExitOnOutOfMemoryError -Djava.net.preferIPv4Stack=true" \
    "-Djute.maxbuffer=10485760 -Dio.netty.tryReflectionSetAccessible=true" \
    "--add-opens java.base/java.io=ALL-UNNAMED --add-opens java.base/java.util.zip=ALL-UNNAMED" \
    "--add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/jdk.internal.misc=ALL-UNNAMED" \
    "--add-opens java.base/sun.net=ALL-UNNAMED --add-opens java.management/sun.management=ALL-UNNAMED" \
    "-Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver" \
    "-Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver" \
    "-Dlog4j.configurationFile=$2 -Dpulsar.log.file=$1 -Dlog4j2.is.webapp=false -Dlog4j.shutdownHookEnabled=false"
}

# classpath PROFILE: the jars of pom.xml's profile (broker or cli), resolved once and cached
# until pom.xml changes.
classpath() {
  local profile=$1 out="$home/$1.classpath"
  if [ ! -s "$out" ] || [ "$here/pom.xml" -nt "$out" ] || ! jars_present "$out"; then
    command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
    mkdir -p "$home"
    say "resolving Pulsar's $profile jars from Maven Central into $home/m2 ..."
    local t0=$SECONDS
    mvn -B -q -s "$here/settings.xml" -f "$here/pom.xml" -P "$profile" \
      -Dmaven.repo.local="$home/m2" dependency:build-classpath \
      -Dmdep.outputFile="$out.tmp" >&2 || die "maven could not resolve the $profile jars"
    mv "$out.tmp" "$out"
    say "resolved in $((SECONDS - t0)) s"
  fi
  cat "$out"
}

jars_present() {
  local j
  while IFS= read -r j; do [ -f "$j" ] || return 1; done < <(tr ':' '\n' <"$1")
}

running() { # pid-file
  [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

token() { [ -f "$state/token" ] && cat "$state/token" || true; }

b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }

# An HS256 secret and a token for the role "admin" signed with it, kept in the state directory.
make_token() {
  [ -f "$state/secret.key" ] && [ -f "$state/token" ] && return
  umask 077
  openssl rand 32 >"$state/secret.key"
  local header payload sig hexkey
  header=$(printf '{"alg":"HS256"}' | b64url)
  payload=$(printf '{"sub":"admin"}' | b64url)
  hexkey=$(od -An -v -tx1 "$state/secret.key" | tr -d ' \n')
  sig=$(printf '%s.%s' "$header" "$payload" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$hexkey" -binary | b64url)
  printf '%s.%s.%s' "$header" "$payload" "$sig" >"$state/token"
}

curl_auth() {
  local t
  t=$(token)
  if [ -n "$t" ]; then curl -H "Authorization: Bearer $t" "$@"; else curl "$@"; fi
}

ready() {
  [ "$(curl_auth -s -o /dev/null -w '%{http_code}' --max-time 5 \
    "http://127.0.0.1:$web/admin/v2/namespaces/public/default" 2>/dev/null)" = 200 ]
}

print_env() {
  echo "export SLUICE_PULSAR_URL=pulsar://127.0.0.1:$port"
  echo "export SLUICE_PULSAR_HTTP=http://127.0.0.1:$web"
  echo "export SLUICE_PULSAR_WS=ws://127.0.0.1:$web"
  echo "export SLUICE_PULSAR_TOKEN=$(token)"
  echo "export SLUICE_PULSAR_SCRIPT=$here/pulsar.sh"
  if running "$proxy_pid"; then echo "export SLUICE_PULSAR_PROXY_WS=ws://127.0.0.1:$proxy"; fi
  # Sluice reads every SLUICE_ variable as a setting unless SLUICE_ENV_IGNORE lists it.
  # shellcheck disable=SC2016
  echo 'case ",${SLUICE_ENV_IGNORE:-}," in *,SLUICE_PULSAR_\*,*) ;; *) export SLUICE_ENV_IGNORE="${SLUICE_ENV_IGNORE:+$SLUICE_ENV_IGNORE,}SLUICE_PULSAR_*" ;; esac'
}

write_env() { print_env >"$state/env"; }

start() {
  mkdir -p "$state/data" "$log_dir" "$state/conf"
  if running "$broker_pid"; then
    if ready; then say "already running (pid $(cat "$broker_pid"))"; print_env; return; fi
  else
    local cp
    cp=$(classpath broker)
    local conf="$state/conf/standalone.conf"
    cp "$here/standalone.conf" "$conf"
    {
      echo
      echo "# pulsar.sh"
      echo "brokerServicePort=$port"
      echo "webServicePort=$web"
    } >>"$conf"
    case "$auth" in
      token)
        make_token
        {
          echo "authenticationEnabled=true"
          echo "authorizationEnabled=false"
          echo "authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
          echo "tokenSecretKey=data:;base64,$(openssl base64 -A <"$state/secret.key")"
          echo "superUserRoles=admin"
          echo "brokerClientAuthenticationPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken"
          echo "brokerClientAuthenticationParameters={\"token\":\"$(token)\"}"
        } >>"$conf"
        ;;
      none) rm -f "$state/token" "$state/secret.key" ;;
      *) die "SLUICE_PULSAR_AUTH must be token or none" ;;
    esac
    local log="$log_dir/standalone.log"
    say "starting Pulsar standalone (broker $port, web $web), log $log"
    local t0
    t0=$(now_ms)
    # shellcheck disable=SC2046,SC2086
    launch "$broker_pid" "$log_dir/standalone.out" "$java" $heap $(jvm_opts "$log" "$here/log4j2.xml") -cp "$cp" \
      org.apache.pulsar.PulsarStandaloneStarter --config "$conf" \
      --no-functions-worker --no-stream-storage \
      --metadata-dir "$state/data/metadata" --bookkeeper-dir "$state/data/bookkeeper"
    local deadline=$((SECONDS + start_timeout))
    until ready; do
      if ! running "$broker_pid"; then
        tail -n 40 "$log_dir/standalone.out" "$log" >&2 2>/dev/null || true
        rm -f "$broker_pid"
        die "Pulsar exited during start-up"
      fi
      [ $SECONDS -lt $deadline ] || { tail -n 40 "$log" >&2 || true; die "Pulsar not ready after ${start_timeout}s (still running: pulsar.sh stop)"; }
      sleep 0.25
    done
    local ms=$(($(now_ms) - t0))
    say "ready in $((ms / 1000)).$(printf '%03d' $((ms % 1000))) s, RSS $(rss "$(cat "$broker_pid")")"
  fi
  write_env
  print_env
}

# launch PID-FILE OUT-FILE COMMAND...: COMMAND in a session of its own (so that it outlives
# the shell and a Ctrl-C), its pid in PID-FILE once it runs.
launch() {
  local pidf=$1 out=$2
  shift 2
  rm -f "$pidf"
  (cd "$state" || exit 1
    exec setsid bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' "$pidf" "$@" \
      >"$out" 2>&1 </dev/null) &
  local i
  for i in $(seq 1 100); do [ -f "$pidf" ] && return; sleep 0.05; done
  die "could not start $1"
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

rss() { awk '/VmRSS/{printf "%d MiB", $2/1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }

stop_pid() { # pid-file name
  local f=$1 name=$2
  if ! running "$f"; then rm -f "$f"; say "$name not running"; return; fi
  local pid
  pid=$(cat "$f")
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + stop_timeout))
  while kill -0 "$pid" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      say "$name (pid $pid) still running after ${stop_timeout}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    sleep 0.2
  done
  rm -f "$f"
  say "$name stopped"
}

kill_broker() {
  running "$broker_pid" || die "not running"
  local pid
  pid=$(cat "$broker_pid")
  kill -KILL "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  rm -f "$broker_pid"
  say "broker (pid $pid) killed"
}

proxy_start() {
  mkdir -p "$state/conf" "$log_dir"
  if running "$proxy_pid"; then say "proxy already running (pid $(cat "$proxy_pid"))"; print_env; return; fi
  ready || die "the broker is not running: pulsar.sh start"
  local cp conf="$state/conf/websocket.conf" log="$log_dir/proxy.log"
  cp=$(classpath broker)
  cp "$here/websocket.conf" "$conf"
  {
    echo
    echo "# pulsar.sh"
    echo "webServicePort=$proxy"
    echo "serviceUrl=http://127.0.0.1:$web"
    echo "brokerServiceUrl=pulsar://127.0.0.1:$port"
    if [ -n "$(token)" ]; then
      echo "brokerClientAuthenticationPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken"
      echo "brokerClientAuthenticationParameters={\"token\":\"$(token)\"}"
    fi
  } >>"$conf"
  say "starting Pulsar's WebSocket proxy on $proxy, log $log"
  # shellcheck disable=SC2046,SC2086
  launch "$proxy_pid" "$log_dir/proxy.out" "$java" $heap $(jvm_opts "$log" "$here/log4j2.xml") -cp "$cp" \
    org.apache.pulsar.websocket.service.WebSocketServiceStarter "$conf"
  local deadline=$((SECONDS + start_timeout))
  # The proxy answers its own stats endpoint once it serves.
  until [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$proxy/admin/v2/proxy-stats/metrics" 2>/dev/null)" = 200 ]; do
    if ! running "$proxy_pid"; then
      tail -n 40 "$log_dir/proxy.out" "$log" >&2 2>/dev/null || true
      rm -f "$proxy_pid"
      die "the proxy exited during start-up"
    fi
    [ $SECONDS -lt $deadline ] || die "the proxy is not ready after ${start_timeout}s"
    sleep 0.25
  done
  say "proxy ready, RSS $(rss "$(cat "$proxy_pid")")"
  write_env
  print_env
}

status() {
  local rc=1
  if running "$broker_pid"; then
    local r="starting"
    ready && r="ready" && rc=0
    echo "standalone: pid $(cat "$broker_pid"), $r, RSS $(rss "$(cat "$broker_pid")"), pulsar://127.0.0.1:$port, http://127.0.0.1:$web"
  else
    echo "standalone: stopped"
  fi
  if running "$proxy_pid"; then
    echo "proxy: pid $(cat "$proxy_pid"), RSS $(rss "$(cat "$proxy_pid")"), ws://127.0.0.1:$proxy"
  else
    echo "proxy: stopped"
  fi
  return $rc
}

cli() {
  local cp conf="$state/conf/client.conf"
  cp=$(classpath cli)
  mkdir -p "$state/conf"
  # The CLI reads a client.conf first; URLs and authentication are given on its command line.
  printf 'webServiceUrl=http://127.0.0.1:%s/\nbrokerServiceUrl=pulsar://127.0.0.1:%s/\n' "$web" "$port" >"$conf"
  # shellcheck disable=SC2046
  exec "$java" -Xmx256m $(jvm_opts /dev/null "$here/log4j2-cli.xml") -cp "$cp" \
    org.apache.pulsar.client.cli.PulsarClientTool "$conf" "$@"
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  start) start ;;
  env) print_env ;;
  stop) stop_pid "$broker_pid" "standalone" ;;
  kill) kill_broker ;;
  wipe)
    stop_pid "$proxy_pid" "proxy"
    stop_pid "$broker_pid" "standalone"
    rm -rf "$state"
    say "removed $state"
    ;;
  proxy-start) proxy_start ;;
  proxy-stop) stop_pid "$proxy_pid" "proxy" ;;
  status) status ;;
  cli) cli "$@" ;;
  classpath) classpath broker >/dev/null && classpath cli >/dev/null ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
