# shellcheck shell=bash
# The `raw` scenario of deploy/bench.sh, which sources this file (it is not run alone): its
# functions use bench.sh's helpers (start_backend, cpu_begin, redis_cmdstat...).
#
# raw: the scripts a reservation runs (claim_token, reserve, ack), timed by redis-benchmark as
# the booking service sends them (deploy/bench-scripts.sh; 50 connections, unpipelined, and the
# reserve script 16 deep), against the booking endpoint end to end on the same Redis, with every
# process's CPU over each run; and the broker's own acknowledgement rate, which bounds the
# endpoint (a 201 waits for the broker).
raw() {
  # The scripts alone run on a sale of their own, under a Redis prefix and in a database no
  # service reads: no relay publishes their events, no reconcile pass looks at them.
  local prefix="rawbench$RANDOM:" db="${DB}_raw" raw_sale="raw-$RANDOM" pool=12627-20261201-SL-TQ
  RAW_DB=$db RAW_PREFIX=$prefix
  psql -q "$PG/postgres" -c "create database $db"
  FLOODGATE_DATABASE_URL="$PG/$db" "$BIN/floodgate-booking" migrate >/dev/null
  FLOODGATE_DATABASE_URL="$PG/$db" FLOODGATE_REDIS_PREFIX=$prefix "$BIN/floodgate-booking" sale create \
    deploy/sales/bench.toml --id "$raw_sale" --opens-in-secs 1 --arm >/dev/null
  # Room for every reservation the benchmark makes.
  local base="${prefix}{p:$raw_sale/$pool}"
  redis-cli MSET "$base:avail" 1000000000 >/dev/null
  redis-cli HSET "$base:cfg" capacity 1000000100 >/dev/null
  local calls="$RESULTS/raw-scripts-calls.json"
  FLOODGATE_REDIS_PREFIX=$prefix "$BIN/floodgate-booking" scripts bench --sale "$raw_sale" \
    --pool "$pool" >"$calls"
  say "raw: redis-benchmark of each script a reservation runs"
  local script rates=() rps redis; redis=$(redis_pid)
  for script in claim_token reserve ack; do
    cpu_begin "raw-script-$script" "redis=$redis"
    rps=$(deploy/bench-scripts.sh "$calls" "$script" 200000 50 1)
    cpu_end "raw-script-$script" "{\"requests\": 200000, \"per_second\": $rps}"
    rates+=("$rps")
  done
  local deep; deep=$(deploy/bench-scripts.sh "$calls" reserve 200000 50 16)
  # One reservation needs one call of each, on one Redis core: its rate is the harmonic sum.
  jq -n --argjson claim "${rates[0]}" --argjson reserve "${rates[1]}" --argjson ack "${rates[2]}" \
    --argjson deep "$deep" '{connections: 50, claim_token_per_second: $claim,
      reserve_per_second: $reserve, ack_per_second: $ack, reserve_pipelined_16_per_second: $deep,
      reservations_per_second: (1 / (1 / $claim + 1 / $reserve + 1 / $ack))}' \
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
  local pool_keys="${FLOODGATE_REDIS_PREFIX}{p:$sale/$pool}"
  redis-cli MSET "$pool_keys:avail" 1000000 >/dev/null
  redis-cli HSET "$pool_keys:cfg" capacity 1000100 >/dev/null
  # A 201 waits for the broker's acknowledgement, so throughput follows the requests in flight.
  local first=1000000000 procs evalsha0 evalsha1 events0 created
  for inflight in 50 400; do
    mapfile -t procs < <(service_procs)
    read -r -a evalsha0 < <(redis_cmdstat evalsha)
    events0=$(metric_sum floodgate_consumer_events_total 127.0.0.1:19180)
    cpu_begin "raw-booking-$inflight" "${procs[@]}"
    cpu_begin "raw-consume-$inflight" $(consumer_procs) $(printf '%s\n' "${procs[@]}" | grep '^postgres')
    "$BIN/floodgate-loadgen" reserve --booking 127.0.0.1:18081 --sale "$sale" \
      --pool "$pool" --requests 20000 --concurrency "$inflight" \
      --first-ticket "$first" --json "$RESULTS/raw-booking-$inflight.json" \
      >"$LOGS/raw-booking-$inflight.log" 2>&1 ||
      say "some reservations failed (see $LOGS/raw-booking-$inflight.log)"
    read -r -a evalsha1 < <(redis_cmdstat evalsha)
    created=$(jq '.statuses["201"] // 0' "$RESULTS/raw-booking-$inflight.json")
    cpu_end "raw-booking-$inflight" "{\"reservations\": $created,
      \"evalsha_calls\": $((evalsha1[0] - evalsha0[0])), \"evalsha_usec\": $((evalsha1[1] - evalsha0[1]))}"
    # The consumer's own phase ends once it has applied this run's events.
    local applied=0 deadline=$(($(date +%s) + 120))
    while [ "$applied" -lt "$created" ] && [ "$(date +%s)" -lt "$deadline" ]; do
      sleep 0.2
      applied=$(($(metric_sum floodgate_consumer_events_total 127.0.0.1:19180) - events0))
    done
    cpu_end "raw-consume-$inflight" "{\"events\": $applied}"
    first=$((first + 1000000))
  done

  say "raw: the broker's acknowledgement rate"
  local topic="floodgate.bench.raw$RANDOM"
  FLOODGATE_RESERVATIONS_TOPIC="$topic" FLOODGATE_TOPIC_PARTITIONS=6 \
    "$BIN/floodgate-booking" topics ensure >/dev/null
  "$BIN/floodgate-loadgen" publish --topic "$topic" --reservations 20000 --pools 6 \
    --json "$RESULTS/raw-broker.json" >"$LOGS/raw-broker.log" 2>&1
  # The booking service's producer, alone: Floodgate's producer settings, 50 events awaiting
  # their acknowledgement at once, all for one pool (one partition), as in the runs above.
  say "raw: the producer alone, 50 events in flight"
  local broker; broker=$(cat "$FLOODGATE_HOME/tansu.pid")
  cpu_begin raw-producer-50 "broker=$broker"
  "$BIN/floodgate-loadgen" publish --topic "$topic" --reservations 13334 --pools 1 --window 50 \
    --json "$RESULTS/raw-producer-50.json" >"$LOGS/raw-producer-50.log" 2>&1
  cpu_end raw-producer-50 "{\"events\": $(jq .events "$RESULTS/raw-producer-50.json")}"
}
