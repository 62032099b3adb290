#!/usr/bin/env bash
# Measures the consumer's persistence throughput (BENCHMARKS.md): publishes synthetic
# reservation events to a fresh topic with floodgate-loadgen, starts MEMBERS release consumers in
# one group on a fresh database, and times how fast the events land in PostgreSQL (first to last
# audit-trail row), with the mean batch size from the consumers' metrics. Needs
# deploy/stack.sh up.
#
#   deploy/bench-consumer.sh [RESERVATIONS] [MEMBERS]   (default 40000: 60000 events; 1 member)
set -euo pipefail
cd "$(dirname "$0")/.."
RESERVATIONS=${1:-40000}
MEMBERS=${2:-1}
FLOODGATE_HOME=${FLOODGATE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/floodgate}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$FLOODGATE_HOME/target}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
TOPIC="floodgate.bench.$RANDOM$RANDOM"
DB="floodgate_bench_$RANDOM$RANDOM"
GROUP="bench-$RANDOM"

cargo build --release -q -p floodgate-consumer -p floodgate-loadgen -p floodgate-booking
BIN=$CARGO_TARGET_DIR/release
FLOODGATE_RESERVATIONS_TOPIC="$TOPIC" FLOODGATE_TOPIC_PARTITIONS=6 \
  "$BIN/floodgate-booking" topics ensure >/dev/null
psql -q "$PG/postgres" -c "create database $DB"
CONSUMERS=()
cleanup() {
  [ ${#CONSUMERS[@]} -eq 0 ] || {
    kill -CONT "${CONSUMERS[@]}" 2>/dev/null
    kill "${CONSUMERS[@]}" 2>/dev/null
    wait "${CONSUMERS[@]}" 2>/dev/null || true
  }
  [ -n "${KEEP_DB:-}" ] || psql -q "$PG/postgres" -c "drop database if exists $DB" || true
}
trap cleanup EXIT

for m in $(seq 1 "$MEMBERS"); do
  FLOODGATE_DATABASE_URL="$PG/$DB" FLOODGATE_RESERVATIONS_TOPIC="$TOPIC" \
    FLOODGATE_CONSUMER_GROUP="$GROUP" FLOODGATE_CONSUMER_INSTANCE_ID="bench-$m" \
    FLOODGATE_CONSUMER_METRICS_LISTEN="127.0.0.1:$((19100 + m))" RUST_LOG=${BENCH_LOG:-warn} \
    "$BIN/floodgate-consumer" &
  CONSUMERS+=($!)
done
# The group settles first (each member holds its share), then the members are paused while the
# events are published, so what is timed is the group draining a backlog, not the publisher.
owners() {
  psql -tAq "$PG/$DB" -c "select count(distinct owner) from consumer_partitions where group_id = '$GROUP'" 2>/dev/null || echo 0
}
until [ "$(owners)" -ge "$MEMBERS" ]; do sleep 0.2; done
kill -STOP "${CONSUMERS[@]}"
"$BIN/floodgate-loadgen" publish --topic "$TOPIC" --reservations "$RESERVATIONS" --pools 6
EVENTS=$((RESERVATIONS + (RESERVATIONS + 1) / 2))
kill -CONT "${CONSUMERS[@]}"
until [ "$(psql -tAq "$PG/$DB" -c 'select count(*) from booking_events' 2>/dev/null || echo 0)" -ge "$EVENTS" ]; do
  for c in "${CONSUMERS[@]}"; do kill -0 "$c" || { echo "a consumer died"; exit 1; }; done
  sleep 0.5
done
psql -tAq "$PG/$DB" -F ' ' -c "select count(*), extract(epoch from max(recorded_at) - min(recorded_at))
  from booking_events" | {
  read -r n secs
  awk -v n="$n" -v s="$secs" 'BEGIN { printf "events=%d in %.2f s: %.0f events/s\n", n, s, n / s }'
}
for m in $(seq 1 "$MEMBERS"); do curl -s "http://127.0.0.1:$((19100 + m))/metrics"; done | awk '
  /^floodgate_consumer_batch_size_sum/ { sum += $2 }
  /^floodgate_consumer_batch_size_count/ { count += $2 }
  /^floodgate_consumer_rows_written_total/ { rows += $2 }
  END { printf "batches=%d mean batch=%.1f events, rows written=%d\n", count, sum / count, rows }'
