#!/usr/bin/env bash
# Profiles a service under load and prints where its CPU goes (BENCHMARKS.md, "Profiles"):
# perf samples the process on the CPU clock (hardware counters are not offered on every
# machine here), with call graphs unwound from DWARF line tables of a release build made for it
# (cargo's `profiling` profile). Printed: the CPU by thread, the functions with the most samples
# of their own, and the inclusive cost of Floodgate's own functions (the steps of the path).
#
#   deploy/profile.sh booking [seconds]   the booking endpoint, 50 reservations in flight
#   deploy/profile.sh gateway [seconds]   one gateway telling 15,000 waiting clients of a pause,
#                                         then of the resume, each second (one change to every
#                                         client: the fan-out's path, held steady)
#   deploy/profile.sh join [seconds]      one gateway taking 2,000 joins a second into a sale's
#                                         pre-queue, each client leaving once it has its ticket
#                                         (the opening burst's path, held steady)
#   PROFILE_THREADS_ONLY=1 deploy/profile.sh ...   only each thread's CPU (to compare settings)
#
# Needs the local stack (deploy/stack.sh up; this script brings it up). perf comes from
# Debian's linux-perf, installed if missing. The perf data is kept in
# ~/.cache/floodgate/profile/<service>-<date>/ for `perf report -i` of your own.
set -euo pipefail
cd "$(dirname "$0")/.."
SERVICE=${1:?booking, gateway or join}
SECONDS_SAMPLED=${2:-15}
FLOODGATE_HOME=${FLOODGATE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/floodgate}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$FLOODGATE_HOME/target}
OUT="$FLOODGATE_HOME/profile/$SERVICE-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
say() { printf '\033[1m[profile]\033[0m %s\n' "$*" >&2; }

deploy/stack.sh up >/dev/null
deploy/stack.sh bench-tools >/dev/null
deploy/stack.sh profile-tools >/dev/null
say "building the profiling binaries (release code with line tables)"
cargo build --profile profiling --locked -q -p floodgate-gateway -p floodgate-booking \
  -p floodgate-consumer -p floodgate-loadgen
BIN=$CARGO_TARGET_DIR/profiling

