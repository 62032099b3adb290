# shellcheck shell=bash
# The `poll` scenario of deploy/bench.sh, which sources this file (it is not run alone): its
# functions use bench.sh's helpers (start_gateways, await_line, cpu_begin...).
#
# poll: the gateway's CPU time per waiting client per minute, WebSocket push against polling the
# sale's status every 5 s, BENCH_POLL_CLIENTS clients each (default 10000), one gateway.
measure_cpu() { # <phase> <clients> <what>: every service's CPU over one minute
  local procs; mapfile -t procs < <(service_procs)
  cpu_begin "$1" "${procs[@]}"
  sleep 60
  cpu_end "$1" "{\"clients\": $2, \"what\": \"$3\"}"
}
# One minute of the gateway's CPU with BENCH_POLL_CLIENTS clients waiting by push, the load
# generator measuring how stale each client's shown place ever is against the frontier it reads
# from Redis. <phase> names the JSON; the clients join <sale> after ticket <skip> was handed out.
push_phase() { # <phase> <sale> <skip> <what>
  local n=${BENCH_POLL_CLIENTS:-10000} loader
  # Admission moves slowly, so every waiting client's true place changes all the time: push's
  # busiest case before the contract (a position message to every client every second).
  curl -fsS -X PATCH -H "Authorization: Bearer $FLOODGATE_OPS_TOKEN" \
    -H 'Content-Type: application/json' -d '{"admission_rate": 2}' \
    "http://127.0.0.1:19081/admin/v1/sales/$2" >/dev/null
  # Tickets handed out to nobody: the clients' places start after them (the freshness test's
  # way to stand far back in a line without a million sockets).
  [ "$3" -eq 0 ] || redis-cli SET "${FLOODGATE_REDIS_PREFIX}{s:$2}:seq" "$3" >/dev/null
  say "poll: $n clients waiting by WebSocket push, $4"
  start_gateways 1
  "$BIN/floodgate-loadgen" idle --gateway "${GATEWAY_ADDRS[0]}" --sale "$2" \
    --connections "$n" --from "$(sources 1)" --hold-secs 70 --freshness \
    --json "$RESULTS/$1.json" >"$LOGS/$1.log" 2>&1 &
  loader=$!
  await_line open= "$LOGS/$1.log" $loader || return 1
  sleep 5
  measure_cpu "$1" "$n" "push, $4"
  # At the front of the line the first clients may be admitted while the rest still join: a
  # session admitted before the line is complete is not held, and counts as not opened.
  wait $loader || say "some sessions were not held: admitted early, or failed (see $LOGS/$1.log)"
  stop_gateways
}
poll() {
  local n=${BENCH_POLL_CLIENTS:-10000} sale behind loader
  sale=$(new_sale bench-poll 2)
  behind=$(new_sale bench-poll-behind 2)
  start_backend
  sleep 3
  # The same crowd at two places of a line: at its front (places 1 to n, the first 1,000 told
  # every move), and behind a million others, where most of a sale of millions waits.
  push_phase poll-push "$sale" 0 "at the front of the line"
  push_phase poll-push-behind "$behind" 1000000 "behind a million others"
  say "poll: $n clients polling every 5 s"
  start_gateways 1
  "$BIN/floodgate-loadgen" poll --gateways "${GATEWAY_ADDRS[0]}" --sale "$sale" --clients "$n" \
    --from "$(sources 2)" --interval-secs 5 --secs 80 >"$LOGS/poll.log" 2>&1 &
  loader=$!
  # The load generator makes its clients first (about 2 ms of its CPU each), then each client
  # polls first within one interval.
  until grep -q '^made ' "$LOGS/poll.log" 2>/dev/null; do sleep 0.5; done
  sleep 6
  measure_cpu poll-poll "$n" "poll"
  wait $loader || say "some polls failed (see $LOGS/poll.log)"
  stop_gateways
}
