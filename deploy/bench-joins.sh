#!/usr/bin/env bash
# Measures the Redis work a join costs on its sale's slot, and how fast joins are taken
# (BENCHMARKS.md, "Joins and the sale's slot"): a private Redis Cluster (deploy/stack.sh
# cluster-up on 7211..7216), release gateways on it, and `floodgate-loadgen burst` (JOINS joins
# within one second, before the opening: the pre-queue) with one gateway and then six. The calls
# the sale slot's primary served are read from `INFO commandstats` around each burst, so every
# command a join's script runs counts. Needs deploy/stack.sh up.
#
#   deploy/bench-joins.sh [JOINS]   (default 4000)
set -euo pipefail
cd "$(dirname "$0")/.."
JOINS=${1:-4000}
FIRST_PORT=7211
BENCH_NAME=joins
# shellcheck source=deploy/bench-env.sh
source deploy/bench-env.sh
export FLOODGATE_MAX_CONNECTIONS_PER_IP=1000000 FLOODGATE_JOINS_PER_SEC_PER_IP=1000000
export FLOODGATE_BOOKING_REQUESTS_PER_SEC_PER_IP=1000000 FLOODGATE_BOOKING_READS_PER_SEC_PER_IP=1000000 FLOODGATE_PLACE_REQUESTS_PER_SEC_PER_IP=1000000
export FLOODGATE_CHALLENGES_PER_SEC_PER_IP=1000000 FLOODGATE_RESUMES_PER_SEC=1000000
# No load balancer here: a stopped gateway closes at once.
export FLOODGATE_DRAIN_DELAY_MS=0

PIDS=()
cleanup() {
  [ ${#PIDS[@]} -eq 0 ] || { kill "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null || true; }
  deploy/stack.sh cluster-down "$FIRST_PORT" >/dev/null 2>&1 || true
  psql -q "$PG/postgres" -c "drop database if exists $DB" 2>/dev/null || true
}
trap cleanup EXIT INT TERM

export FLOODGATE_REDIS_CLUSTER_NODES
FLOODGATE_REDIS_CLUSTER_NODES=$(deploy/stack.sh cluster-up "$FIRST_PORT" | tail -1)
psql -q "$PG/postgres" -c "create database $DB"
"$BIN/floodgate-booking" migrate >/dev/null

# The node serving a key's slot: the only one that answers EXISTS instead of MOVED.
primary_of() {
  for port in $(seq "$FIRST_PORT" $((FIRST_PORT + 5))); do
    if redis-cli -p "$port" EXISTS "$1" 2>/dev/null | grep -qx '[0-9][0-9]*'; then echo "$port"; return; fi
  done
}
calls() { redis-cli -p "$1" info commandstats | tr -d '\r' | awk -F'[=,:]' '/^cmdstat_/ {n += $3} END {print n + 0}'; }
# Microseconds the node spent in scripts (a script's own commands included).
script_usec() { redis-cli -p "$1" info commandstats | tr -d '\r' | awk -F'[=,:]' '/^cmdstat_evalsha:/ {print $5 + 0}'; }

for gateways in 1 6; do
  sale="bench-joins-$gateways-$RANDOM"
  "$BIN/floodgate-booking" sale create deploy/sales/bench.toml --id "$sale" --opens-in-secs 600 --arm >/dev/null
  addrs=()
  for i in $(seq 1 "$gateways"); do
    FLOODGATE_GATEWAY_LISTEN="127.0.0.1:$((18200 + i))" FLOODGATE_GATEWAY_ADMIN_LISTEN="127.0.0.1:$((19200 + i))" \
      FLOODGATE_INSTANCE_ID="bench-gw-$i" "$BIN/floodgate-gateway" serve >"$RESULTS/gateway-$i.log" 2>&1 &
    PIDS+=($!)
    addrs+=("127.0.0.1:$((18200 + i))")
  done
  for addr in "${addrs[@]}"; do
    for _ in $(seq 1 200); do curl -fs "http://$addr/healthz" >/dev/null && break; sleep 0.1; done
  done
  node=$(primary_of "${FLOODGATE_REDIS_PREFIX}{s:$sale}:meta")
  sleep 2 # the gateways' background reads settle
  idle_before=$(calls "$node"); sleep 5; idle=$(( $(calls "$node") - idle_before ))
  before=$(calls "$node") usec_before=$(script_usec "$node")
  say "$JOINS joins within one second on $gateways gateway(s); the sale's slot is on $node"
  loaders=()
  for l in 1 2; do
    base=$((10 + 4 * l))
    "$BIN/floodgate-loadgen" burst --gateways "$(IFS=,; echo "${addrs[*]}")" --sale "$sale" \
      --clients $((JOINS / 2)) --from "127.0.2.$base,127.0.2.$((base + 1)),127.0.2.$((base + 2))" \
      --within-ms 1000 --json "$RESULTS/burst-$gateways-$l.json" >"$RESULTS/burst-$gateways-$l.log" 2>&1 &
    loaders+=($!)
  done
  start=$(date +%s%3N)
  wait "${loaders[@]}" || say "a loadgen reported failures (see $RESULTS)"
  secs=$(awk -v ms="$(( $(date +%s%3N) - start ))" 'BEGIN { print ms / 1000 }')
  used=$(( $(calls "$node") - before ))
  awk -v used="$used" -v idle="$idle" -v secs="$secs" -v joins="$JOINS" 'BEGIN {
    background = idle / 5 * secs
    printf "  sale-slot commands: %d in %.1f s (%.0f of them background at the idle rate): %.1f per join\n",
      used, secs, background, (used - background) / joins }'
  awk -v u="$(( $(script_usec "$node") - ${usec_before:-0} ))" -v joins="$JOINS" 'BEGIN {
    printf "  script time on the sale slot: %.0f us per join (one core saturates at %.0f joins/s)\n",
      u / joins, 1e6 / (u / joins) }'
  grep -h "all ticketed after" "$RESULTS"/burst-"$gateways"-*.log | sed 's/^/  /'
  redis-cli -p "$node" info commandstats | tr -d '\r' | grep '^cmdstat_' | sort -t= -k2 -n -r | head -8 >"$RESULTS/commandstats-$gateways.txt"
  kill "${PIDS[@]}" 2>/dev/null; wait "${PIDS[@]}" 2>/dev/null || true; PIDS=()
  redis-cli -p "$node" config resetstat >/dev/null
done
say "results in $RESULTS"
