#!/usr/bin/env bash
# Measures what one waiting client costs the edge (BENCHMARKS.md, "Edge memory per waiting
# client"): starts a release gateway for a sale that opens in an hour and the edge in front of it
# as its image runs it (deploy/nginx/edge.sh filling in cdn.conf, two workers), opens N waiting-
# room sessions through the edge with floodgate-loadgen from 64 loopback addresses (under the
# edge's 256 sockets an address), and divides the growth of the edge's resident memory (master
# and workers) by N. The kernel's share (each client is two sockets at the edge: the client's
# and the gateway's) is read from the growth of the machine's slab memory, which the gateway's and
# the load generator's sockets share: a rough figure, halved. Needs the local stack
# (deploy/stack.sh up), which installs nginx.
#
#   deploy/bench-edge.sh [N]      (default 8000)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-8000}
FLOODGATE_HOME=${FLOODGATE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/floodgate}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$FLOODGATE_HOME/target}
export FLOODGATE_DATABASE_URL=${FLOODGATE_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/floodgate}
export FLOODGATE_REDIS_PREFIX="bench$RANDOM:"
export FLOODGATE_GATEWAY_LISTEN=127.0.0.1:18080
export FLOODGATE_GATEWAY_ADMIN_LISTEN=127.0.0.1:19080
EDGE=127.0.0.1:18000
# The gateway counts each client by the address the edge names (the one trusted hop); the
# gateways' own per-address limits are lifted for the measure, the edge's are as shipped.
export FLOODGATE_TRUSTED_PROXIES=127.0.0.1/32
export FLOODGATE_MAX_CONNECTIONS_PER_IP=100000 FLOODGATE_JOINS_PER_SEC_PER_IP=100000
export FLOODGATE_BOOKING_REQUESTS_PER_SEC_PER_IP=100000 FLOODGATE_BOOKING_READS_PER_SEC_PER_IP=100000 FLOODGATE_PLACE_REQUESTS_PER_SEC_PER_IP=100000
export FLOODGATE_CHALLENGES_PER_SEC_PER_IP=100000 FLOODGATE_RESUMES_PER_SEC=100000

# The same packages as deploy/bench.sh builds: another set unifies features differently and
# rebuilds half the tree each time one script follows the other.
cargo build --release --locked -q -p floodgate-gateway -p floodgate-booking -p floodgate-consumer \
  -p floodgate-loadgen -p floodgate-sandbox
BIN=$CARGO_TARGET_DIR/release
set -a
# shellcheck disable=SC1090
source <("$BIN/floodgate-gateway" keygen --kid bench | grep -v '^#')
set +a
FLOODGATE_AUDIT_KEY="audit_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export FLOODGATE_AUDIT_KEY
"$BIN/floodgate-booking" migrate >/dev/null
SALE="bench-edge-$RANDOM"
"$BIN/floodgate-booking" sale create deploy/sales/bench.toml --id "$SALE" --opens-in-secs 3600 --arm >/dev/null

EDGE_DIR=$(mktemp -d)
FLOODGATE_DRAIN_DELAY_MS=0 RUST_LOG=warn "$BIN/floodgate-gateway" serve &
GATEWAY=$!
PATH=/usr/sbin:$PATH FLOODGATE_EDGE_LISTEN=$EDGE FLOODGATE_EDGE_METRICS_LISTEN=127.0.0.1:19113 \
  FLOODGATE_EDGE_REDIRECT_LISTEN=127.0.0.1:18001 \
  FLOODGATE_EDGE_GATEWAYS=$FLOODGATE_GATEWAY_LISTEN \
  FLOODGATE_EDGE_BOOKING=127.0.0.1:18081 FLOODGATE_EDGE_WORKERS=2 FLOODGATE_EDGE_PREFIX="$EDGE_DIR" \
  FLOODGATE_EDGE_TEMPLATE=deploy/nginx/cdn.conf deploy/nginx/edge.sh 2>"$EDGE_DIR/stderr" &
NGINX=$!
LOADGEN=
trap 'kill $LOADGEN $GATEWAY 2>/dev/null || true; kill -TERM $NGINX 2>/dev/null || true; wait $NGINX 2>/dev/null || true; rm -rf "$EDGE_DIR"' EXIT
until curl -sf "http://$FLOODGATE_GATEWAY_LISTEN/healthz" >/dev/null; do sleep 0.2; done
until curl -s -o /dev/null "http://$EDGE/healthz"; do
  kill -0 $NGINX 2>/dev/null || { cat "$EDGE_DIR/stderr"; exit 1; }
  sleep 0.2
done

# The edge's processes: the master and its workers.
rss() {
  local total=0 pid
  for pid in $NGINX $(pgrep -P "$NGINX"); do
    total=$((total + $(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")))
  done
  echo "$total"
}
slab() { awk '/^Slab:/ {print $2}' /proc/meminfo; }
# One session first, so that every worker has taken connections in both readings.
"$BIN/floodgate-loadgen" idle --gateway "$EDGE" --sale "$SALE" --connections 8 --hold-secs 0 >/dev/null
sleep 2
BEFORE=$(rss)
SLAB_BEFORE=$(slab)
FROM=$(for i in $(seq 1 64); do printf '127.0.3.%d,' "$i"; done)
"$BIN/floodgate-loadgen" idle --gateway "$EDGE" --sale "$SALE" --connections "$N" \
  --from "${FROM%,}" --hold-secs 20 >"$FLOODGATE_HOME/bench-edge.log" 2>&1 &
LOADGEN=$!
for _ in $(seq 1 240); do
  grep -q '^open=' "$FLOODGATE_HOME/bench-edge.log" && break
  kill -0 $LOADGEN 2>/dev/null || { cat "$FLOODGATE_HOME/bench-edge.log"; exit 1; }
  sleep 0.5
done
grep -q '^open=' "$FLOODGATE_HOME/bench-edge.log" || { echo "the sessions did not open within 2 minutes" >&2; exit 1; }
sleep 3
AFTER=$(rss)
SLAB_AFTER=$(slab)
SESSIONS=$(curl -s "http://$FLOODGATE_GATEWAY_ADMIN_LISTEN/metrics" | awk '/^floodgate_ws_sessions / {print $2}')
grep '^open=' "$FLOODGATE_HOME/bench-edge.log"
echo "edge RSS (master and 2 workers): before ${BEFORE} KiB, with ${SESSIONS} waiting clients ${AFTER} KiB"
awk -v b="$BEFORE" -v a="$AFTER" -v n="$SESSIONS" \
  'BEGIN { printf "edge memory per waiting client: %.2f KB\n", (a - b) * 1.024 / n }'
awk -v b="$SLAB_BEFORE" -v a="$SLAB_AFTER" -v n="$SESSIONS" \
  'BEGIN { printf "kernel slab per client, all four sockets on this machine: %.2f KB (the edge holds two)\n", (a - b) * 1.024 / n }'
