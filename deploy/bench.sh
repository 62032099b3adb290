#!/usr/bin/env bash
# Runs Floodgate's benchmarks on this machine and rewrites the generated part of BENCHMARKS.md
# (between its "bench:begin" and "bench:end" markers) with the figures, the machine and the
# commands. Release builds of the real binaries, the local Redis, PostgreSQL and Tansu; all load
# on loopback. Figures are reported, never asserted.
#
#   deploy/bench.sh                 every scenario (the soak aside)
#   deploy/bench.sh queue sale      some of them (queue, burst, sale, raw, cluster, naive, poll, peer,
#                                   autopilot, hostile)
#   deploy/bench.sh soak            the scenarios back to back for 20 minutes (BENCH_SOAK_MINUTES),
#                                   counting what died, failed or was refused (see soak() below)
#
# Sizes (environment): BENCH_CLIENTS (queue: sessions held, default 100000), BENCH_GATEWAYS
# (gateway processes, default 6: one process may hold fewer than 20,000 sockets), BENCH_BURST
# (joins inside one second, default 10000), BENCH_SALE_CLIENTS (people in the rush, default
# 10000), BENCH_POLL_CLIENTS (poll, default 10000), BENCH_PEER_CLIENTS (peer, default 15000),
# BENCH_PILOT_CLIENTS (autopilot, default 6000) and BENCH_FAULT_RPS (its fault, default 1500).
# The JSON of every run is kept in ~/.cache/floodgate/bench/<date>/. A scenario not run keeps the
# previous run's figures; until this machine's runs have covered every scenario, BENCHMARKS.md is
# left as it is (a new machine's first run of some would leave only those in it).
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_SCENARIOS="queue burst sale raw cluster naive poll peer autopilot hostile"
SCENARIOS=${*:-$ALL_SCENARIOS}
CLIENTS=${BENCH_CLIENTS:-100000}
GATEWAYS=${BENCH_GATEWAYS:-6}
BURST=${BENCH_BURST:-10000}
SALE_CLIENTS=${BENCH_SALE_CLIENTS:-10000}
SOAK_CLIENTS=${BENCH_SOAK_CLIENTS:-5000}
PILOT_CLIENTS=${BENCH_PILOT_CLIENTS:-6000}
FAULT_RPS=${BENCH_FAULT_RPS:-1500}
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
export FLOODGATE_BOOKING_REQUESTS_PER_SEC_PER_IP=1000000 FLOODGATE_BOOKING_READS_PER_SEC_PER_IP=1000000 FLOODGATE_PLACE_REQUESTS_PER_SEC_PER_IP=1000000
export FLOODGATE_CHALLENGES_PER_SEC_PER_IP=1000000 FLOODGATE_RESUMES_PER_SEC=1000000
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
# The scenarios whose figures this folder holds: those carried over (a folder from before this
# list was kept names only what ran in it), and each run now once it has finished (below).
: >"$RESULTS/covers"
if [ -n "$PREVIOUS" ] && [ -f "$PREVIOUS/covers" ]; then
  cp "$PREVIOUS/covers" "$RESULTS/covers"
elif [ -n "$PREVIOUS" ] && [ -f "$PREVIOUS/ran.json" ]; then
  jq -r '.[]' "$PREVIOUS/ran.json" >"$RESULTS/covers"
fi
say() { printf '\033[1m[bench]\033[0m %s\n' "$*" >&2; }

deploy/stack.sh up
deploy/stack.sh bench-tools
say "building release binaries"
cargo build --release --locked -q -p floodgate-gateway -p floodgate-booking -p floodgate-consumer \
  -p floodgate-loadgen -p floodgate-sandbox
