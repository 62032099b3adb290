#!/usr/bin/env bash
# Times one of the scripts a reservation runs, with redis-benchmark, exactly as the booking
# service sends it: the SHA-1, KEYS and ARGV come from `floodgate-booking scripts bench` (JSON),
# made by the same code as a reservation's own calls. Prints the requests per second (on a
# cluster, and the port of the primary it ran on). Exits 1 if the script does not answer as on the
# path timed (its `expect`), checked once before the run and once after (a refusal, an error or a
# sold-out pool is a cheaper path: timing it measures nothing), or if redis-benchmark met an
# error.
#
#   deploy/bench-scripts.sh <calls.json> <script> [requests] [connections] [pipeline]
#
# Redis: 127.0.0.1:${BENCH_REDIS_PORT:-6379}; with BENCH_REDIS_CLUSTER=1 that is a seed of a
# Redis Cluster, and the script is timed on the primary that serves its keys' slot (a script's
# keys share one slot). redis-benchmark's own --cluster mode is not used: it spreads its clients
# over every primary and cannot route a command by the keys of an EVALSHA.
set -euo pipefail
calls=$1 name=$2 requests=${3:-100000} connections=${4:-50} pipeline=${5:-1}
port=${BENCH_REDIS_PORT:-6379}
command=()
while IFS= read -r -d '' word; do command+=("$word"); done < <(
  jq -j --arg name "$name" '.[] | select(.name == $name) |
    (["EVALSHA", .sha, (.call.keys | length | tostring)] + .call.keys + .call.args)[] + "\u0000"' "$calls")
[ ${#command[@]} -gt 0 ] || { echo "no script named $name in $calls" >&2; exit 2; }
expect=$(jq -r --arg name "$name" '.[] | select(.name == $name) | .expect' "$calls")
if [ "${BENCH_REDIS_CLUSTER:-}" = 1 ]; then
  key=$(jq -r --arg name "$name" '.[] | select(.name == $name) | .call.keys[0]' "$calls")
  slot=$(redis-cli -h 127.0.0.1 -p "$port" CLUSTER KEYSLOT "$key")
  # CLUSTER NODES: "<id> <ip:port@bus> <flags> ... <first-last> <slot> ..." for each node; a
  # bracketed entry is a slot being migrated, not served.
  port=$(redis-cli -h 127.0.0.1 -p "$port" CLUSTER NODES | awk -v slot="$slot" '
    $3 ~ /master/ { for (i = 9; i <= NF; i++) if ($i !~ /^\[/) {
      n = split($i, r, "-"); if (slot + 0 >= r[1] + 0 && slot + 0 <= r[n] + 0) { split($2, a, "[:@]"); print a[2]; exit } } }')
  [ -n "$port" ] || { echo "$name: no primary serves slot $slot" >&2; exit 2; }
fi

# One call by hand, each __rand_int__ made a fresh number as redis-benchmark does.
check() {
  local once=() word reply
  for word in "${command[@]}"; do once+=("${word//__rand_int__/$RANDOM$RANDOM$RANDOM}"); done
  reply=$(redis-cli -h 127.0.0.1 -p "$port" "${once[@]}" 2>&1 | head -n 1)
  if [ "$reply" != "$expect" ]; then
    echo "$name $1 the run answered \"$reply\", not \"$expect\": not the path a reservation takes" >&2
    exit 1
  fi
}
check before
out=$(redis-benchmark -h 127.0.0.1 -p "$port" -q \
  -n "$requests" -c "$connections" -P "$pipeline" -r 1000000000 "${command[@]}" 2>&1)
if grep -qi 'error' <<<"$out"; then
  echo "$name: Redis answered with an error:" >&2
  grep -i -m 3 'error' <<<"$out" >&2
  exit 1
fi
check after
# -q prints "EVALSHA ...: <n> requests per second, p50=..."; the rate is the number before it.
rate=$(tr '\r' '\n' <<<"$out" | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -n 1)
if [ "${BENCH_REDIS_CLUSTER:-}" = 1 ]; then echo "$rate $port"; else echo "$rate"; fi
