#!/bin/sh
# Starts the edge: deploy/nginx/cdn.conf with its placeholders filled in from the environment,
# nginx in the foreground. A missing setting stops it, naming the setting.
#
#   FLOODGATE_EDGE_GATEWAYS  the gateways, host:port, comma-separated (required)
#   FLOODGATE_EDGE_BOOKING   the booking instances, host:port, comma-separated (required)
#   FLOODGATE_EDGE_LISTEN    what nginx listens on (default 8000: every address, port 8000)
#   FLOODGATE_EDGE_WORKERS   nginx workers (default: one per core the container sees; each sets
#                            aside ~55 MB for its connections, so name a number under a memory
#                            limit)
#   FLOODGATE_EDGE_PREFIX    nginx's own writable directory (default /var/cache/floodgate-cdn)
set -eu
: "${FLOODGATE_EDGE_GATEWAYS:?FLOODGATE_EDGE_GATEWAYS is not set: name the gateways, host:port, comma-separated}"
: "${FLOODGATE_EDGE_BOOKING:?FLOODGATE_EDGE_BOOKING is not set: name the booking instances, host:port, comma-separated}"
listen=${FLOODGATE_EDGE_LISTEN:-8000}
prefix=${FLOODGATE_EDGE_PREFIX:-/var/cache/floodgate-cdn}
workers=${FLOODGATE_EDGE_WORKERS:-auto}
template=${FLOODGATE_EDGE_TEMPLATE:-/etc/floodgate/cdn.conf}

# `a:1,b:2` as nginx upstream lines: `server a:1 max_fails=0; server b:2 max_fails=0;`. Never
# marked down: a draining or full gateway's 503 (tried on the next, cdn.conf's /ws) is a
# refusal, not a failure, and a Service named several times (Kubernetes) would otherwise be out
# of rotation for every path after a couple of them. A dead origin is still skipped per request.
servers() {
  printf '%s' "$1" | tr ',' '\n' | sed -e '/^ *$/d' -e 's/^ *\(.*[^ ]\) *$/server \1 max_fails=0;/' | tr '\n' ' '
}

mkdir -p "$prefix"
sed -e "s|__LISTEN__|$listen|" \
  -e "s|__GATEWAYS__|$(servers "$FLOODGATE_EDGE_GATEWAYS")|" \
  -e "s|__BOOKING__|$(servers "$FLOODGATE_EDGE_BOOKING")|" \
  -e "s|__PREFIX__|$prefix|g" \
  -e "s|^worker_processes auto;|worker_processes $workers;|" \
  -e "s|^error_log .*|error_log stderr warn;|" \
  "$template" >"$prefix/nginx.conf"
# Its errors go to the container's log (stderr), start-up messages too (-e): not to files.
exec nginx -e stderr -c "$prefix/nginx.conf"