PG=postgres://postgres@127.0.0.1:5432
DB="floodgate_profile_$RANDOM$RANDOM"
export FLOODGATE_DATABASE_URL="$PG/$DB" FLOODGATE_REDIS_PREFIX="profile$RANDOM:"
export FLOODGATE_RESERVATIONS_TOPIC="floodgate.profile.$RANDOM$RANDOM" FLOODGATE_CONSUMER_GROUP="profile-$RANDOM"
export FLOODGATE_MAX_CONNECTIONS_PER_IP=1000000 FLOODGATE_JOINS_PER_SEC_PER_IP=1000000
export FLOODGATE_BOOKING_REQUESTS_PER_SEC_PER_IP=1000000 FLOODGATE_BOOKING_READS_PER_SEC_PER_IP=1000000 FLOODGATE_PLACE_REQUESTS_PER_SEC_PER_IP=1000000
export FLOODGATE_CHALLENGES_PER_SEC_PER_IP=1000000 FLOODGATE_RESUMES_PER_SEC=1000000
export RUST_LOG=warn FLOODGATE_DRAIN_DELAY_MS=0
set -a
# shellcheck disable=SC1090
source <("$BIN/floodgate-gateway" keygen --kid profile | grep -v '^#')
set +a
secret() { echo "$1$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"; }
export FLOODGATE_OPS_TOKEN FLOODGATE_WEBHOOK_SECRET FLOODGATE_PAYMENT_API_KEY FLOODGATE_AUDIT_KEY
export FLOODGATE_RESERVATION_KEY; FLOODGATE_RESERVATION_KEY=$(secret rk_)
export FLOODGATE_EDGE_KEY; FLOODGATE_EDGE_KEY=$(secret ek_)
FLOODGATE_AUDIT_KEY=$(secret audit_) FLOODGATE_OPS_TOKEN=$(secret ops_) FLOODGATE_WEBHOOK_SECRET=$(secret whsec_)
FLOODGATE_PAYMENT_API_KEY=$(secret pk_sandbox_)
PIDS=()
cleanup() {
  [ ${#PIDS[@]} -eq 0 ] || kill "${PIDS[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  psql -q "$PG/postgres" -c "drop database if exists $DB" 2>/dev/null || true
  redis-cli --scan --pattern "${FLOODGATE_REDIS_PREFIX}*" | xargs -r -n 1000 redis-cli DEL >/dev/null || true
}
trap cleanup EXIT
psql -q "$PG/postgres" -c "create database $DB"
"$BIN/floodgate-booking" migrate >/dev/null
FLOODGATE_TOPIC_PARTITIONS=6 "$BIN/floodgate-booking" topics ensure >/dev/null
healthy() { for _ in $(seq 1 200); do curl -fs "http://$1/healthz" >/dev/null && return; sleep 0.1; done; say "$1 did not start"; exit 1; }
ops() { curl -fsS -X "$1" -H "Authorization: Bearer $FLOODGATE_OPS_TOKEN" -H 'Content-Type: application/json' ${3:+-d "$3"} "http://127.0.0.1:19281$2" >/dev/null; }

FLOODGATE_BOOKING_LISTEN=127.0.0.1:18281 FLOODGATE_ADMIN_LISTEN=127.0.0.1:19281 \
  FLOODGATE_PAYMENT_SANDBOX=true FLOODGATE_PAYMENT_PROVIDER_URL=http://127.0.0.1:18282 \
  "$BIN/floodgate-booking" serve >"$OUT/booking.log" 2>&1 &
BOOKING=$! PIDS+=($!)
FLOODGATE_CONSUMER_METRICS_LISTEN=127.0.0.1:19280 "$BIN/floodgate-consumer" >"$OUT/consumer.log" 2>&1 &
PIDS+=($!)
healthy 127.0.0.1:18281
SALE="profile-$RANDOM"
"$BIN/floodgate-booking" sale create deploy/sales/bench.toml --id "$SALE" --opens-in-secs 2 --arm >/dev/null
sleep 3

case $SERVICE in
  booking)
    POOL=12627-20261201-SL-TQ
    redis-cli MSET "${FLOODGATE_REDIS_PREFIX}{p:$SALE/$POOL}:avail" 1000000 >/dev/null
    redis-cli HSET "${FLOODGATE_REDIS_PREFIX}{p:$SALE/$POOL}:cfg" capacity 1000100 >/dev/null
    say "booking: reservations, 50 in flight, sampled for $SECONDS_SAMPLED s"
    "$BIN/floodgate-loadgen" reserve --booking 127.0.0.1:18281 --sale "$SALE" --pool "$POOL" \
      --requests $((4000 * (SECONDS_SAMPLED + 10))) --concurrency "${PROFILE_CONCURRENCY:-50}" \
      >"$OUT/load.log" 2>&1 &
    LOAD=$! PIDS+=($!)
    sleep 3
    TARGET=$BOOKING
    ;;
  gateway)
    # Admission moves slowly; a pause and a resume each second are each told to every client at
    # once (the freshness contract never delays them): one change to everyone, held steady.
    ops PATCH "/admin/v1/sales/$SALE" '{"admission_rate": 2}'
    FLOODGATE_GATEWAY_LISTEN=127.0.0.1:18280 FLOODGATE_GATEWAY_ADMIN_LISTEN=127.0.0.1:19282 \
      "$BIN/floodgate-gateway" serve >"$OUT/gateway.log" 2>&1 &
    TARGET=$! PIDS+=($!)
    healthy 127.0.0.1:18280
    say "gateway: 15,000 waiting clients, sampled for $SECONDS_SAMPLED s"
    "$BIN/floodgate-loadgen" idle --gateway 127.0.0.1:18280 --sale "$SALE" --connections 15000 \
      --from 127.0.2.2,127.0.2.3,127.0.2.4,127.0.2.5 --hold-secs $((SECONDS_SAMPLED + 30)) \
      >"$OUT/load.log" 2>&1 &
    LOAD=$! PIDS+=($!)
    until grep -q '^open=' "$OUT/load.log" 2>/dev/null; do
      kill -0 $LOAD 2>/dev/null || { cat "$OUT/load.log"; exit 1; }
      sleep 0.5
    done
    # Each step in the background and waited for, so the loop's TERM stops it at once, and
    # what it started goes with it.
    (trap 'kill $(jobs -p) 2>/dev/null; exit 0' TERM
    while :; do
      ops POST "/admin/v1/sales/$SALE/pause" || true; sleep 0.5 & wait $!
      ops POST "/admin/v1/sales/$SALE/resume" || true; sleep 0.5 & wait $!
    done) &
    CHANGES=$! PIDS+=($!)
    sleep 3
    ;;
  join)
    # A sale opening in ten minutes: every join lands in its pre-queue, as at an opening.
    EARLY="profile-early-$RANDOM"
    "$BIN/floodgate-booking" sale create deploy/sales/bench.toml --id "$EARLY" --opens-in-secs 600 --arm >/dev/null
    FLOODGATE_GATEWAY_LISTEN=127.0.0.1:18280 FLOODGATE_GATEWAY_ADMIN_LISTEN=127.0.0.1:19282 \
      "$BIN/floodgate-gateway" serve >"$OUT/gateway.log" 2>&1 &
    TARGET=$! PIDS+=($!)
    healthy 127.0.0.1:18280
    say "join: 2,000 joins a second, sampled for $SECONDS_SAMPLED s"
    # Rounds of a burst's clients (each leaves once it has its ticket), back to back.
    # Each round in the background and waited for, so the loop's TERM ends the round too.
    (trap 'kill $(jobs -p) 2>/dev/null; exit 0' TERM
    for _ in $(seq 1 $((SECONDS_SAMPLED + 10))); do
      "$BIN/floodgate-loadgen" burst --gateways 127.0.0.1:18280 --sale "$EARLY" --clients 2000 \
        --from 127.0.2.2,127.0.2.3,127.0.2.4,127.0.2.5 --within-ms 1000 >>"$OUT/load.log" 2>&1 &
      wait $! || true
    done) &
    LOAD=$! PIDS+=($!)
    sleep 3
    ;;
  *) say "unknown service $SERVICE (booking, gateway, join)"; exit 64 ;;
