# shellcheck shell=bash
# The `cluster` scenario of deploy/bench.sh, which sources this file (it is not run alone): its
# functions use bench.sh's helpers (start_gateways, cpu_begin, metric_sum...).
#
# cluster: the booking endpoint on a private Redis Cluster (three primaries, three replicas on
# 127.0.0.1:7221..7226, each with its append-only file), once without waiting for a replica and
# once with FLOODGATE_REDIS_MIN_REPLICAS=1, 50 requests in flight, with every process's CPU (each
# node's, and the EVALSHAs and WAITs the nodes served); then redis-benchmark of the same scripts,
# each on the primary that serves its keys. Its own database, key prefix and topic: no other
# service of the run sees it.
CLUSTER_FIRST=7221 CLUSTER_UP= CLUSTER_DB= CLUSTER_BOOKING=
cluster_ports() { seq "$CLUSTER_FIRST" $((CLUSTER_FIRST + 5)); }
# The count of a command's calls and the microseconds spent in them, summed over every node.
cluster_cmdstat() {
  local port calls=0 usec=0 c u
  for port in $(cluster_ports); do
    read -r c u < <(redis_cmdstat "$1" "$port")
    calls=$((calls + c)) usec=$((usec + u))
  done
  echo "$calls $usec"
}
cluster_procs() {
  local port
  for port in $(cluster_ports); do
    echo "redis-$port=$(redis_pid "$port")"
  done
  echo "broker=$(cat "$FLOODGATE_HOME/tansu.pid")"
  for pid in $(pgrep -x postgres); do echo "postgres-$pid=$pid"; done
}
cluster() {
  local db="${DB}_cluster" prefix="clbench$RANDOM:" topic="floodgate.bench.cluster$RANDOM"
  local seeds sale pool=12627-20261201-SL-TQ
  CLUSTER_DB=$db # its keys go with the cluster (cluster-down removes its data)
  seeds=$(deploy/stack.sh cluster-up "$CLUSTER_FIRST" | tail -1)
  CLUSTER_UP=1
  psql -q "$PG/postgres" -c "create database $db"
  local env=(FLOODGATE_DATABASE_URL="$PG/$db" FLOODGATE_REDIS_PREFIX="$prefix"
    FLOODGATE_REDIS_CLUSTER_NODES="$seeds" FLOODGATE_RESERVATIONS_TOPIC="$topic")
  env "${env[@]}" "$BIN/floodgate-booking" migrate >/dev/null
  env "${env[@]}" FLOODGATE_TOPIC_PARTITIONS=6 "$BIN/floodgate-booking" topics ensure >/dev/null
  sale="bench-cluster-$RANDOM"
  env "${env[@]}" "$BIN/floodgate-booking" sale create deploy/sales/bench.toml --id "$sale" \
    --opens-in-secs 2 --arm >/dev/null
  # The bench sale's pools hold 100 seats: this one gets room for every reservation.
  local base="${prefix}{p:$sale/$pool}"
  redis-cli -c -p "$CLUSTER_FIRST" SET "$base:avail" 1000000000 >/dev/null
  redis-cli -c -p "$CLUSTER_FIRST" HSET "$base:cfg" capacity 1000000100 >/dev/null
  sleep 3 # past the opening

  local first=1000000000 min procs evalsha0 evalsha1 wait0 wait1 created
  for min in 0 1; do
    say "cluster: the booking endpoint, min replicas $min, 50 in flight"
    env "${env[@]}" FLOODGATE_REDIS_MIN_REPLICAS=$min FLOODGATE_BOOKING_LISTEN=127.0.0.1:18091 \
      FLOODGATE_ADMIN_LISTEN=127.0.0.1:19091 FLOODGATE_PAYMENT_SANDBOX=true \
      "$BIN/floodgate-booking" serve >"$LOGS/cluster-booking-$min.log" 2>&1 &
    CLUSTER_BOOKING=$!
    healthy 127.0.0.1:18091
    "$BIN/floodgate-loadgen" reserve --booking 127.0.0.1:18091 --sale "$sale" --pool "$pool" \
      --requests 500 --concurrency 50 --first-ticket "$first" >/dev/null # warm up
    first=$((first + 1000))
    mapfile -t procs < <(cluster_procs)
    read -r -a evalsha0 < <(cluster_cmdstat evalsha)
    read -r -a wait0 < <(cluster_cmdstat wait)
    cpu_begin "cluster-booking-$min" "booking=$CLUSTER_BOOKING" "${procs[@]}"
    "$BIN/floodgate-loadgen" reserve --booking 127.0.0.1:18091 --sale "$sale" --pool "$pool" \
      --requests 20000 --concurrency 50 --first-ticket "$first" \
      --json "$RESULTS/cluster-booking-$min.json" >"$LOGS/cluster-reserve-$min.log" 2>&1 ||
      say "some reservations failed (see $LOGS/cluster-booking-$min.log.loadgen)"
    read -r -a evalsha1 < <(cluster_cmdstat evalsha)
    read -r -a wait1 < <(cluster_cmdstat wait)
    created=$(jq '.statuses["201"] // 0' "$RESULTS/cluster-booking-$min.json")
    cpu_end "cluster-booking-$min" "{\"reservations\": $created, \"min_replicas\": $min,
      \"evalsha_calls\": $((evalsha1[0] - evalsha0[0])), \"evalsha_usec\": $((evalsha1[1] - evalsha0[1])),
      \"wait_calls\": $((wait1[0] - wait0[0])), \"wait_usec\": $((wait1[1] - wait0[1]))}"
    first=$((first + 1000000))
    kill "$CLUSTER_BOOKING"; wait "$CLUSTER_BOOKING" 2>/dev/null || true; CLUSTER_BOOKING=
  done

  # The scripts alone, once no service runs on the cluster: a sale of their own, so they touch
  # nothing the runs above left.
  say "cluster: redis-benchmark of each script, on the primary that serves its keys"
  local raw_sale="raw-cluster-$RANDOM" calls="$RESULTS/cluster-scripts-calls.json"
  env "${env[@]}" "$BIN/floodgate-booking" sale create deploy/sales/bench.toml --id "$raw_sale" \
    --opens-in-secs 1 --arm >/dev/null
  base="${prefix}{p:$raw_sale/$pool}"
  redis-cli -c -p "$CLUSTER_FIRST" SET "$base:avail" 1000000000 >/dev/null
  redis-cli -c -p "$CLUSTER_FIRST" HSET "$base:cfg" capacity 1000000100 >/dev/null
  sleep 2
  env "${env[@]}" "$BIN/floodgate-booking" scripts bench --sale "$raw_sale" --pool "$pool" >"$calls"
  local script out rates=() ports=()
  mapfile -t procs < <(cluster_procs | grep '^redis')
  for script in claim_token reserve ack; do
    cpu_begin "cluster-script-$script" "${procs[@]}"
    read -r -a out < <(BENCH_REDIS_PORT=$CLUSTER_FIRST BENCH_REDIS_CLUSTER=1 \
      deploy/bench-scripts.sh "$calls" "$script" 200000 50 1)
    cpu_end "cluster-script-$script" "{\"requests\": 200000, \"per_second\": ${out[0]}, \"port\": ${out[1]}}"
    rates+=("${out[0]}") ports+=("${out[1]}")
  done
  # A reservation's scripts run on one or two primaries (the sale's slot for the claim, the
  # pool's for the rest): the rate the scripts allow is that of the busiest primary.
  jq -n --argjson rates "[$(joined "${rates[@]}")]" --argjson ports "[$(joined "${ports[@]}")]" '
    [range(3) | {script: (["claim_token", "reserve", "ack"][.]), per_second: $rates[.], port: $ports[.]}] |
    {scripts: ., reservations_per_second:
      (group_by(.port) | map(1 / (map(1 / .per_second) | add)) | min)}' >"$RESULTS/cluster-redis.json"
}
