#!/usr/bin/env bash
# Measures what one idle waiting-room connection costs a gateway (BENCHMARKS.md):
# starts a release gateway for a sale that opens in an hour, opens N idle WebSocket sessions
# with floodgate-loadgen from several loopback addresses, and compares the gateway's resident
# memory before and after; the load generator (each session the client crate's whole wait in line)
# reports what a session costs it too. Needs the local stack: deploy/stack.sh up.
#
#   deploy/bench-idle.sh [N]      (default 15000; the machine allows 20,000 open files a process)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-15000}
FLOODGATE_HOME=${FLOODGATE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/floodgate}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$FLOODGATE_HOME/target}
export FLOODGATE_DATABASE_URL=${FLOODGATE_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/floodgate}
export FLOODGATE_REDIS_PREFIX="bench$RANDOM:"
export FLOODGATE_GATEWAY_LISTEN=127.0.0.1:18080
export FLOODGATE_GATEWAY_ADMIN_LISTEN=127.0.0.1:19080
# The sessions come from a handful of addresses: lift the per-address limits for the measure.
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
# The audit trail's chain key: sale create --arm records itself.
FLOODGATE_AUDIT_KEY="audit_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export FLOODGATE_AUDIT_KEY
"$BIN/floodgate-booking" migrate >/dev/null
SALE="bench-idle-$RANDOM"
"$BIN/floodgate-booking" sale create deploy/sales/bench.toml --id "$SALE" --opens-in-secs 3600 --arm >/dev/null

FLOODGATE_DRAIN_DELAY_MS=0 RUST_LOG=warn "$BIN/floodgate-gateway" serve &
GATEWAY=$!
trap 'kill $GATEWAY $LOADGEN 2>/dev/null || true' EXIT
LOADGEN=
until curl -sf "http://$FLOODGATE_GATEWAY_LISTEN/healthz" >/dev/null; do sleep 0.2; done
rss() { awk '/^VmRSS/ {print $2}' "/proc/$GATEWAY/status"; }
# One session first, so the sale's room (its task and shared state) exists in both readings.
"$BIN/floodgate-loadgen" idle --gateway "$FLOODGATE_GATEWAY_LISTEN" --sale "$SALE" \
  --connections 1 --hold-secs 0 >/dev/null
sleep 2
BEFORE=$(rss)
"$BIN/floodgate-loadgen" idle --gateway "$FLOODGATE_GATEWAY_LISTEN" --sale "$SALE" \
  --connections "$N" --from 127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5 --hold-secs 30 \
  >"$FLOODGATE_HOME/bench-idle.log" 2>&1 &
LOADGEN=$!
until grep -q '^open=' "$FLOODGATE_HOME/bench-idle.log"; do
  kill -0 $LOADGEN 2>/dev/null || { cat "$FLOODGATE_HOME/bench-idle.log"; exit 1; }
  sleep 0.5
done
# The gateway gives the ramp's freed pages back once the ramp is over (gateway/src/memory.rs):
# the memory is read after that, and after the first position-interval messages.
trims() { curl -s "http://$FLOODGATE_GATEWAY_ADMIN_LISTEN/metrics" | awk '/^floodgate_memory_trims_total / {print int($2)}'; }
for _ in $(seq 1 60); do [ "$(trims)" -ge 1 ] 2>/dev/null && break; sleep 0.5; done
[ "$(trims)" -ge 1 ] 2>/dev/null || echo "the gateway did not trim its memory within 30 s" >&2
sleep 2
AFTER=$(rss)
SESSIONS=$(curl -s "http://$FLOODGATE_GATEWAY_ADMIN_LISTEN/metrics" | awk '/^floodgate_ws_sessions / {print $2}')
grep '^open=' "$FLOODGATE_HOME/bench-idle.log"
echo "gateway RSS: before ${BEFORE} KiB, with ${SESSIONS} idle sessions ${AFTER} KiB"
awk -v b="$BEFORE" -v a="$AFTER" -v n="$SESSIONS" \
  'BEGIN { printf "per idle connection: %.2f KB (%.0f bytes)\n", (a - b) * 1.024 / n, (a - b) * 1024 / n }'
grep '^loadgen memory' "$FLOODGATE_HOME/bench-idle.log"