esac

# Each thread's CPU over the sampled time, from /proc (perf's samples say the same, roughly).
thread_cpu() { for t in /proc/"$TARGET"/task/*; do echo "$(basename "$t") $(tr -d '\n' <"$t/comm" | tr ' ' _) $(sed 's/^.*) //' "$t/stat" | awk '{print $12 + $13}')"; done; }
# The 201s (booking) or messages sent (gateway) so far, from the service's own metrics.
done_so_far() {
  case $SERVICE in
    booking) curl -s http://127.0.0.1:19281/metrics | awk '/^floodgate_http_requests_total/ && /status="201"/ { s += $2 } END { print s + 0 }' ;;
    gateway) curl -s http://127.0.0.1:19282/metrics | awk '/^floodgate_ws_messages_sent_total/ { s += $2 } END { print s + 0 }' ;;
    join) curl -s http://127.0.0.1:19282/metrics | awk '/^floodgate_tickets_issued_total/ { s += $2 } END { print s + 0 }' ;;
  esac
}
thread_cpu >"$OUT/threads.before"
if [ "${PROFILE_THREADS_ONLY:-}" = 1 ]; then
  # Only the threads' CPU and the work done: a quick comparison of settings, no samples.
  d0=$(done_so_far)
  sleep "$SECONDS_SAMPLED"
  thread_cpu >"$OUT/threads.after"
  d1=$(done_so_far)
  kill $LOAD ${CHANGES:-} 2>/dev/null || true
  echo "$((d1 - d0)) done in $SECONDS_SAMPLED s"
  awk -v hz="$(getconf CLK_TCK)" 'FNR == NR { t[$1] = $3; next } ($1 in t) { cpu[$2] += ($3 - t[$1]) / hz }
    END { for (name in cpu) printf "%6.2f s  %s\n", cpu[name], name }' \
    "$OUT/threads.before" "$OUT/threads.after" | sort -rn | head -3
  exit 0
fi
perf record -e cpu-clock -F 499 --call-graph dwarf,16384 -p "$TARGET" -o "$OUT/perf.data" \
  -- sleep "$SECONDS_SAMPLED" 2>"$OUT/perf-record.log"
thread_cpu >"$OUT/threads.after"
kill $LOAD ${CHANGES:-} 2>/dev/null || true
report() { perf report -i "$OUT/perf.data" --stdio "$@" 2>/dev/null | grep -v '^#' | grep -v '^$' | cut -c1-160; }
samples=$(perf report -i "$OUT/perf.data" --stdio -g none --sort comm 2>/dev/null | sed -n 's/^# Samples: \([^ ]*\).*/\1/p')
# The steps worth naming, inclusive: Floodgate's own functions and the libraries' entry points
# (a future's poll wrappers and the runtime's frames are left out: they contain everything).
steps='floodgate_[a-z_]+::[a-zA-Z_:]+|ed25519_dalek::verifying|ScriptInvocation::invoke_async|redis::cmd::Cmd::query_async'
steps+='|rdkafka::producer|rd_kafka_broker_serve|hyper::proto::h1::dispatch::Dispatcher<D,Bs,I,T>::poll_(read|write|flush)'
steps+='|serde_json::(de|ser)::|tungstenite::protocol::WebSocketContext::(write|read)|tokio::net::tcp::stream::TcpStream'
# `head` closes each report early: not a failure.
set +o pipefail
{
  echo "## $SERVICE: $samples samples over $SECONDS_SAMPLED s"
  echo
  echo "### CPU by thread (seconds over the $SECONDS_SAMPLED s, from /proc)"
  awk -v hz="$(getconf CLK_TCK)" 'FNR == NR { t[$1] = $3; next } ($1 in t) { cpu[$2] += ($3 - t[$1]) / hz }
    END { for (name in cpu) printf "    %6.2f s  %s\n", cpu[name], name }' \
    "$OUT/threads.before" "$OUT/threads.after" | sort -rn | head -8
  echo
  echo "### Functions by their own samples"
  report --no-children --sort dso,sym -g none | head -40
  echo
  echo "### Steps of the path, inclusive"
  report --children --sort sym -g none | grep -E "$steps" | grep -vE '\] (poll|call_once|catch_unwind|do_call)<' | head -40
} | tee "$OUT/summary.txt"
say "perf data and summary in $OUT"
