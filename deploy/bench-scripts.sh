#!/usr/bin/env bash
# Times one of the scripts a reservation runs, with redis-benchmark, exactly as the booking
# service sends it: the SHA-1, KEYS and ARGV come from `floodgate-booking scripts bench` (JSON),
# made by the same code as a reservation's own calls. Prints the requests per second. Exits 1 if
# the script does not answer as on the path timed (its `expect`), checked once before the run and
# once after (a refusal, an error or a sold-out pool is a cheaper path: timing it measures
# nothing), or if redis-benchmark met an error.
#
#   deploy/bench-scripts.sh <calls.json> <script> [requests] [connections] [pipeline]
#
# Redis: 127.0.0.1:${BENCH_REDIS_PORT:-6379}; BENCH_REDIS_CLUSTER=1 for a cluster seed there.
set -euo pipefail
calls=$1 name=$2 requests=${3:-100000} connections=${4:-50} pipeline=${5:-1}
port=${BENCH_REDIS_PORT:-6379}
command=()
while IFS= read -r -d '' word; do command+=("$word"); done < <(
  jq -j --arg name "$name" '.[] | select(.name == $name) |
    (["EVALSHA", .sha, (.call.keys | length | tostring)] + .call.keys + .call.args)[] + "\u0000"' "$calls")
[ ${#command[@]} -gt 0 ] || { echo "no script named $name in $calls" >&2; exit 2; }
expect=$(jq -r --arg name "$name" '.[] | select(.name == $name) | .expect' "$calls")
cluster=(); [ "${BENCH_REDIS_CLUSTER:-}" = 1 ] && cluster=(-c)

# One call by hand, each __rand_int__ made a fresh number as redis-benchmark does.
check() {
  local once=() word reply
  for word in "${command[@]}"; do once+=("${word//__rand_int__/$RANDOM$RANDOM$RANDOM}"); done
  reply=$(redis-cli -h 127.0.0.1 -p "$port" "${cluster[@]}" "${once[@]}" 2>&1 | head -n 1)
  if [ "$reply" != "$expect" ]; then
    echo "$name $1 the run answered \"$reply\", not \"$expect\": not the path a reservation takes" >&2
    exit 1
  fi
}
check before
cluster=(); [ "${BENCH_REDIS_CLUSTER:-}" = 1 ] && cluster=(--cluster)
out=$(redis-benchmark -h 127.0.0.1 -p "$port" "${cluster[@]}" -q \
  -n "$requests" -c "$connections" -P "$pipeline" -r 1000000000 "${command[@]}" 2>&1)
if grep -qi 'error' <<<"$out"; then
  echo "$name: Redis answered with an error:" >&2
  grep -i -m 3 'error' <<<"$out" >&2
  exit 1
fi
cluster=(); [ "${BENCH_REDIS_CLUSTER:-}" = 1 ] && cluster=(-c)
check after
# -q prints "EVALSHA ...: <n> requests per second, p50=..."; the rate is the number before it.
tr '\r' '\n' <<<"$out" | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -n 1
