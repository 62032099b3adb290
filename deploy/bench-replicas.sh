#!/usr/bin/env bash
# Measures what waiting for a Redis replica costs the booking endpoint (BENCHMARKS.md, "Waiting
# for a replica"): a private Redis Cluster (deploy/stack.sh cluster-up on 7201..7206), a release
# booking service on it, and floodgate-loadgen reserve with 50 requests in flight, once with
# FLOODGATE_REDIS_MIN_REPLICAS=0 and once with 1, against the same sale. Needs deploy/stack.sh up.
#
#   deploy/bench-replicas.sh [REQUESTS]   (default 10000 per setting)
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${1:-10000}
FIRST_PORT=7201
BENCH_NAME=replicas
# shellcheck source=deploy/bench-env.sh
source deploy/bench-env.sh
export FLOODGATE_RESERVATIONS_TOPIC="floodgate.bench.$RANDOM$RANDOM"
secret() { echo "$1$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"; }
export FLOODGATE_OPS_TOKEN FLOODGATE_WEBHOOK_SECRET FLOODGATE_PAYMENT_API_KEY FLOODGATE_AUDIT_KEY
export FLOODGATE_RESERVATION_KEY; FLOODGATE_RESERVATION_KEY=$(secret rk_)
export FLOODGATE_EDGE_KEY; FLOODGATE_EDGE_KEY=$(secret ek_)
FLOODGATE_AUDIT_KEY=$(secret audit_) FLOODGATE_OPS_TOKEN=$(secret ops_) FLOODGATE_WEBHOOK_SECRET=$(secret whsec_)
FLOODGATE_PAYMENT_API_KEY=$(secret pk_sandbox_)

BOOKING=
cleanup() {
  [ -z "$BOOKING" ] || { kill "$BOOKING" 2>/dev/null; wait "$BOOKING" 2>/dev/null || true; }
  deploy/stack.sh cluster-down "$FIRST_PORT" >/dev/null 2>&1 || true
  psql -q "$PG/postgres" -c "drop database if exists $DB" 2>/dev/null || true
}
trap cleanup EXIT INT TERM

export FLOODGATE_REDIS_CLUSTER_NODES
FLOODGATE_REDIS_CLUSTER_NODES=$(deploy/stack.sh cluster-up "$FIRST_PORT" | tail -1)
psql -q "$PG/postgres" -c "create database $DB"
"$BIN/floodgate-booking" migrate >/dev/null
FLOODGATE_TOPIC_PARTITIONS=6 "$BIN/floodgate-booking" topics ensure >/dev/null
sale="bench-replicas-$RANDOM"
"$BIN/floodgate-booking" sale create deploy/sales/bench.toml --id "$sale" --opens-in-secs 2 --arm >/dev/null
pool=12627-20261201-SL-TQ
# The bench sale's pools hold 100 seats: this one gets room for every request.
key="${FLOODGATE_REDIS_PREFIX}{p:$sale/$pool}"
redis-cli -c -p "$FIRST_PORT" SET "$key:avail" 10000000 >/dev/null
redis-cli -c -p "$FIRST_PORT" HSET "$key:cfg" capacity 10000100 >/dev/null
sleep 3 # past the opening

# Commands served so far by every node (INFO commandstats, a script's own commands included).
all_calls() {
  local total=0 n
  for port in $(seq "$FIRST_PORT" $((FIRST_PORT + 5))); do
    n=$(redis-cli -p "$port" info commandstats | tr -d '\r' | awk -F'[=,:]' '/^cmdstat_/ {n += $3} END {print n + 0}')
    total=$((total + n))
  done
  echo "$total"
}
# WAITs served so far by every node (INFO commandstats): how well the waits are grouped.
waits() {
  local total=0 n
  for port in $(seq "$FIRST_PORT" $((FIRST_PORT + 5))); do
    n=$(redis-cli -p "$port" info commandstats | tr -d '\r' | awk -F'[=,:]' '/^cmdstat_wait:/ {print $3}')
    total=$((total + ${n:-0}))
  done
  echo "$total"
}

first=1000000000
for min in 0 1; do
  FLOODGATE_REDIS_MIN_REPLICAS=$min FLOODGATE_BOOKING_LISTEN=127.0.0.1:18091 \
    FLOODGATE_ADMIN_LISTEN=127.0.0.1:19091 FLOODGATE_PAYMENT_SANDBOX=true \
    "$BIN/floodgate-booking" serve >"$RESULTS/booking-$min.log" 2>&1 &
  BOOKING=$!
  for _ in $(seq 1 200); do curl -fs http://127.0.0.1:18091/healthz >/dev/null && break; sleep 0.1; done
  # Warm up (connections, scripts), then the measured run.
  "$BIN/floodgate-loadgen" reserve --booking 127.0.0.1:18091 --sale "$sale" --pool "$pool" \
    --requests 500 --concurrency 50 --first-ticket "$first" >/dev/null
  first=$((first + 1000))
  say "min replicas $min: $REQUESTS reservations, 50 in flight"
  before=$(waits) calls_before=$(all_calls)
  "$BIN/floodgate-loadgen" reserve --booking 127.0.0.1:18091 --sale "$sale" --pool "$pool" \
    --requests "$REQUESTS" --concurrency 50 --first-ticket "$first" \
    --json "$RESULTS/replicas-$min.json" | tail -n 4
  awk -v n="$(($(waits) - before))" -v c="$(($(all_calls) - calls_before))" -v r="$REQUESTS" \
    'BEGIN { printf "  WAITs sent                     %d (%.2f per reservation)\n", n, n / r
             printf "  Redis commands, every node     %.1f per reservation\n", c / r }'
  first=$((first + REQUESTS))
  kill "$BOOKING"; wait "$BOOKING" 2>/dev/null || true; BOOKING=
done
say "results in $RESULTS"
