# shellcheck shell=bash
# The `soak` scenario of deploy/bench.sh, which sources this file (it is not run alone): its
# functions use bench.sh's helpers (start_backend, start_gateways, metric_where...).
#
# soak: the scenarios back to back for BENCH_SOAK_MINUTES (default 20) against one broker, one
# booking service and one consumer, started once and never restarted by this script. Each round:
# the whole rush (a fresh sale of BENCH_SOAK_CLIENTS people, default 5000, its invariants checked,
# then reconciled against PostgreSQL), the booking endpoint end to end (20,000 reservations, 50 in
# flight) and an opening burst of BENCH_BURST / 2 joins. After each round, one line of
# soak-rounds.jsonl: which long-lived processes died or were restarted (the broker is checked by
# a produce and fetch round trip, `deploy/stack.sh kafka`, which restarts one whose storage died:
# a new pid), the consumer's worker restarts, the produce errors, the broker's storage failures
# (its log's panics), the 503s answered, and the round's invariants. soak.json sums them up.
SOAK_ROUNDS="$RESULTS/soak-rounds.jsonl"
postmaster_pid() { psql -tAq "$PG/postgres" -c 'select pg_postmaster_start_time()' 2>/dev/null; }
# Panics in the broker's log (and in the one it rotated to, deploy/stack.sh), so far.
panics() {
  cat "$FLOODGATE_HOME/tansu.log.1" "$FLOODGATE_HOME/tansu.log" 2>/dev/null | grep -c 'panicked at' || true
}
# A JSON file's content, or null when a run left none.
json_or_null() { if [ -s "$1" ]; then cat "$1"; else echo null; fi; }
soak_round() { # <round> <first ticket>: the round's three scenarios; their results in $RESULTS
  local round=$1 first=$2 sale raw burst pool=12627-20261201-SL-TQ l
  sale=$(new_sale soak-rush 10)
  start_gateways 2
  "$BIN/floodgate-loadgen" sale --gateways "$(joined "${GATEWAY_ADDRS[@]}")" --sale "$sale" \
    --booking 127.0.0.1:18081 --sandbox 127.0.0.1:18082 --clients "$SOAK_CLIENTS" \
    --from "$(sources 1),$(sources 2)" --json "$RESULTS/soak-sale-$round.json" \
    2>"$LOGS/soak-sale-$round.log" || true
  stop_gateways
  # Redis against PostgreSQL, once the consumer has caught up (a minute at most).
  echo false >"$RESULTS/.soak-reconciled"
  for _ in $(seq 1 30); do
    if "$BIN/floodgate-booking" sale reconcile "$sale" >"$LOGS/soak-reconcile-$round.log" 2>&1; then
      echo true >"$RESULTS/.soak-reconciled"
      break
    fi
    sleep 2
  done
  raw=$(new_sale soak-raw 2)
  sleep 3
  redis-cli MSET "${FLOODGATE_REDIS_PREFIX}{p:$raw/$pool}:avail" 1000000 >/dev/null
  redis-cli HSET "${FLOODGATE_REDIS_PREFIX}{p:$raw/$pool}:cfg" capacity 1000100 >/dev/null
  "$BIN/floodgate-loadgen" reserve --booking 127.0.0.1:18081 --sale "$raw" --pool "$pool" \
    --requests 20000 --concurrency 50 --first-ticket "$first" \
    --json "$RESULTS/soak-reserve-$round.json" >"$LOGS/soak-reserve-$round.log" 2>&1 || true
  burst=$(new_sale soak-burst 600)
  start_gateways 2
  local loaders=()
  for l in 1 2; do
    "$BIN/floodgate-loadgen" burst --gateways "$(joined "${GATEWAY_ADDRS[@]}")" --sale "$burst" \
      --clients $((BURST / 4)) --from "$(sources "$l")" --within-ms 1000 \
      --json "$RESULTS/soak-burst-$round-$l.json" >"$LOGS/soak-burst-$round-$l.log" 2>&1 &
    loaders+=($!)
  done
  # Only the loaders: a bare `wait` would wait for the services too.
  wait "${loaders[@]}" || true
  stop_gateways
}
soak() {
  local minutes=${BENCH_SOAK_MINUTES:-20} round=0 first=3000000000 end started
  start_backend
  local broker0 redis0 postgres0 panics0 procs=(booking consumer sandbox)
  broker0=$(cat "$FLOODGATE_HOME/tansu.pid" 2>/dev/null || echo none)
  redis0=$(redis_pid) postgres0=$(postmaster_pid)
  panics0=$(panics)
  declare -A pid=([booking]=$BOOKING_PID [consumer]=$CONSUMER_PID [sandbox]=$SANDBOX_PID)
  started=$(date +%s) end=$(( $(date +%s) + minutes * 60 ))
  : >"$SOAK_ROUNDS"
  say "soak: rounds for $minutes minutes (until $(date -d "@$end" +%H:%M:%S))"
  while [ "$(date +%s)" -lt "$end" ]; do
    round=$((round + 1))
    local t0; t0=$(date +%s)
    say "soak: round $round"
    soak_round "$round" "$first"
    first=$((first + 1000000))
    deploy/stack.sh kafka >>"$LOGS/soak-stack.log" 2>&1 || true
    local died=() name now
    for name in "${procs[@]}"; do kill -0 "${pid[$name]}" 2>/dev/null || died+=("$name"); done
    [ "$(redis_pid)" = "$redis0" ] || died+=(redis)
    [ "$(postmaster_pid)" = "$postgres0" ] || died+=(postgres)
    now=$(cat "$FLOODGATE_HOME/tansu.pid" 2>/dev/null || echo none)
    [ "$now" = "$broker0" ] || died+=(broker)
    jq -n --argjson round "$round" --argjson seconds "$(( $(date +%s) - t0 ))" \
      --argjson died "$(printf '%s\n' "${died[@]}" | jq -R 'select(length > 0)' | jq -s .)" \
      --argjson worker_restarts "$(metric_sum floodgate_consumer_worker_restarts 127.0.0.1:19180)" \
      --argjson producers_renewed "$(metric_sum floodgate_kafka_producers_renewed_total 127.0.0.1:19081)" \
      --argjson produce_errors "$(metric_where floodgate_kafka_produce_duration_seconds_count 'outcome="failed"' 127.0.0.1:19081)" \
      --argjson broker_down "$(metric_sum floodgate_kafka_down_total 127.0.0.1:19081)" \
      --argjson broker_panics "$(( $(panics) > panics0 ? $(panics) - panics0 : 0 ))" \
      --argjson http_503 "$(metric_where floodgate_http_requests_total 'status="503"' 127.0.0.1:19081)" \
      --argjson reconciled "$(cat "$RESULTS/.soak-reconciled")" \
      --argjson sale "$(json_or_null "$RESULTS/soak-sale-$round.json")" \
      --argjson reserve "$(json_or_null "$RESULTS/soak-reserve-$round.json")" \
      '{round: $round, seconds: $seconds, died: $died, consumer_worker_restarts: $worker_restarts,
        producers_renewed: $producers_renewed, produce_errors: $produce_errors,
        broker_down: $broker_down, broker_storage_failures: $broker_panics, http_503: $http_503,
        invariants: ($sale.checks // null | if . == null then null else map({name, ok}) end),
        reconciled: $reconciled, rush_failed: ($sale.outcomes.failed // null),
        reserve_statuses: ($reserve.statuses // null)}' >>"$SOAK_ROUNDS"
    [ ${#died[@]} -eq 0 ] || { say "soak: ${died[*]} died or was restarted; stopping"; break; }
  done
  jq -s --argjson minutes "$(( ($(date +%s) - started) / 60 ))" '
    {minutes: $minutes, rounds: length,
     processes_died_or_restarted: ((map(.died | length) | add) + (last.consumer_worker_restarts)),
     consumer_worker_restarts: last.consumer_worker_restarts,
     produce_errors: last.produce_errors, producers_renewed: last.producers_renewed,
     broker_down: last.broker_down, broker_storage_failures: last.broker_storage_failures,
     http_503: last.http_503,
     invariants_held_every_round:
       (map(.invariants != null and (.invariants | length > 0) and (.invariants | all(.ok))
            and .reconciled) | all),
     rounds_detail: .}' "$SOAK_ROUNDS" >"$RESULTS/soak.json"
  say "soak: $(jq -c '{rounds, processes_died_or_restarted, produce_errors, broker_storage_failures, http_503, invariants_held_every_round}' "$RESULTS/soak.json")"
}