BIN=$CARGO_TARGET_DIR/release
set -a
# shellcheck disable=SC1090
source <("$BIN/floodgate-gateway" keygen --kid bench | grep -v '^#')
set +a
# Secrets of 32 characters or more, fresh per run (the services refuse shorter ones).
secret() { echo "$1$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"; }
export FLOODGATE_OPS_TOKEN; FLOODGATE_OPS_TOKEN=$(secret ops_)
export FLOODGATE_AUDIT_KEY; FLOODGATE_AUDIT_KEY=$(secret audit_)
export FLOODGATE_WEBHOOK_SECRET; FLOODGATE_WEBHOOK_SECRET=$(secret whsec_)
export FLOODGATE_RESERVATION_KEY; FLOODGATE_RESERVATION_KEY=$(secret rk_)
export FLOODGATE_EDGE_KEY; FLOODGATE_EDGE_KEY=$(secret ek_)
export FLOODGATE_PAYMENT_API_KEY; FLOODGATE_PAYMENT_API_KEY=$(secret pk_sandbox_)
psql -q "$PG/postgres" -c "create database $DB"
"$BIN/floodgate-booking" migrate >/dev/null
FLOODGATE_TOPIC_PARTITIONS=6 "$BIN/floodgate-booking" topics ensure >/dev/null

