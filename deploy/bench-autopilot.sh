# shellcheck shell=bash
# The `autopilot` scenario of deploy/bench.sh, which sources this file (it is not run alone):
# its functions use bench.sh's helpers (start_backend, start_gateways, cpu_begin...).
#
# autopilot: the same rush twice through a named fault, a saturated Redis under the booking
# service (`floodgate-loadgen fault`: at most BENCH_FAULT_RPS replies a second, 1,500 by
# default), by people who think about 2 s between admission and booking: once at a fixed
# admission rate (the autopilot off), once with the autopilot on between a floor and that same
# rate as its ceiling. Reported side by side: the booking service's 503s, failed people, and
# the time until the last seat was held (deploy/sales/bench-autopilot.toml: 3,000 seats).
# The rate and the autopilot's step every second while process $1 (a rush) runs, from the ops
# API's figures of sale $2, a JSON line each into file $3: the report's account of what it did.
watch_autopilot() { # <loader pid> <sale> <series file>
  : >"$3"
  while kill -0 "$1" 2>/dev/null; do
    curl -fsS -H "Authorization: Bearer $FLOODGATE_OPS_TOKEN" \
      "http://127.0.0.1:19081/admin/v1/sales/$2" 2>/dev/null |
      jq -c '.autopilot.last_step as $s | {admission_rate, step_at: $s.at_ms, decision: $s.decision, health: $s.health}' >>"$3" || true
    sleep 1
  done
}
autopilot() {
  stop_backend
  "$BIN/floodgate-loadgen" fault --listen 127.0.0.1:16390 --upstream 127.0.0.1:6379 \
    --replies-per-sec "$FAULT_RPS" >"$LOGS/fault.log" 2>&1 &
  local fault=$!
  PIDS+=("$fault")
  BOOKING_REDIS_URL=redis://127.0.0.1:16390 start_backend
  start_gateways 2
  local mode sale before
  for mode in off on; do
    sale="bench-pilot-$mode-$RANDOM"
    "$BIN/floodgate-booking" sale create deploy/sales/bench-autopilot.toml --id "$sale" \
      --opens-in-secs 10 --arm >/dev/null
    if [ "$mode" = on ]; then
      curl -fsS -X PATCH -H "Authorization: Bearer $FLOODGATE_OPS_TOKEN" \
        -H 'Content-Type: application/json' "http://127.0.0.1:19081/admin/v1/sales/$sale" \
        -d '{"autopilot": {"enabled": true, "floor": 20, "ceiling": 300, "settle_secs": 3}}' >/dev/null
    fi
    before=$(metric_where floodgate_http_requests_total 'status="503"' 127.0.0.1:19081)
    say "autopilot $mode: $PILOT_CLIENTS people for 3000 seats through a Redis of $FAULT_RPS replies/s"
    "$BIN/floodgate-loadgen" sale --gateways "$(joined "${GATEWAY_ADDRS[@]}")" --sale "$sale" \
      --booking 127.0.0.1:18081 --sandbox 127.0.0.1:18082 --clients "$PILOT_CLIENTS" \
      --think-ms 2000 --pay-ratio 1 --seats 1 --from "$(sources 1),$(sources 2)" \
      --json "$RESULTS/autopilot-$mode.json" 2>"$LOGS/autopilot-$mode.log" &
    local loader=$!
    local series="$RESULTS/.autopilot-$mode.series"
    watch_autopilot "$loader" "$sale" "$series"
    wait "$loader" ||
      say "autopilot $mode: the sale's invariants did NOT all hold (see $RESULTS/autopilot-$mode.json)"
    local after; after=$(metric_where floodgate_http_requests_total 'status="503"' 127.0.0.1:19081)
    local tmp="$RESULTS/.autopilot-$mode.json"
    jq --arg mode "$mode" --argjson rps "$FAULT_RPS" --argjson n503 $((after - before)) \
      --slurpfile series "$series" \
      '. + {mode: $mode, fault_replies_per_sec: $rps, booking_503: $n503, every_second: $series}' \
      "$RESULTS/autopilot-$mode.json" >"$tmp" && mv "$tmp" "$RESULTS/autopilot-$mode.json"
    rm -f "$series"
  done
  stop_gateways
  stop_backend
  kill "$fault" 2>/dev/null || true
  wait "$fault" 2>/dev/null || true
}
