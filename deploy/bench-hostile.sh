# shellcheck shell=bash
# The `hostile` scenario of deploy/bench.sh, which sources this file (it is not run alone): its
# functions use bench.sh's helpers (start_backend, start_gateways, cpu_begin, watch_autopilot...).
#
# hostile: the autopilot's sale three times calm and three times with a stranger beside the
# crowd (`floodgate-loadgen hostile`: each of its attacks at BENCH_HOSTILE_RATE requests a
# second, 100 by default, from eight addresses of its own), in pairs, one round after another.
# Unlike every other scenario the services keep their default per-address allowances, and the
# crowd (BENCH_HOSTILE_CLIENTS people, 6,000 by default) comes from 1,500 addresses, as a real
# one does. The sale opens 6 s after it is made; the stranger joins at once (first in the
# pre-queue, so its pass comes in the first batch) and the crowd a second after the opening.
# The 503s the booking service answered, the autopilot's steps every second, and every
# service's CPU over each run are kept beside the crowd's figures (docs: BENCHMARKS.md).
hostile() {
  local limits=(FLOODGATE_MAX_CONNECTIONS_PER_IP FLOODGATE_JOINS_PER_SEC_PER_IP
    FLOODGATE_BOOKING_REQUESTS_PER_SEC_PER_IP FLOODGATE_BOOKING_READS_PER_SEC_PER_IP
    FLOODGATE_PLACE_REQUESTS_PER_SEC_PER_IP FLOODGATE_CHALLENGES_PER_SEC_PER_IP FLOODGATE_RESUMES_PER_SEC)
  local saved=() v
  for v in "${limits[@]}"; do saved+=("$v=${!v}"); unset "$v"; done
  stop_backend
  start_backend
  start_gateways 2
  local crowd strangers
  crowd=$(joined $(for a in 2 3 4 5 6 7; do for b in $(seq 1 250); do echo "127.0.$a.$b"; done; done))
  strangers=$(joined $(seq -f '127.0.10.%g' 1 8))
  local round mode
  for round in 1 2 3; do
    for mode in calm hostile; do hostile_run "$round" "$mode" "$crowd" "$strangers"; done
  done
  stop_gateways
  stop_backend
  export "${saved[@]}"
}
hostile_run() { # <round> <calm|hostile> <crowd addresses> <stranger addresses>
  local round=$1 mode=$2
  local name="hostile-$mode-$round"
  local sale="bench-$name-$RANDOM" opens
  opens=$(($(date +%s%3N) + 6000))
  "$BIN/floodgate-booking" sale create deploy/sales/bench-autopilot.toml --id "$sale" \
    --opens-in-secs 6 --arm >/dev/null
  curl -fsS -X PATCH -H "Authorization: Bearer $FLOODGATE_OPS_TOKEN" \
    -H 'Content-Type: application/json' "http://127.0.0.1:19081/admin/v1/sales/$sale" \
    -d '{"autopilot": {"enabled": true, "floor": 20, "ceiling": 300, "settle_secs": 3}}' >/dev/null
  local before procs stranger=
  before=$(metric_where floodgate_http_requests_total 'status="503"' 127.0.0.1:19081)
  mapfile -t procs < <(service_procs)
  cpu_begin "$name" "${procs[@]}"
  if [ "$mode" = hostile ]; then
    "$BIN/floodgate-loadgen" hostile --gateways "$(joined "${GATEWAY_ADDRS[@]}")" \
      --booking 127.0.0.1:18081 --sandbox 127.0.0.1:18082 --sale "$sale" --pool 12951-20261201-3A-TQ --from "$4" \
      --rate "${BENCH_HOSTILE_RATE:-100}" --json "$RESULTS/.$name-strangers.json" \
      >/dev/null 2>"$LOGS/$name-strangers.log" &
    stranger=$!
    PIDS+=("$stranger")
  fi
  sleep_until_ms $((opens + 1000))
  say "$name: ${BENCH_HOSTILE_CLIENTS:-6000} people for 3000 seats${stranger:+, a stranger attacking}"
  "$BIN/floodgate-loadgen" sale --gateways "$(joined "${GATEWAY_ADDRS[@]}")" --sale "$sale" \
    --booking 127.0.0.1:18081 --sandbox 127.0.0.1:18082 --clients "${BENCH_HOSTILE_CLIENTS:-6000}" \
    --think-ms 2000 --pay-ratio 1 --seats 1 --from "$3" \
    --json "$RESULTS/$name.json" 2>"$LOGS/$name.log" &
  local loader=$!
  local series="$RESULTS/.$name.series"
  watch_autopilot "$loader" "$sale" "$series"
  wait "$loader" || say "$name: the sale's invariants did NOT all hold (see $RESULTS/$name.json)"
  if [ -n "$stranger" ]; then
    kill -TERM "$stranger" 2>/dev/null || true
    wait "$stranger" || say "$name: the stranger failed (see $LOGS/$name-strangers.log)"
  fi
  cpu_end "$name" "{\"people\": ${BENCH_HOSTILE_CLIENTS:-6000}}"
  local after tmp="$RESULTS/.$name.json"
  after=$(metric_where floodgate_http_requests_total 'status="503"' 127.0.0.1:19081)
  [ -s "$RESULTS/.$name-strangers.json" ] || echo null >"$RESULTS/.$name-strangers.json"
  jq --arg mode "$mode" --argjson n503 $((after - before)) --slurpfile series "$series" \
    --slurpfile strangers "$RESULTS/.$name-strangers.json" \
    '. + {mode: $mode, booking_503: $n503, every_second: $series, strangers: $strangers[0]}' \
    "$RESULTS/$name.json" >"$tmp" && mv "$tmp" "$RESULTS/$name.json"
  rm -f "$series" "$RESULTS/.$name-strangers.json"
}
