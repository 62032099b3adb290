# The private Redis Cluster of `deploy/stack.sh cluster-up|cluster-down|cluster-node-up`, sourced
# by deploy/stack.sh (its say, die, wait_port, port_open, apt_install and FLOODGATE_HOME): not a
# command of its own.
# shellcheck shell=bash

# A Redis Cluster of three primaries and three replicas from Debian's redis-server, on loopback
# ports $1..$1+5, for the cluster pass of the tests (and anyone who wants to try the services on a
# cluster). Each node keeps an append-only file; a short node timeout makes a failover take
# seconds, not the production default's fifteen.
CLUSTER_NODES=6
cluster_dir() { echo "$FLOODGATE_HOME/redis-cluster-$1"; }

# Starts (or restarts, from its data and nodes.conf) the node on port $2 of the cluster in $1.
cluster_node_start() {
  local dir=$1 port=$2
  mkdir -p "$dir/$port"
  redis-server --port "$port" --bind 127.0.0.1 --daemonize yes --dir "$dir/$port" \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
    --appendonly yes --appendfsync everysec --save "" --protected-mode no \
    --logfile "$dir/$port/redis.log" --pidfile "$dir/$port/redis.pid" >/dev/null
  wait_port "$port" 10 || die "redis cluster: node $port did not start"
}

cluster_up() {
  local first=${1:-7001} dir port ports=()
  dir=$(cluster_dir "$first")
  command -v redis-server >/dev/null || apt_install redis-server
  command -v redis-cli >/dev/null || apt_install redis-tools
  for i in $(seq 0 $((CLUSTER_NODES - 1))); do
    port=$((first + i))
    ports+=("127.0.0.1:$port")
    port_open "$port" || cluster_node_start "$dir" "$port"
  done
  for p in "${ports[@]}"; do wait_port "${p#*:}" 10 || die "redis cluster: node $p did not start"; done
  if [ "$(redis-cli -p "$first" cluster info | tr -d '\r' | grep cluster_state)" != "cluster_state:ok" ]; then
    redis-cli --cluster create "${ports[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
      die "redis cluster: create failed (see $dir/create.log)"
    for _ in $(seq 1 100); do
      local all=1
      for p in "${ports[@]}"; do
        [ "$(redis-cli -p "${p#*:}" cluster info | tr -d '\r' | grep cluster_state)" = "cluster_state:ok" ] || all=0
      done
      [ "$all" = 1 ] && break
      sleep 0.1
    done
  fi
  # Every primary has its replica in sync before anyone writes: the services wait for a replica
  # on every promised write (FLOODGATE_REDIS_MIN_REPLICAS), and a replica still loading its first
  # copy acknowledges nothing.
  for _ in $(seq 1 200); do
    local synced=0
    for p in "${ports[@]}"; do
      if redis-cli -p "${p#*:}" info replication | tr -d '\r' | grep -q '^role:master' &&
        redis-cli -p "${p#*:}" info replication | tr -d '\r' | grep -q 'state=online'; then
        synced=$((synced + 1))
      fi
    done
    [ "$synced" -ge $((CLUSTER_NODES / 2)) ] && break
    sleep 0.1
  done
  say "redis cluster: up on ${ports[*]}"
  echo "redis://${ports[0]},redis://${ports[1]},redis://${ports[2]}"
}

cluster_down() {
  local first=${1:-7001} dir port pids=()
  dir=$(cluster_dir "$first")
  for i in $(seq 0 $((CLUSTER_NODES - 1))); do
    port=$((first + i))
    pids+=("$(cat "$dir/$port/redis.pid" 2>/dev/null || true)")
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  done
  # Wait for them to exit, so a `cluster-up` right after starts fresh nodes instead of finding
  # dying ones.
  for pid in "${pids[@]}"; do
    [ -n "$pid" ] || continue
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  rm -rf "$dir"
  say "redis cluster: stopped (ports $first..$((first + CLUSTER_NODES - 1)))"
}
