#!/usr/bin/env bash
# Runs Floodgate's benchmarks on this machine and rewrites the generated part of BENCHMARKS.md
# (between its "bench:begin" and "bench:end" markers) with the figures, the machine and the
# commands. Release builds of the real binaries, the local Redis, PostgreSQL and Tansu; all load
# on loopback. Figures are reported, never asserted.
#
#   deploy/bench.sh                 every scenario
#   deploy/bench.sh queue sale      some of them (queue, burst, sale, raw, naive, poll, peer)
#
# Sizes (environment): BENCH_CLIENTS (queue: sessions held, default 100000), BENCH_GATEWAYS
# (gateway processes, default 6: one process may hold fewer than 20,000 sockets), BENCH_BURST
# (joins inside one second, default 10000), BENCH_SALE_CLIENTS (people in the rush, default
# 10000), BENCH_POLL_CLIENTS (poll, default 10000), BENCH_PEER_CLIENTS (peer, default 15000).
# The JSON of every run is kept in ~/.cache/floodgate/bench/<date>/.
set -euo pipefail
cd "$(dirname "$0")/.."

SCENARIOS=${*:-queue burst sale raw naive poll peer}
CLIENTS=${BENCH_CLIENTS:-100000}
GATEWAYS=${BENCH_GATEWAYS:-6}
BURST=${BENCH_BURST:-10000}
SALE_CLIENTS=${BENCH_SALE_CLIENTS:-10000}
FLOODGATE_HOME=${FLOODGATE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/floodgate}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$FLOODGATE_HOME/target}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
DB="floodgate_bench_$RANDOM$RANDOM"
export FLOODGATE_DATABASE_URL="$PG/$DB"
export FLOODGATE_REDIS_PREFIX="bench$RANDOM:"
export FLOODGATE_RESERVATIONS_TOPIC="floodgate.bench.$RANDOM$RANDOM"
export FLOODGATE_CONSUMER_GROUP="bench-$RANDOM"
# The crowd comes from a handful of loopback addresses: lift the per-address limits.
export FLOODGATE_MAX_CONNECTIONS_PER_IP=1000000 FLOODGATE_JOINS_PER_SEC_PER_IP=1000000
export RUST_LOG=${BENCH_LOG:-warn}
# No load balancer here: a stopped gateway closes at once.
export FLOODGATE_DRAIN_DELAY_MS=0
PREVIOUS=$(ls -d "$FLOODGATE_HOME"/bench/*/ 2>/dev/null | tail -n 1 || true)
RESULTS="$FLOODGATE_HOME/bench/$(date +%Y%m%d-%H%M%S)"
LOGS="$RESULTS/logs"
mkdir -p "$LOGS"
# Scenarios not run now keep the previous run's figures (the report says which are carried over).
if [ -n "$PREVIOUS" ]; then
  cp "$PREVIOUS"/*.json "$RESULTS"/ 2>/dev/null || true
  basename "$PREVIOUS" >"$RESULTS/carried-from"
fi
say() { printf '\033[1m[bench]\033[0m %s\n' "$*" >&2; }

deploy/stack.sh up
deploy/stack.sh bench-tools
say "building release binaries"
cargo build --release --locked -q -p floodgate-gateway -p floodgate-booking -p floodgate-consumer \
  -p floodgate-loadgen
BIN=$CARGO_TARGET_DIR/release
set -a
# shellcheck disable=SC1090
source <("$BIN/floodgate-gateway" keygen --kid bench | grep -v '^#')
set +a
# Secrets of 32 characters or more, fresh per run (the services refuse shorter ones).
secret() { echo "$1$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"; }
export FLOODGATE_OPS_TOKEN; FLOODGATE_OPS_TOKEN=$(secret ops_)
export FLOODGATE_WEBHOOK_SECRET; FLOODGATE_WEBHOOK_SECRET=$(secret whsec_)
export FLOODGATE_PAYMENT_API_KEY; FLOODGATE_PAYMENT_API_KEY=$(secret pk_sandbox_)
psql -q "$PG/postgres" -c "create database $DB"
"$BIN/floodgate-booking" migrate >/dev/null
FLOODGATE_TOPIC_PARTITIONS=6 "$BIN/floodgate-booking" topics ensure >/dev/null

PIDS=()
cleanup() {
  trap - EXIT INT TERM
  [ ${#PIDS[@]} -eq 0 ] || kill "${PIDS[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  psql -q "$PG/postgres" -c "drop database if exists $DB" 2>/dev/null || true
  # The run's Redis keys (its own prefix) go too: the shared Redis keeps only what is in use.
  redis-cli --scan --pattern "${FLOODGATE_REDIS_PREFIX}*" | xargs -r -n 1000 redis-cli DEL >/dev/null || true
}
trap cleanup EXIT INT TERM

healthy() { for _ in $(seq 1 200); do curl -fs "http://$1/healthz" >/dev/null && return; sleep 0.1; done; say "$1 did not start"; exit 1; }

# Gateways 127.0.0.1:18101.. with their admin listeners (metrics) on 127.0.0.1:19101.. (their
# pids in GATEWAY_PIDS, addresses in GATEWAY_ADDRS, admin addresses in GATEWAY_ADMINS).
GATEWAY_PIDS=() GATEWAY_ADDRS=() GATEWAY_ADMINS=()
start_gateways() {
  for i in $(seq 1 "$1"); do
    local addr="127.0.0.1:$((18100 + i))" admin="127.0.0.1:$((19100 + i))"
    FLOODGATE_GATEWAY_LISTEN=$addr FLOODGATE_GATEWAY_ADMIN_LISTEN=$admin \
      FLOODGATE_INSTANCE_ID="bench-gw-$i" \
      "$BIN/floodgate-gateway" serve >"$LOGS/gateway-$i.log" 2>&1 &
    PIDS+=($!) GATEWAY_PIDS+=($!) GATEWAY_ADDRS+=("$addr") GATEWAY_ADMINS+=("$admin")
  done
  for addr in "${GATEWAY_ADDRS[@]}"; do healthy "$addr"; done
}
stop_gateways() {
  kill "${GATEWAY_PIDS[@]}" 2>/dev/null || true
  wait "${GATEWAY_PIDS[@]}" 2>/dev/null || true
  GATEWAY_PIDS=() GATEWAY_ADDRS=() GATEWAY_ADMINS=()
}
joined() { local IFS=,; echo "$*"; }
rss_kib() { local total=0; for pid in "$@"; do total=$((total + $(awk '/^VmRSS/ {print $2}' "/proc/$pid/status"))); done; echo $total; }
sessions() { local total=0; for addr in "${GATEWAY_ADMINS[@]}"; do total=$((total + $(curl -s "http://$addr/metrics" | awk '/^floodgate_ws_sessions / {print int($2)}'))); done; echo $total; }
# Source addresses for loadgen process $1 of a run: four of its own.
sources() { local base=$((2 + 4 * ($1 - 1))); echo "127.0.1.$base,127.0.1.$((base + 1)),127.0.1.$((base + 2)),127.0.1.$((base + 3))"; }
new_sale() { # <id prefix> <opens in secs>
  local sale="$1-$RANDOM"
  "$BIN/floodgate-booking" sale create deploy/sales/bench.toml --id "$sale" --opens-in-secs "$2" --arm >/dev/null
  echo "$sale"
}
ops() { curl -fsS -X "$1" -H "Authorization: Bearer $FLOODGATE_OPS_TOKEN" "http://127.0.0.1:19081$2" >/dev/null; }

BACKEND_UP=
start_backend() {
  [ -n "$BACKEND_UP" ] && return
  FLOODGATE_BOOKING_LISTEN=127.0.0.1:18081 FLOODGATE_ADMIN_LISTEN=127.0.0.1:19081 \
    FLOODGATE_PAYMENT_SANDBOX=true FLOODGATE_PAYMENT_PROVIDER_URL=http://127.0.0.1:18082 \
    "$BIN/floodgate-booking" serve >"$LOGS/booking.log" 2>&1 & PIDS+=($!)
  FLOODGATE_SANDBOX_LISTEN=127.0.0.1:18082 FLOODGATE_SANDBOX_PUBLIC_URL=http://127.0.0.1:18082 \
    FLOODGATE_SANDBOX_WEBHOOK_URL=http://127.0.0.1:18081/v1/payments/webhook \
    "$BIN/floodgate-booking" sandbox-pay >"$LOGS/sandbox.log" 2>&1 & PIDS+=($!)
  FLOODGATE_CONSUMER_METRICS_LISTEN=127.0.0.1:19102 FLOODGATE_CONSUMER_INSTANCE_ID=bench-consumer \
    "$BIN/floodgate-consumer" >"$LOGS/consumer.log" 2>&1 & PIDS+=($!)
  healthy 127.0.0.1:18081
  BACKEND_UP=1
}

machine() {
  jq -n --arg date "$(date -u +%Y-%m-%dT%H:%MZ)" --arg commit "$(git rev-parse --short HEAD)" \
    --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" \
    --argjson cores "$(nproc)" --arg memory "$(free -g | awk '/^Mem/ {print $2 " GiB"}')" \
    --arg kernel "$(uname -r)" --arg redis "$(redis-server --version | awk '{print $3}' | tr -d v=)" \
    --arg postgres "$(psql -tAq "$PG/postgres" -c 'show server_version' | awk '{print $1}')" \
    '{date: $date, commit: $commit, cpu: $cpu, cores: $cores, memory: $memory, kernel: $kernel,
      redis: $redis, postgres: $postgres}' >"$RESULTS/machine.json"
}

# queue: CLIENTS sessions over GATEWAYS gateways from as many loadgen processes; memory per
# connection; then one frontier change (admission resumed on an open, paused sale) timed to
# every client.
queue() {
  local sale per at
  sale=$(new_sale bench-queue 2)
  start_backend
  ops POST "/admin/v1/sales/$sale/pause"
  sleep 3 # past the opening, so clients get positions, not the pre-queue
  start_gateways "$GATEWAYS"
  sleep 1
  local before; before=$(rss_kib "${GATEWAY_PIDS[@]}")
  per=$((CLIENTS / GATEWAYS))
  # The change happens at one instant for every process, once all can be in place.
  at=$(( $(date +%s%3N) + 30000 + CLIENTS / 2 ))
  say "queue: $CLIENTS sessions on $GATEWAYS gateways; the change at +$(( (at - $(date +%s%3N)) / 1000 )) s"
  local loaders=()
  for l in $(seq 1 "$GATEWAYS"); do
    local trigger=(); [ "$l" = 1 ] && trigger=(--trigger)
    "$BIN/floodgate-loadgen" queue --gateways "$(joined "${GATEWAY_ADDRS[@]}")" --sale "$sale" \
      --clients "$per" --from "$(sources "$l")" --ops 127.0.0.1:19081 \
      --change-at-unix-ms "$at" "${trigger[@]}" --json "$RESULTS/queue-$l.json" \
      >"$LOGS/queue-$l.log" 2>&1 &
    loaders+=($!)
  done
  # Memory once everyone is in place, before the change.
  until [ "$(grep -l '^placed' "$LOGS"/queue-*.log 2>/dev/null | wc -l)" -ge "$GATEWAYS" ]; do
    sleep 0.5
  done
  sleep 2
  local after held; after=$(rss_kib "${GATEWAY_PIDS[@]}"); held=$(sessions)
  jq -n --argjson before "$before" --argjson after "$after" --argjson sessions "$held" \
    --argjson gateways "$GATEWAYS" \
    '{gateways: $gateways, sessions: $sessions, rss_kib_before: $before, rss_kib_after: $after,
      bytes_per_connection: (($after - $before) * 1024 / $sessions)}' >"$RESULTS/memory.json"
  wait "${loaders[@]}" || say "a queue loadgen reported failures (see $LOGS)"
  stop_gateways
}

# burst: BURST joins within one second, from four processes, on two gateways, before the
# opening (the pre-queue, as at a real opening).
burst() {
  local sale; sale=$(new_sale bench-burst 600)
  start_gateways 2
  say "burst: $BURST joins within one second"
  local loaders=()
  for l in 1 2 3 4; do
    "$BIN/floodgate-loadgen" burst --gateways "$(joined "${GATEWAY_ADDRS[@]}")" --sale "$sale" \
      --clients $((BURST / 4)) --from "$(sources "$l")" --within-ms 1000 \
      --json "$RESULTS/burst-$l.json" >"$LOGS/burst-$l.log" 2>&1 &
    loaders+=($!)
  done
  wait "${loaders[@]}" || say "a burst loadgen reported failures (see $LOGS)"
  stop_gateways
}

# sale: the whole rush on two gateways with the booking service, sandbox provider and consumer,
# checked at the end (no oversell, every 201 durable, admission in order).
sale() {
  local sale; sale=$(new_sale bench-sale 10)
  start_backend
  start_gateways 2
  say "sale: $SALE_CLIENTS people for 400 seats"
  "$BIN/floodgate-loadgen" sale --gateways "$(joined "${GATEWAY_ADDRS[@]}")" --sale "$sale" \
    --booking 127.0.0.1:18081 --sandbox 127.0.0.1:18082 --clients "$SALE_CLIENTS" \
    --from "$(sources 1),$(sources 2)" --json "$RESULTS/sale.json" 2>"$LOGS/sale.log" ||
    say "the sale's invariants did NOT all hold (see $RESULTS/sale.json)"
  stop_gateways
}

# raw: the pool script alone, as redis-benchmark runs it (EVALSHA, 50 connections, unpipelined
# and 16 deep), against the booking endpoint end to end on the same Redis; and the broker's own
# acknowledgement rate, which bounds the endpoint (a 201 waits for the broker).
raw() {
  # A pool no service knows (so no relay publishes the benchmark's events), armed by hand with
  # more seats than the run can take.
  local base="${FLOODGATE_REDIS_PREFIX}{p:rawbench/p}" sha
  redis-cli HSET "$base:cfg" armed 1 capacity 1000000000 hold_ttl_ms 600000 sale rawbench \
    pool p fare_minor 100 currency INR >/dev/null
  redis-cli MSET "$base:avail" 1000000000 "$base:held" 0 "$base:sold" 0 >/dev/null
  sha=$(redis-cli SCRIPT LOAD "$(cat lua/lib.lua lua/reserve.lua)")
  say "raw: redis-benchmark EVALSHA of the reserve script"
  local results=()
  for depth in 1 16; do
    local rps
    rps=$(redis-benchmark -n 200000 -c 50 -P "$depth" -r 1000000000 --csv EVALSHA "$sha" 9 \
      "$base:cfg" "$base:avail" "$base:held" "$base:sold" "$base:holds" "$base:expiries" \
      "$base:outbox" "$base:rsv:__rand_int__" "$base:tok:__rand_int__" \
      t__rand_int__ k 1 r__rand_int__ s 1 | awk -F'"' 'NR == 2 {print $4}')
    results+=("$rps")
  done
  redis-cli --scan --pattern "${FLOODGATE_REDIS_PREFIX}{p:rawbench/p}*" | xargs -r -n 1000 redis-cli DEL >/dev/null
  jq -n --argjson p1 "${results[0]}" --argjson p16 "${results[1]}" \
    '{evalsha_per_second: $p1, evalsha_pipelined_16_per_second: $p16, connections: 50}' \
    >"$RESULTS/raw-redis.json"

  say "raw: the booking endpoint end to end"
  local sale
  sale=$(new_sale bench-raw 2)
  start_backend
  sleep 3
  "$BIN/floodgate-loadgen" reserve --booking 127.0.0.1:18081 --sale "$sale" \
    --pool 12951-20261201-3A-TQ --requests 100 --concurrency 50 --first-ticket 9000000000 \
    >/dev/null # warm up
  # The bench sale's pools hold 100 seats: this one gets room for the whole run.
  local pool="${FLOODGATE_REDIS_PREFIX}{p:$sale/12627-20261201-SL-TQ}"
  redis-cli MSET "$pool:avail" 1000000 >/dev/null
  redis-cli HSET "$pool:cfg" capacity 1000100 >/dev/null
  # A 201 waits for the broker's acknowledgement, so throughput follows the requests in flight.
  local first=1000000000
  for inflight in 50 400; do
    "$BIN/floodgate-loadgen" reserve --booking 127.0.0.1:18081 --sale "$sale" \
      --pool 12627-20261201-SL-TQ --requests 20000 --concurrency "$inflight" \
      --first-ticket "$first" --json "$RESULTS/raw-booking-$inflight.json" \
      >"$LOGS/raw-booking-$inflight.log" 2>&1 ||
      say "some reservations failed (see $LOGS/raw-booking-$inflight.log)"
    first=$((first + 1000000))
  done

  say "raw: the broker's acknowledgement rate"
  local topic="floodgate.bench.raw$RANDOM"
  FLOODGATE_RESERVATIONS_TOPIC="$topic" FLOODGATE_TOPIC_PARTITIONS=6 \
    "$BIN/floodgate-booking" topics ensure >/dev/null
  "$BIN/floodgate-loadgen" publish --topic "$topic" --reservations 20000 --pools 6 \
    --json "$RESULTS/raw-broker.json" >"$LOGS/raw-broker.log" 2>&1
}

# naive: one PostgreSQL counter row, booked with SELECT ... FOR UPDATE, or read then written back
# (the race); against Floodgate's endpoint on a pool of the same size: attempts per second and
# seats sold beyond the capacity.
naive() {
  for mode in for-update race; do
    say "naive: $mode"
    "$BIN/floodgate-loadgen" naive --mode "$mode" --capacity 1000 --attempts 20000 \
      --concurrency 50 --json "$RESULTS/naive-$mode.json" >"$LOGS/naive-$mode.log" 2>&1
  done
  say "naive: Floodgate's endpoint on a 1,000-seat pool"
  local sale; sale=$(new_sale bench-naive 2)
  start_backend
  sleep 3
  local pool="${FLOODGATE_REDIS_PREFIX}{p:$sale/12627-20261201-SL-TQ}"
  redis-cli MSET "$pool:avail" 1000 >/dev/null
  redis-cli HSET "$pool:cfg" capacity 1000 >/dev/null
  "$BIN/floodgate-loadgen" reserve --booking 127.0.0.1:18081 --sale "$sale" \
    --pool 12627-20261201-SL-TQ --requests 20000 --concurrency 50 \
    --json "$RESULTS/naive-floodgate.json" >"$LOGS/naive-floodgate.log" 2>&1
}

# poll: the gateway's CPU time per waiting client per minute, WebSocket push against polling the
# sale's status every 5 s, BENCH_POLL_CLIENTS clients each (default 10000), one gateway.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
measure_cpu() { # <file> <clients> <what>: the gateway's CPU over one minute, as JSON
  local t0 t1 window=60
  t0=$(cpu_ticks "${GATEWAY_PIDS[0]}")
  sleep $window
  t1=$(cpu_ticks "${GATEWAY_PIDS[0]}")
  jq -n --arg what "$3" --argjson clients "$2" --argjson ticks $((t1 - t0)) \
    --argjson hz "$(getconf CLK_TCK)" --argjson window $window \
    '{what: $what, clients: $clients, seconds: $window, cpu_seconds: ($ticks / $hz)}' >"$1"
}
poll() {
  local n=${BENCH_POLL_CLIENTS:-10000} sale
  sale=$(new_sale bench-poll 2)
  start_backend
  sleep 3
  # Admission moves slowly, so every waiting client's place changes all the time: push's busiest
  # case (a position message to every client every second), not an idle room.
  curl -fsS -X PATCH -H "Authorization: Bearer $FLOODGATE_OPS_TOKEN" \
    -H 'Content-Type: application/json' -d '{"admission_rate": 2}' \
    "http://127.0.0.1:19081/admin/v1/sales/$sale" >/dev/null
  # Push as it runs (a new place at most every second), and at the pollers' freshness (5 s).
  local loader interval
  for interval in 1000 5000; do
    say "poll: $n clients waiting by WebSocket push, a position at most every $interval ms"
    export FLOODGATE_POSITION_INTERVAL_MS=$interval
    start_gateways 1
    unset FLOODGATE_POSITION_INTERVAL_MS
    "$BIN/floodgate-loadgen" idle --gateway "${GATEWAY_ADDRS[0]}" --sale "$sale" \
      --connections "$n" --from "$(sources 1)" --hold-secs 90 >"$LOGS/push-$interval.log" 2>&1 &
    loader=$!
    until grep -q "^open=" "$LOGS/push-$interval.log" 2>/dev/null; do sleep 0.5; done
    sleep 5
    measure_cpu "$RESULTS/poll-push-$interval.json" "$n" "push, a position at most every $((interval / 1000)) s"
    kill $loader 2>/dev/null || true
    wait $loader 2>/dev/null || true
    stop_gateways
  done
  say "poll: $n clients polling every 5 s"
  start_gateways 1
  "$BIN/floodgate-loadgen" poll --gateways "${GATEWAY_ADDRS[0]}" --sale "$sale" --clients "$n" \
    --from "$(sources 2)" --interval-secs 5 --secs 80 >"$LOGS/poll.log" 2>&1 &
  loader=$!
  sleep 10 # every client has made its first request
  measure_cpu "$RESULTS/poll-poll.json" "$n" "poll"
  wait $loader || say "some polls failed (see $LOGS/poll.log)"
  stop_gateways
}

# peer: memory per idle connection, Floodgate's gateway against Node's `ws` (the most used
# WebSocket server), each holding BENCH_PEER_CLIENTS (default 15000) idle connections opened by
# the same load generator from the same addresses.
hold_idle() { # <pid> <address> <sale> <name>: the server's RSS before and with the sessions
  local n=${BENCH_PEER_CLIENTS:-15000} before after opened loader
  "$BIN/floodgate-loadgen" idle --gateway "$2" --sale "$3" --connections 1 --hold-secs 0 >/dev/null
  sleep 2
  before=$(rss_kib "$1")
  "$BIN/floodgate-loadgen" idle --gateway "$2" --sale "$3" --connections "$n" \
    --from "$(sources 3)" --hold-secs 30 >"$LOGS/$4.log" 2>&1 &
  loader=$!
  until grep -q '^open=' "$LOGS/$4.log" 2>/dev/null; do
    kill -0 $loader 2>/dev/null || { say "the load generator stopped (see $LOGS/$4.log)"; return 1; }
    sleep 0.5
  done
  sleep 10 # the first messages sent, the allocator settled
  after=$(rss_kib "$1")
  opened=$(sed -n 's/^open=\([0-9]*\).*/\1/p' "$LOGS/$4.log")
  jq -n --arg name "$4" --argjson n "$opened" --argjson before "$before" --argjson after "$after" \
    '{server: $name, connections: $n, rss_kib_before: $before, rss_kib_after: $after,
      bytes_per_connection: (($after - $before) * 1024 / $n)}' >"$RESULTS/$4.json"
  kill $loader 2>/dev/null || true
  wait $loader 2>/dev/null || true
}
peer() {
  local sale; sale=$(new_sale bench-peer 3600) # before the opening: the sessions only hold
  say "peer: Floodgate's gateway holding ${BENCH_PEER_CLIENTS:-15000} idle connections"
  start_gateways 1
  hold_idle "${GATEWAY_PIDS[0]}" "${GATEWAY_ADDRS[0]}" "$sale" peer-floodgate
  stop_gateways
  say "peer: Node's ws holding as many"
  (ulimit -n "$(ulimit -Hn)"; exec node deploy/ws-peer/server.mjs 18090) >"$LOGS/ws-peer.log" 2>&1 &
  local node=$!
  PIDS+=($node)
  until grep -q listening "$LOGS/ws-peer.log" 2>/dev/null; do sleep 0.2; done
  hold_idle "$node" 127.0.0.1:18090 "$sale" peer-node
  kill $node 2>/dev/null || true
}

machine
# shellcheck disable=SC2086
jq -n '$ARGS.positional' --args $SCENARIOS >"$RESULTS/ran.json"
for scenario in $SCENARIOS; do
  case $scenario in
    queue | burst | sale | raw | naive | poll | peer) "$scenario" ;;
    *) say "unknown scenario $scenario (queue, burst, sale, raw, naive, poll, peer)"; exit 64 ;;
  esac
done
"$BIN/floodgate-loadgen" markdown --results "$RESULTS" --into BENCHMARKS.md
say "BENCHMARKS.md rewritten from $RESULTS"