PIDS=() RAW_DB= RAW_PREFIX=
cleanup() {
  trap - EXIT INT TERM
  [ ${#PIDS[@]} -eq 0 ] || kill "${PIDS[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  psql -q "$PG/postgres" -c "drop database if exists $DB" 2>/dev/null || true
  # The run's Redis keys (its own prefix) go too: the shared Redis keeps only what is in use.
  local prefix
  for prefix in "$FLOODGATE_REDIS_PREFIX" $RAW_PREFIX; do
    redis-cli --scan --pattern "${prefix}*" | xargs -r -n 1000 redis-cli DEL >/dev/null || true
  done
  [ -z "$RAW_DB" ] || psql -q "$PG/postgres" -c "drop database if exists $RAW_DB" 2>/dev/null || true
  [ -z "$CLUSTER_BOOKING" ] || { kill "$CLUSTER_BOOKING" 2>/dev/null; wait "$CLUSTER_BOOKING" 2>/dev/null || true; }
  [ -z "$CLUSTER_UP" ] || deploy/stack.sh cluster-down "$CLUSTER_FIRST" >/dev/null 2>&1 || true
  [ -z "$CLUSTER_DB" ] || psql -q "$PG/postgres" -c "drop database if exists $CLUSTER_DB" 2>/dev/null || true
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
sleep_until_ms() { local ms=$(($1 - $(date +%s%3N))); [ "$ms" -le 0 ] || sleep "$(awk -v m="$ms" 'BEGIN { printf "%.3f", m / 1000 }')"; }

# Per-process CPU over a timed phase: the headline figures of BENCHMARKS.md, every process of
# one run side by side. `cpu_begin <phase> <name=pid>...` marks each process's CPU time so far
# (user and system, from /proc/<pid>/stat; a name's part before its first '-' is its role);
# `cpu_end <phase> [counts]` marks them again and writes $RESULTS/cpu-<phase>.json: each
# process's seconds over the phase, the phase's wall time, and the counts (a JSON object:
# messages sent, reservations, ...; the first is the unit the phase's table divides by). A
# process gone by the end is left out; the load generators report their own CPU in their JSON.
proc_cpu() { [ -r "/proc/$1/stat" ] && sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12, $13}'; }
cpu_mark() { # <file> <name=pid>...
  local out=$1 np ticks; shift
  { date +%s%N; for np in "$@"; do ticks=$(proc_cpu "${np#*=}") && echo "${np%%=*} $ticks"; done; } >"$out"
}
cpu_begin() {
  local phase=$1; shift
  printf '%s\n' "$@" >"$RESULTS/.cpu-$phase.names"
  cpu_mark "$RESULTS/.cpu-$phase.begin" "$@"
}
cpu_end() {
  local phase=$1 counts=${2:-"{}"} names
  mapfile -t names <"$RESULTS/.cpu-$phase.names"
  cpu_mark "$RESULTS/.cpu-$phase.end" "${names[@]}"
  # A process gone by now (the consumer's worker restarted, a service died) is left out of the
  # phase: say so, rather than let its role's figure look cheap.
  local np
  for np in "${names[@]}"; do
    [ -r "/proc/${np#*=}/stat" ] || say "warning: ${np%%=*} (pid ${np#*=}) ended during $phase: its CPU is not counted"
  done
  awk -v hz="$(getconf CLK_TCK)" '
    FNR == 1 { t[FILENAME == ARGV[1]] = $1; next }
    FILENAME == ARGV[1] { u[$1] = $2; s[$1] = $3; next }
    ($1 in u) { printf "%s %.2f %.2f\n", $1, ($2 - u[$1]) / hz, ($3 - s[$1]) / hz }
    END { printf "@wall %.3f\n", (t[0] - t[1]) / 1e9 }' \
    "$RESULTS/.cpu-$phase.begin" "$RESULTS/.cpu-$phase.end" |
    jq -R -s --arg phase "$phase" --argjson counts "$counts" '
      split("\n") | map(select(length > 0) | split(" ")) |
      { phase: $phase, counts: $counts, unit: ($counts | keys_unsorted | first),
        seconds: (map(select(.[0] == "@wall"))[0][1] | tonumber),
        processes: map(select(.[0] != "@wall") | { name: .[0], role: (.[0] | split("-")[0]),
          user_s: (.[1] | tonumber), system_s: (.[2] | tonumber) }) }' >"$RESULTS/cpu-$phase.json"
  rm -f "$RESULTS/.cpu-$phase".*
}
# The pid of the Redis at port $1 (default the shared one, 6379).
redis_pid() { redis-cli -p "${1:-6379}" INFO server | tr -d '\r' | awk -F: '$1 == "process_id" {print $2}'; }
# Every service process running now, as name=pid (PostgreSQL's are each backend and helper).
service_procs() {
  local procs=("redis=$(redis_pid)") pid i
  pid=$(cat "$FLOODGATE_HOME/tansu.pid" 2>/dev/null || true)
  [ -n "$pid" ] && procs+=("broker=$pid")
  [ -n "$BACKEND_UP" ] && procs+=("booking=$BOOKING_PID" $(consumer_procs) "sandbox=$SANDBOX_PID")
  for i in "${!GATEWAY_PIDS[@]}"; do procs+=("gateway-$((i + 1))=${GATEWAY_PIDS[$i]}"); done
  for pid in $(pgrep -x postgres); do procs+=("postgres-$pid=$pid"); done
  printf '%s\n' "${procs[@]}"
}
# The consumer's two processes: its supervisor and the worker that does the work (the same
# binary, its child: consumer/src/supervise.rs), both under the role "consumer".
consumer_procs() {
  echo "consumer=$CONSUMER_PID"
  local worker
  for worker in $(pgrep -P "$CONSUMER_PID" 2>/dev/null); do echo "consumer-worker$worker=$worker"; done
}
# A counter's value summed over all its series and the admin listeners given.
metric_sum() { # <metric> <admin address>...
  local name=$1 total=0 addr; shift
  for addr in "$@"; do
    total=$((total + $(curl -s "http://$addr/metrics" |
      awk -v n="$name" '$1 == n || index($1, n "{") == 1 { s += $2 } END { printf "%.0f", s }')))
  done
  echo "$total"
}
# The value of the series of metric $1 whose labels contain $2, summed, at the admin listener $3.
metric_where() {
  curl -s "http://$3/metrics" |
    awk -v n="$1" -v l="$2" 'index($1, n "{") == 1 && index($1, l) { s += $2 } END { printf "%.0f", s }'
}
# Redis' own count of a command's calls and the microseconds it spent in them (a script's
# commands are counted inside its EVALSHA too); of the Redis at port $2 (default 6379).
redis_cmdstat() {
  redis-cli -p "${2:-6379}" INFO commandstats | tr -d '\r' |
    awk -F'[:,=]' -v c="cmdstat_$1" '$1 == c { print $3, $5; f = 1 } END { if (!f) print 0, 0 }'
}

BACKEND_UP= BOOKING_PID= CONSUMER_PID= SANDBOX_PID=
# The booking service reaches Redis at BOOKING_REDIS_URL when set (the autopilot scenario's
# fault), else at the shared one.
start_backend() {
  [ -n "$BACKEND_UP" ] && return
  FLOODGATE_REDIS_URL=${BOOKING_REDIS_URL:-${FLOODGATE_REDIS_URL:-redis://127.0.0.1:6379}} \
    FLOODGATE_BOOKING_LISTEN=127.0.0.1:18081 FLOODGATE_ADMIN_LISTEN=127.0.0.1:19081 \
    FLOODGATE_PAYMENT_SANDBOX=true FLOODGATE_PAYMENT_PROVIDER_URL=http://127.0.0.1:18082 \
    "$BIN/floodgate-booking" serve >"$LOGS/booking.log" 2>&1 &
  BOOKING_PID=$! PIDS+=($!)
  FLOODGATE_SANDBOX_LISTEN=127.0.0.1:18082 FLOODGATE_SANDBOX_PUBLIC_URL=http://127.0.0.1:18082 \
    FLOODGATE_SANDBOX_WEBHOOK_URL=http://127.0.0.1:18081/v1/payments/webhook \
    FLOODGATE_SANDBOX_WEBHOOK_SECRET=$FLOODGATE_WEBHOOK_SECRET \
    FLOODGATE_SANDBOX_API_KEY=$FLOODGATE_PAYMENT_API_KEY \
    "$BIN/floodgate-sandbox" >"$LOGS/sandbox.log" 2>&1 &
  SANDBOX_PID=$! PIDS+=($!)
  # Not 1910x: the gateways' admin listeners are 19101 and up.
  FLOODGATE_CONSUMER_METRICS_LISTEN=127.0.0.1:19180 FLOODGATE_CONSUMER_INSTANCE_ID=bench-consumer \
    "$BIN/floodgate-consumer" >"$LOGS/consumer.log" 2>&1 &
  CONSUMER_PID=$! PIDS+=($!)
  healthy 127.0.0.1:18081
  BACKEND_UP=1
}

stop_backend() {
  [ -n "$BACKEND_UP" ] || return 0
  kill "$BOOKING_PID" "$SANDBOX_PID" "$CONSUMER_PID" 2>/dev/null || true
  wait "$BOOKING_PID" "$SANDBOX_PID" "$CONSUMER_PID" 2>/dev/null || true
  BACKEND_UP=
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
  local loaders=() logs=()
  mapfile -t procs < <(service_procs)
  cpu_begin queue-opening "${procs[@]}"
  for l in $(seq 1 "$GATEWAYS"); do
    local trigger=(); [ "$l" = 1 ] && trigger=(--trigger)
    "$BIN/floodgate-loadgen" queue --gateways "$(joined "${GATEWAY_ADDRS[@]}")" --sale "$sale" \
      --clients "$per" --from "$(sources "$l")" --ops 127.0.0.1:19081 --hold-secs 5 \
      --change-at-unix-ms "$at" "${trigger[@]}" --json "$RESULTS/queue-$l.json" \
      >"$LOGS/queue-$l.log" 2>&1 &
    loaders+=($!) logs+=("$LOGS/queue-$l.log")
  done
  # Memory once everyone is in place, before the change.
  until [ "$(grep -l '^placed' "${logs[@]}" 2>/dev/null | wc -l)" -ge "$GATEWAYS" ]; do
    sleep 0.5
  done
  local held; held=$(sessions)
  cpu_end queue-opening "{\"sessions\": $held}"
  # Each gateway gives the join ramp's freed pages back once its ramp is over (within seconds:
  # gateway/src/memory.rs); the memory is read after that, as it would be in a sale's queue.
  local deadline=$(($(date +%s) + 30))
  until trimmed_everywhere; do
    [ "$(date +%s)" -lt "$deadline" ] || { say "queue: not every gateway trimmed its memory"; break; }
    sleep 0.5
  done
  local after; after=$(rss_kib "${GATEWAY_PIDS[@]}")
  jq -n --argjson before "$before" --argjson after "$after" --argjson sessions "$held" \
    --argjson gateways "$GATEWAYS" \
    '{gateways: $gateways, sessions: $sessions, rss_kib_before: $before, rss_kib_after: $after,
      bytes_per_connection: (($after - $before) * 1024 / $sessions)}' >"$RESULTS/memory.json"
  fanout_phase queue-fanout "$at" gateway_messages "${logs[@]}"
  wait "${loaders[@]}" || say "a queue loadgen reported failures (see $LOGS)"
  stop_gateways
}
# Whether every running gateway has given freed memory back at least once.
trimmed_everywhere() {
  local addr
  for addr in "${GATEWAY_ADMINS[@]}"; do
    [ "$(metric_sum floodgate_memory_trims_total "$addr")" -ge 1 ] || return 1
  done
}
# The messages every running gateway has sent so far.
gateway_messages() { metric_sum floodgate_ws_messages_sent_total "${GATEWAY_ADMINS[@]}"; }
# One change's fan-out, for loaders started with --change-at-unix-ms <at> and --hold-secs: every
# service's CPU from just before the instant until each loader has seen its clients reached
# (while their sessions are still open: closing them is no part of the change), and the
# messages the servers sent meanwhile (counted by the command <messages>).
fanout_phase() { # <phase> <at> <messages> <loader logs>...
  local phase=$1 at=$2 messages=$3 m0 m1 procs; shift 3
  mapfile -t procs < <(service_procs)
  sleep_until_ms $((at - 100))
  m0=$($messages)
  cpu_begin "$phase" "${procs[@]}" "${FANOUT_EXTRA[@]}"
  local deadline=$(($(date +%s) + 60))
  until [ "$(grep -l '^fan-out measured' "$@" 2>/dev/null | wc -l)" -ge "$#" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || { say "$phase: not every loader measured the change"; break; }
    sleep 0.05
  done
  m1=$($messages)
  cpu_end "$phase" "{\"messages\": $((m1 - m0))}"
}
FANOUT_EXTRA=()

# burst: BURST joins within one second, from four processes, on two gateways, before the
# opening (the pre-queue, as at a real opening).
burst() {
  local sale; sale=$(new_sale bench-burst 600)
  start_gateways 2
  say "burst: $BURST joins within one second"
  local loaders=() procs
  mapfile -t procs < <(service_procs)
  cpu_begin burst "${procs[@]}"
  for l in 1 2 3 4; do
    "$BIN/floodgate-loadgen" burst --gateways "$(joined "${GATEWAY_ADDRS[@]}")" --sale "$sale" \
      --clients $((BURST / 4)) --from "$(sources "$l")" --within-ms 1000 \
      --json "$RESULTS/burst-$l.json" >"$LOGS/burst-$l.log" 2>&1 &
    loaders+=($!)
  done
  wait "${loaders[@]}" || say "a burst loadgen reported failures (see $LOGS)"
  # Each join and its leave: the burst's clients disconnect once they have their ticket.
  cpu_end burst "{\"joins\": $BURST}"
  stop_gateways
}

# sale: the whole rush on two gateways with the booking service, sandbox provider and consumer,
# checked at the end (no oversell, every 201 durable, admission in order).
sale() {
  local sale; sale=$(new_sale bench-sale 10)
  start_backend
  start_gateways 2
  say "sale: $SALE_CLIENTS people for 400 seats"
  local procs; mapfile -t procs < <(service_procs)
  cpu_begin sale "${procs[@]}"
  "$BIN/floodgate-loadgen" sale --gateways "$(joined "${GATEWAY_ADDRS[@]}")" --sale "$sale" \
    --booking 127.0.0.1:18081 --sandbox 127.0.0.1:18082 --clients "$SALE_CLIENTS" \
    --from "$(sources 1),$(sources 2)" --json "$RESULTS/sale.json" 2>"$LOGS/sale.log" ||
    say "the sale's invariants did NOT all hold (see $RESULTS/sale.json)"
  cpu_end sale "{\"people\": $SALE_CLIENTS}"
  stop_gateways
}

# The raw scenario, in a file of its own.
# shellcheck source=deploy/bench-raw.sh
source deploy/bench-raw.sh

# The cluster scenario, in a file of its own.
# shellcheck source=deploy/bench-cluster.sh
source deploy/bench-cluster.sh

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
  local procs; mapfile -t procs < <(service_procs)
  cpu_begin naive-floodgate "${procs[@]}"
  "$BIN/floodgate-loadgen" reserve --booking 127.0.0.1:18081 --sale "$sale" \
    --pool 12627-20261201-SL-TQ --requests 20000 --concurrency 50 \
    --json "$RESULTS/naive-floodgate.json" >"$LOGS/naive-floodgate.log" 2>&1
  cpu_end naive-floodgate "{\"attempts\": 20000}"
}

# Waits until the load generator <pid> writes a line starting with <prefix> to <log>; fails,
# saying so, if it stops first.
await_line() { # <prefix> <log> <pid>
  until grep -q "^$1" "$2" 2>/dev/null; do
    kill -0 "$3" 2>/dev/null || { say "the load generator stopped (see $2)"; return 1; }
    sleep 0.5
  done
}
# The poll scenario, in a file of its own.
# shellcheck source=deploy/bench-poll.sh
source deploy/bench-poll.sh

# The peer scenario, in a file of its own.
# shellcheck source=deploy/bench-peer.sh
source deploy/bench-peer.sh

# The soak, a scenario in a file of its own.
# shellcheck source=deploy/bench-soak.sh
source deploy/bench-soak.sh

# The autopilot scenario, in a file of its own (the hostile one uses its watch_autopilot).
# shellcheck source=deploy/bench-autopilot.sh
source deploy/bench-autopilot.sh

# The hostile rush, a scenario in a file of its own: the crowd at the default allowances and the
# stranger beside it.
# shellcheck source=deploy/bench-hostile.sh
source deploy/bench-hostile.sh

machine
# shellcheck disable=SC2086
jq -n '$ARGS.positional' --args $SCENARIOS >"$RESULTS/ran.json"
for scenario in $SCENARIOS; do
  # A scenario run now replaces all it carried over (its processes may be fewer this time).
  rm -f "$RESULTS/$scenario"-*.json "$RESULTS/$scenario.json" "$RESULTS/cpu-$scenario"*.json
  [ "$scenario" != queue ] || rm -f "$RESULTS/memory.json"
  # Not covered until it has run to its end: an aborted run leaves no claim to its figures.
  grep -vxF "$scenario" "$RESULTS/covers" >"$RESULTS/covers.new" || true
  mv "$RESULTS/covers.new" "$RESULTS/covers"
  case $scenario in
    queue | burst | sale | raw | cluster | naive | poll | peer | autopilot | hostile | soak) "$scenario" ;;
    *) say "unknown scenario $scenario (queue, burst, sale, raw, cluster, naive, poll, peer, autopilot, hostile, soak)"; exit 64 ;;
  esac
  echo "$scenario" >>"$RESULTS/covers"
done
# The generated part holds every scenario: until this machine's runs have covered them all (a new
# machine), a run of some would rewrite it with those alone, so it is left as it is.
# shellcheck disable=SC2086
missing=$(printf '%s\n' $ALL_SCENARIOS | grep -vxF -f "$RESULTS/covers" | tr '\n' ' ' || true)
if [ -n "$missing" ]; then
  say "BENCHMARKS.md left as it is: no run on this machine has figures of $missing"
  say "the figures: $RESULTS (to read them as markdown: cp BENCHMARKS.md /tmp/b.md; $BIN/floodgate-loadgen markdown --results $RESULTS --into /tmp/b.md)"
  exit 0
fi
"$BIN/floodgate-loadgen" markdown --results "$RESULTS" --into BENCHMARKS.md
say "BENCHMARKS.md rewritten from $RESULTS"
