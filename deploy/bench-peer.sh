# shellcheck shell=bash
# The `peer` scenario of deploy/bench.sh, which sources this file (it is not run alone): its
# functions use bench.sh's helpers (start_gateways, await_line, gateway_messages...).
#
# peer: Floodgate's gateway against Node's `ws` (the most used WebSocket server), each holding
# BENCH_PEER_CLIENTS (default 15000) connections opened by the same load generator from the same
# addresses: the memory per idle connection, then the CPU of one change sent to every client,
# each its own message.
hold_idle() { # <pid> <address> <sale> <name>: the server's RSS before and with the sessions
  local n=${BENCH_PEER_CLIENTS:-15000} before after opened loader
  "$BIN/floodgate-loadgen" idle --gateway "$2" --sale "$3" --connections 1 --hold-secs 0 >/dev/null
  sleep 2
  before=$(rss_kib "$1")
  "$BIN/floodgate-loadgen" idle --gateway "$2" --sale "$3" --connections "$n" \
    --from "$(sources 3)" --hold-secs 30 >"$LOGS/$4.log" 2>&1 &
  loader=$!
  await_line open= "$LOGS/$4.log" $loader || return 1
  sleep 10 # the first messages sent, the allocator settled
  after=$(rss_kib "$1")
  opened=$(sed -n 's/^open=\([0-9]*\).*/\1/p' "$LOGS/$4.log")
  jq -n --arg name "$4" --argjson n "$opened" --argjson before "$before" --argjson after "$after" \
    '{server: $name, connections: $n, rss_kib_before: $before, rss_kib_after: $after,
      bytes_per_connection: (($after - $before) * 1024 / $n)}' >"$RESULTS/$4.json"
  kill $loader 2>/dev/null || true
  wait $loader 2>/dev/null || true
}
# One change reaching BENCH_PEER_CLIENTS clients of one server, joined by one loadgen queue
# process, the change at a set instant (admission resumed through the ops API, which the Node
# peer plays), with every process's CPU over it.
fanout_once() { # <name> <server address> <ops address> <sale> <messages command>
  local n=${BENCH_PEER_CLIENTS:-15000} at loader
  at=$(( $(date +%s%3N) + 20000 + n / 2 ))
  "$BIN/floodgate-loadgen" queue --gateways "$2" --sale "$4" --clients "$n" --from "$(sources 4)" \
    --ops "$3" --trigger --change-at-unix-ms "$at" --hold-secs 5 \
    --json "$RESULTS/peer-fanout-$1.json" >"$LOGS/peer-fanout-$1.log" 2>&1 &
  loader=$!
  await_line placed "$LOGS/peer-fanout-$1.log" $loader || return 1
  fanout_phase "peer-fanout-$1" "$at" "$5" "$LOGS/peer-fanout-$1.log"
  wait $loader || say "the $1 fan-out reported failures (see $LOGS/peer-fanout-$1.log)"
}
node_messages() { curl -s http://127.0.0.1:18090/stats | jq .position_messages_sent; }
peer() {
  local sale; sale=$(new_sale bench-peer 3600) # before the opening: the sessions only hold
  say "peer: Floodgate's gateway holding ${BENCH_PEER_CLIENTS:-15000} idle connections"
  start_gateways 1
  hold_idle "${GATEWAY_PIDS[0]}" "${GATEWAY_ADDRS[0]}" "$sale" peer-floodgate
  stop_gateways
  say "peer: Floodgate's gateway sending one change to as many"
  local open; open=$(new_sale bench-peer-fanout 2)
  start_backend
  ops POST "/admin/v1/sales/$open/pause"
  sleep 3
  start_gateways 1
  fanout_once floodgate "${GATEWAY_ADDRS[0]}" 127.0.0.1:19081 "$open" gateway_messages
  stop_gateways
  say "peer: Node's ws holding as many, then sending each its own place"
  (ulimit -n "$(ulimit -Hn)"; exec node deploy/ws-peer/server.mjs 18090) >"$LOGS/ws-peer.log" 2>&1 &
  local node=$!
  PIDS+=($node)
  until grep -q listening "$LOGS/ws-peer.log" 2>/dev/null; do sleep 0.2; done
  hold_idle "$node" 127.0.0.1:18090 "$sale" peer-node
  FANOUT_EXTRA=("node=$node")
  fanout_once node 127.0.0.1:18090 127.0.0.1:18090 "$open" node_messages
  FANOUT_EXTRA=()
  kill $node 2>/dev/null || true
}
